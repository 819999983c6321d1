//! Many flows per thread: the flow state machines of [`crate::flow`] driven
//! on mio event loops over non-blocking sockets, a few threads per end.
//! This module runs TCP's stream and request/response flows; [`udp`] runs
//! UDP_RR's and UDP_STREAM's, [`crr`] TCP_CRR's requesters.
//! Used for tests of more than one flow; one flow keeps the blocking loops
//! (their fast path).
//!
//! Every flow of a run starts at once (the sockets are connected before),
//! and is counted exactly, as one flow is: a sender stops at the stop flag
//! or its byte count, half-closes and waits for the receiver's end; a
//! receiver reads to end-of-file and half-closes; a requester finishes the
//! transactions in flight, half-closes and waits; a responder answers
//! until end-of-file. Buffers are the thread's, shared by its flows (the
//! bytes carry nothing a flow needs), so that a flow costs its socket and
//! a few dozen bytes of state.

use std::{
    io::{self, Read, Write},
    net::{Shutdown, TcpStream},
    time::{Duration, Instant},
};

use mio::{Events, Interest, Poll, Token};

pub mod crr;
pub mod udp;

use crate::{
    EngineError,
    buffer::{Buffer, Placement},
    clock,
    flow::{Ended, Io, RrRequest, RrRespond, StreamRecv, StreamSend},
    latency::Latency,
    live::Live,
    rr::window::Window,
    stream::{rx::Reader, tcp::SenderEnd, zc::ZcSender},
    timer::StopFlag,
};
use proto::RxPath;

/// What every flow of a run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Send messages of `size` bytes (until stopped, or `total` bytes per
    /// flow).
    Send { size: usize, total: Option<u64> },
    /// Receive into calls of `size` bytes until end-of-file.
    Recv { size: usize },
    /// Requests of `req` bytes answered by `resp`, `burst` more in flight,
    /// until stopped or `limit` transactions per flow; `timing`: record each
    /// transaction's latency.
    Request {
        req: usize,
        resp: usize,
        burst: u32,
        limit: Option<u64>,
        timing: bool,
    },
    /// Answer requests of `req` bytes with `resp` until end-of-file;
    /// `burst` as the requester's.
    Respond { req: usize, resp: usize, burst: u32 },
}

/// How to run them.
#[derive(Clone, Debug)]
pub struct Plan {
    pub role: Role,
    /// Threads (at least one, at most one per flow).
    pub threads: usize,
    /// CPUs to pin the threads to, in turn (empty: not pinned).
    pub cpus: Vec<u32>,
    /// After the stop flag, how long the ends may take to close.
    pub linger: Duration,
    /// A receiving flow silent this long (no data, no end) is given up.
    pub silence: Duration,
    /// `--warmup`/`--cooldown`: count only between these offsets from the
    /// common start (the report's `window`).
    pub window: Option<(Duration, Duration)>,
    /// How a receiving flow takes its bytes.
    pub rx: RxPath,
    /// A receiving flow is woken for more than a packet once it is fast
    /// ([`crate::stream::rx::Reader::batching`]).
    pub batch_wakes: bool,
    /// Sending flows send with MSG_ZEROCOPY (`--zerocopy`).
    pub zerocopy: bool,
    /// What a sending flow does once done: wait for its peer's
    /// end-of-file (ours and netperf 2.7's ends close theirs at once);
    /// half-close and go (to iperf3's clients, which close their streams
    /// only after the results); or leave it open (to an iperf3 server).
    pub end: SenderEnd,
    /// Each flow's ECN read from its TCP_INFO as it ends (`--ecn`).
    pub ecn: bool,
}

/// What a run counted: each flow's, in the order of the connections given,
/// and the latency of every transaction of every flow.
#[derive(Debug, Default)]
pub struct Report {
    pub flows: Vec<Ended>,
    /// Each flow's TCP_INFO as it ended.
    pub tcp: Vec<Option<proto::TcpStats>>,
    /// The first flow's socket buffer sizes at its end (send, receive).
    pub bufs_end: (u32, u32),
    pub latency: Option<Latency>,
    /// With a window: each flow's counts within it, and how long it was
    /// open (the mean over the threads, each of which takes its snapshots
    /// as its clock passes the window's edges).
    pub window: Option<(Vec<proto::FlowCounters>, Duration)>,
    /// What the receiving flows' path did beyond copying.
    pub rx: proto::RxFigures,
    /// The flows' ECN, all together, where the plan asked (`--ecn`).
    pub ecn: Option<proto::ecn::TcpEcn>,
}

