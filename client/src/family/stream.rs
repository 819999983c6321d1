//! TCP_STREAM (we send), TCP_MAERTS (the netserver sends), TCP_SENDFILE
//! (TCP_STREAM from a file) and TCP_MSS (a connection's segment size). One
//! flow runs on this thread, with netperf's ring of buffers at their
//! placement and its system calls; many flows (or a window) on event loops
//! ([`engine::evloop`]), counted flow by flow.

use engine::drive::Driver;
use std::{fs::File, io::Write as _, net::TcpStream, time::Duration};

use anyhow::{Context as _, Result, bail};
use engine::{
    buffer::{Placement, Ring},
    evloop::{self, Role},
    latency::Latency,
    sockopt,
    stream::{self, Until, rx::Reader, tcp::SendCall},
    timer::{StopFlag, Timer},
};
use proto::{Capabilities, SideResults, TestKind};
use socket2::SockRef;

use super::lifecycle::{self, Family, Local, Ours, Prepared, Run, connect_flows};
use crate::{
    plan::{Length, Plan, TestName},
    report::FlowEnd,
};

/// How long a sender waits for the receiver to close after the last byte.
const LINGER: Duration = Duration::from_secs(60);

/// The TCP stream tests' family.
#[derive(Default)]
pub(crate) struct Streams {
    conns: Vec<TcpStream>,
    /// Our first connection's segment size right after connect (TCP_MSS's
    /// figure, as netperf 2.7 reads it).
    mss_at_connect: Option<u32>,
    /// The netserver's send size, as granted.
    their_send_size: u64,
    /// The driver the flows ran on.
    driver: Driver,
    /// Connections kept open until the test is over: a sending client's,
    /// where the receiver counts until told the end (iperf3's server reads
    /// a closed stream as it reads an open one until then).
    held: Vec<TcpStream>,
}

/// The measured interval inside the traffic, with a window: its bounds
/// and the whole run's length.
pub(crate) fn window(plan: &Plan) -> Result<Option<((Duration, Duration), Duration)>> {
    match (plan.window, plan.length) {
        (None, _) => Ok(None),
        (Some(w), Length::Seconds(s)) if s > 0 => {
            let length = Duration::from_secs(s);
            Ok(Some((w.bounds(length), w.total(length))))
        }
        (Some(_), _) => {
            bail!("--warmup/--cooldown: a window needs a timed test (-l SECS), not a count")
        }
    }
}

/// The timer of a test that may have a window: the whole run's length
/// with one, `-l` without.
pub(crate) fn window_timer(plan: &Plan, stop: &StopFlag) -> Result<Option<Timer>> {
    Ok(match window(plan)? {
        Some((_, total)) => Some(Timer::start(total, stop.clone())?),
        None => super::context::length_timer(plan, stop)?,
    })
}

impl Family for Streams {
    fn resolve(&self, plan: &Plan, p: &Prepared) -> Result<Ours> {
        let mut sizes = plan
            .local
            .resolve(plan.test, p.family, (p.lss, p.lsr), u32::MAX);
        // the direction we do not use says 0, as netperf 2.7's; flows on
        // event loops have one buffer each way
        match (plan.test, p.driver != Driver::Blocking) {
            (TestKind::TcpStream, false) => (sizes.recv_size, sizes.recv_width) = (0, 0),
            (_, false) => (sizes.send_size, sizes.send_width) = (0, 0),
            (_, true) => (sizes.send_width, sizes.recv_width) = (1, 1),
        }
        // io_uring: a ring as each of our threads will have it, set up
        // now, so that what the kernel does not allow this process (the
        // locked-memory limit, kernel.io_uring_disabled) refuses the test
        // before it is asked for
        if let Driver::Uring { threads } = p.driver {
            let sending = plan.test == TestKind::TcpStream;
            let size = if sending {
                sizes.send_size
            } else {
                sizes.recv_size
            };
            let per_thread = plan.flows.max(1).div_ceil(threads.max(1)) as usize;
            engine::uring::probe(per_thread, sending, size as usize)?;
        }
        Ok(Ours {
            sizes,
            ..Ours::default()
        })
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        self.driver = r.driver;
        (self.conns, self.mss_at_connect) = connect_flows(r, p)?;
        self.their_send_size = u64::from(r.grant.send_size);
        Ok(())
    }

