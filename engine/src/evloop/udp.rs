//! Many UDP flows per thread: UDP_RR's requester and responder and
//! UDP_STREAM's sender and receiver, a few threads per end whatever the
//! number of flows, each flow a connected socket (each flow's hello made
//! both ends' sockets one pair) and a few dozen bytes of state, except a
//! receiver's sequence window (8 KiB).
//!
//! The flows are the same machines as one flow's blocking loops: a
//! UDP_STREAM sender is a [`Sender`], a receiver a [`Tally`]; UDP_RR's
//! requester keeps its requests in flight in a [`Window`], tagged, each
//! given up when its timeout passes. Each is counted exactly as one flow
//! is. A thread waits for its sockets (mio) and, with the same wait, for
//! the nearest deadline of its flows (a paced send, a request's timeout).

use std::{
    io,
    net::UdpSocket,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use mio::{Events, Poll, Token};
use proto::UdpFast;

use super::spread;
use crate::{
    EngineError, clock,
    conventions::{Conventions, UdpEnd},
    error::no_datagram,
    flow::Ended,
    latency::Latency,
    live::Live,
    rr::{RrOutcome, window::Window},
    stream::udp::{
        Call, Calls, Drain, GRACE, Link, MAX_DRAIN, RecvOutcome, SendOutcome, Sender, Tally, Until,
        recv_batch, send_batch, set_segment, transient,
    },
    sys::MsgBatch,
    timer::StopFlag,
};

/// What every flow of a run does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UdpRole {
    /// UDP_RR's requester: requests of `req` bytes answered by `resp`,
    /// `burst` more in flight, until stopped or the flow's count of
    /// transactions; a request unanswered after `timeout` is lost.
    /// `timing`: record each transaction's latency.
    Request {
        req: usize,
        resp: usize,
        burst: u32,
        timing: bool,
        timeout: Duration,
    },
    /// UDP_RR's responder: every request answered with `resp` bytes
    /// carrying its tag, until stopped.
    Respond { req: usize, resp: usize },
    /// UDP_STREAM's sender: datagrams of `size` bytes carrying the test's
    /// `id`, until stopped or the flow's count of bytes, at `rate_bps` a
    /// flow.
    Send {
        size: usize,
        rate_bps: Option<u64>,
        id: u32,
    },
    /// UDP_STREAM's receiver: every datagram counted, until the senders
    /// are done (the run's drain says so).
    Recv,
}

/// How to run them.
#[derive(Clone, Copy)]
pub struct UdpPlan<'a> {
    pub role: UdpRole,
    /// Threads (at least one, at most one per flow).
    pub threads: usize,
    /// CPUs to pin the threads to, in turn (empty: not pinned).
    pub cpus: &'a [u32],
    pub conv: Conventions,
    /// sendmmsg/recvmmsg batches and UDP_SEGMENT/UDP_GRO, as one flow has
    /// them.
    pub fast: UdpFast,
    /// The test's token: a receiver sets aside a hello that comes again,
    /// and another test's datagrams.
    pub token: &'a proto::Token,
    /// A receiver learns here that the senders are done, and of an abort.
    pub drain: Option<&'a (dyn Drain + Sync)>,
    /// After the stop flag, how long the flows may take to finish.
    pub linger: Duration,
    /// A receiver counts each datagram's ECN codepoint, by intervals of
    /// this many milliseconds (`--ecn`).
    pub ecn: Option<u32>,
}

impl std::fmt::Debug for UdpPlan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpPlan")
            .field("role", &self.role)
            .field("threads", &self.threads)
            .field("cpus", &self.cpus)
            .field("fast", &self.fast)
            .finish_non_exhaustive()
    }
}

/// What a flow counted, by its role.
#[derive(Debug)]
pub enum UdpFlowEnd {
    /// A requester's transactions, losses and stale answers. Each
    /// thread's latency histogram is on the first flow it ran.
    Requested(RrOutcome),
    Answered(Ended),
    Sent(SendOutcome),
    Received(RecvOutcome),
}

