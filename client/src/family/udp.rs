//! The UDP tests: UDP_STREAM (we send datagrams, the netserver counts them
//! exactly), netperf 2.7's UDP receive test (the netserver sends, we
//! count), and UDP_RR (tagged requests and their answers). Every flow has
//! a socket of its own, which says hello (naming its flow) before any
//! data, and its own share of a count and of a rate.

use std::{
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use engine::{
    buffer::{Buffer, Placement, Ring},
    evloop,
    latency::Latency,
    netstat, rr, sockopt,
    stream::udp::{self, Until},
};
use proto::{
    Capabilities, ClientDone, DropSource, Family as AddrFam, Feature, Protocol, SideResults,
    UdpFast, test::Resolved,
};

use super::lifecycle::{Family, Local, Ours, Prepared, Run, check_send_size};
use crate::plan::{Length, Plan};

/// UDP_RR's receive timeout when `-e` is not given.
pub const DEFAULT_UDP_TIMEOUT: Duration = Duration::from_secs(1);

/// `--batch` and `--gso` for datagrams of `size` bytes: how many a call
/// moves.
fn udp_fast(plan: &Plan, size: u32, family: AddrFam) -> Result<UdpFast> {
    let segments = match plan.udp_gso {
        None => 1,
        Some(bytes) => {
            if bytes < size {
                bail!("--gso {bytes}: less than one datagram of -m {size} bytes a send");
            }
            // at most the kernel's segments a send, and one IP datagram's
            // worth of payload in all
            (bytes / size)
                .min(proto::test::MAX_UDP_SEGMENTS)
                .min((family.max_udp_payload() / size).max(1))
        }
    };
    Ok(UdpFast {
        batch: plan.udp_batch.max(1),
        segments,
    })
}

/// Every flow's UDP socket (the prepared one is flow 0's), each linked to
/// the netserver (connected with `-- -n`, else sendto()/recvfrom(), as
/// netperf 2.7) and its hello answered, naming its flow.
pub(super) fn open_flows(r: &Run<'_>, p: Prepared) -> Result<Vec<UdpSocket>> {
    let n = r.plan.flows.max(1);
    let mut socks: Vec<UdpSocket> = Vec::with_capacity(n as usize);
    for i in 0..n {
        let s = if i == 0 {
            p.sock.try_clone()?
        } else {
            p.another(r.plan, Protocol::Udp)
                .with_context(|| format!("UDP data socket of flow {i}"))?
        };
        sockopt::set_recv_err(&s, p.family)?;
        socks.push(s.into());
    }
    for (i, s) in socks.iter().enumerate() {
        // many flows run on event loops over connected sockets (each
        // flow's hello makes the netserver's socket of that flow one too)
        let link = if n > 1 {
            s.connect(r.to)
                .with_context(|| format!("UDP data socket to {}", r.to))?;
            udp::Link::connected(s)
        } else {
            link(r.plan, s, r.to)?
        };
        udp::client_hello_flow(
            link,
            &r.grant.token,
            &r.conv,
            i as u32,
            Instant::now() + Duration::from_secs(10),
        )?;
    }
    Ok(socks)
}

/// A socket's link to the netserver.
pub(super) fn link<'a>(plan: &Plan, sock: &'a UdpSocket, to: SocketAddr) -> Result<udp::Link<'a>> {
    if plan.local_only.connected_udp {
        sock.connect(to)
            .with_context(|| format!("UDP data socket to {to}"))?;
        Ok(udp::Link::connected(sock))
    } else {
        Ok(udp::Link::to(sock, to))
    }
}

/// How many flows' event loops run: the plan's threads at each end.
fn udp_plan<'a>(
    plan: &'a Plan,
    r: &'a Run<'_>,
    role: evloop::udp::UdpRole,
    fast: UdpFast,
) -> evloop::udp::UdpPlan<'a> {
    evloop::udp::UdpPlan {
        role,
        threads: super::context::threads(plan),
        cpus: &plan.cpus,
        conv: r.conv,
        fast,
        token: &r.grant.token,
        drain: None,
        linger: Duration::from_secs(60),
        ecn: None,
    }
}

