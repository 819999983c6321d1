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
        "Use TCP_DEFER_ACCEPT (accepted; no effect)",
    )
    .hidden(),
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
        "Declare a connection test (accepted; implied by TCP_CRR)",
    )
    .hidden(),
    OptDef::flag("cork", 'C', "Set TCP_CORK (accepted; no effect)").hidden(),
    OptDef::value(
        "direction",
        'd',
        "direction",
        "Test direction (omni tests only; accepted, ignored for named tests)",
    )
    .hidden(),
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
        "Set IP_MTU_DISCOVER (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag("fastopen", 'F', "Use TCP Fast Open (accepted; no effect)").hidden(),
    OptDef::flag("so_debug", 'g', "Set SO_DEBUG (accepted; no effect)").hidden(),
    OptDef::value("mss", 'G', "bytes", "TCP_MAXSEG (accepted; no effect)").hidden(),
    OptDef::flag("help", 'h', "Display this text"),
    OptDef::value(
        "data_host",
        'H',
        "name[,fam]",
        "Host of the data connection (must be the control connection's host)",
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
        "Use write() rather than send() (accepted; no effect)",
    )
    .hidden(),
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
        "Local address of the data connection",
    ),
    OptDef::value(
        "send_size",
        'm',
        "local[,remote]",
        "Send size of _STREAM/_MAERTS tests (a lone value sets the local one)",
    ),
    OptDef::value(
        "recv_size",
        'M',
        "remote[,local]",
        "Receive size of _STREAM/_MAERTS tests (a lone value sets the remote one)",
    ),
    OptDef::flag(
        "local_connected",
        'n',
        "Connect the UDP socket locally (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag(
        "remote_connected",
        'N',
        "Connect the UDP socket remotely (accepted; no effect)",
    )
    .hidden(),
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
        "Local port range of TCP_CRR's connections",
    ),
    OptDef::value(
        "data_port",
        'P',
        "local[,remote]",
        "Data ports, local and remote",
    ),
    OptDef::value(
        "pacing",
        'q',
        "rate",
        "SO_MAX_PACING_RATE (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "rr_size",
        'r',
        "req[,rsp]",
        "Request and response sizes of _RR tests (default 1,1)",
    ),
    OptDef::value("routing", 'R', "0|1", "Allow routing (accepted; no effect)").hidden(),
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
        "Socket type (omni tests only; accepted, ignored for named tests)",
    )
    .hidden(),
    OptDef::value(
        "protocol",
        'T',
        "protocol",
        "Protocol (omni tests only; accepted, ignored for named tests)",
    )
    .hidden(),
    OptDef::value("uuid", 'u', "uuid", "Test UUID for output selectors"),
    OptDef::flag(
        "dont_give_up",
        'U',
        "Keep retrying failed connects (accepted; no effect)",
    )
    .hidden(),
    OptDef::flag("copy_avoid", 'V', "Copy avoidance (accepted; no effect)").hidden(),
    OptDef::value("wait", 'w', "x", "(accepted; no effect)").hidden(),
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