    fn timer(&self, plan: &Plan, stop: &StopFlag, caps: &Capabilities) -> Result<Option<Timer>> {
        match plan.test {
            // the netserver's clock ends TCP_MAERTS, where it stops by
            // itself; else ours does, and the end is told
            TestKind::TcpMaerts if caps.stops_itself => Ok(None),
            _ => window_timer(plan, stop),
        }
    }

    fn run(&mut self, r: &Run<'_>, ours: &Ours) -> Result<Local> {
        if r.driver != Driver::Blocking {
            return self.run_loops(r, ours);
        }
        let plan = r.plan;
        let conn = self
            .conns
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no data connection"))?;
        let mut lat = r.ctx.stats.then(Latency::new);
        let s = ours.sizes;
        let mut mapped = 0;
        let outcome = if plan.test == TestKind::TcpStream {
            let at = Placement::new(plan.local.send_align, plan.local.send_offset);
            let mut ring =
                Ring::placed(s.send_size as usize, s.send_width as usize, &r.ctx.fill, at);
            let until = match plan.length {
                Length::Count(n) => Until::Bytes(n),
                Length::Seconds(_) => Until::Stopped,
            };
            if plan.sendfile() {
                let f = sendfile_source(plan, &ring)?;
                stream::tcp::send_file(
                    &conn,
                    &f,
                    s.send_size as usize,
                    ring.width(),
                    until,
                    r.stop,
                    &r.ctx.live,
                    LINGER,
                    lat.as_mut(),
                )?
            } else {
                let how = if plan.zerocopy {
                    SendCall::ZeroCopy
                } else if plan.local_only.use_write {
                    SendCall::Write
                } else {
                    SendCall::Send
                };
                stream::tcp::send_with(
                    &conn,
                    &mut ring,
                    until,
                    r.stop,
                    &r.ctx.live,
                    (
                        stream::tcp::SenderEnd::client(&r.conv, r.grant.recv_size),
                        LINGER,
                    ),
                    how,
                    lat.as_mut(),
                )?
            }
        } else {
            let at = Placement::new(plan.local.recv_align, plan.local.recv_offset);
            let mut ring = Ring::placed(s.recv_size as usize, s.recv_width as usize, b"", at);
            let silence = match plan.length {
                Length::Seconds(secs) if secs > 0 => Duration::from_secs(secs + 30),
                _ => Duration::from_secs(330),
            };
            conn.set_read_timeout(Some(silence))?;
            let mut reader = Reader::new(lifecycle::local_rx(plan), &conn)?;
            let o =
                stream::tcp::receive_by(&conn, &mut ring, &mut reader, &r.ctx.live, lat.as_mut())?;
            mapped = reader.mapped;
            o
        };
        let mut counts = SideResults {
            tcp: sockopt::tcp_stats(&conn),
            rx: proto::RxFigures {
                mapped_bytes: mapped,
            },
            ..outcome.results()
        };
        (counts.send_buf_end, counts.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&conn));
        if plan.ecn.is_some() {
            counts.ecn = Some(proto::ecn::EcnReport {
                tcp: Some(engine::ecn::tcp_report([&conn])?),
                ..Default::default()
            });
        }
        let local = Local {
            counts,
            elapsed: outcome.elapsed,
            latency: lat.and_then(|l| l.summary()),
            mss: if plan.name == TestName::TcpMss {
                self.mss_at_connect
            } else {
                sockopt::mss(SockRef::from(&conn))
            },
            addr: conn.local_addr().ok(),
            ..Local::default()
        };
        self.end(r, vec![conn]);
        Ok(local)
    }

    fn check(
        &self,
        plan: &Plan,
        local: &Local,
        remote: &SideResults,
        caps: &Capabilities,
    ) -> Result<()> {
        if self.driver != Driver::Blocking {
            return check_flows(plan.test, &local.counts, remote);
        }
        check_bytes(
            plan.test,
            &local.counts,
            remote,
            self.their_send_size,
            caps.exact_counts,
        )
    }
}

