//! TCP_STREAM and TCP_MAERTS: the sender's and the receiver's loops.
//!
//! TCP_STREAM runs [`send`] in netperf and [`receive`] in netserver;
//! TCP_MAERTS the other way round. The sender sends until its stop flag is
//! raised (timed test) or until exactly the requested number of bytes is
//! out, then shuts down its write side and waits for the receiver to close:
//! its elapsed time therefore covers the delivery of every byte it counted.
//! The receiver reads until end-of-file, then shuts down its own write side.
//! Each send and each receive is one
//! system call on a blocking socket.

use std::{
    io::{self, Read, Write},
    net::{Shutdown, TcpStream},
    time::{Duration, Instant},
};

use crate::{
    EngineError,
    buffer::Ring,
    clock,
    flow::{Ended, StreamRecv, StreamSend},
    latency::Latency,
    live::Live,
    stream::{rx::Reader, zc::ZcSender},
    sys,
    timer::StopFlag,
};
use proto::RxPath;

/// What a TCP sender does once it is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SenderEnd {
    /// Half-close, and wait for the receiver's end-of-file (ours, netperf
    /// 2.7's: the receiver closes once it has everything).
    #[default]
    WaitEof,
    /// Half-close and go (a server sending to an iperf3 client, which
    /// closes its streams only after the results).
    HalfClose,
    /// Leave the connection open, and go, having sent a whole number of
    /// `block`s (a client sending to an iperf3 server, which counts what
    /// it has read when the end is told on the control connection, reads
    /// a closed stream in a loop, and (3.21) counts a block of its `len`
    /// only once it is whole): see [`settle`].
    Open { block: u32 },
}

impl SenderEnd {
    /// How a client's sender ends with these conventions: it leaves its
    /// connections open where the receiver counts until the end is told
    /// ([`crate::conventions::Conventions::told_end`]), and waits for the
    /// receiver's end-of-file otherwise.
    /// `block`: the receiver's read size (the grant's).
    pub fn client(conv: &crate::conventions::Conventions, block: u32) -> SenderEnd {
        if conv.told_end {
            SenderEnd::Open { block }
        } else {
            SenderEnd::WaitEof
        }
    }

    /// The bytes a sender's total is a multiple of.
    pub fn block(self) -> u32 {
        match self {
            SenderEnd::Open { block } => block,
            _ => 1,
        }
    }

    /// How a server's sender ends: it waits for the client's end-of-file
    /// where the client closes once it has everything, and half-closes
    /// and goes otherwise (an iperf3 client closes after the results).
    pub fn server(conv: &crate::conventions::Conventions) -> SenderEnd {
        if conv.sender_waits_eof {
            SenderEnd::WaitEof
        } else {
            SenderEnd::HalfClose
        }
    }
}

/// A sending client's last step where the receiver counts what it has read
/// when told the end ([`crate::conventions::Conventions::told_end`]): wait
/// until what was sent on `conns` is acknowledged (within `limit`), then
/// [`crate::conventions::SETTLE`] for the receiver to read it. Whether it
/// was all acknowledged.
pub fn settle(conns: &[TcpStream], limit: Duration) -> bool {
    let acked = acknowledged(conns, Instant::now() + limit);
    std::thread::sleep(crate::conventions::SETTLE);
    acked
}

/// When the sender stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// When the stop flag is raised.
    Stopped,
    /// After exactly this many bytes (or earlier if the flag is raised).
    Bytes(u64),
}

/// The system call a sender sends with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendCall {
    /// send(2), as netperf.
    #[default]
    Send,
    /// write(2) (netperf's `-- -I`).
    Write,
    /// send(2) with MSG_ZEROCOPY (`--zerocopy`): a ring buffer is sent
    /// again only once the kernel has said it is done with it.
    ZeroCopy,
}

/// What one side of a stream test counted: a flow's counters, the
/// sender's in `bytes_sent` and `send_calls`, the receiver's in
/// `bytes_received` and `recv_calls`.
pub type Outcome = Ended;

