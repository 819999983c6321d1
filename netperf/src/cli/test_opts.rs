//! Test-specific options: everything after `--`.
//!
//! netperf 2.7 runs every named test through its "omni" code and parses the
//! test-specific options with one grammar for all of them; we do the same, so
//! that any option netperf accepts after `--` is accepted here. Each test
//! family reads the options that mean something to it.

use optparse::{Arity, OptDef};

pub const OPTIONS: &[OptDef] = &[
    OptDef::flag(
        "defer_accept",
        'a',
        "TCP_DEFER_ACCEPT on netserver's data listener",
    ),
    OptDef::flag("pktinfo", 'B', "Use IP_PKTINFO (accepted; no effect)").hidden(),
    OptDef::value(
        "burst",
        'b',
        "number",
        "Transactions in flight at once beyond the first (TCP_RR, UDP_RR)",
    ),
    OptDef::flag(
        "connection_test",
        'c',
        "A new connection per transaction (OMNI -d rr: TCP_CRR; no direction: TCP_CC)",
    ),
    OptDef::flag("cork", 'C', "Set TCP_CORK on our data socket"),
    OptDef::value(
        "direction",
        'd',
        "dir",
        "OMNI's direction: send|xmit|stream, recv|maerts, rr, or a number; '|' joins them",
    ),
    OptDef::flag("nodelay", 'D', "Set TCP_NODELAY on both ends"),
    OptDef::value(
        "recv_timeout",
        'e',
        "seconds",
        "Receive timeout: a UDP_RR transaction with no answer within it counts as lost",
    ),
    OptDef::flag(
        "mtu_discover",
        'f',
        "Set IP_MTU_DISCOVER to 'do' (don't fragment) on our data socket",
    ),
    OptDef::flag("fastopen", 'F', "Use TCP Fast Open on the data connections"),
    OptDef::flag("so_debug", 'g', "Set SO_DEBUG on our data socket"),
    OptDef::value("mss", 'G', "bytes", "TCP_MAXSEG of our data socket"),
    OptDef::flag("help", 'h', "Display this text"),
    OptDef::value(
        "data_host",
        'H',
        "name[,fam]",
        "Host of the data connection (another address of the netserver's host)",
    ),
    OptDef::value(
        "check_interval",
        'i',
        "x",
        "Removed in netperf 2.7 (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag(
        "use_write",
        'I',
        "Use write() rather than send() on our data socket",
    ),
    OptDef::value(
        "parallel",
        'j',
        "n",
        "Parallel connections (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag(
        "keyval",
        'k',
        "Key=value output of these selectors or of the selectors in this file",
    )
    .with_arity(Arity::OptionalWord)
    .with_value_name("list|file"),
    OptDef::value(
        "cong_control",
        'K',
        "loc[,rem]",
        "TCP congestion control algorithm, locally and remotely",
    ),
    OptDef::value(
        "multicast_ttl",
        'l',
        "ttl",
        "Multicast TTL (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "local_data",
        'L',
        "name[,fam]",
        "Local address (and family) our data socket binds to",
    ),
    OptDef::value(
        "send_size",
        'm',
        "local[,remote]",
        "Send size, ours and netserver's (a lone value sets ours)",
    ),
    OptDef::value(
        "recv_size",
        'M',
        "remote[,local]",
        "Receive size, netserver's and ours (a lone value sets netserver's)",
    ),
    OptDef::flag("local_connected", 'n', "Connect our UDP data socket"),
    OptDef::flag(
        "remote_connected",
        'N',
        "netserver connects its UDP data socket",
    ),
    OptDef::flag(
        "csv",
        'o',
        "CSV output of these selectors or of the selectors in this file",
    )
    .with_arity(Arity::OptionalWord)
    .with_value_name("list|file"),
    OptDef::flag(
        "human",
        'O',
        "Columnar output of these selectors or of the selectors in this file",
    )
    .with_arity(Arity::OptionalWord)
    .with_value_name("list|file"),
    OptDef::value(
        "port_range",
        'p',
        "min[,max]",
        "Local port range of TCP_CRR's and TCP_CC's connections",
    ),
    OptDef::value(
        "data_port",
        'P',
        "local[,remote]",
        "Data ports, ours and netserver's (a lone value sets both)",
    ),
    OptDef::value(
        "pacing",
        'q',
        "bytes/s",
        "SO_MAX_PACING_RATE of our data socket, bytes per second",
    ),
    OptDef::value(
        "rr_size",
        'r',
        "req[,rsp]",
        "Request and response sizes of _RR tests (default 1,1)",
    ),
    OptDef::value(
        "routing",
        'R',
        "0|1",
        "Allow routing (0: SO_DONTROUTE on both ends; UDP_STREAM's default)",
    ),
    OptDef::value(
        "local_bufs",
        's',
        "send[,recv]",
        "Local socket send and receive buffer sizes",
    ),
    OptDef::value(
        "remote_bufs",
        'S',
        "send[,recv]",
        "Remote socket send and receive buffer sizes",
    ),
    OptDef::value(
        "socket_type",
        't',
        "type",
        "Socket type: stream or dgram (follows -T)",
    )
    .hidden(),
    OptDef::value(
        "protocol",
        'T',
        "tcp|udp",
        "Protocol of the data connections",
    ),
    OptDef::value("uuid", 'u', "uuid", "Test UUID for output selectors"),
    OptDef::flag(
        "dont_give_up",
        'U',
        "Keep retrying failed connects (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag(
        "copy_avoid",
        'V',
        "Copy avoidance (not available on Linux; shown in the banner)",
    )
    .hidden(),
    OptDef::value("wait", 'w', "x", "(accepted; no effect)").hidden(),
    OptDef::flag(
        "classic_z",
        'z',
        "(TCP_SENDFILE, TCP_CC, TCP_MSS: accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "send_width",
        'W',
        "width",
        "Number of send buffers in the ring",
    ),
    OptDef::flag("ipv4", '4', "IPv4 data connection"),
    OptDef::flag("ipv6", '6', "IPv6 data connection"),
    OptDef::long_only(
        "rate",
        "rate",
        Arity::Required,
        "RATE",
        "Pace UDP_STREAM sends at RATE bits/s (k, m, g suffixes)",
    ),
    OptDef::long_only(
        "flows",
        "flows",
        Arity::Required,
        "N",
        "Run N data connections at once, started together (every test but TCP_SENDFILE and TCP_MSS)",
    ),
    OptDef::long_only(
        "threads",
        "threads",
        Arity::Required,
        "T",
        "Threads at each end that drive the flows (default: the CPUs, at most one per flow)",
    ),
    OptDef::long_only(
        "warmup",
        "warmup",
        Arity::Required,
        "SECS",
        "Run this long before the measured interval, uncounted (slow start stays out)",
    ),
    OptDef::long_only(
        "cooldown",
        "cooldown",
        Arity::Required,
        "SECS",
        "Run this long after the measured interval, uncounted (the ragged end stays out)",
    ),
    OptDef::long_only(
        "cpus",
        "cpus",
        Arity::Required,
        "LIST",
        "Pin the flow threads to these CPUs in turn (0,2,4 or 0-3)",
    ),
    OptDef::long_only(
        "batch",
        "batch",
        Arity::Required,
        "N",
        "UDP_STREAM: N datagrams a system call at each end (sendmmsg, recvmmsg)",
    ),
    OptDef::long_only(
        "gso",
        "gso",
        Arity::Required,
        "SIZE",
        "UDP_STREAM: hand the kernel SIZE bytes a send, cut into -m datagrams (UDP_SEGMENT; the receiver takes them coalesced, UDP_GRO)",
    ),
    OptDef::long_only(
        "zerocopy",
        "zerocopy",
        Arity::None,
        "",
        "TCP_STREAM: send with MSG_ZEROCOPY (a buffer is reused once the kernel is done with it)",
    ),
    OptDef::long_only(
        "spin",
        "spin",
        Arity::None,
        "",
        "Busy-poll non-blocking sockets on both ends (_RR tests)",
    ),
    OptDef::long_only(
        "no_latency",
        "no-latency",
        Arity::None,
        "",
        "Do not time each transaction (to measure what timing costs)",
    ),
];