impl Report {
    /// This end's side of the results: every flow's counters (within the
    /// window, if there was one, the whole run's then in `totals`), the
    /// first flow's TCP_INFO and buffer sizes.
    pub fn results(&self) -> proto::SideResults {
        let mut r = proto::SideResults::default();
        match &self.window {
            Some((counted, open)) => {
                for c in counted {
                    r.add_flow(c, crate::flow::nanos(*open));
                }
                r.totals = self.flows.iter().map(|f| f.counters).collect();
            }
            None => {
                for f in &self.flows {
                    r.add_flow(&f.counters, crate::flow::nanos(f.elapsed));
                }
            }
        }
        r.close_flows();
        r.tcp = self.tcp.first().cloned().flatten();
        r.rx = self.rx;
        r.ecn = self.ecn.map(|t| proto::ecn::EcnReport {
            tcp: Some(t),
            ..Default::default()
        });
        (r.send_buf_end, r.recv_buf_end) = self.bufs_end;
        r
    }
}

enum Machine {
    Send(StreamSend, Option<ZcSender>),
    Recv(StreamRecv, Reader),
    Req(RrRequest, Window),
    Resp(RrRespond),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Our write side is shut; reading to the peer's end-of-file.
    Closing,
    Done,
}

struct Slot {
    index: usize,
    sock: mio::net::TcpStream,
    machine: Machine,
    phase: Phase,
    ended: Option<Instant>,
    /// The flow's counters as the window opened and as it closed.
    at_open: Option<proto::FlowCounters>,
    at_close: Option<proto::FlowCounters>,
    tcp: Option<proto::TcpStats>,
    /// Its ECN, read as it ends where the plan asks.
    ecn: Option<Result<proto::ecn::TcpEcn, String>>,
    bufs_end: (u32, u32),
    last_progress: Instant,
    /// What was last added to the run's live counters.
    published: (u64, u64),
    /// Once done sending ([`Plan::end`]).
    end: SenderEnd,
}

/// The thread's buffers, shared by its flows.
struct Buffers {
    out: Buffer,
    inb: Buffer,
}

/// Run `conns` (connected, blocking or not) by `plan` until they are all
/// done. `stop`: the end of a timed test (senders and requesters stop).
pub fn run(
    conns: Vec<TcpStream>,
    plan: &Plan,
    stop: &StopFlag,
    live: &Live,
) -> Result<Report, EngineError> {
    let n = conns.len();
    let start = Instant::now();
    type Share = (Vec<Done>, Latency, Option<Duration>);
    let results: Vec<Share> = spread(conns, plan.threads, &plan.cpus, |share| {
        run_share(share, plan, stop, live, start)
    })?;
    let mut flows = vec![Ended::default(); n];
    let mut tcp = vec![None; n];
    let mut bufs_end = (0, 0);
    let mut latency: Option<Latency> = None;
    let mut windowed = vec![proto::FlowCounters::default(); n];
    let mut open_for: Vec<Duration> = Vec::new();
    let mut rx = proto::RxFigures::default();
    let mut ecn: Option<proto::ecn::TcpEcn> = None;
    for (ended, lat, open) in results {
        open_for.extend(open);
        for d in ended {
            rx.mapped_bytes += d.mapped;
            if let Some(e) = d.ecn {
                let e = e.map_err(|e| EngineError::Invalid(format!("--ecn: {e}")))?;
                ecn.get_or_insert_with(Default::default).merge(&e);
            }
            if let (Some(slot), Some(w)) = (windowed.get_mut(d.index), d.window) {
                *slot = w;
            }
            if let Some(slot) = flows.get_mut(d.index) {
                *slot = d.ended;
            }
            if let Some(slot) = tcp.get_mut(d.index) {
                *slot = d.tcp;
            }
            if d.index == 0 {
                bufs_end = d.bufs_end;
            }
        }
        if lat.count() > 0 {
            match &mut latency {
                Some(l) => l.merge(&lat),
                None => latency = Some(lat),
            }
        }
    }
    let window = plan.window.map(|_| {
        let mean = if open_for.is_empty() {
            Duration::ZERO
        } else {
            open_for.iter().sum::<Duration>() / open_for.len() as u32
        };
        (windowed, mean)
    });
    Ok(Report {
        flows,
        tcp,
        bufs_end,
        latency,
        window,
        rx,
        ecn,
    })
}

/// Run `items` on `threads` threads (at least one, at most one an item),
/// item `i` on thread `i % threads`, the threads pinned to `cpus` in turn;
/// `f` runs a thread's share (each item with its index). Every thread's
/// result, or the first error.
pub(crate) fn spread<C: Send, R: Send>(
    items: Vec<C>,
    threads: usize,
    cpus: &[u32],
    f: impl Fn(Vec<(usize, C)>) -> Result<R, EngineError> + Sync,
) -> Result<Vec<R>, EngineError> {
    let threads = threads.clamp(1, items.len().max(1));
    let mut shares: Vec<Vec<(usize, C)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, c) in items.into_iter().enumerate() {
        if let Some(s) = shares.get_mut(i % threads) {
            s.push((i, c));
        }
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(t, share)| {
                let cpu = (!cpus.is_empty())
                    .then(|| cpus.get(t % cpus.len()).copied())
                    .flatten();
                let f = &f;
                // (its CPU time counts toward its starter's test)
                crate::cpu::spawn_scoped(s, move || {
                    if let Some(c) = cpu {
                        crate::sockopt::pin_current_thread(c)?;
                    }
                    f(share)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(EngineError::Invalid("a flow thread panicked".into())))
            })
            .collect()
    })
}