/// Run `flows` (each a socket connected to its flow's peer, and the
/// flow's count: transactions for a requester, bytes for a sender; none:
/// until stopped) by `plan` until every flow is done; each flow's end, in
/// their order.
pub fn run(
    socks: Vec<(UdpSocket, Option<u64>)>,
    plan: &UdpPlan<'_>,
    stop: &StopFlag,
    live: &Live,
) -> Result<Vec<UdpFlowEnd>, EngineError> {
    let n = socks.len();
    // every receiving thread adds the datagrams its flows took here: the
    // senders' count is of every flow
    let received = AtomicU64::new(0);
    let shares = spread(socks, plan.threads, plan.cpus, |share| {
        run_share(share, plan, stop, live, &received)
    })?;
    super::in_order(n, shares, "a UDP flow")
}

/// A UDP_RR requester's flow: its requests in flight, by tag.
struct Requester {
    tag: usize,
    /// How many sequence numbers the tag tells apart.
    distinct: u64,
    limit: u64,
    timeout_ns: u64,
    seq: u64,
    window: Window,
    out: RrOutcome,
    start_ns: u64,
    /// The last request sent or answer taken: the flow's end (waiting out
    /// the timeout of requests never answered is not part of it).
    end_ns: u64,
}

enum Machine<'t> {
    Req(Requester),
    /// What it answered, since when, and how many bytes of a request are
    /// its tag.
    Resp(Ended, Instant, usize),
    Send(Sender),
    Recv(Tally<'t>),
}

struct Slot<'t> {
    index: usize,
    sock: UdpSocket,
    /// How the loop watches it.
    watch: crate::sys::Watch,
    machine: Machine<'t>,
    done: bool,
    /// It has more to do without waiting for its socket.
    ready: bool,
    /// What was last added to the run's live counters.
    published: (u64, u64),
}

/// A thread's buffers and batches, shared by its flows.
struct Buffers {
    out: Vec<u8>,
    inb: Vec<u8>,
    send: Option<(MsgBatch, usize, Vec<usize>)>,
    recv: Option<MsgBatch>,
}

fn buffers(plan: &UdpPlan<'_>, first: Option<&UdpSocket>) -> Result<Buffers, EngineError> {
    let (out, inb) = match plan.role {
        UdpRole::Request { req, resp, .. } => (req, resp),
        UdpRole::Respond { req, resp } => (resp, req + 1),
        UdpRole::Send { size, .. } => (size, 64),
        UdpRole::Recv => (1, proto::test::UDP_SLOT as usize),
    };
    let mut o = vec![0u8; out.max(1)];
    for (i, b) in o.iter_mut().enumerate() {
        *b = b'a' + (i % 26) as u8;
    }
    let fast = plan.fast.is_on();
    let send = match (plan.role, fast) {
        (UdpRole::Send { size, .. }, true) => {
            let size = size.max(1);
            let fill = o.clone();
            let batch = send_batch(plan.fast, size, None, || fill.clone());
            Some((batch, plan.fast.segments.max(1) as usize, Vec::new()))
        }
        _ => None,
    };
    let recv = match (plan.role, fast, first) {
        (UdpRole::Recv, true, Some(s)) => Some(recv_batch(s, plan.fast)?),
        _ => None,
    };
    Ok(Buffers {
        out: o,
        inb: vec![0u8; inb.max(64)],
        send,
        recv,
    })
}

fn machine<'t>(plan: &UdpPlan<'t>, count: Option<u64>) -> Machine<'t> {
    match plan.role {
        UdpRole::Request {
            req,
            resp,
            burst,
            timeout,
            ..
        } => {
            let tag = plan.conv.udp_rr_tag_len(req, resp);
            let now = clock::now_ns();
            Machine::Req(Requester {
                tag,
                distinct: if tag == 0 {
                    u64::MAX
                } else {
                    proto::test::udp_rr_distinct_tags(req, resp)
                },
                limit: count.unwrap_or(u64::MAX),
                timeout_ns: u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
                seq: 0,
                window: Window::new(burst as usize + 1),
                out: RrOutcome::default(),
                start_ns: now,
                end_ns: now,
            })
        }
        UdpRole::Respond { req, resp } => Machine::Resp(
            Ended::default(),
            Instant::now(),
            plan.conv.udp_rr_tag_len(req, resp),
        ),
        UdpRole::Send { size, rate_bps, id } => Machine::Send(Sender::new(
            size,
            id,
            &plan.conv,
            count.map_or(Until::Stopped, Until::Bytes),
            rate_bps,
        )),
        UdpRole::Recv => Machine::Recv(Tally::new(plan.token, &plan.conv).counting_ecn(plan.ecn)),
    }
}

