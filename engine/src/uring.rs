//! The stream tests through io_uring (`--io-uring`): a third driver beside
//! the blocking loop and the event loops, for TCP_STREAM and TCP_MAERTS
//! flows (a ring a thread, its share of the flows on it) and for a
//! UDP_STREAM flow ([`UdpRecv`], [`udp_send`]).
//!
//! A TCP sender keeps [`DEPTH`] sends in flight a flow, from one page-aligned
//! buffer (the bytes carry nothing), a short one counted as what it sent;
//! all the thread's submissions and completions cross in one system call.
//! A receiver arms one multishot receive a flow into a group of provided
//! buffers, each completion a buffer counted and handed straight back.
//! Every flow is counted as the other drivers count it, and ends as they
//! end: the sender half-closes and waits for the receiver's end, the
//! receiver reads to end-of-file and half-closes.

use std::{
    io,
    net::{Shutdown, TcpStream},
    time::{Duration, Instant},
};

use crate::{
    EngineError,
    evloop::{Plan, Report, Role},
    flow::{Ended, StreamRecv, StreamSend},
    live::Live,
    sys::uring::{Done, Io},
    timer::StopFlag,
};

/// Sends in flight a TCP flow.
pub const DEPTH: u32 = 4;
/// How long a wait for completions lasts before the loop looks at the stop
/// flag and the deadlines.
const TICK: Duration = Duration::from_millis(20);

/// What a completion was for: the flow's place in the thread's share and
/// the operation, and a send's length.
fn tag(flow: usize, op: Op, len: u32) -> u64 {
    ((flow as u64) << 40) | ((op as u64) << 32) | u64::from(len)
}

fn untag(t: u64) -> (usize, u64, u32) {
    ((t >> 40) as usize, (t >> 32) & 0xff, t as u32)
}

#[derive(Clone, Copy)]
enum Op {
    Send = 1,
    Recv = 2,
    /// A sender's read for the receiver's end-of-file.
    Eof = 3,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Our write side is shut; reading to the peer's end.
    Closing,
    Done,
}

struct Flow {
    index: usize,
    sock: TcpStream,
    fd: crate::sys::RawSock,
    send: StreamSend,
    recv: StreamRecv,
    /// Sends in flight, and the bytes they asked for.
    in_flight: u32,
    asked: u64,
    phase: Phase,
    ended: Option<Instant>,
    last_progress: Instant,
    published: (u64, u64),
    tcp: Option<proto::TcpStats>,
    bufs_end: (u32, u32),
}

/// Run TCP stream `conns` by `plan` (its role a sender's or a receiver's)
/// through io_uring until they are all done.
pub fn run(
    conns: Vec<TcpStream>,
    plan: &Plan,
    stop: &StopFlag,
    live: &Live,
) -> Result<Report, EngineError> {
    if !matches!(plan.role, Role::Send { .. } | Role::Recv { .. }) {
        return Err(EngineError::Invalid(
            "--io-uring: the stream tests have it".into(),
        ));
    }
    let n = conns.len();
    let start = Instant::now();
    let shares = crate::evloop::spread(conns, plan.threads, &plan.cpus, |share| {
        run_share(share, plan, stop, live, start)
    })?;
    let mut report = Report {
        flows: vec![Ended::default(); n],
        tcp: vec![None; n],
        ..Report::default()
    };
    for f in shares.into_iter().flatten() {
        let counters = if matches!(plan.role, Role::Send { .. }) {
            f.send.counters
        } else {
            f.recv.counters
        };
        let elapsed = f.ended.unwrap_or(start).duration_since(start);
        if let Some(slot) = report.flows.get_mut(f.index) {
            *slot = Ended { counters, elapsed };
        }
        if let Some(slot) = report.tcp.get_mut(f.index) {
            *slot = f.tcp;
        }
        if f.index == 0 {
            report.bufs_end = f.bufs_end;
        }
    }
    Ok(report)
}