/// Wait at most `timeout` for events (a signal's interruption is a
/// wake-up like any other).
pub(crate) fn wait(
    poll: &mut Poll,
    events: &mut Events,
    timeout: Duration,
    what: &str,
) -> Result<(), EngineError> {
    match poll.poll(events, Some(timeout)) {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => {
            Err(EngineError::io(format!("waiting for {what}"), e))
        }
        _ => Ok(()),
    }
}

/// A flow at its end.
struct Done {
    index: usize,
    ended: Ended,
    /// Its counts within the window, if there was one.
    window: Option<proto::FlowCounters>,
    tcp: Option<proto::TcpStats>,
    ecn: Option<Result<proto::ecn::TcpEcn, String>>,
    bufs_end: (u32, u32),
    /// Bytes a receiving flow took as mapped pages.
    mapped: u64,
}

fn machine(plan: &Plan, sock: &mio::net::TcpStream) -> Result<Machine, EngineError> {
    Ok(match plan.role {
        Role::Send { size, total } => Machine::Send(
            StreamSend::new(size, total).with_block(plan.end.block()),
            plan.zerocopy.then(|| ZcSender::new(sock)).transpose()?,
        ),
        Role::Recv { .. } => {
            let reader = Reader::new(plan.rx, sock)?;
            let reader = if plan.batch_wakes {
                reader.batching()
            } else {
                reader
            };
            Machine::Recv(StreamRecv::default(), reader)
        }
        Role::Request {
            req,
            resp,
            burst,
            limit,
            ..
        } => Machine::Req(
            RrRequest::new(req.max(1), resp.max(1), burst, limit),
            Window::new(burst as usize + 1),
        ),
        Role::Respond { req, resp, .. } => Machine::Resp(RrRespond::new(req.max(1), resp.max(1))),
    })
}

impl Buffers {
    /// The receive buffer, whole.
    fn rx(&mut self) -> &mut [u8] {
        self.inb.as_mut_slice()
    }

    /// `range` of the receive buffer (empty where it does not fit).
    fn inb_at(&mut self, range: std::ops::Range<usize>) -> &mut [u8] {
        self.inb.as_mut_slice().get_mut(range).unwrap_or_default()
    }

    /// `range` of the message to send (empty where it does not fit).
    fn out_at(&self, range: std::ops::Range<usize>) -> &[u8] {
        self.out.as_slice().get(range).unwrap_or_default()
    }
}

fn buffers(role: Role) -> Buffers {
    let (out, inb) = match role {
        Role::Send { size, .. } => (size.max(1), 512),
        Role::Recv { size } => (1, size.max(1)),
        Role::Request { req, resp, .. } => (req.max(1), resp.max(1)),
        Role::Respond { req, resp, .. } => (resp.max(1), req.max(1)),
    };
    // a stream sender's buffer starts a page, so that its pages go whole
    // (a zero-copy send's, and so a mapping receiver's); so does a stream
    // receiver's: the kernel copies into a page-aligned buffer for about
    // 30% less CPU a megabyte than into a malloc'd one (eight iperf3 3.21
    // streams: 96 against 137 us/MB, doc/performance.md)
    let page = Placement::new(proto::test::PAGE_ALIGN, 0);
    let (at_out, at_in) = match role {
        Role::Send { .. } => (page, Placement::default()),
        Role::Recv { .. } => (Placement::default(), page),
        _ => (Placement::default(), Placement::default()),
    };
    Buffers {
        out: Buffer::new(out, at_out),
        inb: Buffer::new(inb.max(512), at_in),
    }
}