impl Streams {
    /// Many flows (or a window): every connection on event loops, a count
    /// shared out among them.
    fn run_loops(&mut self, r: &Run<'_>, ours: &Ours) -> Result<Local> {
        let (send, recv) = (ours.sizes.send_size as usize, ours.sizes.recv_size as usize);
        let test = r.plan.test;
        let conns = std::mem::take(&mut self.conns);
        // (the loops close theirs; another handle keeps each open where
        // the conventions leave it so)
        let kept = conns
            .iter()
            .map(TcpStream::try_clone)
            .collect::<std::io::Result<Vec<_>>>()?;
        let local = loops_local(r, conns, |share| match test {
            TestKind::TcpStream => Role::Send {
                size: send,
                total: share,
            },
            _ => Role::Recv { size: recv },
        })?;
        self.end(r, kept);
        Ok(local)
    }

    /// Our data phase is over. Closed before the results are asked for (a
    /// sending netserver waits for it); or, as a sender whose receiver
    /// counts until told the end, kept open until the test is over, once
    /// what was sent is acknowledged and has had a moment to be read.
    fn end(&mut self, r: &Run<'_>, conns: Vec<TcpStream>) {
        if !r.conv.told_end {
            return;
        }
        if r.plan.test == TestKind::TcpStream && !stream::tcp::settle(&conns, SETTLE_LIMIT) {
            crate::debug::line(1, || {
                "what we sent was not all acknowledged within 10 s: the server may count less"
                    .into()
            });
        }
        self.held = conns;
    }
}

/// How long a sender whose receiver counts until told the end waits for
/// what it sent to be acknowledged.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// Flows on event loops, each with the role `role` makes of its share of
/// a count: what our side counted.
pub(crate) fn loops_local(
    r: &Run<'_>,
    conns: Vec<TcpStream>,
    role: impl Fn(Option<u64>) -> Role,
) -> Result<Local> {
    let plan = r.plan;
    let n = plan.flows.max(1);
    let count = match plan.length {
        Length::Count(c) => Some(c),
        Length::Seconds(_) => None,
    };
    let mut ends: Vec<FlowEnd> = conns
        .iter()
        .map(|c| FlowEnd::at(c.local_addr().ok()))
        .collect();
    let addr = conns.first().and_then(|c| c.local_addr().ok());
    let report = run_on_loops(plan, r, conns, count, window(plan)?, |i| {
        role(count.map(|c| super::context::share(c, n, i)))
    })?;
    for (e, t) in ends.iter_mut().zip(&report.tcp) {
        e.retransmits = t.as_ref().map(|t| t.retransmits);
    }
    let counts = report.results();
    Ok(Local {
        elapsed: Duration::from_nanos(counts.elapsed_ns),
        counts,
        latency: report.latency.and_then(|l| l.summary()),
        flows: ends,
        addr,
        ..Local::default()
    })
}