fn uring_err(what: &str, e: io::Error) -> EngineError {
    let why = match e.raw_os_error() {
        Some(libc::ENOMEM) => {
            " (the kernel charges io_uring's rings and buffers to the locked-memory limit before Linux 5.12, to the memory cgroup since: raise `ulimit -l` or systemd's LimitMEMLOCK=, or the container's memory limit)"
        }
        Some(libc::EPERM) => {
            " (io_uring is disabled for this process: kernel.io_uring_disabled, or the container's seccomp profile)"
        }
        _ => "",
    };
    EngineError::io(format!("--io-uring: {what}{why}"), e)
}

/// The ring a thread of `flows` flows runs on: its submissions, its group
/// of provided buffers (a receiver's), the sender's one buffer and a
/// scratch slot a flow for the reads of the receiver's end.
fn ring_for(flows: usize, sending: bool, size: usize) -> Result<Io, EngineError> {
    let count = if sending {
        0
    } else {
        let flows = u32::try_from(flows).unwrap_or(u32::MAX);
        u16::try_from(proto::uring_buffers(flows)).unwrap_or(1024)
    };
    let bufsize = proto::uring_buffer_size(u32::try_from(size).unwrap_or(u32::MAX), false) as usize;
    let entries = (flows as u32 * (DEPTH + 2)).max(8);
    let (send, slots) = if sending { (size, flows) } else { (1, 0) };
    Io::new(entries, count, bufsize, send, slots).map_err(|e| uring_err("setting up a ring", e))
}

/// Whether a thread's ring for `flows` stream flows of `size`-byte
/// messages can be set up here now (what the kernel allows this process
/// of io_uring), so that an end refuses the test before it starts rather
/// than failing in its middle.
pub fn probe(flows: usize, sending: bool, size: usize) -> Result<(), EngineError> {
    ring_for(flows.max(1), sending, size.max(1)).map(drop)
}

fn run_share(
    share: Vec<(usize, TcpStream)>,
    plan: &Plan,
    stop: &StopFlag,
    live: &Live,
    start: Instant,
) -> Result<Vec<Flow>, EngineError> {
    let sending = matches!(plan.role, Role::Send { .. });
    let (size, total) = match plan.role {
        Role::Send { size, total } => (size.max(1), total),
        Role::Recv { size } => (size.max(1), None),
        _ => (1, None),
    };
    let mut io = ring_for(share.len(), sending, size)?;
    let mut flows: Vec<Flow> = share
        .into_iter()
        .map(|(index, sock)| Flow {
            index,
            fd: crate::sys::uring::fd_of(&sock),
            sock,
            send: StreamSend::new(size, total),
            recv: StreamRecv::default(),
            in_flight: 0,
            asked: 0,
            phase: Phase::Running,
            ended: None,
            last_progress: start,
            published: (0, 0),
            tcp: None,
            bufs_end: (0, 0),
        })
        .collect();
    if !sending {
        for (k, f) in flows.iter().enumerate() {
            io.recv_multi(f.fd, tag(k, Op::Recv, 0))
                .map_err(|e| uring_err("arming a receive", e))?;
        }
    }
    let mut done: Vec<Done> = Vec::with_capacity(256);
    let mut open = flows.len();
    let mut stopping_since: Option<Instant> = None;
    while open > 0 {
        let stopping = stop.is_set();
        if stopping {
            stopping_since.get_or_insert_with(Instant::now);
        }
        if sending {
            for (k, f) in flows.iter_mut().enumerate() {
                fill_sends(&mut io, k, f, stopping)?;
            }
        }
        done.clear();
        io.wait(1, TICK, &mut done)
            .map_err(|e| uring_err("waiting for completions", e))?;
        let now = Instant::now();
        for d in &done {
            let (k, op, len) = untag(d.tag);
            let Some(f) = flows.get_mut(k) else { continue };
            complete(&mut io, k, f, op, len, d, now)?;
            if f.phase == Phase::Done && f.ended.is_none() {
                f.ended = Some(now);
                f.tcp = crate::sockopt::tcp_stats(&f.sock);
                f.bufs_end = crate::sockopt::buffer_sizes(socket2::SockRef::from(&f.sock));
                open -= 1;
            }
            publish(f, live, sending);
        }
        overdue(&flows, open, now, stopping_since, plan)?;
    }
    Ok(flows)
}