fn run_share(
    share: Vec<(usize, TcpStream)>,
    plan: &Plan,
    stop: &StopFlag,
    live: &Live,
    start: Instant,
) -> Result<(Vec<Done>, Latency, Option<Duration>), EngineError> {
    let mut window = Edges::new(plan.window, start);
    let mut poll = Poll::new().map_err(|e| EngineError::io("creating an event loop", e))?;
    // A thread with one flow blocks in its system calls, as a single-flow
    // test does: an event loop would only add a wait per message.
    let alone = share.len() == 1;
    let mut slots = register(share, plan, &poll, alone, start)?;
    let mut bufs = buffers(plan.role);
    let timing = matches!(plan.role, Role::Request { timing: true, .. });
    // One transaction in flight: after a flow sends a whole message, the
    // peer's answer cannot have arrived yet, so trying to read it would
    // only fail (EAGAIN); its arrival wakes the loop instead. With more in
    // flight, data may already wait behind what was read, and no new event
    // would announce it: there the loop reads until it would block.
    let lockstep = matches!(
        plan.role,
        Role::Request { burst: 0, .. } | Role::Respond { burst: 0, .. }
    );
    // how the event loop drives a ready flow: until its socket would block
    let on_events = Mode {
        timing,
        lockstep,
        max_steps: usize::MAX,
        return_at: None,
        blocking: false,
    };
    let mut lat = Latency::new();
    let mut events = Events::with_capacity(1024);
    let mut open = slots.len();
    let mut stopping_since: Option<Instant> = None;
    let mut now_ns = clock::now_ns();
    if alone && let Some(s) = slots.first_mut() {
        // lockstep waits would only skip reads that block anyway
        while s.phase != Phase::Done {
            let stopping = stop.is_set();
            drive(
                s,
                &mut bufs,
                stopping,
                Mode {
                    timing,
                    lockstep: false,
                    max_steps: BLOCKING_STEPS,
                    return_at: Some(Instant::now() + BLOCKING_TICK),
                    blocking: true,
                },
                &mut lat,
                &mut now_ns,
            )?;
            publish(s, live);
            let now = Instant::now();
            window.tick(std::slice::from_mut(s), now);
            if stopping {
                stopping_since.get_or_insert(now);
            }
            overdue(std::slice::from_ref(s), 1, now, stopping_since, plan)?;
        }
        // (done: the loop below has nothing left to wait for)
    }
    // every flow once, before waiting for events
    for s in slots.iter_mut() {
        drive(s, &mut bufs, false, on_events, &mut lat, &mut now_ns)?;
        publish(s, live);
    }
    open -= slots.iter().filter(|s| s.phase == Phase::Done).count();
    while open > 0 {
        wait(
            &mut poll,
            &mut events,
            Duration::from_millis(20),
            "data connections",
        )?;
        let stopping = stop.is_set();
        let now = Instant::now();
        window.tick(&mut slots, now);
        if stopping && stopping_since.is_none() {
            stopping_since = Some(now);
            // every sender and requester learns it at once
            for s in slots.iter_mut().filter(|s| s.phase != Phase::Done) {
                drive(s, &mut bufs, true, on_events, &mut lat, &mut now_ns)?;
                publish(s, live);
                if s.phase == Phase::Done {
                    open -= 1;
                }
            }
        }
        for ev in events.iter() {
            let Some(s) = slots.get_mut(ev.token().0) else {
                continue;
            };
            if s.phase == Phase::Done {
                continue;
            }
            drive(s, &mut bufs, stopping, on_events, &mut lat, &mut now_ns)?;
            publish(s, live);
            if s.phase == Phase::Done {
                open -= 1;
            }
        }
        overdue(&slots, open, now, stopping_since, plan)?;
    }
    let open_for = window.open_for();
    let ended = slots
        .into_iter()
        .map(|s| done_of(s, start, open_for))
        .collect();
    Ok((ended, lat, open_for))
}

/// The share's connections set up for its driver (blocking with a tick for
/// a lone flow, else non-blocking and registered with `poll`), each with
/// its flow machine.
fn register(
    share: Vec<(usize, TcpStream)>,
    plan: &Plan,
    poll: &Poll,
    alone: bool,
    start: Instant,
) -> Result<Vec<Slot>, EngineError> {
    let mut slots = Vec::with_capacity(share.len());
    for (k, (index, c)) in share.into_iter().enumerate() {
        if alone {
            // (the timeouts let the thread look at the clock and the stop
            // flag while the peer is quiet)
            c.set_read_timeout(Some(BLOCKING_TICK))
                .and_then(|()| c.set_write_timeout(Some(BLOCKING_TICK)))
                .map_err(|e| EngineError::io("setting a data connection's timeouts", e))?;
        } else {
            c.set_nonblocking(true)
                .map_err(|e| EngineError::io("making a data connection non-blocking", e))?;
        }
        let mut sock = mio::net::TcpStream::from_std(c);
        if !alone {
            poll.registry()
                .register(&mut sock, Token(k), Interest::READABLE | Interest::WRITABLE)
                .map_err(|e| EngineError::io("registering a data connection", e))?;
        }
        slots.push(Slot {
            index,
            machine: machine(plan, &sock)?,
            sock,
            phase: Phase::Running,
            ended: None,
            at_open: None,
            at_close: None,
            tcp: None,
            ecn: plan.ecn.then(|| Err("it did not end".to_string())),
            bufs_end: (0, 0),
            last_progress: start,
            published: (0, 0),
            end: plan.end,
        });
    }
    Ok(slots)
}

/// What a flow ended with; with a window, what it moved inside it (a flow
/// that ended inside the window counts to its end; one that ended before
/// it opened, nothing).
fn done_of(s: Slot, start: Instant, open_for: Option<Duration>) -> Done {
    let counters = counters_of(&s);
    let elapsed = s.ended.unwrap_or(start).duration_since(start);
    let in_window = open_for.map(|_| {
        let close = s.at_close.unwrap_or(counters);
        close.since(s.at_open.unwrap_or(close))
    });
    let mapped = match &s.machine {
        Machine::Recv(_, r) => r.mapped,
        _ => 0,
    };
    Done {
        index: s.index,
        ended: Ended { counters, elapsed },
        window: in_window,
        tcp: s.tcp,
        ecn: s.ecn,
        bufs_end: s.bufs_end,
        mapped,
    }
}

