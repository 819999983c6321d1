//! `--flows N`: N data connections in one test, every one connected
//! before any starts, then all driven together on event loops
//! ([`engine::evloop`]), counted exactly and checked flow by flow against
//! the netserver's counts. The aggregate is the sum over the common
//! interval (from the common start to the last flow's end).

use std::{
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use engine::{
    evloop::{self, Role},
    handshake, sockopt,
    timer::StopFlag,
};
use proto::{ClientDone, Protocol, SideResults, TestKind};

use super::{Context, Measurement, length_timer, pin, prepare, request, results_wait};
use crate::{
    cli::{Length, Plan},
    control::Control,
    interrupt,
};

/// A flow's view at the end: its local port and TCP's retransmissions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowEnd {
    pub local_port: u16,
    pub retransmits: Option<u64>,
}

/// Threads at each end: `--threads`, or the CPUs; never more than flows.
pub fn threads(plan: &Plan) -> usize {
    let t = plan
        .threads
        .map_or_else(|| engine::cpu::count().max(1) as usize, |t| t as usize);
    t.clamp(1, plan.flows.max(1) as usize)
}

/// A count (`-l -N`) shared out among the flows, the first ones taking the
/// remainder.
pub(super) fn share(total: u64, flows: u32, i: usize) -> u64 {
    let n = u64::from(flows.max(1));
    total / n + u64::from((i as u64) < total % n)
}

pub fn run_once(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let what = if plan.flows > 1 {
        "--flows"
    } else {
        "--warmup/--cooldown"
    };
    if !matches!(
        plan.test,
        TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpRr
    ) {
        bail!(
            "{what}: {} runs one flow here, with no window; --flows is for every test but TCP_SENDFILE and TCP_MSS, --warmup/--cooldown for TCP_STREAM, TCP_MAERTS and TCP_RR",
            plan.name.name()
        );
    }
    // the measured interval inside the traffic, with a window
    let window = match (plan.window, plan.length) {
        (None, _) => None,
        (Some(w), Length::Seconds(s)) if s > 0 => {
            let length = Duration::from_secs(s);
            Some((w, w.bounds(length), w.total(length)))
        }
        (Some(_), _) => {
            bail!("--warmup/--cooldown: a window needs a timed test (-l SECS), not a count")
        }
    };
    if let Some(why) = window.and_then(|_| d.caps().lacks(proto::Feature::Window)) {
        bail!("{why}");
    }
    if let Some(why) = (plan.flows > 1)
        .then(|| d.caps().lacks(proto::Feature::Flows))
        .flatten()
    {
        bail!("{why}");
    }
    raise_open_files(plan.flows);
    let mut p = prepare(plan, d, Protocol::Tcp)?;
    p.spec.flows = plan.flows;
    p.spec.window = plan.window;
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let size = |given: Option<u32>, buf: u32| {
        given.unwrap_or_else(|| proto::test::default_message_size(buf, u32::MAX))
    };
    let send_size = size(plan.local.send_size, lss);
    let recv_size = size(plan.local.recv_size, lsr);
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let conns = connect_all(plan, &p, to, &grant, d)?;
    let ends: Vec<FlowEnd> = conns
        .iter()
        .map(|c| FlowEnd {
            local_port: c.local_addr().map_or(0, |a| a.port()),
            retransmits: None,
        })
        .collect();
    pin(plan)?;
    let n = plan.flows;
    let count = match plan.length {
        Length::Count(c) => Some(c),
        Length::Seconds(_) => None,
    };
    // a per-flow count is the same for every flow: the evloop's plan has
    // one role; a count that does not divide evenly goes to one role each
    let role = |i: usize| match plan.test {
        TestKind::TcpStream => Role::Send {
            size: send_size as usize,
            total: count.map(|c| share(c, n, i)),
        },
        TestKind::TcpMaerts => Role::Recv {
            size: recv_size as usize,
        },
        _ => Role::Request {
            req: p.spec.request_size as usize,
            resp: p.spec.response_size as usize,
            burst: plan.effective_burst(),
            limit: count.map(|c| share(c, n, i)),
            timing: ctx.timing,
        },
    };
    let evplan = |r: Role| evloop::Plan {
        role: r,
        threads: threads(plan),
        cpus: plan.cpus.clone(),
        linger: Duration::from_secs(60),
        silence: match plan.length {
            Length::Seconds(s) if s > 0 => {
                window.map_or(Duration::from_secs(s), |(_, _, total)| total)
                    + Duration::from_secs(30)
            }
            _ => Duration::from_secs(330),
        },
        window: window.map(|(_, bounds, _)| bounds),
    };
    let stop = StopFlag::new();
    let _timer = match plan.test {
        // the netserver's clock ends TCP_MAERTS
        TestKind::TcpMaerts => None,
        _ => match window {
            Some((_, _, total)) => Some(engine::timer::Timer::start(total, stop.clone())?),
            None => length_timer(plan, &stop)?,
        },
    };
    let _int = interrupt::stop_on_interrupt(&stop);
    let phase = ctx.begin(plan)?;
    // flows whose share of a count differs run as two groups, together
    let even = count.is_none_or(|c| c % u64::from(n.max(1)) == 0);
    let report = if even {
        evloop::run(conns, &evplan(role(0)), &stop, &ctx.live)?
    } else {
        let cut = (count.unwrap_or(0) % u64::from(n.max(1))) as usize;
        let mut conns = conns;
        let rest = conns.split_off(cut);
        let (a, b) = std::thread::scope(|s| {
            let live = &ctx.live;
            let stop = &stop;
            let pa = evplan(role(0));
            let pb = evplan(role(cut));
            let ha = s.spawn(move || evloop::run(conns, &pa, stop, live));
            let b = evloop::run(rest, &pb, stop, live);
            (ha.join(), b)
        });
        let mut a = a.map_err(|_| anyhow::anyhow!("a flow thread panicked"))??;
        let b = b?;
        a.flows.extend(b.flows);
        if let Some(lb) = b.latency {
            match &mut a.latency {
                Some(la) => la.merge(&lb),
                None => a.latency = Some(lb),
            }
        }
        a
    };
    let local_cpu = phase.end();
    let mut ends = ends;
    for (e, t) in ends.iter_mut().zip(&report.tcp) {
        e.retransmits = t.as_ref().map(|t| t.retransmits);
    }
    let mut local = report.results();
    local.cpu = local_cpu;
    let remote = d.finish(ClientDone::default(), results_wait(plan))?;
    check_flows(plan.test, &local, &remote)?;
    let elapsed = local.elapsed_ns as f64 / 1e9;
    Ok(Measurement {
        elapsed,
        local,
        remote,
        local_send_buf: lss,
        local_recv_buf: lsr,
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        local_send_size: if plan.test.is_rr() {
            p.spec.request_size
        } else {
            send_size
        },
        local_recv_size: if plan.test.is_rr() {
            p.spec.response_size
        } else {
            recv_size
        },
        remote_send_size: grant.send_size,
        remote_recv_size: grant.recv_size,
        remote_send_width: grant.send_width,
        remote_recv_width: grant.recv_width,
        local_send_width: 1,
        local_recv_width: 1,
        local_tos: tos,
        latency: report.latency.and_then(|l| l.summary()),
        remote_addr: Some(to),
        flows: ends,
        ..Measurement::default()
    })
}