/// How long a thread waits at most before it looks at the clock and the
/// stop flag again.
const TICK: Duration = Duration::from_millis(20);

fn run_share(
    share: Vec<(usize, (UdpSocket, Option<u64>))>,
    plan: &UdpPlan<'_>,
    stop: &StopFlag,
    live: &Live,
    received: &AtomicU64,
) -> Result<Vec<(usize, UdpFlowEnd)>, EngineError> {
    let mut poll = Poll::new().map_err(|e| EngineError::io("creating an event loop", e))?;
    let mut bufs = buffers(plan, share.first().map(|(_, (s, _))| s))?;
    let mut slots = register(share, plan, &poll)?;
    let timing = matches!(plan.role, UdpRole::Request { timing: true, .. });
    let drain = plan.drain;
    let mut lat = Latency::new();
    let mut events = Events::with_capacity(1024);
    let mut stopping_since: Option<Instant> = None;
    let mut drained = Drained::new();
    let mut ctx = Ctx {
        bufs: &mut bufs,
        stopping: false,
        timing,
        lat: &mut lat,
        drain,
        live,
        conv: &plan.conv,
    };
    for s in &mut slots {
        pump(s, &mut ctx)?;
    }
    let mut open = slots.iter().filter(|s| !s.done).count();
    while open > 0 {
        let now_ns = clock::now_ns();
        let next = slots
            .iter()
            .filter(|s| !s.done)
            .filter_map(|s| deadline(&s.machine))
            .min();
        let timeout = if slots.iter().any(|s| s.ready && !s.done) {
            Duration::ZERO
        } else {
            next.map_or(TICK, |d| {
                Duration::from_nanos(d.saturating_sub(now_ns)).min(TICK)
            })
        };
        super::wait(&mut poll, &mut events, timeout, "UDP data sockets")?;
        let stopping = stop.is_set();
        let now = Instant::now();
        let newly = stopping && stopping_since.is_none();
        if newly {
            stopping_since = Some(now);
        }
        ctx.stopping = stopping;
        for ev in events.iter() {
            if let Some(s) = slots.get_mut(ev.token().0).filter(|s| !s.done) {
                pump(s, &mut ctx)?;
            }
        }
        for s in slots.iter_mut().filter(|s| s.ready && !s.done) {
            pump(s, &mut ctx)?;
        }
        // what the clock or the stop flag moves on: timeouts, paced sends,
        // and, when the test ends, every sender and requester at once
        let now_ns = clock::now_ns();
        for s in slots.iter_mut().filter(|s| !s.done) {
            let due = deadline(&s.machine).is_some_and(|d| d <= now_ns);
            if newly || due {
                if let Machine::Req(r) = &mut s.machine {
                    r.out.lost += r.window.expire(now_ns, r.timeout_ns);
                }
                pump(s, &mut ctx)?;
            }
        }
        if let (UdpRole::Recv, Some(d)) = (plan.role, drain) {
            drained.check(&mut slots, d, received, now)?;
        }
        for s in slots.iter_mut() {
            publish(s, live);
        }
        open = slots.iter().filter(|s| !s.done).count();
        if let Some(since) = stopping_since
            && open > 0
            && now.duration_since(since) > plan.linger
        {
            return Err(EngineError::Timeout(format!(
                "{open} UDP flows did not finish within {} s of the end of the test",
                plan.linger.as_secs()
            )));
        }
    }
    let mut lat = Some(lat).filter(|l| l.count() > 0);
    Ok(slots.into_iter().map(|s| flow_end(s, &mut lat)).collect())
}

