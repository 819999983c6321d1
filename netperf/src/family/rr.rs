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
    control::Control,
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

pub fn run_once(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
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
        timing: ctx.timing,
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
                flow: 0,
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
    check_counts(plan.test, &m, &outcome, d.caps().exact_counts)?;
    Ok(m)
}

/// UDP_RR `--flows N`: a socket per flow, each with its own hello and its
/// own transactions (its share of a count), on a thread each, started
/// together; the netserver answers each flow from a socket of its own.
/// Latency is over every transaction of every flow (the histograms merged).
pub fn run_udp_flows(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let n = plan.flows;
    let (mut p, socks) = super::udp_stream::flow_sockets(plan, d)?;
    p.spec.flows = n;
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let req_size = p.spec.request_size as usize;
    let resp_size = p.spec.response_size as usize;
    let (first, _) = super::udp_stream::udp_socket(p)?;
    let mut socks = socks;
    socks.insert(0, first);
    let links = super::udp_stream::flow_hellos(plan, &socks, to, &grant, d)?;
    pin(plan)?;
    let stop = StopFlag::new();
    let _timer = length_timer(plan, &stop)?;
    let timeout = plan.recv_timeout.unwrap_or(DEFAULT_UDP_TIMEOUT);
    let conv = d.conventions();
    let (outcomes, local_cpu) = {
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let outcomes = engine::flow::together(
            links.len(),
            |i| -> Result<RrOutcome> {
                let params = Requester {
                    req: req_size,
                    resp: resp_size,
                    burst: plan.effective_burst(),
                    until: match plan.length {
                        Length::Count(c) => Until::Transactions(super::flows::share(c, n, i)),
                        Length::Seconds(_) => Until::Stopped,
                    },
                    timing: ctx.timing,
                    spin: plan.spin,
                };
                super::pin_flow(plan, i)?;
                let l = links
                    .get(i)
                    .copied()
                    .ok_or_else(|| anyhow::anyhow!("flow {i}"))?;
                Ok(rr::udp_requester(
                    l,
                    &params,
                    &conv,
                    timeout,
                    &stop,
                    ctx.live.flow(i).unwrap_or(&ctx.live),
                )?)
            },
            || anyhow::anyhow!("a flow thread panicked"),
        );
        (outcomes, phase.end())
    };
    let (all, mut local) = merge_outcomes(outcomes)?;
    local.cpu = local_cpu;
    let remote = d.finish(ClientDone::default(), results_wait(plan))?;
    check_flow_transactions(&local, &remote, false)?;
    let mut m = measurement(plan, &all, remote, (lss, lsr), &grant, None, None);
    m.local = SideResults {
        cpu: local.cpu.clone(),
        ..local
    };
    (m.local_send_width, m.local_recv_width) = (1, 1);
    (m.remote_send_width, m.remote_recv_width) = (grant.send_width, grant.recv_width);
    m.local_addr = socks.first().and_then(|s| s.local_addr().ok());
    m.local_tos = tos;
    m.remote_addr = Some(to);
    m.flows = socks
        .iter()
        .map(|s| super::flows::FlowEnd {
            local_port: s.local_addr().map_or(0, |a| a.port()),
            retransmits: None,
        })
        .collect();
    Ok(m)
}