/// Keep a sender's sends in flight, or, once it has sent all it will,
/// half-close and wait for the receiver's end.
fn fill_sends(io: &mut Io, k: usize, f: &mut Flow, stopping: bool) -> Result<(), EngineError> {
    if f.phase != Phase::Running {
        return Ok(());
    }
    while f.in_flight < DEPTH && !stopping {
        let want = match f.send.next_len() {
            Some(w) => {
                // what is in flight counts against an exact total
                let left = match f.send_total_left() {
                    Some(l) => l.saturating_sub(f.asked),
                    None => w as u64,
                };
                (w as u64).min(left) as usize
            }
            None => 0,
        };
        if want == 0 {
            break;
        }
        let len = u32::try_from(want).unwrap_or(u32::MAX);
        io.send(f.fd, want, tag(k, Op::Send, len))
            .map_err(|e| uring_err("queueing a send", e))?;
        f.in_flight += 1;
        f.asked += u64::from(len);
    }
    let finished = stopping || f.send.next_len().is_none() || f.send_total_left() == Some(f.asked);
    if finished && f.in_flight == 0 {
        half_close(f)?;
        arm_eof(io, k, f)?;
    }
    Ok(())
}

impl Flow {
    /// With an exact total: what is left to send.
    fn send_total_left(&self) -> Option<u64> {
        self.send
            .total()
            .map(|t| t.saturating_sub(self.send.counters.bytes_sent))
    }
}

fn half_close(f: &mut Flow) -> Result<(), EngineError> {
    match f.sock.shutdown(Shutdown::Write) {
        Err(e) if e.kind() != io::ErrorKind::NotConnected => {
            return Err(EngineError::io("shutting down a data connection", e));
        }
        _ => {}
    }
    f.phase = Phase::Closing;
    f.last_progress = Instant::now();
    Ok(())
}

/// A one-shot read for the peer's end, into the flow's scratch slot (one
/// in flight a flow).
fn arm_eof(io: &mut Io, k: usize, f: &Flow) -> Result<(), EngineError> {
    io.read_scratch(f.fd, k, tag(k, Op::Eof, 0))
        .map_err(|e| uring_err("queueing a read for the end", e))
}

#[allow(clippy::too_many_arguments)]
fn complete(
    io: &mut Io,
    k: usize,
    f: &mut Flow,
    op: u64,
    len: u32,
    d: &Done,
    now: Instant,
) -> Result<(), EngineError> {
    let res = d.result;
    let failed = |what: &str| {
        EngineError::io(
            format!("{what} on data connection {}", f.index),
            io::Error::from_raw_os_error(-res),
        )
    };
    match op {
        o if o == Op::Send as u64 => {
            f.in_flight = f.in_flight.saturating_sub(1);
            f.asked = f.asked.saturating_sub(u64::from(len));
            if res < 0 {
                if res == -libc::EINTR || res == -libc::EAGAIN {
                    return Ok(());
                }
                return Err(failed("send"));
            }
            f.send.sent(res as usize);
            f.last_progress = now;
        }
        o if o == Op::Recv as u64 => {
            if let (Some(bid), Some(b)) = (d.buffer, io.buffers()) {
                b.give_back(bid);
            }
            if res == -libc::ENOBUFS || (res > 0 && !d.more) {
                // out of buffers for a moment, or the kernel ended the
                // multishot: arm it again
                io.recv_multi(f.fd, tag(k, Op::Recv, 0))
                    .map_err(|e| uring_err("arming a receive", e))?;
            }
            if res == -libc::ENOBUFS || res == -libc::EINTR {
                return Ok(());
            }
            if res < 0 {
                return Err(failed("receive"));
            }
            f.last_progress = now;
            if f.recv.received(res as usize) {
                let _ = f.sock.shutdown(Shutdown::Write);
                f.phase = Phase::Done;
            }
        }
        _ => {
            // a sender's read for the end: 0 is the receiver's end-of-file
            match res {
                0 => f.phase = Phase::Done,
                r if r == -libc::ECONNRESET => f.phase = Phase::Done,
                r if r > 0 || r == -libc::EINTR => arm_eof(io, k, f)?,
                _ => return Err(failed("waiting for the receiver to close")),
            }
        }
    }
    Ok(())
}

