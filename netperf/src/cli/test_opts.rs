//! Test-specific options: everything after `--`.
//!
//! netperf 2.7 runs every named test through its "omni" code and parses the
//! test-specific options with one grammar for all of them; we do the same, so
//! that any option netperf accepts after `--` is accepted here. Each test
//! family reads the options that mean something to it.

use optparse::{
    Arity, Occurrence, OptDef, Parsed,
    value::{self, AddrFamily},
};
use proto::Protocol;

use super::{
    Invocation,
    plan::{MAX_FLOWS, Plan, Selection, SelectorStyle, Shape, UnderLoad, resolve_shape},
    test_name::{self, TestName},
    values::*,
};

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
        "Pace the sender at RATE bits/s in all, shared by the flows (k, m, g suffixes): UDP by our own pacing, TCP by the kernel's (SO_MAX_PACING_RATE), the netserver's end when it sends",
    ),
    OptDef::long_only(
        "flows",
        "flows",
        Arity::Required,
        "N",
        "Run N data connections at once, started together (every test but TCP_SENDFILE and TCP_MSS)",
    ),
    OptDef::long_only(
        "under_load",
        "under-load",
        Arity::Required,
        "N[,up|down|both]",
        "TCP_RR, UDP_RR, TCP_CRR: run while N bulk TCP flows load the path (up: we send; down; both), after an idle phase",
    ),
    OptDef::long_only(
        "one_way",
        "one-way",
        Arity::None,
        "",
        "Queueing delay each way (up: toward the netserver), from probes beside the test with no common clock: taken under load (--under-load, -t RPM) where the netserver answers them; asked for, TCP_RR and UDP_RR too, and a netserver that cannot is an error",
    ),
    OptDef::long_only(
        "observer",
        "observer",
        Arity::Required,
        "HOST[:PORT]",
        "A second netserver (netserver --fleet, with the same key) probes the same netserver while the test runs, so that a queue it shares is told from one it does not: its queueing delay each way beside ours (implies --one-way)",
    ),
    OptDef::long_only(
        "threads",
        "threads",
        Arity::Required,
        "T",
        "Threads that drive our end's flows (default: the CPUs, at most one per flow; TCP streams a flow a thread up to 16); the netserver sizes its own",
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
        "rx_zerocopy",
        "rx-zerocopy",
        Arity::None,
        "",
        "TCP_STREAM, TCP_MAERTS: the receiver maps whole pages of data (TCP_ZEROCOPY_RECEIVE) and copies only the rest",
    ),
    OptDef::long_only(
        "rx_discard",
        "rx-discard",
        Arity::None,
        "",
        "TCP_STREAM, TCP_MAERTS: the receiver's kernel drops the data uncopied (MSG_TRUNC): the stack's ceiling, no delivery",
    ),
    OptDef::long_only(
        "io_uring",
        "io-uring",
        Arity::None,
        "",
        "TCP_STREAM, TCP_MAERTS, UDP_STREAM: both ends move the data through io_uring (batched sends, multishot receive)",
    ),
    OptDef::long_only(
        "ecn",
        "ecn",
        Arity::Required,
        "ect0|ect1",
        "UDP_STREAM, UDP_RR, TCP_STREAM, TCP_MAERTS: ECN on the path. UDP: both ends' sends carry the codepoint and each end counts the codepoints that arrive (not-ECT, ECT(0), ECT(1), CE), in total and each interval, and says whether the path passes, bleaches or mangles ECN; TCP: whether the connection negotiated ECN (net.ipv4.tcp_ecn) and the packets delivered CE-marked",
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
    OptDef::long_only(
        "stamp_key",
        "stamp-key",
        Arity::Required,
        "file",
        "-t STAMP in authenticated mode: HMAC-SHA-256 under the key in this file (as netserver --stamp-key reads it)",
    ),
];

/// OMNI's options that the classic grammar of TCP_SENDFILE, TCP_CC and
/// TCP_MSS does not have (its letters are `aAbCDnNhHLmMpPrRsSTVwWz46`):
/// netperf 2.7 reads each as -4 and ignores it.
const CLASSIC_UNKNOWN: &[&str] = &[
    "pktinfo",
    "connection_test",
    "direction",
    "recv_timeout",
    "mtu_discover",
    "fastopen",
    "so_debug",
    "mss",
    "check_interval",
    "use_write",
    "parallel",
    "keyval",
    "cong_control",
    "multicast_ttl",
    "csv",
    "human",
    "pacing",
    "socket_type",
    "uuid",
    "dont_give_up",
];