/// Sender role. `linger` bounds the wait for the receiver to close after the
/// last byte.
pub fn send(
    conn: &TcpStream,
    ring: &mut Ring,
    until: Until,
    stop: &StopFlag,
    live: &Live,
    linger: Duration,
) -> Result<Outcome, EngineError> {
    send_with(
        conn,
        ring,
        until,
        stop,
        live,
        (SenderEnd::WaitEof, linger),
        SendCall::Send,
        None,
    )
}

/// [`send`], with the system call of `how`, timing each call into `lat`
/// when given (netperf 2.7's latency selectors on a stream test).
#[allow(clippy::too_many_arguments)]
pub fn send_with(
    conn: &TcpStream,
    ring: &mut Ring,
    until: Until,
    stop: &StopFlag,
    live: &Live,
    (end, linger): (SenderEnd, Duration),
    how: SendCall,
    lat: Option<&mut Latency>,
) -> Result<Outcome, EngineError> {
    let size = ring.size() as u64;
    let mut zc = match how {
        SendCall::ZeroCopy => Some(ZcSender::new(conn)?),
        _ => None,
    };
    let out = pump(
        conn,
        size,
        until,
        stop,
        live,
        (end, linger),
        lat,
        "send",
        |want| {
            let next = ring.next_buf();
            let buf = next.get(..want).unwrap_or(next);
            match (how, zc.as_mut()) {
                // (a wait is a tick at most: pump looks at the stop flag)
                (SendCall::ZeroCopy, Some(zc)) => zc.send(conn, buf, Some(ZcSender::WAIT_MS)),
                (SendCall::Write, _) => sys::write(conn, buf),
                _ => (&*conn).write(buf),
            }
        },
    );
    if let Some(zc) = zc.as_mut() {
        zc.finish(conn);
    }
    out
}

/// TCP_SENDFILE's sender: sendfile(2) of `size` bytes at a time from
/// `file`, which holds `width` messages back to back, cycling through them
/// as [`send`] cycles through its ring.
#[allow(clippy::too_many_arguments)]
pub fn send_file(
    conn: &TcpStream,
    file: &std::fs::File,
    size: usize,
    width: usize,
    until: Until,
    stop: &StopFlag,
    live: &Live,
    linger: Duration,
    lat: Option<&mut Latency>,
) -> Result<Outcome, EngineError> {
    let size = size.max(1) as u64;
    let mut slot = 0u64;
    pump(
        conn,
        size,
        until,
        stop,
        live,
        (SenderEnd::WaitEof, linger),
        lat,
        "sendfile",
        |want| {
            let mut offset = (slot * size) as i64;
            slot = if slot + 1 == width as u64 {
                0
            } else {
                slot + 1
            };
            sys::sendfile(conn, file, &mut offset, want)
        },
    )
}

/// How long a send may block before the sender looks at its stop flag.
const SEND_TICK: Duration = Duration::from_secs(1);

