//! TCP_RR: transactions per second and their latency. One flow runs its
//! transactions on this thread, one send and one receive each; many flows
//! (or a window) on event loops.

use engine::drive::Driver;
use std::net::TcpStream;

use anyhow::{Result, bail};
use engine::{
    evloop::Role,
    rr::{self, Requester, Until},
    sockopt,
};
use proto::{Capabilities, SideResults, TestKind, test::Resolved};
use socket2::SockRef;

use super::lifecycle::{Family, Local, Ours, Prepared, Run, connect_flows};
use crate::plan::{Length, Plan};

/// TCP_RR's family.
#[derive(Default)]
pub(crate) struct TcpRr {
    conns: Vec<TcpStream>,
    /// The driver the flows ran on.
    driver: Driver,
}

/// A request/response test's sizes: requests out, responses in, a buffer
/// each way (TCP_CC's none).
pub(crate) fn rr_sizes(plan: &Plan) -> Ours {
    let width = u32::from(plan.test != TestKind::TcpCc);
    Ours {
        sizes: Resolved {
            send_size: plan.request_size,
            recv_size: plan.response_size,
            send_width: width,
            recv_width: width,
        },
        ..Ours::default()
    }
}

/// The transaction loop's parameters for flow `i` of `n`.
pub(crate) fn requester(plan: &Plan, timing: bool, n: u32, i: usize) -> Requester {
    Requester {
        req: plan.request_size as usize,
        resp: plan.response_size as usize,
        burst: plan.effective_burst(),
        until: match plan.length {
            Length::Count(c) => Until::Transactions(super::context::share(c, n, i)),
            Length::Seconds(_) => Until::Stopped,
        },
        timing,
        spin: plan.spin,
    }
}

impl Family for TcpRr {
    fn resolve(&self, plan: &Plan, _p: &Prepared) -> Result<Ours> {
        Ok(rr_sizes(plan))
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        self.driver = r.driver;
        self.conns = connect_flows(r, p)?.0;
        Ok(())
    }

    fn timer(
        &self,
        plan: &Plan,
        stop: &engine::timer::StopFlag,
        _caps: &Capabilities,
    ) -> Result<Option<engine::timer::Timer>> {
        super::stream::window_timer(plan, stop)
    }

    fn run(&mut self, r: &Run<'_>, _ours: &Ours) -> Result<Local> {
        let plan = r.plan;
        if r.driver != Driver::Blocking {
            return self.run_loops(r);
        }
        let conn = self
            .conns
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no data connection"))?;
        let o = rr::tcp_requester(
            &conn,
            &requester(plan, r.ctx.timing, 1, 0),
            r.stop,
            &r.ctx.live,
        )?;
        let mut counts = SideResults {
            tcp: sockopt::tcp_stats(&conn),
            ..o.results()
        };
        // netperf 2.7 reads the sizes again on a connected TCP socket whose
        // sizes it did not set (autotuning changes them)
        (counts.send_buf_end, counts.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&conn));
        Ok(Local {
            counts,
            elapsed: o.elapsed,
            latency: o.latency,
            mss: sockopt::mss(SockRef::from(&conn)),
            addr: conn.local_addr().ok(),
            ..Local::default()
        })
    }

    fn check(
        &self,
        plan: &Plan,
        local: &Local,
        remote: &SideResults,
        _caps: &Capabilities,
    ) -> Result<()> {
        if self.driver != Driver::Blocking {
            return super::stream::check_flows(plan.test, &local.counts, remote);
        }
        // both ends count the same transactions over TCP
        let (ours, theirs) = (local.counts.transactions, remote.transactions);
        if ours != theirs {
            bail!(
                "transaction counts disagree: we completed {ours}, the netserver answered {theirs}"
            );
        }
        Ok(())
    }
}

impl TcpRr {
    fn run_loops(&mut self, r: &Run<'_>) -> Result<Local> {
        let plan = r.plan;
        super::stream::loops_local(r, std::mem::take(&mut self.conns), |limit| Role::Request {
            req: plan.request_size as usize,
            resp: plan.response_size as usize,
            burst: plan.effective_burst(),
            limit,
            timing: r.ctx.timing,
        })
    }
}