fn publish(f: &mut Flow, live: &Live, sending: bool) {
    let bytes = if sending {
        f.send.counters.bytes_sent
    } else {
        f.recv.counters.bytes_received
    };
    crate::evloop::publish_flow(live, f.index, &mut f.published, bytes, 0);
}

/// The ends' deadlines, as the event loops keep them.
fn overdue(
    flows: &[Flow],
    open: usize,
    now: Instant,
    stopping_since: Option<Instant>,
    plan: &Plan,
) -> Result<(), EngineError> {
    let not_done = flows
        .iter()
        .filter(|f| f.phase != Phase::Done)
        .map(|f| (f.index, f.last_progress));
    crate::evloop::deadlines(not_done, open, now, stopping_since, plan)
}

/// A UDP_STREAM receiver's io_uring: one multishot recvmsg into a group of
/// provided buffers, each completion one datagram and its sender, the
/// buffer handed back once the datagram is counted.
#[derive(Debug)]
pub struct UdpRecv {
    io: Io,
    fd: crate::sys::RawSock,
    armed: bool,
    done: Vec<Done>,
}

impl UdpRecv {
    /// For `sock`, datagrams of up to `size` bytes.
    pub fn new(sock: &impl crate::sys::Sock, size: usize) -> Result<UdpRecv, EngineError> {
        let count = u16::try_from(proto::uring_buffers(1)).unwrap_or(64);
        let room = proto::uring_buffer_size(u32::try_from(size).unwrap_or(u32::MAX), true) as usize;
        let io = Io::new(8, count, room, 1, 0).map_err(|e| uring_err("setting up a ring", e))?;
        Ok(UdpRecv {
            io,
            fd: crate::sys::uring::fd_of(sock),
            armed: false,
            done: Vec::with_capacity(usize::from(count) * 2),
        })
    }

    /// The datagrams that come within `timeout` (or are there already),
    /// each handed to `each` with its sender until it says the test is
    /// over (those after it are let go uncounted). How many came.
    pub fn take(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(&[u8], Option<std::net::SocketAddr>) -> Result<bool, EngineError>,
    ) -> Result<usize, EngineError> {
        if !self.armed {
            self.io
                .recvmsg_multi(self.fd, 0)
                .map_err(|e| uring_err("arming a receive", e))?;
            self.armed = true;
        }
        self.done.clear();
        self.io
            .wait(1, timeout, &mut self.done)
            .map_err(|e| uring_err("waiting for datagrams", e))?;
        let mut came = 0;
        let mut over = false;
        let mut failed = None;
        for d in &self.done {
            if !d.more {
                self.armed = false;
            }
            let Some(b) = self.io.buffers() else { break };
            if let Some(bid) = d.buffer {
                if d.result >= 0 && !over && failed.is_none() {
                    if let Some((payload, from)) = b.datagram(bid, d.result as usize) {
                        came += 1;
                        match each(payload, from) {
                            Ok(stop) => over = stop,
                            Err(e) => failed = Some(e),
                        }
                    }
                }
                b.give_back(bid);
            } else if d.result < 0
                && d.result != -libc::ENOBUFS
                && d.result != -libc::EINTR
                && failed.is_none()
            {
                failed = Some(EngineError::io(
                    "UDP receive (io_uring)",
                    io::Error::from_raw_os_error(-d.result),
                ));
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(came),
        }
    }
}

/// A UDP_STREAM sender's io_uring, for a [`crate::sys::MsgBatch`]'s
/// batched sends.
#[derive(Debug)]
pub struct UdpSend {
    io: Io,
}

impl UdpSend {
    pub fn new(batch: usize) -> Result<UdpSend, EngineError> {
        let io = Io::new(u32::try_from(batch).unwrap_or(64) * 2, 0, 1, 1, 0)
            .map_err(|e| uring_err("setting up a ring", e))?;
        Ok(UdpSend { io })
    }