/// Each flow's socket (another handle on it) and its count.
fn with_counts(
    socks: &[UdpSocket],
    count: impl Fn(usize) -> Option<u64>,
) -> Result<Vec<(UdpSocket, Option<u64>)>> {
    socks
        .iter()
        .enumerate()
        .map(|(i, s)| Ok((s.try_clone()?, count(i))))
        .collect()
}

/// Our side's results of many flows, flow by flow.
fn flow_ends(socks: &[UdpSocket]) -> Vec<crate::report::FlowEnd> {
    socks
        .iter()
        .map(|s| crate::report::FlowEnd::at(s.local_addr().ok()))
        .collect()
}

/// UDP_STREAM: we send.
#[derive(Default)]
pub(crate) struct UdpSend {
    socks: Vec<UdpSocket>,
    /// Datagrams we sent, told to the netserver.
    sent: u64,
}

impl Family for UdpSend {
    fn needs(&self, plan: &Plan) -> Vec<Feature> {
        if plan.udp_batch > 1 || plan.udp_gso.is_some() {
            vec![Feature::UdpFast]
        } else {
            Vec::new()
        }
    }

    fn resolve(&self, plan: &Plan, p: &Prepared) -> Result<Ours> {
        let mut sizes = plan
            .local
            .resolve(plan.test, p.family, (p.lss, p.lsr), u32::MAX);
        check_send_size(sizes.send_size, p.family)?;
        (sizes.recv_size, sizes.recv_width) = (0, 0);
        Ok(Ours {
            sizes,
            udp_fast: udp_fast(plan, sizes.send_size, p.family)?,
        })
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        self.socks = open_flows(r, p)?;
        Ok(())
    }

    fn run(&mut self, r: &Run<'_>, ours: &Ours) -> Result<Local> {
        let plan = r.plan;
        let n = self.socks.len().max(1);
        let size = ours.sizes.send_size;
        let id = udp::test_id(&r.grant.token);
        let rate = plan.rate_bps.map(|b| (b / n as u64).max(1));
        let mut local = Local {
            addr: self.socks.first().and_then(|s| s.local_addr().ok()),
            ..Local::default()
        };
        if n == 1 {
            let s = self
                .socks
                .first()
                .ok_or_else(|| anyhow::anyhow!("no data socket"))?;
            let until = match plan.length {
                Length::Count(total) => Until::Bytes(total),
                Length::Seconds(_) => Until::Stopped,
            };
            let at = Placement::new(plan.local.send_align, plan.local.send_offset);
            let mut ring = Ring::placed(
                size as usize,
                ours.sizes.send_width as usize,
                &r.ctx.fill,
                at,
            );
            let mut lat = r.ctx.stats.then(Latency::new);
            let o = udp::send(
                link(plan, s, r.to)?,
                &mut ring,
                id,
                &r.conv,
                until,
                rate,
                r.stop,
                &r.ctx.live,
                lat.as_mut(),
                udp::UdpCalls {
                    fast: ours.udp_fast,
                    uring: plan.uring,
                    ecn: None,
                },
            )?;
            local.send_errors = o.failed;
            local.elapsed = o.elapsed;
            self.sent = o.sent;
            local.counts = o.results();
            local.latency = lat.and_then(|l| l.summary());
            settle(r);
            return Ok(local);
        }
        // a count in whole datagrams, as one flow sends it, shared out
        let flows = with_counts(&self.socks, |i| match plan.length {
            Length::Count(total) => {
                let datagrams = total.div_ceil(u64::from(size));
                Some(super::context::share(datagrams, n as u32, i) * u64::from(size))
            }
            Length::Seconds(_) => None,
        })?;
        let role = evloop::udp::UdpRole::Send {
            size: size as usize,
            rate_bps: rate,
            id,
        };
        let ends = evloop::udp::run(
            flows,
            &udp_plan(plan, r, role, ours.udp_fast),
            r.stop,
            &r.ctx.live,
        )?;
        for e in ends {
            let evloop::udp::UdpFlowEnd::Sent(o) = e else {
                bail!("a UDP flow ended as no sender does");
            };
            local.send_errors += o.failed;
            local.elapsed = local.elapsed.max(o.elapsed);
            self.sent += o.sent;
            local
                .counts
                .add_flow(&o.results().totals(), engine::flow::nanos(o.elapsed));
        }
        local.counts.send_errors = local.send_errors;
        local.counts.close_flows();
        local.flows = flow_ends(&self.socks);
        settle(r);
        Ok(local)
    }