/// The ends' deadlines: the flows still `open` must close within the
/// linger after the end of the test, and none may go silent.
fn overdue(
    slots: &[Slot],
    open: usize,
    now: Instant,
    stopping_since: Option<Instant>,
    plan: &Plan,
) -> Result<(), EngineError> {
    let not_done = slots
        .iter()
        .filter(|s| s.phase != Phase::Done)
        .map(|s| (s.index, s.last_progress));
    deadlines(not_done, open, now, stopping_since, plan)
}

/// The deadlines of any driver: the flows still `open` (each flow not done
/// with when it last moved) must close within the linger after the end of
/// the test, and none may go silent.
pub(crate) fn deadlines(
    mut not_done: impl Iterator<Item = (usize, Instant)>,
    open: usize,
    now: Instant,
    stopping_since: Option<Instant>,
    plan: &Plan,
) -> Result<(), EngineError> {
    if let Some(since) = stopping_since
        && now.duration_since(since) > plan.linger
    {
        return Err(EngineError::Timeout(format!(
            "{open} of the data connections did not close within {} s of the end of the test",
            plan.linger.as_secs()
        )));
    }
    if let Some((index, _)) = not_done.find(|(_, last)| now.duration_since(*last) > plan.silence) {
        return Err(EngineError::Timeout(format!(
            "data connection {index} went silent (no data, no end of test)"
        )));
    }
    Ok(())
}

fn counters_of(s: &Slot) -> proto::FlowCounters {
    match &s.machine {
        Machine::Send(f, _) => f.counters,
        Machine::Recv(f, _) => f.counters,
        Machine::Req(f, _) => f.counters,
        Machine::Resp(f) => f.counters,
    }
}

/// A thread's view of the window: when its clock passed each edge, and
/// every flow's counters then.
struct Edges {
    bounds: Option<(Instant, Instant)>,
    opened: Option<Instant>,
    closed: Option<Instant>,
}

impl Edges {
    fn new(window: Option<(Duration, Duration)>, start: Instant) -> Edges {
        Edges {
            bounds: window.map(|(o, c)| (start + o, start + c)),
            opened: None,
            closed: None,
        }
    }

    fn tick(&mut self, slots: &mut [Slot], now: Instant) {
        let Some((open, close)) = self.bounds else {
            return;
        };
        if self.opened.is_none() && now >= open {
            self.opened = Some(now);
            for s in slots.iter_mut().filter(|s| s.phase != Phase::Done) {
                s.at_open = Some(counters_of(s));
            }
        }
        if self.closed.is_none() && now >= close {
            self.closed = Some(now);
            for s in slots.iter_mut().filter(|s| s.phase != Phase::Done) {
                s.at_close = Some(counters_of(s));
            }
        }
    }

    /// How long the window was open on this thread (to its close, or to
    /// the end of the traffic if that came first).
    fn open_for(&self) -> Option<Duration> {
        self.bounds?;
        let opened = self.opened?;
        Some(
            self.closed
                .unwrap_or_else(Instant::now)
                .duration_since(opened),
        )
    }
}

/// Add what a flow did since it last added to the run's live counters.
fn publish(s: &mut Slot, live: &Live) {
    let (bytes, tx) = match &s.machine {
        Machine::Send(f, _) => (f.counters.bytes_sent, 0),
        Machine::Recv(f, _) => (f.counters.bytes_received, 0),
        Machine::Req(f, _) => (f.counters.bytes_received, f.counters.transactions),
        Machine::Resp(f) => (f.counters.bytes_received, f.counters.transactions),
    };
    publish_flow(live, s.index, &mut s.published, bytes, tx);
}

/// Flow `index` has counted `bytes` and `tx` transactions so far: into its
/// own live counters where the run keeps them per flow, else what is new
/// since `published` into the run's.
pub(crate) fn publish_flow(
    live: &Live,
    index: usize,
    published: &mut (u64, u64),
    bytes: u64,
    tx: u64,
) {
    if let Some(l) = live.flow(index) {
        l.publish(bytes, 0);
        l.publish_transactions(tx);
        return;
    }
    let (b0, t0) = *published;
    if bytes != b0 || tx != t0 {
        live.add(bytes - b0, 0, tx - t0);
        *published = (bytes, tx);
    }
}

/// The threads' shares of `n` flows' ends, each with its flow's index, put
/// back in the flows' order.
pub(crate) fn in_order<T>(
    n: usize,
    shares: Vec<Vec<(usize, T)>>,
    what: &str,
) -> Result<Vec<T>, EngineError> {
    let mut ends: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for (i, end) in shares.into_iter().flatten() {
        if let Some(slot) = ends.get_mut(i) {
            *slot = Some(end);
        }
    }
    ends.into_iter()
        .map(|e| e.ok_or_else(|| EngineError::Invalid(format!("{what} did not end"))))
        .collect()
}