/// Flows on event loops ([`engine::evloop`]): flows whose share of a count
/// differs run as two groups, together (a loop's plan has one role).
pub(crate) fn run_on_loops(
    plan: &Plan,
    r: &Run<'_>,
    mut conns: Vec<TcpStream>,
    count: Option<u64>,
    window: Option<((Duration, Duration), Duration)>,
    role: impl Fn(usize) -> Role,
) -> Result<evloop::Report> {
    let n = plan.flows.max(1);
    let evplan = |role: Role| evloop::Plan {
        role,
        threads: super::context::threads(plan),
        cpus: plan.cpus.clone(),
        linger: Duration::from_secs(60),
        silence: match plan.length {
            Length::Seconds(s) if s > 0 => {
                window.map_or(Duration::from_secs(s), |(_, total)| total) + Duration::from_secs(30)
            }
            _ => Duration::from_secs(330),
        },
        window: window.map(|(bounds, _)| bounds),
        rx: lifecycle::local_rx(plan),
        batch_wakes: false,
        zerocopy: plan.zerocopy,
        end: stream::tcp::SenderEnd::client(&r.conv, r.grant.recv_size),
        ecn: plan.ecn.is_some(),
    };
    let live = &r.ctx.live;
    // the driver chosen for the test: io_uring where asked, else event loops
    let drive =
        |conns, p: &evloop::Plan, stop, live| engine::drive::flows(r.driver, conns, p, stop, live);
    if count.is_none_or(|c| c % u64::from(n) == 0) {
        return Ok(drive(conns, &evplan(role(0)), r.stop, live)?);
    }
    let cut = (count.unwrap_or(0) % u64::from(n)) as usize;
    let rest = conns.split_off(cut);
    let (pa, pb) = (evplan(role(0)), evplan(role(cut)));
    let (a, b) = std::thread::scope(|s| {
        let ha = s.spawn(|| drive(conns, &pa, r.stop, live));
        let b = drive(rest, &pb, r.stop, live);
        (ha.join(), b)
    });
    let mut a = a.map_err(|_| anyhow::anyhow!("a flow thread panicked"))??;
    let b = b?;
    a.flows.extend(b.flows);
    a.tcp.extend(b.tcp);
    a.rx.mapped_bytes += b.rx.mapped_bytes;
    if let Some(e) = b.ecn {
        a.ecn.get_or_insert_with(Default::default).merge(&e);
    }
    if let Some(lb) = b.latency {
        match &mut a.latency {
            Some(la) => la.merge(&lb),
            None => a.latency = Some(lb),
        }
    }
    Ok(a)
}

/// TCP_SENDFILE's file: the `-F` fill file, which must hold the whole ring
/// (as netperf 2.7 requires), or a temporary file of the ring's contents,
/// unlinked from the start.
fn sendfile_source(plan: &Plan, ring: &Ring) -> Result<File> {
    let need = (ring.size() * ring.width()) as u64;
    if let Some(path) = &plan.fill_file {
        let f = File::open(path).with_context(|| format!("-F {}", path.display()))?;
        let len = f.metadata()?.len();
        if len < need {
            bail!(
                "-F {}: TCP_SENDFILE sends from the file itself, which must hold {} messages of {} bytes ({need} bytes); it has {len}",
                path.display(),
                ring.width(),
                ring.size()
            );
        }
        return Ok(f);
    }
    let mut f =
        engine::sys::anonymous_file().context("TCP_SENDFILE: cannot make a temporary file")?;
    f.write_all(&ring.contents())
        .context("TCP_SENDFILE: cannot fill its temporary file")?;
    Ok(f)
}

/// TCP is reliable: what one side sent, the other received, to the byte.
/// A netserver that does not count exactly (netserver 2.7, as a sender)
/// leaves out the send its timer cut short: what we received may exceed
/// its count by less than one of its messages (the figure is ours, as
/// netperf 2.7's).
fn check_bytes(
    kind: TestKind,
    local: &SideResults,
    remote: &SideResults,
    their_message: u64,
    exact: bool,
) -> Result<()> {
    let (sent, got) = match kind {
        TestKind::TcpStream => (local.bytes_sent, remote.bytes_received),
        _ => (remote.bytes_sent, local.bytes_received),
    };
    let cut_short =
        !exact && kind == TestKind::TcpMaerts && got >= sent && got - sent < their_message.max(1);
    if sent != got && !cut_short {
        bail!(
            "byte counts disagree: {sent} sent, {got} received (the data connection was disturbed)"
        );
    }
    Ok(())
}

/// Flow by flow, what one end sent the other received, and both ran the
/// same transactions. With a window, the whole run's counts are checked
/// (the window's edges fall by each end's own clock).
pub(crate) fn check_flows(kind: TestKind, local: &SideResults, remote: &SideResults) -> Result<()> {
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