    fn done(&self, _local: &Local) -> ClientDone {
        ClientDone {
            datagrams_sent: self.sent,
        }
    }

    fn check(
        &self,
        _plan: &Plan,
        local: &Local,
        remote: &SideResults,
        _caps: &Capabilities,
    ) -> Result<()> {
        if local.counts.flows.is_empty() {
            return Ok(());
        }
        if remote.flows.len() != local.counts.flows.len() {
            bail!(
                "the netserver reported {} flows, we ran {}",
                remote.flows.len(),
                local.counts.flows.len()
            );
        }
        for (i, (a, b)) in local.counts.flows.iter().zip(&remote.flows).enumerate() {
            if b.recv_calls > a.send_calls {
                bail!(
                    "flow {i}: the netserver counted {} datagrams, we sent {}",
                    b.recv_calls,
                    a.send_calls
                );
            }
        }
        Ok(())
    }
}

/// Where the receiver counts what it has read when told the end
/// ([`engine::conventions::Conventions::told_end`]), a moment for the
/// last datagrams to be read before it is told.
fn settle(r: &Run<'_>) {
    if r.conv.told_end {
        std::thread::sleep(engine::conventions::SETTLE);
    }
}

/// When our receiver of netperf 2.7's UDP receive test is done: once our
/// test time is up (the netserver's sender stops on its own clock) and
/// nothing has arrived for a moment, or once as many bytes as asked have.
#[derive(Debug)]
struct Receiving<'a> {
    stop: &'a engine::timer::StopFlag,
    expected: Option<u64>,
}

impl udp::Drain for Receiving<'_> {
    fn expected(&self) -> Option<u64> {
        match self.expected {
            Some(n) => Some(n),
            None => self.stop.is_set().then_some(u64::MAX),
        }
    }

    fn aborted(&self) -> bool {
        false
    }
}

/// netperf 2.7's UDP receive test (OMNI `-d recv -T udp`, TCP_MAERTS
/// `-- -T udp`): the netserver sends, we count exactly what arrives.
#[derive(Default)]
pub(crate) struct UdpReceive {
    sock: Option<UdpSocket>,
}

impl Family for UdpReceive {
    fn resolve(&self, _plan: &Plan, _p: &Prepared) -> Result<Ours> {
        // the receive size is the netserver's send size, once granted
        Ok(Ours::default())
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        let mut socks = open_flows(r, p)?;
        self.sock = socks.pop();
        Ok(())
    }

    fn run(&mut self, r: &Run<'_>, _ours: &Ours) -> Result<Local> {
        let plan = r.plan;
        let sock = self
            .sock
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no data socket"))?;
        let inode = netstat::socket_inode(sock);
        let size = plan.local.recv_size.unwrap_or(r.grant.send_size).max(1);
        let expected = match plan.length {
            // what the netserver sends to reach the byte count: whole datagrams
            Length::Count(n) => Some(n.div_ceil(u64::from(r.grant.send_size.max(1)))),
            Length::Seconds(_) => None,
        };
        let drain = Receiving {
            stop: r.stop,
            expected,
        };
        let mut buf = Buffer::new(
            size as usize,
            Placement::new(plan.local.recv_align, plan.local.recv_offset),
        );
        let o = udp::receive(
            link(plan, sock, r.to)?,
            buf.as_mut_slice(),
            &r.grant.token,
            &r.conv,
            &drain,
            &r.ctx.live,
            UdpFast::default(),
        )?;
        let drops = inode.and_then(netstat::udp_socket_drops);
        Ok(Local {
            counts: o.results(
                drops.unwrap_or(0),
                if drops.is_some() {
                    DropSource::Socket
                } else {
                    DropSource::Unavailable
                },
            ),
            elapsed: o.elapsed,
            addr: sock.local_addr().ok(),
            sizes: Some(Resolved {
                recv_size: size,
                recv_width: 1,
                ..Resolved::default()
            }),
            ..Local::default()
        })
    }