/// A lone flow's blocking calls wake this often to look at the clock.
const BLOCKING_TICK: Duration = Duration::from_millis(50);
/// ... and return to the loop after this many calls, to publish counts.
const BLOCKING_STEPS: usize = 256;

/// What a call on a non-blocking socket says.
#[derive(Clone, Copy)]
enum Step {
    Did(usize),
    Wait,
}

impl Step {
    /// The bytes a call moved (none where it would block or a signal
    /// interrupted it).
    #[inline]
    fn moved(self) -> Option<usize> {
        match self {
            Step::Did(n) if n != usize::MAX => Some(n),
            _ => None,
        }
    }
}

fn step(r: io::Result<usize>, what: &str) -> Result<Step, EngineError> {
    match r {
        Ok(n) => Ok(Step::Did(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Step::Wait),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Step::Did(usize::MAX)),
        Err(e) => Err(EngineError::io(format!("{what} on a data connection"), e)),
    }
}

/// How [`drive`] drives a flow.
#[derive(Clone, Copy)]
struct Mode {
    /// Record each transaction's latency.
    timing: bool,
    /// One transaction in flight: wait for the answer's event after a
    /// whole message is sent.
    lockstep: bool,
    /// Return after this many calls even if none would block, or once
    /// this instant has passed (a blocking flow, so that its thread looks
    /// at the clock and the window's edges).
    max_steps: usize,
    return_at: Option<Instant>,
    /// The socket blocks (a lone flow's, with a receive timeout).
    blocking: bool,
}

/// Drive one flow until its socket would block, or it is done.
fn drive(
    s: &mut Slot,
    bufs: &mut Buffers,
    stopping: bool,
    mode: Mode,
    lat: &mut Latency,
    now_ns: &mut u64,
) -> Result<(), EngineError> {
    for call in 0..mode.max_steps {
        // (the clock once every few calls, not on every one)
        if call % 16 == 15 && mode.return_at.is_some_and(|t| Instant::now() >= t) {
            return Ok(());
        }
        let next = match s.phase {
            Phase::Done => Next::Yield,
            Phase::Closing => closing_step(s, bufs)?,
            _ => match s.machine {
                Machine::Send(..) => send_step(s, bufs, stopping, mode.blocking)?,
                Machine::Recv(..) => recv_step(s, bufs, mode.blocking)?,
                Machine::Req(..) => req_step(s, bufs, stopping, mode, (lat, now_ns))?,
                Machine::Resp(_) => resp_step(s, bufs, mode.lockstep)?,
            },
        };
        if next == Next::Yield {
            return Ok(());
        }
    }
    Ok(())
}

/// What a flow's step leaves its driver to do: go on calling, or return
/// (its socket would block, its message is out in lockstep, it is done).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    Go,
    Yield,
}

impl From<Step> for Next {
    fn from(s: Step) -> Next {
        match s {
            Step::Did(_) => Next::Go,
            Step::Wait => Next::Yield,
        }
    }
}

/// Our side is shut: read to the peer's end.
#[inline]
fn closing_step(s: &mut Slot, bufs: &mut Buffers) -> Result<Next, EngineError> {
    let st = step((&s.sock).read(bufs.rx()), "receive")?;
    if let Step::Did(0) = st {
        finish(s);
    }
    Ok(st.into())
}

/// A sender's next write (through zero copy where asked), or its end.
#[inline]
fn send_step(
    s: &mut Slot,
    bufs: &mut Buffers,
    stopping: bool,
    blocking: bool,
) -> Result<Next, EngineError> {
    let Machine::Send(f, zc) = &mut s.machine else {
        return Ok(Next::Go);
    };
    if stopping {
        f.stop();
    }
    let Some(want) = f.next_len() else {
        if let Some(z) = zc {
            z.finish(&s.sock);
        }
        half_close(s)?;
        return Ok(Next::Go);
    };
    let out = bufs.out.as_slice();
    let buf = out.get(..want).unwrap_or(out);
    let sent = match zc {
        // (a blocking flow waits a moment for the kernel's room, then
        // looks at the clock)
        Some(z) => z.send(&s.sock, buf, blocking.then_some(ZcSender::WAIT_MS)),
        None => (&s.sock).write(buf),
    };
    let st = step(sent, "send")?;
    if let Some(n) = st.moved() {
        f.sent(n);
    }
    Ok(st.into())
}

/// A receiver's next read.
#[inline]
fn recv_step(s: &mut Slot, bufs: &mut Buffers, blocking: bool) -> Result<Next, EngineError> {
    let Machine::Recv(f, r) = &mut s.machine else {
        return Ok(Next::Go);
    };
    let st = step(r.read(&s.sock, bufs.rx(), !blocking), "receive")?;
    if let Some(n) = st.moved() {
        s.last_progress = Instant::now();
        if f.received(n) {
            let _ = s.sock.shutdown(Shutdown::Write);
            finish(s);
        }
    }
    Ok(st.into())
}

