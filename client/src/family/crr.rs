//! TCP_CRR (connect, request, response, close) and TCP_CC (connect,
//! close): a connection per transaction, each bound to the next port of
//! the local range. Many flows each have their own slice of the range, and
//! each connection's preamble names its flow, so the netserver counts every
//! flow's transactions.

use engine::drive::Driver;
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Result, bail};
use engine::{
    crr::{self, CrrRequester},
    evloop,
    rr::{RrOutcome, Until},
};
use proto::{Capabilities, Grant, SideResults, TestKind, test::Resolved};

use super::lifecycle::{Family, Local, Ours, Prepared, Run};
use crate::{
    plan::{Length, Plan},
    report::FlowEnd,
};

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

/// The connection-per-transaction family.
#[derive(Default)]
pub(crate) struct Crr {
    /// The address each connection binds to.
    local_ip: Option<std::net::IpAddr>,
    /// `-t RPM`'s probes: paced, each one's round trips kept.
    probes: Option<Arc<Probes>>,
}

/// The probes of one phase of a responsiveness test: one every `every`,
/// each kept as it ends.
#[derive(Debug)]
pub struct Probes {
    pub every: Duration,
    pub kept: Mutex<Vec<crr::Probe>>,
}

impl Probes {
    pub fn new(every: Duration) -> Arc<Probes> {
        Arc::new(Probes {
            every,
            kept: Mutex::new(Vec::new()),
        })
    }

    /// What was kept, taken.
    pub fn take(&self) -> Vec<crr::Probe> {
        self.kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }
}

impl Crr {
    /// A TCP_CRR that probes: a transaction every `probes.every`.
    pub(crate) fn probing(probes: Arc<Probes>) -> Crr {
        Crr {
            local_ip: None,
            probes: Some(probes),
        }
    }
}

impl Family for Crr {
    fn resolve(&self, plan: &Plan, _p: &Prepared) -> Result<Ours> {
        let n = plan.flows.max(1);
        let (lo, hi) = plan.port_range.unwrap_or_else(default_ports);
        if n > 1 && u32::from(hi - lo) + 1 < n * 4 {
            bail!(
                "--flows {n}: the local port range {lo}-{hi} leaves fewer than 4 ports a flow (-- -p MIN,MAX)"
            );
        }
        Ok(super::rr::rr_sizes(plan))
    }

    /// The sizes netperf 2.7 shows for TCP_CC are the plan's (it carries
    /// none).
    fn remote_sizes(&self, plan: &Plan, g: &Grant) -> Resolved {
        Resolved {
            send_size: plan.response_size,
            recv_size: plan.request_size,
            send_width: g.send_width,
            recv_width: g.recv_width,
        }
    }

    fn connect(&mut self, _r: &Run<'_>, p: Prepared) -> Result<()> {
        // each transaction opens its own connection, later
        self.local_ip = Some(p.local.ip());
        Ok(())
    }

