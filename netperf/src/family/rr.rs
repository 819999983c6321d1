//! TCP_RR, UDP_RR and TCP_CRR: transactions per second and their latency.

use std::{
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, Result};
use engine::{
    crr::{self, CrrRequester},
    handshake,
    rr::{self, Requester, RrOutcome, Until},
    sockopt,
    timer::StopFlag,
};
use proto::{ClientDone, Protocol, SideResults, TestKind};
use socket2::SockRef;

use super::{Context, Measurement, bind_local, length_timer, pin, prepare, request, results_wait};
use crate::{
    cli::{Length, Plan},
    control::Dialect,
    interrupt,
};

/// UDP_RR's receive timeout when `-e` is not given.
pub const DEFAULT_UDP_TIMEOUT: Duration = Duration::from_secs(1);
/// TCP_CRR's local port range when `-p` is not given: from netperf's 5000
/// up to just below the kernel's ephemeral range. netperf's own default
/// (5000-65535) fills the ephemeral range with TIME_WAIT entries during a
/// long test, and every other program on the host then fails to bind or
/// connect from an ephemeral port for a minute.
pub fn default_ports() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok());
    match ephemeral_low {
        Some(lo) if lo > 6000 => (5000, lo - 1),
        _ => (5000, 65535),
    }
}

pub fn run_once(plan: &Plan, d: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    let p = prepare(plan, d, plan.test.protocol())?;
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let params = Requester {
        req: p.spec.request_size as usize,
        resp: p.spec.response_size as usize,
        burst: plan.effective_burst(),
        until: match plan.length {
            Length::Count(n) => Until::Transactions(n),
            Length::Seconds(_) => Until::Stopped,
        },
        timing: plan.latency,
        spin: plan.spin,
    };
    let stop = StopFlag::new();
    let live = &ctx.live;
    // TCP_CRR's connections come and go: the address they bind to.
    let mut local_addr = Some(SocketAddr::new(p.local.ip(), 0));
    let mut end_bufs = None;
    let (outcome, local_cpu, mss, tcp) = match plan.test {
        TestKind::TcpRr => {
            bind_local(&p)?;
            p.sock
                .connect_timeout(&to.into(), Duration::from_secs(10))
                .with_context(|| format!("data connection to {to}"))?;
            let conn: TcpStream = p.sock.into();
            local_addr = conn.local_addr().ok();
            handshake::present(&conn, &grant.token, 0, &d.conventions())?;
            pin(plan)?;
            let _timer = length_timer(plan, &stop)?;
            let _int = interrupt::stop_on_interrupt(&stop);
            let phase = ctx.begin(plan)?;
            let o = rr::tcp_requester(&conn, &params, &stop, live)?;
            // netperf 2.7 reads the sizes again on a connected TCP socket
            // whose sizes it did not set (autotuning changes them).
            end_bufs = Some(sockopt::buffer_sizes(SockRef::from(&conn)));
            (
                o,
                phase.end(),
                sockopt::mss(SockRef::from(&conn)),
                sockopt::tcp_stats(&conn),
            )
        }
        TestKind::UdpRr => {
            let (s, _) = super::udp_stream::udp_socket(p)?;
            let link = super::udp_stream::link(plan, &s, to)?;
            local_addr = s.local_addr().ok();
            super::udp_stream::hello(link, &grant, d)?;
            pin(plan)?;
            let _timer = length_timer(plan, &stop)?;
            let _int = interrupt::stop_on_interrupt(&stop);
            let timeout = plan.recv_timeout.unwrap_or(DEFAULT_UDP_TIMEOUT);
            let phase = ctx.begin(plan)?;
            let o = rr::udp_requester(link, &params, &d.conventions(), timeout, &stop, live)?;
            (o, phase.end(), None, None)
        }
        _ => {
            let local_ip = p.local.ip();
            drop(p);
            let p = CrrRequester {
                server: to,
                local_ip,
                ports: plan.port_range.unwrap_or_else(default_ports),
                token: grant.token,
                req: params.req,
                resp: params.resp,
                until: params.until,
                timing: params.timing,
                side: plan.local.clone(),
                local: super::local_opts(plan),
                conv: d.conventions(),
            };
            pin(plan)?;
            let _timer = length_timer(plan, &stop)?;
            let _int = interrupt::stop_on_interrupt(&stop);
            let phase = ctx.begin(plan)?;
            let o = crr::requester(&p, &stop, live)?;
            let mss = o.mss;
            (o, phase.end(), mss, None)
        }
    };
    let remote = d.finish(ClientDone::default(), results_wait(plan))?;
    let mut m = measurement(plan, &outcome, remote, (lss, lsr), &grant, mss, tcp);
    let width = u32::from(plan.test != TestKind::TcpCc);
    (m.local_send_width, m.local_recv_width) = (width, width);
    (m.remote_send_width, m.remote_recv_width) = (grant.send_width, grant.recv_width);
    (m.local.send_buf_end, m.local.recv_buf_end) = end_bufs.unwrap_or((lss, lsr));
    m.local_addr = local_addr;
    m.local_tos = tos;
    m.remote_addr = Some(to);
    m.local.cpu = local_cpu;
    check_counts(plan.test, &m, &outcome, d.is_netperf2())?;
    Ok(m)
}

fn measurement(
    plan: &Plan,
    o: &RrOutcome,
    remote: SideResults,
    (lss, lsr): (u32, u32),
    grant: &proto::Grant,
    mss: Option<u32>,
    tcp: Option<proto::TcpStats>,
) -> Measurement {
    Measurement {
        elapsed: o.elapsed.as_secs_f64(),
        local: SideResults { tcp, ..o.results() },
        remote,
        local_send_buf: lss,
        local_recv_buf: lsr,
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        local_send_size: plan.request_size,
        local_recv_size: plan.response_size,
        remote_send_size: plan.response_size,
        remote_recv_size: plan.request_size,
        mss,
        latency: o.latency,
        lost: o.lost,
        ..Measurement::default()
    }
}

/// Over TCP both ends count the same transactions; over UDP the responder
/// may have answered requests whose responses were lost, never fewer.
/// netserver 2.7 ends a connection-per-transaction test on its own timer,
/// and may count the connection it accepted as that fired: one more.
fn check_counts(kind: TestKind, m: &Measurement, o: &RrOutcome, netperf2: bool) -> Result<()> {
    let (ours, theirs) = (m.local.transactions, m.remote.transactions);
    let agree = match kind.protocol() {
        Protocol::Tcp if netperf2 && kind.is_connection_test() => {
            theirs >= ours && theirs <= ours + 1
        }
        Protocol::Tcp => ours == theirs,
        Protocol::Udp => theirs >= ours && theirs <= ours + o.lost + o.stale,
    };
    if !agree {
        anyhow::bail!(
            "transaction counts disagree: we completed {ours}, the netserver answered {theirs}"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_ports_stay_below_the_ephemeral_range() {
        let (lo, hi) = super::default_ports();
        assert_eq!(lo, 5000);
        let eph: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if eph > 6000 {
            assert_eq!(hi, eph - 1);
        }
    }
}