/// The share's sockets made non-blocking, set up for the fast paths, and
/// registered with `poll`, each with its flow machine.
fn register<'t>(
    share: Vec<(usize, (UdpSocket, Option<u64>))>,
    plan: &UdpPlan<'t>,
    poll: &Poll,
) -> Result<Vec<Slot<'t>>, EngineError> {
    let mut slots = Vec::with_capacity(share.len());
    for (k, (index, (sock, count))) in share.into_iter().enumerate() {
        sock.set_read_timeout(None)
            .and_then(|()| sock.set_nonblocking(true))
            .map_err(|e| EngineError::io("making a UDP data socket non-blocking", e))?;
        if let (UdpRole::Send { size, .. }, true) = (plan.role, plan.fast.segments > 1) {
            set_segment(&sock, size.max(1))?;
        }
        if let (UdpRole::Recv, true) = (plan.role, plan.fast.segments > 1) {
            recv_batch(&sock, plan.fast)?;
        }
        if let (UdpRole::Recv, Some(_)) = (plan.role, plan.ecn) {
            crate::ecn::ask_codepoints(&sock)?;
        }
        let receives = !matches!(plan.role, UdpRole::Send { .. });
        let watch = crate::sys::Watch::new(
            poll.registry(),
            &sock,
            crate::sys::SockKind::Datagram,
            Token(k),
            crate::sys::Watch::interest(receives, true),
        )
        .map_err(|e| EngineError::io("registering a UDP data socket", e))?;
        slots.push(Slot {
            index,
            sock,
            watch,
            machine: machine(plan, count),
            done: false,
            ready: false,
            published: (0, 0),
        });
    }
    Ok(slots)
}

/// A receiving thread's view of the end: when the senders said they were
/// done, when its flows last took a datagram, and what it has counted into
/// the run's total.
struct Drained {
    at: Option<Instant>,
    last_rx: Instant,
    taken: u64,
}

impl Drained {
    fn new() -> Drained {
        Drained {
            at: None,
            last_rx: Instant::now(),
            taken: 0,
        }
    }

    /// Add what the flows took to `received`; once the senders are done,
    /// every flow ends when all they sent is in, when nothing came for a
    /// grace period, or after the longest drain.
    fn check(
        &mut self,
        slots: &mut [Slot<'_>],
        d: &(dyn Drain + Sync),
        received: &AtomicU64,
        now: Instant,
    ) -> Result<(), EngineError> {
        if d.aborted() {
            return Err(EngineError::Aborted);
        }
        let mine: u64 = slots
            .iter()
            .map(|s| match &s.machine {
                Machine::Recv(t) => t.received(),
                _ => 0,
            })
            .sum();
        if mine > self.taken {
            received.fetch_add(mine - self.taken, Ordering::Relaxed);
            self.taken = mine;
            self.last_rx = now;
        }
        if let Some(expected) = d.expected() {
            let at = *self.at.get_or_insert(now);
            if received.load(Ordering::Relaxed) >= expected
                || now.duration_since(self.last_rx.max(at)) >= GRACE
                || now.duration_since(at) >= MAX_DRAIN
            {
                for s in slots.iter_mut() {
                    s.done = true;
                }
            }
        }
        Ok(())
    }
}

/// What a flow ended with; the thread's latency goes with its first
/// requester.
fn flow_end(s: Slot<'_>, lat: &mut Option<Latency>) -> (usize, UdpFlowEnd) {
    let end = match s.machine {
        Machine::Req(mut r) => {
            r.out.elapsed = Duration::from_nanos(r.end_ns.wrapping_sub(r.start_ns));
            if let Some(l) = lat.take() {
                r.out.latency = l.summary();
                r.out.histogram = Some(Box::new(l));
            }
            UdpFlowEnd::Requested(r.out)
        }
        Machine::Resp(mut e, start, _) => {
            e.elapsed = start.elapsed();
            UdpFlowEnd::Answered(e)
        }
        Machine::Send(s) => UdpFlowEnd::Sent(s.finish()),
        Machine::Recv(t) => UdpFlowEnd::Received(t.finish()),
    };
    (s.index, end)
}

/// What driving a flow needs besides the flow.
struct Ctx<'c> {
    bufs: &'c mut Buffers,
    stopping: bool,
    timing: bool,
    lat: &'c mut Latency,
    drain: Option<&'c (dyn Drain + Sync)>,
    live: &'c Live,
    conv: &'c Conventions,
}

/// When a flow next has something to do whatever its socket says (the
/// clock of [`clock::now_ns`]).
fn deadline(m: &Machine<'_>) -> Option<u64> {
    match m {
        Machine::Req(r) => r
            .window
            .oldest_sent()
            .map(|t| t.saturating_add(r.timeout_ns)),
        Machine::Send(s) => s.due_ns(),
        Machine::Resp(..) | Machine::Recv(_) => None,
    }
}

