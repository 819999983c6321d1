//! `-d`: netperf 2.7's debug lines that describe the run (endpoints, ports,
//! socket buffers, ring widths, the timer, each iteration's figures), in
//! its words and on stdout where it writes them, because wrappers scrape
//! them ("remote port is N"); our own detail goes to stderr (`-d` tells
//! what netperf does: addresses, requests, grants, results; `-dd` adds
//! every control message).

use std::{
    io::Write,
    net::SocketAddr,
    sync::atomic::{AtomicU8, Ordering},
};

use optparse::value::AddrFamily;
use proto::Protocol;

use crate::plan::Plan;

static LEVEL: AtomicU8 = AtomicU8::new(0);

/// Set from `-d` (once per `-d`).
pub fn set_level(n: u8) {
    LEVEL.store(n, Ordering::Relaxed);
}

pub fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Print one of our debug lines, on stderr, at `at` or above.
pub fn line(at: u8, text: impl FnOnce() -> String) {
    if level() >= at {
        eprintln!("netperf: debug: {}", text());
    }
}

/// Print netperf 2.7's debug line (or lines) on stdout at `-d` and above,
/// in order with the banner and the table. A closed stdout is noticed by
/// the output that follows, not here.
pub fn hp(text: impl FnOnce() -> String) {
    if level() >= 1 {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", text());
        let _ = out.flush();
    }
}

/// netperf 2.7's name of an address family.
fn af(f: AddrFamily) -> &'static str {
    match f {
        AddrFamily::Unspec => "AF_UNSPEC",
        AddrFamily::V4 => "AF_INET",
        AddrFamily::V6 => "AF_INET6",
    }
}

fn af_of(a: &SocketAddr) -> &'static str {
    af(if a.is_ipv4() {
        AddrFamily::V4
    } else {
        AddrFamily::V6
    })
}

/// The local control address as netperf 2.7 names it: `-L`, or the
/// wildcard of the family asked for (or of the netserver's).
fn local_host_name(plan: &Plan, peer: &SocketAddr) -> String {
    match (&plan.local_host, plan.local_family, peer.is_ipv6()) {
        (Some(h), ..) => h.clone(),
        (None, AddrFamily::V6, _) | (None, AddrFamily::Unspec, true) => "::0".into(),
        (None, ..) => "0.0.0.0".into(),
    }
}

/// The control connection's lines, once it is up.
pub fn control(plan: &Plan, peer: &SocketAddr) {
    if level() == 0 {
        return;
    }
    let host = plan.host_name();
    let port = plan.port;
    let local = local_host_name(plan, peer);
    let lport = plan.local_port.unwrap_or(0);
    hp(|| format!("remotehost is {host} and port {port}"));
    hp(|| {
        format!(
            "establish_control called with host '{host}' port '{port}' remfam {}\n\t\tlocal '{local}' port '{lport}' locfam {}",
            af_of(peer),
            af(plan.local_family)
        )
    });
    hp(|| format!("bound control socket to {local} and {lport}"));
    hp(|| format!("successful connection to remote netserver at {host} and {port}"));
}

/// The data endpoints' lines: what the data connections go to and come
/// from, as asked (the ports are those of `-- -P`, 0 when the kernel picks).
pub fn data_endpoints(plan: &Plan, peer: &SocketAddr, protocol: Protocol) {
    if level() == 0 {
        return;
    }
    let (ty, prot) = match protocol {
        Protocol::Tcp => ("SOCK_STREAM", "IPPROTO_TCP"),
        Protocol::Udp => ("SOCK_DGRAM", "IPPROTO_UDP"),
    };
    let remote_family = match plan.data_family {
        AddrFamily::Unspec => af_of(peer),
        f => af(f),
    };
    let host = plan.data_host.as_deref().unwrap_or(plan.host_name());
    let rport = plan.remote_data_port.unwrap_or(0);
    hp(|| {
        format!(
            "complete_addrinfo using hostname {host} port {rport} family {remote_family} type {ty} prot {prot} flags 0x0"
        )
    });
    let local = match (&plan.data_local, &plan.data_host) {
        (Some(l), _) => l.clone(),
        (None, None) => {
            let l = local_host_name(plan, peer);
            hp(|| format!("local_data_address not set, using local_host_name of '{l}'"));
            l
        }
        (None, Some(_)) => {
            hp(|| "local_data_address not set, using address family info".into());
            match (plan.data_family, remote_family) {
                (AddrFamily::V6, _) | (AddrFamily::Unspec, "AF_INET6") => "::0".into(),
                _ => "0.0.0.0".into(),
            }
        }
    };
    let lport = plan.local_data_port.unwrap_or(0);
    hp(|| {
        format!(
            "complete_addrinfo using hostname {local} port {lport} family {} type {ty} prot {prot} flags 0x1",
            af(plan.data_family)
        )
    });
}

/// A socket buffer's size as netperf 2.7 reads it (`send` or `receive`).
pub fn socket_size(which: &str, size: u32) {
    hp(|| format!("netperf: get_sock_buffer: {which} socket size determined to be {size}"));
}

/// One iteration's figures, as netperf 2.7's confidence arithmetic takes
/// them (-1 for what was not measured).
pub fn iteration(itr: usize, time: f64, result: f64, cpu: [Option<f64>; 2], sd: [Option<f64>; 2]) {
    let v = |x: Option<f64>| x.unwrap_or(-1.0);
    hp(|| {
        format!(
            "calculate_confidence: itr  {itr}; time {time:.6}; res  {result:.6}\n{pad}lcpu {:.6}; rcpu {:.6}\n{pad}lsdm {:.6}; rsdm {:.6}",
            v(cpu[0]),
            v(cpu[1]),
            v(sd[0]),
            v(sd[1]),
            pad = " ".repeat(31)
        )
    });
}

/// A socket's descriptor number, as netperf 2.7's lines show it.
pub fn descriptor(s: &socket2::Socket) -> i64 {
    engine::sys::raw(s) as i64
}

/// The netserver's counters arrived.
pub(crate) fn got_results(r: &proto::SideResults) {
    line(1, || {
        format!(
            "netserver's counters: {} bytes sent in {} calls, {} received in {} calls, {} transactions, over {:.3} s",
            r.bytes_sent,
            r.send_calls,
            r.bytes_received,
            r.recv_calls,
            r.transactions,
            r.elapsed_ns as f64 / 1e9
        )
    });
    line(2, || format!("results: {r:?}"));
}