/// What the test-specific options say, into the plan.
pub(crate) fn apply(p: &Parsed, plan: &mut Plan) -> Result<Option<Invocation>, CliError> {
    let mut shape = Shape::default();
    let omni_options = plan.name.takes_omni_options();
    for occ in &p.options {
        let o = occ.spelled.as_str();
        // netperf 2.7's TCP_SENDFILE, TCP_CC and TCP_MSS have the classic
        // grammar, without OMNI's options.
        if !omni_options && CLASSIC_UNKNOWN.contains(&occ.id) {
            plan.warnings.push(format!(
                "warning: {o} is not an option of {}, ignored (netperf 2.7 reads it as -4)",
                plan.name
            ));
            plan.data_family = AddrFamily::V4;
            continue;
        }
        // the classic grammar takes -T's value and ignores it, and -z
        if !omni_options && matches!(occ.id, "protocol" | "classic_z") {
            continue;
        }
        if let Some(inv) = option(occ, plan, &mut shape)? {
            return Ok(Some(inv));
        }
    }
    resolve_shape(plan, shape)?;
    Ok(None)
}

/// The data path: family, burst, direction, sockets' own options, hosts, output.
fn option(
    occ: &Occurrence,
    plan: &mut Plan,
    shape: &mut Shape,
) -> Result<Option<Invocation>, CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    match occ.id {
        "help" => return Ok(Some(Invocation::TestHelp)),
        optparse::BAD_OPTION | "ipv4" => plan.data_family = AddrFamily::V4,
        // OMNI has no -z: netperf 2.7 reads it as -4
        "classic_z" => {
            plan.warnings.push(format!(
                "warning: {o} is not an option of {}, ignored (netperf 2.7 reads it as -4)",
                plan.name
            ));
            plan.data_family = AddrFamily::V4;
        }
        "ipv6" => plan.data_family = AddrFamily::V6,
        // netperf 2.7 takes a negative burst as none at all (its manual
        // still describes a ramp-up that a negative value skipped; we
        // never ramp up).
        "burst" => {
            let n = atoi(o, v, &mut plan.warnings)?;
            plan.burst = u32::try_from(n.max(0))
                .map_err(|_| CliError(format!("{o}: '{v}' is more than {}", u32::MAX)))?;
        }
        "connection_test" => shape.connection = true,
        "cork" => plan.local_only.cork = true,
        "direction" => return direction(o, v, plan, shape),
        "nodelay" => {
            plan.local.nodelay = true;
            plan.remote.nodelay = true;
        }
        "recv_timeout" => recv_timeout(o, v, plan)?,
        "mtu_discover" => plan.local_only.mtu_discover = true,
        "fastopen" => plan.local_only.fastopen = true,
        "so_debug" => plan.local_only.so_debug = true,
        "mss" => {
            let n = atoi(o, v, &mut plan.warnings)?;
            plan.local_only.mss = u32::try_from(n).ok().filter(|&n| n > 0);
        }
        "data_host" => {
            let (host, fam) = value::pair_explicit(v);
            if let Some(h) = host {
                plan.data_host = Some(strip_mask(h).to_string());
            }
            if let Some(f) = fam {
                plan.data_family = family_of(o, f, &mut plan.warnings);
            }
        }
        "check_interval" => plan.warnings.push(format!(
            "warning: {o}: netperf 2.7 removed this option; ignored"
        )),
        "use_write" => plan.local_only.use_write = true,
        // netperf 2.7 stores -j and never uses it; -l is a multicast
        // TTL, -w nothing, -U and -B change nothing on Linux.
        "parallel" | "multicast_ttl" | "wait" | "dont_give_up" | "pktinfo" => {}
        "keyval" | "csv" | "human" => return Ok(selection(occ, plan)),
        "cong_control" => {
            let (l, r) = value::pair(v);
            plan.local.cong_control = l.map(str::to_string);
            plan.remote.cong_control = r.map(str::to_string);
        }
        "local_data" => {
            let (host, fam) = value::pair_explicit(v);
            if let Some(h) = host {
                plan.data_local = Some(strip_mask(h).to_string());
            }
            if let Some(f) = fam {
                plan.data_family = family_of(o, f, &mut plan.warnings);
            }
        }
        // A size of 0 (or not a number) is the default size, as in
        // netperf 2.7. The classic TCP_SENDFILE, TCP_CC and TCP_MSS
        // take the whole word as one size (`-m 1,64K` is 1024 there).
        _ => return size_option(occ, plan, shape),
    }
    Ok(None)
}