    /// The first `lens.len()` messages of `batch` on `sock`, one submission:
    /// how many went (lengths in the batch), and the errors of any that
    /// failed.
    pub fn send(
        &mut self,
        batch: &mut crate::sys::MsgBatch,
        sock: &impl crate::sys::Sock,
        lens: &[usize],
    ) -> io::Result<(usize, Vec<io::Error>)> {
        batch.send_uring(self.io.ring(), sock, lens)
    }
}

/// Datagrams a UDP_STREAM sender's io_uring submission carries.
pub const UDP_BATCH: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tcp_pair;

    fn plan(role: Role, threads: usize) -> Plan {
        Plan {
            role,
            threads,
            cpus: Vec::new(),
            linger: Duration::from_secs(10),
            silence: Duration::from_secs(10),
            window: None,
            rx: proto::RxPath::Copy,
            batch_wakes: false,
            zerocopy: false,
            end: crate::stream::tcp::SenderEnd::WaitEof,
            ecn: false,
        }
    }

    /// Senders and receivers through io_uring, one flow a thread and many,
    /// count to the byte at both ends, a short last send included; and an
    /// io_uring sender against the event loops' receiver, and the other
    /// way round.
    #[test]
    fn streams_count_to_the_byte() {
        for (n, threads, total) in [(1, 1, 10_000_001u64), (5, 2, 1_000_003)] {
            for (uring_tx, uring_rx) in [(true, true), (true, false), (false, true)] {
                let (c, s) = (0..n).map(|_| tcp_pair()).unzip::<_, _, Vec<_>, Vec<_>>();
                let rx = std::thread::spawn(move || {
                    let p = plan(Role::Recv { size: 65536 }, 2);
                    let drive = if uring_rx { run } else { crate::evloop::run };
                    drive(s, &p, &StopFlag::new(), &Live::new()).unwrap()
                });
                let live = Live::new();
                let send = Role::Send {
                    size: 16384,
                    total: Some(total),
                };
                let drive = if uring_tx { run } else { crate::evloop::run };
                let tx = drive(c, &plan(send, threads), &StopFlag::new(), &live).unwrap();
                let rx = rx.join().unwrap();
                for (a, b) in tx.flows.iter().zip(&rx.flows) {
                    assert_eq!(a.counters.bytes_sent, total);
                    assert_eq!(b.counters.bytes_received, total);
                }
                assert_eq!(live.snapshot().bytes, n as u64 * total);
            }
        }
    }

    /// A timed sender stops at the flag, and the receiver counts what it
    /// sent.
    #[test]
    fn a_stop_flag_ends_the_senders() {
        let (c, s) = (0..3).map(|_| tcp_pair()).unzip::<_, _, Vec<_>, Vec<_>>();
        let rx = std::thread::spawn(move || {
            run(
                s,
                &plan(Role::Recv { size: 8192 }, 1),
                &StopFlag::new(),
                &Live::new(),
            )
            .unwrap()
        });
        let stop = StopFlag::new();
        let _t = crate::timer::Timer::start(Duration::from_millis(200), stop.clone()).unwrap();
        let send = Role::Send {
            size: 8192,
            total: None,
        };
        let tx = run(c, &plan(send, 2), &stop, &Live::new()).unwrap();
        let rx = rx.join().unwrap();
        for (a, b) in tx.flows.iter().zip(&rx.flows) {
            assert!(a.counters.bytes_sent > 0);
            assert_eq!(a.counters.bytes_sent, b.counters.bytes_received);
        }
    }
}