/// TCP_CRR (and TCP_CC) `--flows N`: N requesters, each opening its own
/// connection per transaction from its own share of the local port range,
/// on a thread each, started together; each connection's preamble names
/// its flow, so the netserver counts every flow's transactions.
pub fn run_crr_flows(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let n = plan.flows;
    if let Some(why) = d.caps().lacks(proto::Feature::Flows) {
        anyhow::bail!("{why}");
    }
    super::flows::raise_open_files(n);
    let mut p = prepare(plan, d, Protocol::Tcp)?;
    p.spec.flows = n;
    let (lo, hi) = plan.port_range.unwrap_or_else(default_ports);
    let span = u32::from(hi - lo) + 1;
    if span < n * 4 {
        anyhow::bail!(
            "--flows {n}: the local port range {lo}-{hi} leaves fewer than 4 ports a flow (-- -p MIN,MAX)"
        );
    }
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let local_ip = p.local.ip();
    drop(p.sock);
    let base = CrrRequester {
        server: to,
        local_ip,
        ports: (lo, hi),
        token: grant.token,
        req: p.spec.request_size as usize,
        resp: p.spec.response_size as usize,
        until: Until::Stopped,
        timing: ctx.timing,
        side: plan.local.clone(),
        local: super::local_opts(plan),
        conv: d.conventions(),
        flow: 0,
    };
    pin(plan)?;
    let stop = StopFlag::new();
    let _timer = length_timer(plan, &stop)?;
    let (outcomes, local_cpu) = {
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let outcomes = engine::flow::together(
            n as usize,
            |i| -> Result<RrOutcome> {
                super::pin_flow(plan, i)?;
                // each flow its own slice of the port range
                let share = span / n;
                let first = u32::from(lo) + share * i as u32;
                let last = (first + share - 1).min(u32::from(hi));
                let p = CrrRequester {
                    ports: (first as u16, last as u16),
                    until: match plan.length {
                        Length::Count(c) => Until::Transactions(super::flows::share(c, n, i)),
                        Length::Seconds(_) => Until::Stopped,
                    },
                    flow: i as u32,
                    ..base.clone()
                };
                Ok(crr::requester(
                    &p,
                    &stop,
                    ctx.live.flow(i).unwrap_or(&ctx.live),
                )?)
            },
            || anyhow::anyhow!("a flow thread panicked"),
        );
        (outcomes, phase.end())
    };
    let (all, mut local) = merge_outcomes(outcomes)?;
    local.cpu = local_cpu;
    let remote = d.finish(ClientDone::default(), results_wait(plan))?;
    check_flow_transactions(&local, &remote, true)?;
    let mss = all.mss;
    let mut m = measurement(plan, &all, remote, (lss, lsr), &grant, mss, None);
    m.local = local;
    let width = u32::from(plan.test != TestKind::TcpCc);
    (m.local_send_width, m.local_recv_width) = (width, width);
    (m.remote_send_width, m.remote_recv_width) = (grant.send_width, grant.recv_width);
    m.local_tos = tos;
    m.remote_addr = Some(to);
    m.flows = (0..n).map(|_| super::flows::FlowEnd::default()).collect();
    Ok(m)
}

/// Flow by flow, the netserver answered what we completed: exactly (TCP),
/// or at least that (UDP: an answer may be lost on its way back).
fn check_flow_transactions(local: &SideResults, remote: &SideResults, exact: bool) -> Result<()> {
    if remote.flows.len() != local.flows.len() {
        anyhow::bail!(
            "the netserver reported {} flows, we ran {}",
            remote.flows.len(),
            local.flows.len()
        );
    }
    for (i, (a, b)) in local.flows.iter().zip(&remote.flows).enumerate() {
        let agree = if exact {
            a.transactions == b.transactions
        } else {
            b.transactions >= a.transactions
        };
        if !agree {
            anyhow::bail!(
                "flow {i}: we completed {} transactions, the netserver answered {}",
                a.transactions,
                b.transactions
            );
        }
    }
    Ok(())
}

/// Many flows' outcomes as one (latency over every transaction of every
/// flow, the histograms merged), and our side's results, flow by flow.
fn merge_outcomes(outcomes: Vec<Result<RrOutcome>>) -> Result<(RrOutcome, SideResults)> {
    let mut all = RrOutcome::default();
    let mut hist: Option<Box<engine::latency::Latency>> = None;
    let mut local = SideResults::default();
    for o in outcomes {
        let o = o?;
        local.add_flow(&o.counters, engine::flow::nanos(o.elapsed));
        all.counters = all.counters.plus(o.counters);
        all.lost += o.lost;
        all.stale += o.stale;
        all.elapsed = all.elapsed.max(o.elapsed);
        all.mss = all.mss.or(o.mss);
        if let Some(h) = o.histogram {
            match &mut hist {
                Some(m) => m.merge(&h),
                None => hist = Some(h),
            }
        }
    }
    all.latency = hist.and_then(|h| h.summary());
    local.close_flows();
    Ok((all, local))
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
fn check_counts(kind: TestKind, m: &Measurement, o: &RrOutcome, exact: bool) -> Result<()> {
    let (ours, theirs) = (m.local.transactions, m.remote.transactions);
    let agree = match kind.protocol() {
        Protocol::Tcp if !exact && kind.is_connection_test() => {
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