    fn run(&mut self, r: &Run<'_>, _ours: &Ours) -> Result<Local> {
        let plan = r.plan;
        let n = plan.flows.max(1);
        let (lo, hi) = plan.port_range.unwrap_or_else(default_ports);
        let span = u32::from(hi - lo) + 1;
        let base = CrrRequester {
            server: r.to,
            local_ip: self
                .local_ip
                .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
            ports: (lo, hi),
            token: r.grant.token,
            // TCP_CC carries nothing (its sizes are printed for show)
            req: if plan.test == TestKind::TcpCc {
                0
            } else {
                plan.request_size as usize
            },
            resp: if plan.test == TestKind::TcpCc {
                0
            } else {
                plan.response_size as usize
            },
            until: Until::Stopped,
            timing: r.ctx.timing,
            side: plan.local.clone(),
            local: super::context::local_opts(plan),
            conv: r.conv,
            flow: 0,
        };
        let flow = |i: usize| -> CrrRequester {
            // each flow its own slice of the port range (0,0: the kernel's)
            let ports = if n == 1 || (lo, hi) == (0, 0) {
                (lo, hi)
            } else {
                let share = span / n;
                let first = u32::from(lo) + share * i as u32;
                let last = (first + share - 1).min(u32::from(hi));
                (first as u16, last as u16)
            };
            CrrRequester {
                ports,
                until: match plan.length {
                    Length::Count(c) => Until::Transactions(super::context::share(c, n, i)),
                    Length::Seconds(_) => Until::Stopped,
                },
                flow: i as u32,
                ..base.clone()
            }
        };
        let outcomes: Vec<Result<RrOutcome>> = if let Some(log) = &self.probes {
            let mut keep = |p: crr::Probe| {
                if let Ok(mut k) = log.kept.lock() {
                    k.push(p);
                }
            };
            vec![Ok(crr::prober(
                &flow(0),
                r.stop,
                &r.ctx.live,
                log.every,
                &mut keep,
            )?)]
        } else if r.driver == Driver::Blocking {
            vec![Ok(crr::requester(&flow(0), r.stop, &r.ctx.live)?)]
        } else {
            let plan = evloop::crr::CrrPlan {
                threads: super::context::threads(plan),
                cpus: &plan.cpus,
                linger: Duration::from_secs(60),
            };
            let flows = (0..n as usize).map(flow).collect();
            evloop::crr::run(flows, &plan, r.stop, &r.ctx.live)?
                .into_iter()
                .map(Ok)
                .collect()
        };
        let mut local = merge(outcomes, n > 1)?;
        local.addr = Some(SocketAddr::new(base.local_ip, 0));
        Ok(local)
    }

    fn check(
        &self,
        plan: &Plan,
        local: &Local,
        remote: &SideResults,
        caps: &Capabilities,
    ) -> Result<()> {
        if plan.flows > 1 {
            return check_flow_transactions(&local.counts, remote, true);
        }
        // netserver 2.7 ends a connection-per-transaction test on its own
        // timer, and may count the connection it accepted as that fired
        let (ours, theirs) = (local.counts.transactions, remote.transactions);
        let agree = if caps.exact_counts {
            ours == theirs
        } else {
            theirs >= ours && theirs <= ours + 1
        };
        if !agree {
            bail!(
                "transaction counts disagree: we completed {ours}, the netserver answered {theirs}"
            );
        }
        Ok(())
    }
}

/// Many flows' outcomes as one (latency over every transaction of every
/// flow, the histograms merged), and our side's results, flow by flow when
/// `per_flow`.
pub(crate) fn merge(outcomes: Vec<Result<RrOutcome>>, per_flow: bool) -> Result<Local> {
    let mut all = RrOutcome::default();
    let mut hist: Option<Box<engine::latency::Latency>> = None;
    let mut counts = SideResults::default();
    let mut flows = Vec::new();
    for o in outcomes {
        let o = o?;
        counts.add_flow(&o.counters, engine::flow::nanos(o.elapsed));
        all.counters = all.counters.plus(o.counters);
        all.lost += o.lost;
        all.stale += o.stale;
        all.elapsed = all.elapsed.max(o.elapsed);
        all.mss = all.mss.or(o.mss);
        if let Some(e) = &o.ecn {
            all.ecn.get_or_insert_with(Default::default).merge(e);
        }
        if let Some(h) = o.histogram {
            match &mut hist {
                Some(m) => m.merge(&h),
                None => hist = Some(h),
            }
        }
        // (a lone flow's latency needs no histogram)
        if !per_flow {
            all.latency = o.latency;
        }
        flows.push(FlowEnd::default());
    }
    if per_flow {
        all.latency = hist.and_then(|h| h.summary());
        counts.close_flows();
    } else {
        counts = all.results();
        flows.clear();
    }
    Ok(Local {
        counts,
        elapsed: all.elapsed,
        latency: all.latency,
        mss: all.mss,
        lost: all.lost,
        flows,
        ..Local::default()
    })
}

/// Flow by flow, the netserver answered what we completed: exactly (TCP),
/// or at least that (UDP: an answer may be lost on its way back).
pub(crate) fn check_flow_transactions(
    local: &SideResults,
    remote: &SideResults,
    exact: bool,
) -> Result<()> {
    if remote.flows.len() != local.flows.len() {
        bail!(
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
            bail!(
                "flow {i}: we completed {} transactions, the netserver answered {}",
                a.transactions,
                b.transactions
            );
        }
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