/// Drive one flow until its socket would block, it must wait for the
/// clock, or it is done.
fn pump(s: &mut Slot<'_>, c: &mut Ctx<'_>) -> Result<(), EngineError> {
    let sock = &s.sock;
    let after = match &mut s.machine {
        Machine::Req(r) => {
            let after = request(sock, r, c)?;
            if (c.stopping || r.seq >= r.limit) && r.window.is_empty() {
                After::Done
            } else {
                after
            }
        }
        Machine::Resp(e, _, tag) => {
            let empty_ends = matches!(c.conv.udp_end, UdpEnd::EmptyDatagrams(_));
            match respond(sock, e, *tag, c, empty_ends)? {
                _ if c.stopping => After::Done,
                after => after,
            }
        }
        Machine::Send(f) => send(sock, f, c)?,
        Machine::Recv(t) => {
            let drain: &dyn Drain = match c.drain {
                Some(d) => d,
                None => &NoDrain,
            };
            let live = c.live.flow(s.index).unwrap_or(c.live);
            let mut calls = match &mut c.bufs.recv {
                Some(b) => Calls::Batch(b),
                None => Calls::One(&mut c.bufs.inb),
            };
            let mut after = After::Ready;
            for _ in 0..BUDGET {
                match calls.take(Link::connected(sock), t, drain, live)? {
                    Call::Went => {}
                    Call::Quiet => {
                        after = After::Wait;
                        break;
                    }
                    Call::Ended => {
                        after = After::Done;
                        break;
                    }
                }
            }
            after
        }
    };
    s.done = after == After::Done;
    s.ready = after == After::Ready;
    // waiting for its socket, not for the clock: the loop is to say when
    // it is ready
    if after == After::Wait {
        // (a paced sender waits for the clock, not for its socket)
        s.watch.rearm_if(|| match &s.machine {
            Machine::Send(f) => f.due_ns().is_none_or(|d| d <= clock::now_ns()),
            _ => true,
        });
    }
    Ok(())
}

/// Where a flow is after it was driven.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    /// For its socket or the clock.
    Wait,
    /// It used its turn and has more to do at once.
    Ready,
    Done,
}

/// Calls a flow makes in one turn before the others get theirs (a
/// sender on loopback rarely blocks, a busy receiver always has more).
const BUDGET: usize = 64;

/// A receiver with no one to say when the senders are done.
struct NoDrain;
impl Drain for NoDrain {
    fn expected(&self) -> Option<u64> {
        None
    }
    fn aborted(&self) -> bool {
        false
    }
}