/// `-d`: RPM's load's direction, or OMNI's (a named test keeps its own,
/// as netperf 2.7 reads -d for OMNI only).
fn direction(
    o: &str,
    v: &str,
    plan: &mut Plan,
    shape: &mut Shape,
) -> Result<Option<Invocation>, CliError> {
    if plan.name == TestName::Rpm {
        let (up, down) = match v.to_ascii_lowercase().as_str() {
            "up" => (true, false),
            "down" => (false, true),
            "both" => (true, true),
            _ => {
                return Err(CliError(format!(
                    "{o}: '{v}' is not a direction of the load: up, down or both"
                )));
            }
        };
        let was = plan.rpm.unwrap_or(super::RPM_LOAD);
        plan.rpm = Some(UnderLoad { up, down, ..was });
        return Ok(None);
    }
    if plan.name != TestName::Omni {
        return Ok(None);
    }
    let (bits, unknown) = test_name::parse_direction(v);
    for u in unknown {
        plan.warnings.push(format!(
            "warning: {o} '{u}' is not a direction; read as 0, as netperf 2.7 does (send, recv, rr or a number)"
        ));
    }
    shape.explicit = Some(bits);
    Ok(None)
}

/// `-e`: the receive timeout. netperf takes whole seconds; fractions are
/// ours (-e 0.01). 0, or not a number, is no timeout, as in 2.7.
fn recv_timeout(o: &str, v: &str, plan: &mut Plan) -> Result<(), CliError> {
    let r = value::atof(v);
    if r.value == 0.0 {
        taken(o, v, r.clean, "0: no timeout", &mut plan.warnings);
        plan.recv_timeout = None;
        return Ok(());
    }
    if !(0.001..=3600.0).contains(&r.value) {
        return Err(CliError(format!(
            "{o}: '{v}' is not between 0.001 and 3600 seconds (0: no timeout)"
        )));
    }
    taken(o, v, r.clean, r.value, &mut plan.warnings);
    plan.recv_timeout = Some(std::time::Duration::from_secs_f64(r.value));
    Ok(())
}

/// `-k`, `-o`, `-O`: the output selectors (a list, a file, or `?`).
fn selection(occ: &Occurrence, plan: &mut Plan) -> Option<Invocation> {
    let style = match occ.id {
        "keyval" => SelectorStyle::KeyVal,
        "csv" => SelectorStyle::Csv,
        _ => SelectorStyle::Columns,
    };
    if occ.value.as_deref() == Some("?") {
        return Some(Invocation::ListSelectors {
            one_line: style != SelectorStyle::Columns,
            ours: plan.verbosity >= 3,
        });
    }
    plan.selection = Some(Selection {
        style,
        spec: occ.value.clone(),
    });
    None
}

/// `-m` and `-M`: a classic test's one size, OMNI's pair (for `-M` the
/// netserver's receive size first).
fn message_sizes(occ: &Occurrence, plan: &mut Plan, shape: &mut Shape) -> Result<(), CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    let (first, second) = if plan.name.takes_omni_options() {
        value::pair_explicit(v)
    } else {
        (Some(v), None)
    };
    let size = |x: &str, warnings: &mut Vec<String>| -> Result<Option<u32>, CliError> {
        Ok(Some(unsigned(o, x, warnings)?).filter(|&n| n > 0))
    };
    if occ.id == "send_size" {
        if let Some(l) = first {
            plan.local.send_size = size(l, &mut plan.warnings)?;
            shape.implied |= test_name::XMIT;
        }
        if let Some(r) = second {
            plan.remote.send_size = size(r, &mut plan.warnings)?;
            shape.implied |= test_name::RECV;
        }
    } else {
        // netperf: the first value is the remote receive size.
        if let Some(r) = first {
            plan.remote.recv_size = size(r, &mut plan.warnings)?;
            shape.implied |= test_name::XMIT;
        }
        if let Some(l) = second {
            plan.local.recv_size = size(l, &mut plan.warnings)?;
            shape.implied |= test_name::RECV;
        }
    }
    Ok(())
}

/// `-s` and `-S`: socket buffers. netperf 2.7 sets a buffer of 0 or
/// more (0: the kernel's least), and leaves a negative one.
fn buffers(occ: &Occurrence, plan: &mut Plan) -> Result<(), CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    let (s, r) = value::pair(v);
    let mut buf = |x: &str| -> Result<Option<u32>, CliError> {
        let n = num(o, x, &mut plan.warnings)?;
        Ok(u32::try_from(n).ok())
    };
    let (send, recv) = (
        s.map(&mut buf).transpose()?.flatten(),
        r.map(&mut buf).transpose()?.flatten(),
    );
    let side = if occ.id == "local_bufs" {
        &mut plan.local
    } else {
        &mut plan.remote
    };
    if s.is_some() {
        side.send_buf = send;
    }
    if r.is_some() {
        side.recv_buf = recv;
    }
    Ok(())
}