    fn check(
        &self,
        _plan: &Plan,
        _l: &Local,
        _r: &SideResults,
        _caps: &Capabilities,
    ) -> Result<()> {
        Ok(())
    }
}

/// UDP_RR: requests and their answers, each lost one counted when its
/// timeout passes.
#[derive(Default)]
pub(crate) struct UdpRr {
    socks: Vec<UdpSocket>,
    /// Answers that came for a request already given up.
    stale: u64,
}

impl Family for UdpRr {
    fn resolve(&self, plan: &Plan, _p: &Prepared) -> Result<Ours> {
        Ok(super::rr::rr_sizes(plan))
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        self.socks = open_flows(r, p)?;
        Ok(())
    }

    fn run(&mut self, r: &Run<'_>, _ours: &Ours) -> Result<Local> {
        let plan = r.plan;
        let n = self.socks.len().max(1);
        let timeout = plan.recv_timeout.unwrap_or(DEFAULT_UDP_TIMEOUT);
        let outcomes: Vec<Result<rr::RrOutcome>> = if n == 1 {
            let s = self
                .socks
                .first()
                .ok_or_else(|| anyhow::anyhow!("no data socket"))?;
            let params = super::rr::requester(plan, r.ctx.timing, 1, 0);
            // --ecn: the codepoint of every answer, counted as it arrives
            let ecn = plan.ecn.map(|_| {
                std::cell::RefCell::new(engine::ecn::EcnTally::new(
                    super::lifecycle::ecn_interval_ms(plan),
                ))
            });
            let mut l = link(plan, s, r.to)?;
            if let Some(tally) = &ecn {
                engine::ecn::ask_codepoints(s)?;
                l = l.counting(tally);
            }
            let mut o = rr::udp_requester(l, &params, &r.conv, timeout, r.stop, &r.ctx.live)?;
            o.ecn = ecn.map(|t| t.borrow().report());
            vec![Ok(o)]
        } else {
            let flows = with_counts(&self.socks, |i| match plan.length {
                Length::Count(c) => Some(super::context::share(c, n as u32, i)),
                Length::Seconds(_) => None,
            })?;
            let role = evloop::udp::UdpRole::Request {
                req: plan.request_size as usize,
                resp: plan.response_size as usize,
                burst: plan.effective_burst(),
                timing: r.ctx.timing,
                timeout,
            };
            evloop::udp::run(
                flows,
                &udp_plan(plan, r, role, UdpFast::default()),
                r.stop,
                &r.ctx.live,
            )?
            .into_iter()
            .map(|e| match e {
                evloop::udp::UdpFlowEnd::Requested(o) => Ok(o),
                _ => bail!("a UDP_RR flow ended as no requester does"),
            })
            .collect()
        };
        let stale = outcomes.iter().flatten().map(|o| o.stale).sum();
        self.stale = stale;
        let mut local = super::crr::merge(outcomes, n > 1)?;
        local.addr = self.socks.first().and_then(|s| s.local_addr().ok());
        if n > 1 {
            local.flows = flow_ends(&self.socks);
        }
        Ok(local)
    }

    fn check(
        &self,
        plan: &Plan,
        local: &Local,
        remote: &SideResults,
        _caps: &Capabilities,
    ) -> Result<()> {
        if plan.flows > 1 {
            return super::crr::check_flow_transactions(&local.counts, remote, false);
        }
        // the responder may have answered requests whose answers were lost,
        // never fewer
        let (ours, theirs) = (local.counts.transactions, remote.transactions);
        if !(theirs >= ours && theirs <= ours + local.lost + self.stale) {
            bail!(
                "transaction counts disagree: we completed {ours}, the netserver answered {theirs}"
            );
        }
        Ok(())
    }
}