/// Connect every flow, each presenting the test's token and its number,
/// before any data moves.
fn connect_all(
    plan: &Plan,
    p: &super::Prepared,
    to: SocketAddr,
    grant: &proto::Grant,
    d: &Control,
) -> Result<Vec<TcpStream>> {
    let mut conns = Vec::with_capacity(plan.flows as usize);
    for i in 0..plan.flows {
        let sock = sockopt::new_socket(p.family, Protocol::Tcp)?;
        sockopt::apply_side(&sock, &plan.local, p.family, Protocol::Tcp, plan.keepalive)
            .context("local data socket")?;
        sockopt::apply_local(&sock, &super::local_opts(plan), p.family, Protocol::Tcp)
            .context("local data socket")?;
        if p.bind {
            let _ = sock.set_reuse_address(true);
            let local = SocketAddr::new(p.local.ip(), 0);
            sock.bind(&local.into())
                .with_context(|| format!("-- -L: cannot bind data connection {i} to {local}"))?;
        }
        sock.connect_timeout(&to.into(), Duration::from_secs(10))
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::EMFILE) {
                    anyhow::anyhow!(
                        "--flows {}: out of file descriptors after {i} connections (ulimit -n; the hard limit is {})",
                        plan.flows,
                        open_files_limit().1
                    )
                } else {
                    anyhow::anyhow!("data connection {i} to {to}: {e}")
                }
            })?;
        let c: TcpStream = sock.into();
        handshake::present(&c, &grant.token, i, &d.conventions())?;
        conns.push(c);
    }
    Ok(conns)
}

/// Flow by flow, what one end sent the other received, and both ran the
/// same transactions.
/// With a window, the whole run's counts are checked (the window's edges
/// fall by each end's own clock).
fn check_flows(kind: TestKind, local: &SideResults, remote: &SideResults) -> Result<()> {
    let (ours, theirs) = if local.totals.is_empty() {
        (&local.flows, &remote.flows)
    } else {
        (&local.totals, &remote.totals)
    };
    if theirs.len() != ours.len() {
        bail!(
            "the netserver reported {} flows, we ran {}",
            theirs.len(),
            ours.len()
        );
    }
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let agree = match kind {
            TestKind::TcpStream => a.bytes_sent == b.bytes_received,
            TestKind::TcpMaerts => a.bytes_received == b.bytes_sent,
            _ => {
                a.transactions == b.transactions
                    && a.bytes_sent == b.bytes_received
                    && a.bytes_received == b.bytes_sent
            }
        };
        if !agree {
            bail!("flow {i}: counts disagree: ours {a:?}, the netserver's {b:?}");
        }
    }
    Ok(())
}

/// The soft and hard limits of open files.
pub fn open_files_limit() -> (u64, u64) {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .unwrap_or((1024, 1024))
}

/// Enough descriptors for `flows` connections and some to spare, as far as
/// the hard limit allows.
pub fn raise_open_files(flows: u32) {
    let (soft, hard) = open_files_limit();
    let want = (u64::from(flows) + 64).min(hard);
    if want > soft {
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, want, hard);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_share_out_exactly() {
        let total: u64 = (0..7).map(|i| super::share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(super::share(100, 7, 0), 15);
        assert_eq!(super::share(100, 7, 6), 14);
    }
}