/// A requester's next write or read, its latency timed where asked.
#[inline]
fn req_step(
    s: &mut Slot,
    bufs: &mut Buffers,
    stopping: bool,
    mode: Mode,
    (lat, now_ns): (&mut Latency, &mut u64),
) -> Result<Next, EngineError> {
    let Machine::Req(f, sent_at) = &mut s.machine else {
        return Ok(Next::Go);
    };
    if stopping {
        f.stop();
    }
    match f.next() {
        Io::Send { offset, len } => {
            let st = step((&s.sock).write(bufs.out_at(offset..offset + len)), "send")?;
            if let Some(n) = st.moved() {
                if offset == 0 && mode.timing {
                    sent_at.push(0, *now_ns);
                }
                f.sent(n);
                if mode.lockstep && n >= len {
                    return Ok(Next::Yield);
                }
            }
            Ok(st.into())
        }
        Io::Recv { offset, len } => {
            let buf = bufs.inb_at(offset..offset + len);
            let st = step((&s.sock).read(buf), "receive")?;
            match st.moved() {
                Some(0) => Err(EngineError::Invalid(format!(
                    "data connection {}: the peer closed it during the test",
                    s.index
                ))),
                Some(n) => {
                    s.last_progress = Instant::now();
                    if f.received(n) && mode.timing {
                        *now_ns = clock::now_ns();
                        let t0 = sent_at.pop_oldest().unwrap_or(*now_ns);
                        lat.record(now_ns.wrapping_sub(t0));
                    }
                    Ok(Next::Go)
                }
                None => Ok(st.into()),
            }
        }
        Io::Done | Io::Connect | Io::Close => {
            half_close(s)?;
            Ok(Next::Go)
        }
    }
}

/// A responder's next read or write, or its end.
#[inline]
fn resp_step(s: &mut Slot, bufs: &mut Buffers, lockstep: bool) -> Result<Next, EngineError> {
    let Machine::Resp(f) = &mut s.machine else {
        return Ok(Next::Go);
    };
    match f.next() {
        Io::Recv { offset, len } => {
            let buf = bufs.inb_at(offset..offset + len);
            let st = step((&s.sock).read(buf), "receive")?;
            if let Some(n) = st.moved() {
                s.last_progress = Instant::now();
                f.received(n).map_err(|_| {
                    EngineError::Invalid(format!(
                        "data connection {}: the peer closed it in the middle of a request",
                        s.index
                    ))
                })?;
            }
            Ok(st.into())
        }
        Io::Send { offset, len } => {
            let st = step((&s.sock).write(bufs.out_at(offset..offset + len)), "send")?;
            if let Some(n) = st.moved() {
                f.sent(n);
                if lockstep && n >= len {
                    return Ok(Next::Yield);
                }
            }
            Ok(st.into())
        }
        Io::Done | Io::Connect | Io::Close => {
            let _ = s.sock.shutdown(Shutdown::Write);
            finish(s);
            Ok(Next::Go)
        }
    }
}