/// The sender's loop: `call` sends up to `want` bytes, once per turn, until
/// the stop flag or the byte count; then the end of the test.
#[allow(clippy::too_many_arguments)]
#[inline]
fn pump(
    conn: &TcpStream,
    size: u64,
    until: Until,
    stop: &StopFlag,
    live: &Live,
    (end, linger): (SenderEnd, Duration),
    mut lat: Option<&mut Latency>,
    what: &str,
    mut call: impl FnMut(usize) -> io::Result<usize>,
) -> Result<Outcome, EngineError> {
    let start = Instant::now();
    let total = match until {
        Until::Stopped => None,
        Until::Bytes(n) => Some(n),
    };
    let mut flow = StreamSend::new(size as usize, total).with_block(end.block());
    // A peer that stops reading must not hold a send past the end of the
    // test: a blocked call returns after a moment, and the loop looks at
    // the stop flag (a call cut short counts what it sent).
    conn.set_write_timeout(Some(SEND_TICK))
        .map_err(|e| EngineError::io("setting a send timeout", e))?;
    loop {
        if stop.is_set() {
            flow.stop();
        }
        let Some(want) = flow.next_len() else { break };
        let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
        let r = call(want);
        if let Some(l) = lat.as_deref_mut() {
            l.record(clock::now_ns().wrapping_sub(t0));
        }
        match r {
            Ok(n) => {
                flow.sent(n);
                live.publish(flow.counters.bytes_sent, flow.counters.send_calls);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::error::timed_out(&e) => {}
            Err(e) => {
                return Err(EngineError::io(format!("{what} on the data connection"), e));
            }
        }
    }
    if !matches!(end, SenderEnd::Open { .. }) {
        conn.shutdown(Shutdown::Write)
            .map_err(|e| EngineError::io("shutting down the data connection", e))?;
    }
    if end == SenderEnd::WaitEof {
        wait_for_close(conn, linger)?;
    }
    Ok(Ended {
        counters: flow.counters,
        elapsed: start.elapsed(),
    })
}

/// Receiver role: read until the sender's end-of-file, into one buffer.
pub fn receive(conn: &TcpStream, buf: &mut [u8], live: &Live) -> Result<Outcome, EngineError> {
    receive_with(conn, live, None, |c| (&*c).read(buf))
}

/// Receiver role, into the next buffer of `ring` each time (as netperf
/// cycles through its receive ring), timing each call into `lat` when
/// given.
pub fn receive_ring(
    conn: &TcpStream,
    ring: &mut Ring,
    live: &Live,
    lat: Option<&mut Latency>,
) -> Result<Outcome, EngineError> {
    receive_with(conn, live, lat, |c| (&*c).read(ring.next_buf()))
}

/// [`receive_ring`] by the path of `reader` (the ring's buffers are the
/// copies' room; a zero-copy or discarding path takes more, or nothing).
pub fn receive_by(
    conn: &TcpStream,
    ring: &mut Ring,
    reader: &mut Reader,
    live: &Live,
    lat: Option<&mut Latency>,
) -> Result<Outcome, EngineError> {
    if reader.path() == RxPath::Copy {
        return receive_ring(conn, ring, live, lat);
    }
    receive_with(conn, live, lat, |c| reader.read(c, ring.next_buf(), false))
}

#[inline]
fn receive_with(
    conn: &TcpStream,
    live: &Live,
    mut lat: Option<&mut Latency>,
    mut read: impl FnMut(&TcpStream) -> io::Result<usize>,
) -> Result<Outcome, EngineError> {
    let start = Instant::now();
    let mut flow = StreamRecv::default();
    loop {
        let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
        let r = read(conn);
        if let Some(l) = lat.as_deref_mut() {
            l.record(clock::now_ns().wrapping_sub(t0));
        }
        match r {
            Ok(n) => {
                if flow.received(n) {
                    break;
                }
                live.publish(flow.counters.bytes_received, flow.counters.recv_calls);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::error::timed_out(&e) => {
                return Err(EngineError::Timeout(
                    "the data connection went silent (no data, no end of test)".into(),
                ));
            }
            Err(e) => return Err(EngineError::io("receive on the data connection", e)),
        }
    }
    let elapsed = start.elapsed();
    // Tell the sender we have everything: it is waiting for our end-of-file.
    // (A plain close would not do if another descriptor of the socket is
    // open, as netserver keeps one to abort tests.)
    let _ = conn.shutdown(Shutdown::Write);
    Ok(Ended {
        counters: flow.counters,
        elapsed,
    })
}

/// Wait until everything sent on `conns` is acknowledged (the kernel's
/// send queues are empty), until `deadline` at most: whether it was.
/// Where the platform cannot tell, `true` at once.
pub fn acknowledged(conns: &[TcpStream], deadline: Instant) -> bool {
    loop {
        let left: u64 = conns
            .iter()
            .map(|c| sys::unacknowledged(c).unwrap_or(0))
            .sum();
        if left == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// After shutting down our write side, wait for the peer to close its side.
fn wait_for_close(conn: &TcpStream, linger: Duration) -> Result<(), EngineError> {
    let deadline = Instant::now() + linger;
    let mut scratch = [0u8; 512];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout(
                "the receiver did not close the data connection after the test".into(),
            ));
        }
        conn.set_read_timeout(Some(deadline - now))
            .map_err(|e| EngineError::io("setting a receive timeout", e))?;
        match (&*conn).read(&mut scratch) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::error::timed_out(&e) => {}
            // The receiver closed abruptly: everything we counted was
            // acknowledged or lost with it; the caller compares counts.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(EngineError::io("waiting for the receiver to close", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{testing::tcp_pair as pair, timer::Timer};
    use std::{os::unix::fs::OpenOptionsExt as _, thread};

    #[test]
    fn byte_count_is_exact_on_both_sides() {
        let (c, s) = pair();
        let rx = thread::spawn(move || {
            let mut buf = vec![0u8; 8192];
            let o = receive(&s, &mut buf, &Live::new()).unwrap();
            drop(s);
            o
        });
        let mut ring = Ring::new(3000, 2, b"");
        let live = Live::new();
        let sent = send(
            &c,
            &mut ring,
            Until::Bytes(1_000_001),
            &StopFlag::new(),
            &live,
            Duration::from_secs(10),
        )
        .unwrap();
        let got = rx.join().unwrap();
        assert_eq!(sent.counters.bytes_sent, 1_000_001);
        assert_eq!(got.counters.bytes_received, 1_000_001);
        assert_eq!(sent.counters.send_calls, 334); // 333 full sends and one of 1001 bytes
        assert_eq!(live.snapshot().bytes, 1_000_001);
    }

    #[test]
    fn sendfile_and_write_count_exactly() {
        use std::io::Write as _;
        let mut file = std::fs::File::options()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(std::env::temp_dir())
            .unwrap();
        let ring = Ring::new(1000, 3, b"");
        file.write_all(&ring.contents()).unwrap();
        for how in [None, Some(SendCall::Write)] {
            let (c, s) = pair();
            let rx = thread::spawn(move || {
                let mut ring = Ring::new(4096, 3, b"");
                let mut lat = Latency::new();
                let o = receive_ring(&s, &mut ring, &Live::new(), Some(&mut lat)).unwrap();
                drop(s);
                // every receive call is timed, the one that saw the end too
                assert_eq!(lat.count(), o.counters.recv_calls);
                o
            });
            let mut lat = Latency::new();
            let sent = match how {
                None => send_file(
                    &c,
                    &file,
                    1000,
                    3,
                    Until::Bytes(10_500),
                    &StopFlag::new(),
                    &Live::new(),
                    Duration::from_secs(10),
                    Some(&mut lat),
                ),
                Some(how) => send_with(
                    &c,
                    &mut Ring::new(1000, 3, b""),
                    Until::Bytes(10_500),
                    &StopFlag::new(),
                    &Live::new(),
                    (SenderEnd::WaitEof, Duration::from_secs(10)),
                    how,
                    Some(&mut lat),
                ),
            }
            .unwrap();
            let got = rx.join().unwrap();
            assert_eq!(
                (sent.counters.bytes_sent, got.counters.bytes_received),
                (10_500, 10_500)
            );
            assert_eq!(sent.counters.send_calls, 11);
            assert_eq!(lat.count(), 11);
        }
    }

    #[test]
    fn timed_send_stops_and_counts_match() {
        let (c, s) = pair();
        let rx = thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let o = receive(&s, &mut buf, &Live::new()).unwrap();
            drop(s);
            o
        });
        let stop = StopFlag::new();
        let _t = Timer::start(Duration::from_millis(200), stop.clone()).unwrap();
        let mut ring = Ring::new(16384, 2, b"");
        let sent = send(
            &c,
            &mut ring,
            Until::Stopped,
            &stop,
            &Live::new(),
            Duration::from_secs(10),
        )
        .unwrap();
        let got = rx.join().unwrap();
        assert!(sent.counters.bytes_sent > 0);
        assert_eq!(sent.counters.bytes_sent, got.counters.bytes_received);
        assert!(sent.elapsed >= Duration::from_millis(150));
        assert!(sent.elapsed < Duration::from_secs(5));
    }
}