/// Send what the window lets go, take every answer waiting.
fn request(sock: &UdpSocket, r: &mut Requester, c: &mut Ctx<'_>) -> Result<After, EngineError> {
    let out = &mut c.bufs.out;
    for _ in 0..BUDGET {
        while !c.stopping && r.seq < r.limit && r.window.may_send(r.seq, r.distinct) {
            if let (Some(t), Some(s)) = (out.get_mut(..r.tag), r.seq.to_le_bytes().get(..r.tag)) {
                t.copy_from_slice(s);
            }
            let now = clock::now_ns();
            match sock.send(out) {
                Ok(n) => {
                    r.out.counters.send_calls += 1;
                    r.out.counters.bytes_sent += n as u64;
                    r.window.push(r.seq, now);
                    r.end_ns = now;
                    r.seq += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // a full queue, a firewall, an ICMP error: this
                // transaction is lost
                Err(e) if transient(&e) => {
                    r.out.lost += 1;
                    r.seq += 1;
                }
                Err(e) => return Err(EngineError::io("UDP send", e)),
            }
        }
        match sock.recv(&mut c.bufs.inb) {
            Ok(n) => {
                r.out.counters.recv_calls += 1;
                let now = clock::now_ns();
                let answered = c.bufs.inb.get(..r.tag).filter(|_| n >= r.tag);
                match answered.and_then(|t| r.window.answer(t)) {
                    Some(sent_at) => {
                        r.end_ns = now;
                        r.out.counters.bytes_received += n as u64;
                        r.out.counters.transactions += 1;
                        if c.timing {
                            c.lat.record(now.wrapping_sub(sent_at));
                        }
                    }
                    None => r.out.stale += 1,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(After::Wait),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // an ICMP error an earlier request drew: its timeout tells
            Err(e) if no_datagram(&e) => {}
            Err(e) => return Err(EngineError::io("UDP receive", e)),
        }
    }
    Ok(After::Ready)
}

/// Answer the requests waiting (an empty datagram ends the flow by
/// netperf 2.7's conventions).
fn respond(
    sock: &UdpSocket,
    e: &mut Ended,
    tag: usize,
    c: &mut Ctx<'_>,
    empty_ends: bool,
) -> Result<After, EngineError> {
    for _ in 0..BUDGET {
        let n = match sock.recv(&mut c.bufs.inb) {
            Ok(0) if empty_ends => return Ok(After::Done),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(After::Wait),
            Err(e) if e.kind() == io::ErrorKind::Interrupted || no_datagram(&e) => continue,
            Err(err) => return Err(EngineError::io("UDP receive", err)),
        };
        e.counters.recv_calls += 1;
        e.counters.bytes_received += n as u64;
        // the request's tag back in the response (as much of it as the
        // shorter of the two holds)
        let t = tag.min(n);
        if let (Some(to), Some(from)) = (c.bufs.out.get_mut(..t), c.bufs.inb.get(..t)) {
            to.copy_from_slice(from);
        }
        match sock.send(&c.bufs.out) {
            Ok(m) => {
                e.counters.send_calls += 1;
                e.counters.bytes_sent += m as u64;
                e.counters.transactions += 1;
            }
            // a full queue: this answer is lost, as a blocking
            // responder's transient error is
            Err(err) if err.kind() == io::ErrorKind::WouldBlock || transient(&err) => {}
            Err(err) => return Err(EngineError::io("UDP send", err)),
        }
    }
    Ok(After::Ready)
}

/// Send until the socket would block, the pace holds the next datagram,
/// the turn is over, or the flow is done.
fn send(sock: &UdpSocket, f: &mut Sender, c: &mut Ctx<'_>) -> Result<After, EngineError> {
    for _ in 0..BUDGET {
        if !f.more(c.stopping) {
            return Ok(After::Done);
        }
        if f.due_ns().is_some_and(|d| clock::now_ns() < d) {
            return Ok(After::Wait);
        }
        let r = match &mut c.bufs.send {
            Some((batch, segments, lens)) => {
                f.fill(batch, *segments, lens);
                batch.send(sock, lens).map(|k| f.went_batch(batch, k))
            }
            None => {
                let buf = &mut c.bufs.out;
                f.stamp_next(buf);
                sock.send(buf).map(|n| f.went(n))
            }
        };
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(After::Wait),
            Err(e) => f.out.failed_with(e, "UDP send")?,
        }
    }
    Ok(After::Ready)
}

/// Add what a flow did since it last added to the run's live counters.
fn publish(s: &mut Slot<'_>, live: &Live) {
    let (bytes, tx) = match &s.machine {
        Machine::Req(r) => (r.out.counters.bytes_received, r.out.counters.transactions),
        Machine::Resp(e, ..) => (e.counters.bytes_received, e.counters.transactions),
        Machine::Send(f) => (f.out.bytes, 0),
        // (a receiver publishes as it takes each datagram)
        Machine::Recv(_) => return,
    };
    super::publish_flow(live, s.index, &mut s.published, bytes, tx);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{stream::udp::Told, testing::udp_pair};
    use std::sync::atomic::AtomicU64;

    type Flows = Vec<(UdpSocket, Option<u64>)>;

    /// `n` pairs: the first ends with `count` each, the second with none.
    fn pairs(n: usize, count: Option<u64>) -> (Flows, Flows) {
        (0..n)
            .map(|_| {
                let (a, b) = udp_pair();
                ((a, count), (b, None))
            })
            .unzip()
    }

    fn plan<'a>(role: UdpRole, token: &'a proto::Token) -> UdpPlan<'a> {
        UdpPlan {
            role,
            threads: 2,
            cpus: &[],
            conv: Conventions::NATIVE,
            fast: UdpFast::default(),
            token,
            drain: None,
            linger: Duration::from_secs(10),
            ecn: None,
        }
    }

    fn requested(e: &UdpFlowEnd) -> &RrOutcome {
        match e {
            UdpFlowEnd::Requested(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn answered(e: &UdpFlowEnd) -> &Ended {
        match e {
            UdpFlowEnd::Answered(a) => a,
            other => panic!("{other:?}"),
        }
    }

    /// `n` UDP_RR flows of `limit` transactions each, `burst` more in
    /// flight: every flow completes its count, each answered once.
    fn rr(n: usize, burst: u32, limit: Option<u64>, stop_after: Option<Duration>) {
        let token = crate::handshake::new_token().unwrap();
        let (c, s) = pairs(n, limit);
        let stop_srv = StopFlag::new();
        let st = stop_srv.clone();
        let srv = std::thread::spawn(move || {
            run(
                s,
                &plan(UdpRole::Respond { req: 8, resp: 64 }, &token),
                &st,
                &Live::new(),
            )
            .unwrap()
        });
        let stop = StopFlag::new();
        if let Some(after) = stop_after {
            let s2 = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(after);
                s2.set();
            });
        }
        let role = UdpRole::Request {
            req: 8,
            resp: 64,
            burst,
            timing: true,
            timeout: Duration::from_secs(1),
        };
        let ours = run(c, &plan(role, &token), &stop, &Live::new()).unwrap();
        stop_srv.set();
        let theirs = srv.join().unwrap();
        let mut total = 0;
        let mut timed = 0;
        for (a, b) in ours.iter().zip(&theirs) {
            let (a, b) = (requested(a), answered(b));
            assert!(a.counters.transactions > 0, "every flow made progress");
            if let Some(l) = limit {
                assert_eq!(a.counters.transactions + a.lost, l);
            }
            // loopback loses nothing here
            assert_eq!(a.lost, 0);
            assert_eq!(a.counters.transactions, b.counters.transactions);
            assert_eq!(a.counters.bytes_received, b.counters.bytes_sent);
            total += a.counters.transactions;
            timed += a.histogram.as_ref().map_or(0, |h| h.count());
        }
        assert_eq!(timed, total, "every transaction timed, once");
    }

    #[test]
    fn rr_flows_count_exactly() {
        rr(200, 0, Some(25), None);
        rr(50, 3, Some(40), None);
        rr(100, 0, None, Some(Duration::from_millis(300)));
    }

    /// A request nobody answers is lost when its timeout passes, and the
    /// flow goes on to its count.
    #[test]
    fn an_unanswered_request_is_lost_at_its_timeout() {
        let token = crate::handshake::new_token().unwrap();
        let (c, _silent) = pairs(3, Some(4));
        let role = UdpRole::Request {
            req: 8,
            resp: 8,
            burst: 1,
            timing: false,
            timeout: Duration::from_millis(50),
        };
        let t0 = Instant::now();
        let ours = run(c, &plan(role, &token), &StopFlag::new(), &Live::new()).unwrap();
        for e in &ours {
            let r = requested(e);
            assert_eq!((r.lost, r.counters.transactions), (4, 0));
        }
        // two windows of two, 50 ms each
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    /// UDP_STREAM flows of a count each, with and without the fast paths:
    /// every datagram of every flow counted at both ends.
    #[test]
    fn stream_flows_count_every_datagram() {
        for fast in [
            UdpFast::default(),
            UdpFast {
                batch: 8,
                segments: 1,
            },
        ] {
            let token = crate::handshake::new_token().unwrap();
            let (c, s) = pairs(40, Some(50_000));
            let told = std::sync::Arc::new(Told(AtomicU64::new(u64::MAX)));
            let t2 = told.clone();
            let srv = std::thread::spawn(move || {
                let mut p = plan(UdpRole::Recv, &token);
                p.drain = Some(&*t2);
                p.fast = fast;
                run(s, &p, &StopFlag::new(), &Live::new()).unwrap()
            });
            let role = UdpRole::Send {
                size: 1000,
                // paced, so that no socket buffer overflows
                rate_bps: Some(20_000_000),
                id: crate::stream::udp::test_id(&token),
            };
            let mut p = plan(role, &token);
            p.fast = fast;
            let sent = run(c, &p, &StopFlag::new(), &Live::new()).unwrap();
            let total: u64 = sent
                .iter()
                .map(|e| match e {
                    UdpFlowEnd::Sent(s) => s.sent,
                    other => panic!("{other:?}"),
                })
                .sum();
            assert_eq!(total, 40 * 50);
            told.0.store(total, Ordering::Relaxed);
            for e in srv.join().unwrap() {
                match e {
                    UdpFlowEnd::Received(r) => {
                        assert_eq!((r.received, r.bytes), (50, 50_000), "{fast:?}");
                        assert_eq!((r.duplicates, r.out_of_order, r.foreign), (0, 0, 0));
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }
}