/// Sizes, ports, pacing, buffers, protocol.
fn size_option(
    occ: &Occurrence,
    plan: &mut Plan,
    shape: &mut Shape,
) -> Result<Option<Invocation>, CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    match occ.id {
        "send_size" | "recv_size" => message_sizes(occ, plan, shape)?,
        "local_connected" => plan.local_only.connected_udp = true,
        "remote_connected" => plan.remote_connected_udp = true,
        "port_range" => {
            let (lo, hi) = value::pair(v);
            let mut atoi_port = |s: &str| -> Result<u16, CliError> {
                let n = atoi(o, s, &mut plan.warnings)?;
                u16::try_from(n)
                    .map_err(|_| CliError(format!("{o}: '{s}' is not a port number (0 to 65535)")))
            };
            let lo = lo.map(&mut atoi_port).transpose()?;
            let hi = hi.map(&mut atoi_port).transpose()?;
            let (lo, hi) = (lo.unwrap_or(5000), hi.unwrap_or(65535));
            // 0,0: netperf 2.7 binds port 0, the kernel choosing each
            if hi < lo || (lo == 0 && hi != 0) {
                return Err(CliError(format!("{o}: '{v}' is not a port range min,max")));
            }
            plan.port_range = Some((lo, hi));
        }
        "data_port" => {
            let (l, r) = value::pair(v);
            plan.local_data_port = l.map(|x| port_of(o, x, &mut plan.warnings)).transpose()?;
            plan.remote_data_port = r.map(|x| port_of(o, x, &mut plan.warnings)).transpose()?;
        }
        "pacing" => {
            let n = atoi(o, v, &mut plan.warnings)?;
            plan.local_only.pacing = u64::try_from(n).ok().filter(|&n| n > 0);
        }
        "rr_size" => {
            let (q, r) = value::pair(v);
            if let Some(q) = q {
                plan.request_size = unsigned(o, q, &mut plan.warnings)?;
                plan.request_size_given = true;
            }
            if let Some(r) = r {
                plan.response_size = unsigned(o, r, &mut plan.warnings)?;
            }
            shape.implied |= test_name::XMIT | test_name::RECV;
        }
        "routing" => {
            shape.routing = Some(atoi(o, v, &mut plan.warnings)? != 0);
        }
        "local_bufs" | "remote_bufs" => buffers(occ, plan)?,
        "socket_type" => shape.socket_type = Some(v.to_string()),
        "protocol" => match test_name::parse_protocol(o, v)? {
            test_name::ProtocolWord::Known(p) => {
                shape.protocol = Some(p);
                shape.default_protocol = false;
            }
            test_name::ProtocolWord::Default => {
                plan.warnings.push(format!(
                    "warning: {o} '{v}' is not a protocol this netperf knows; TCP runs, as in netperf 2.7"
                ));
                shape.protocol = Some(Protocol::Tcp);
                shape.default_protocol = true;
            }
        },
        _ => return our_option(occ, plan, shape),
    }
    Ok(None)
}