/// Our side is done sending: shut it, and wait for the peer's end (where
/// the plan says so).
fn half_close(s: &mut Slot) -> Result<(), EngineError> {
    if matches!(s.end, SenderEnd::Open { .. }) {
        finish(s);
        return Ok(());
    }
    s.sock
        .shutdown(Shutdown::Write)
        .or_else(|e| {
            if e.kind() == io::ErrorKind::NotConnected {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| EngineError::io("shutting down a data connection", e))?;
    if s.end == SenderEnd::HalfClose {
        finish(s);
        return Ok(());
    }
    s.phase = Phase::Closing;
    s.last_progress = Instant::now();
    Ok(())
}

fn finish(s: &mut Slot) {
    s.phase = Phase::Done;
    s.ended = Some(Instant::now());
    s.tcp = crate::sockopt::tcp_stats(&s.sock);
    if s.ecn.is_some() {
        s.ecn = Some(crate::ecn::tcp_report([&s.sock]).map_err(|e| e.to_string()));
    }
    s.bufs_end = crate::sockopt::buffer_sizes(socket2::SockRef::from(&s.sock));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tcp_pair;

    fn pairs(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
        (0..n).map(|_| tcp_pair()).unzip()
    }

    fn plan(role: Role, threads: usize) -> Plan {
        Plan {
            role,
            threads,
            cpus: Vec::new(),
            linger: Duration::from_secs(10),
            silence: Duration::from_secs(10),
            window: None,
            rx: RxPath::Copy,
            batch_wakes: false,
            zerocopy: false,
            end: SenderEnd::WaitEof,
            ecn: false,
        }
    }

    /// The window counts what arrived while it was open and nothing
    /// before or after; the whole run is still counted to the byte.
    #[test]
    fn a_window_counts_only_its_interval() {
        // Bytes sent well before the window opens (500 ms in), well inside
        // it, and well after it closes (at 1000 ms): the window counts the
        // middle ones exactly, however late a starved loop opens or closes
        // it by (up to 200 ms; a test may not depend on the CPU the host
        // gives it).
        for flows in [1, 3] {
            let (c, s) = pairs(flows);
            let t0 = std::time::Instant::now();
            let senders: Vec<_> = c
                .into_iter()
                .map(|mut c| {
                    std::thread::spawn(move || {
                        for (at, bytes) in [(0, 10_000), (700, 20_000), (1300, 30_000)] {
                            let when = t0 + Duration::from_millis(at);
                            std::thread::sleep(
                                when.saturating_duration_since(std::time::Instant::now()),
                            );
                            c.write_all(&vec![7u8; bytes]).unwrap();
                        }
                    })
                })
                .collect();
            let mut p = plan(Role::Recv { size: 8192 }, 2);
            p.window = Some((Duration::from_millis(500), Duration::from_millis(1000)));
            let r = run(s, &p, &StopFlag::new(), &Live::new()).unwrap();
            for t in senders {
                t.join().unwrap();
            }
            let (counted, open) = r.window.unwrap();
            assert!(
                open > Duration::ZERO && open <= Duration::from_millis(1300),
                "{open:?}"
            );
            for (w, f) in counted.iter().zip(&r.flows) {
                assert_eq!(f.counters.bytes_received, 60_000);
                assert_eq!(w.bytes_received, 20_000, "the window's bytes");
            }
        }
    }

    /// `n` flows of `total` bytes each, sent by `tx_threads` threads and
    /// received by two: both ends count every byte of every flow.
    fn streams(n: usize, tx_threads: usize, total: u64) {
        streams_by(n, tx_threads, total, RxPath::Copy, false);
    }

    fn streams_by(n: usize, tx_threads: usize, total: u64, rx: RxPath, zerocopy: bool) {
        let (c, s) = pairs(n);
        let rx = std::thread::spawn(move || {
            let p = Plan {
                rx,
                ..plan(Role::Recv { size: 8192 }, 2)
            };
            run(s, &p, &StopFlag::new(), &Live::new()).unwrap()
        });
        let live = Live::new();
        let send = Role::Send {
            size: 3000,
            total: Some(total),
        };
        let p = Plan {
            zerocopy,
            ..plan(send, tx_threads)
        };
        let tx = run(c, &p, &StopFlag::new(), &live).unwrap();
        let rx = rx.join().unwrap();
        for (a, b) in tx.flows.iter().zip(&rx.flows) {
            assert_eq!(a.counters.bytes_sent, total);
            assert_eq!(b.counters.bytes_received, total);
            assert_eq!(a.counters.send_calls, total.div_ceil(3000));
        }
        assert_eq!(live.snapshot().bytes, n as u64 * total);
    }

    #[test]
    fn streams_count_to_the_byte_at_both_ends() {
        streams(16, 3, 100_001);
    }

    /// A flow alone on its thread blocks in its calls.
    #[test]
    fn a_flow_per_thread_counts_to_the_byte() {
        streams(2, 2, 10_000_001);
    }

    /// The receive paths (a discarding receiver; a mapping one, which on
    /// plain loopback maps nothing and copies) and zero-copy senders count
    /// to the byte, on event loops and a flow a thread alike.
    #[test]
    fn every_path_counts_to_the_byte() {
        for (n, threads) in [(6, 2), (2, 2)] {
            streams_by(n, threads, 1_000_001, RxPath::Discard, false);
            streams_by(n, threads, 1_000_001, RxPath::ZeroCopy, true);
        }
    }

    #[test]
    fn many_rr_flows_with_a_stop_flag() {
        // one in flight (the loop waits for the answer's event after each
        // message), and two in flight (it reads until it would block)
        for burst in [0, 1] {
            rr_flows(burst, 200);
        }
        // a flow per thread: its thread blocks in the system calls
        rr_flows(0, 2);
        rr_flows(3, 2);
    }

    fn rr_flows(burst: u32, n: usize) {
        let (c, s) = pairs(n);
        let srv = std::thread::spawn(move || {
            run(
                s,
                &plan(
                    Role::Respond {
                        req: 8,
                        resp: 64,
                        burst,
                    },
                    2,
                ),
                &StopFlag::new(),
                &Live::new(),
            )
            .unwrap()
        });
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            s2.set();
        });
        let req = Role::Request {
            req: 8,
            resp: 64,
            burst,
            limit: None,
            timing: true,
        };
        let ours = run(c, &plan(req, 2), &stop, &Live::new()).unwrap();
        t.join().unwrap();
        let theirs = srv.join().unwrap();
        let mut total = 0;
        for (a, b) in ours.flows.iter().zip(&theirs.flows) {
            assert!(a.counters.transactions > 0, "every flow made progress");
            assert_eq!(a.counters.transactions, b.counters.transactions);
            assert_eq!(a.counters.bytes_sent, b.counters.bytes_received);
            total += a.counters.transactions;
        }
        assert_eq!(ours.latency.unwrap().count(), total);
    }
}