/// This netperf's own options: fast paths, flows, threads, windows.
fn our_option(
    occ: &Occurrence,
    plan: &mut Plan,
    _: &mut Shape,
) -> Result<Option<Invocation>, CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    let size = |s: &str| size(o, s);
    match occ.id {
        "uuid" => plan.uuid = Some(v.chars().take(37).collect()),
        "copy_avoid" => plan.copy_avoidance = true,
        "defer_accept" => plan.defer_accept = true,
        "send_width" => {
            plan.local.send_width = Some(unsigned(o, v, &mut plan.warnings)?).filter(|&w| w > 0)
        }
        "rate" => plan.rate_bps = Some(value::bits_per_second(v).map_err(|e| bad(o, e))?),
        "spin" => plan.spin = true,
        "batch" => {
            let n = value::int(v).map_err(|e| bad(o, e))?;
            let max = proto::test::MAX_UDP_BATCH;
            if !(1..=i64::from(max)).contains(&n) {
                return Err(CliError(format!(
                    "{o}: '{v}': a batch goes from 1 to {max} datagrams"
                )));
            }
            plan.udp_batch = n as u32;
        }
        "gso" => plan.udp_gso = Some(size(v)?.max(1)),
        "zerocopy" => plan.zerocopy = true,
        "one_way" => plan.one_way = super::OneWayAsk::Asked,
        "observer" => {
            plan.observer = Some(host_port(o, v)?);
            plan.one_way = super::OneWayAsk::Asked;
        }
        "rx_zerocopy" | "rx_discard" => {
            let path = if occ.id == "rx_zerocopy" {
                proto::RxPath::ZeroCopy
            } else {
                proto::RxPath::Discard
            };
            if plan.rx != proto::RxPath::Copy && plan.rx != path {
                return Err(CliError(
                    "--rx-zerocopy, --rx-discard: a receiver takes its bytes one way; give one of them".into(),
                ));
            }
            plan.rx = path;
        }
        "io_uring" => plan.uring = true,
        "ecn" => {
            plan.ecn = Some(proto::ecn::Codepoint::parse_mark(v).ok_or_else(|| {
                CliError(format!(
                    "{o}: '{v}': a sender marks with ect0 or ect1 (CE is a queue's to set)"
                ))
            })?)
        }
        "no_latency" => plan.latency = false,
        "stamp_key" => plan.stamp_key = Some(std::path::PathBuf::from(v)),
        "flows" => flows(o, v, plan)?,
        "under_load" => plan.under_load = Some(under_load(o, v)?),
        "threads" => {
            let n = value::int(v).map_err(|e| bad(o, e))?;
            if n < 1 {
                return Err(CliError(format!("{o}: '{v}': at least one thread")));
            }
            plan.threads = Some(n.min(i64::from(MAX_FLOWS)) as u32);
        }
        "cpus" => plan.cpus = cpu_list(o, v)?,
        "warmup" | "cooldown" => {
            let secs = value::float(v).map_err(|e| bad(o, e))?;
            if !(0.0..=3600.0).contains(&secs) {
                return Err(CliError(format!(
                    "{o}: '{v}' is not between 0 and 3600 seconds"
                )));
            }
            let ms = (secs * 1000.0).round() as u32;
            let w = plan.window.get_or_insert_with(proto::Window::default);
            if occ.id == "warmup" {
                w.warmup_ms = ms;
            } else {
                w.cooldown_ms = ms;
            }
        }
        other => return Err(unhandled(other)),
    }
    Ok(None)
}

/// `--flows N` (for RPM, a fixed load of N flows a direction, not the
/// draft's ramp).
fn flows(o: &str, v: &str, plan: &mut Plan) -> Result<(), CliError> {
    let n = value::int(v).map_err(|e| bad(o, e))?;
    if !(1..=MAX_FLOWS as i64).contains(&n) {
        return Err(CliError(format!(
            "{o}: '{v}': flows go from 1 to {MAX_FLOWS}"
        )));
    }
    plan.flows = n as u32;
    if plan.name == TestName::Rpm {
        let was = plan.rpm.unwrap_or(super::RPM_LOAD);
        plan.rpm = Some(UnderLoad {
            flows: n as u32,
            ramp: false,
            ..was
        });
    }
    Ok(())
}

/// `--under-load N[,up|down|both]`.
fn under_load(o: &str, v: &str) -> Result<UnderLoad, CliError> {
    let (n, dir) = value::pair_explicit(v);
    let n = value::int(n.unwrap_or("")).map_err(|e| bad(o, e))?;
    if !(1..=64).contains(&n) {
        return Err(CliError(format!(
            "{o}: '{v}': 1 to 64 load flows a direction"
        )));
    }
    let (up, down) = match dir.map(str::to_ascii_lowercase).as_deref() {
        None | Some("up") => (true, false),
        Some("down") => (false, true),
        Some("both") => (true, true),
        Some(d) => {
            return Err(CliError(format!(
                "{o}: '{d}' is not a direction: up, down or both"
            )));
        }
    };
    Ok(UnderLoad {
        flows: n as u32,
        ramp: false,
        up,
        down,
    })
}

/// `HOST`, `HOST:PORT` or `[V6]:PORT` (the port netserver's own when
/// left out).
fn host_port(o: &str, v: &str) -> Result<(String, u16), CliError> {
    let bad = |why: &str| CliError(format!("{o}: '{v}': {why}"));
    let (host, port) = if let Some(rest) = v.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 address in [ ] is not closed"))?;
        (h, after.strip_prefix(':'))
    } else if v.matches(':').count() == 1 {
        let (h, p) = v.split_once(':').unwrap_or((v, ""));
        (h, Some(p))
    } else {
        (v, None)
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        None => super::DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
    };
    Ok((host.to_string(), port))
}
