//! Per-flow state machines, without I/O: what a flow wants to do next,
//! what it counted, and when it is done. A driver does the system calls:
//! today's blocking single-flow loops (the fast path: one send and one
//! receive per transaction, as netperf), and an event loop for many flows
//! per thread. Every state machine counts into [`FlowCounters`], the type
//! the protocol carries.
//!
//! - [`StreamSend`], [`StreamRecv`]: a stream test's sender and receiver.
//! - [`RrRequest`], [`RrRespond`]: a request/response transaction stream
//!   over a byte stream (TCP), with a window of requests in flight.
//! - [`CrrRequest`]: a connection per transaction (TCP_CRR, TCP_CC).
//!
//! UDP_RR's requester is a window of tagged datagrams with timeouts:
//! [`crate::rr::window::Window`].

use std::time::Duration;

pub use proto::FlowCounters;

/// What a flow counted, and over how long: every loop's result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ended {
    pub counters: FlowCounters,
    pub elapsed: Duration,
}

impl Ended {
    /// The flow's side of the results (one flow: its counters are the
    /// totals).
    pub fn results(&self) -> proto::SideResults {
        proto::SideResults::of_flow(&self.counters, nanos(self.elapsed))
    }
}

/// A duration in nanoseconds, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What a flow wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// Send this many bytes, from this offset of its message.
    Send { offset: usize, len: usize },
    /// Receive at most this many bytes, into this offset of its message.
    Recv { offset: usize, len: usize },
    /// Open a new connection (a connection per transaction).
    Connect,
    /// Close our end of the connection and wait for the peer's.
    Close,
    /// Nothing more: the flow is done.
    Done,
}

/// A stream sender: messages of `size` bytes until stopped, or exactly
/// `total` bytes (the last message short).
#[derive(Clone, Debug)]
pub struct StreamSend {
    size: usize,
    total: Option<u64>,
    /// The flow ends on a multiple of this many bytes (1: anywhere).
    block: u64,
    /// The test's end came (its time is up).
    stopped: bool,
    pub counters: FlowCounters,
}

impl StreamSend {
    pub fn new(size: usize, total: Option<u64>) -> StreamSend {
        StreamSend {
            size: size.max(1),
            total,
            block: 1,
            stopped: false,
            counters: FlowCounters::default(),
        }
    }

    /// The flow ends on a whole number of `block`s: once its count is in
    /// or its time up, it sends what completes the last one (a receiver
    /// that counts what it reads a block at a time: iperf3's server).
    pub fn with_block(mut self, block: u32) -> StreamSend {
        self.block = u64::from(block.max(1));
        self
    }

    /// The test's time is up: only what completes the last block goes.
    #[inline]
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// How many bytes the next send carries; `None` when the count is out
    /// (or the flow stopped) and the last block is whole.
    #[inline]
    pub fn next_len(&self) -> Option<usize> {
        let sent = self.counters.bytes_sent;
        let left = match self.total {
            _ if self.stopped => 0,
            None => u64::MAX,
            Some(t) => t.saturating_sub(sent),
        };
        if left > 0 {
            return Some((self.size as u64).min(left) as usize);
        }
        let rest = (self.block - sent % self.block) % self.block;
        (rest > 0).then(|| (self.size as u64).min(rest) as usize)
    }

    #[inline]
    pub fn sent(&mut self, n: usize) {
        self.counters.bytes_sent += n as u64;
        self.counters.send_calls += 1;
    }

    /// The exact total, if the sender has one.
    pub fn total(&self) -> Option<u64> {
        self.total
    }
}

/// A stream receiver: counts until end of stream.
#[derive(Clone, Debug, Default)]
pub struct StreamRecv {
    pub counters: FlowCounters,
    done: bool,
}

impl StreamRecv {
    /// A receive returned `n` bytes (0: the sender's end). Returns whether
    /// the stream is over.
    #[inline]
    pub fn received(&mut self, n: usize) -> bool {
        // The final receive call, which saw end-of-file, counts too, as in
        // netperf.
        self.counters.recv_calls += 1;
        if n == 0 {
            self.done = true;
        } else {
            self.counters.bytes_received += n as u64;
        }
        self.done
    }
}

/// The requesting side of request/response over a byte stream: up to
/// `window` requests of `req` bytes in flight, each answered by `resp`
/// bytes, in order, until `limit` transactions (or until stopped).
#[derive(Clone, Debug)]
pub struct RrRequest {
    req: usize,
    resp: usize,
    window: u64,
    limit: u64,
    /// Bytes of the request being sent, of the response being received.
    send_off: usize,
    recv_off: usize,
    requested: u64,
    stopped: bool,
    pub counters: FlowCounters,
}

impl RrRequest {
    /// `burst`: requests in flight beyond the first (netperf's `-b`).
    pub fn new(req: usize, resp: usize, burst: u32, limit: Option<u64>) -> RrRequest {
        RrRequest {
            req,
            resp,
            window: u64::from(burst) + 1,
            limit: limit.unwrap_or(u64::MAX),
            send_off: 0,
            recv_off: 0,
            requested: 0,
            stopped: false,
            counters: FlowCounters::default(),
        }
    }

    /// No more requests: those in flight are still answered.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether another request may start (not stopped, under the limit).
    #[inline]
    pub fn may_request(&self) -> bool {
        !self.stopped && self.requested < self.limit
    }

    /// Transactions sent and not yet answered.
    pub fn in_flight(&self) -> u64 {
        self.requested - self.counters.transactions
    }

    /// Requests are sent while the window has room (a request is finished
    /// before the next begins); otherwise the oldest response is awaited.
    #[inline]
    pub fn next(&self) -> Io {
        if self.send_off > 0 {
            return Io::Send {
                offset: self.send_off,
                len: self.req - self.send_off,
            };
        }
        if self.may_request() && self.in_flight() < self.window {
            return Io::Send {
                offset: 0,
                len: self.req,
            };
        }
        if self.in_flight() > 0 {
            return Io::Recv {
                offset: self.recv_off,
                len: self.resp - self.recv_off,
            };
        }
        Io::Done
    }

    #[inline]
    pub fn sent(&mut self, n: usize) {
        self.counters.send_calls += 1;
        self.counters.bytes_sent += n as u64;
        self.send_off += n;
        if self.send_off >= self.req {
            self.send_off = 0;
            self.requested += 1;
        }
    }

    /// A whole transaction in `send_calls` and `recv_calls`, with nothing
    /// else in flight: the one-at-a-time driver's count, which asks the
    /// flow nothing between its calls.
    #[inline]
    pub fn whole(&mut self, send_calls: u64, recv_calls: u64) {
        let c = &mut self.counters;
        c.send_calls += send_calls;
        c.recv_calls += recv_calls;
        c.bytes_sent += self.req as u64;
        c.bytes_received += self.resp as u64;
        c.transactions += 1;
        self.requested += 1;
    }

    /// `n` bytes of a response arrived; returns whether they completed a
    /// transaction (the oldest in flight).
    #[inline]
    pub fn received(&mut self, n: usize) -> bool {
        self.counters.recv_calls += 1;
        self.counters.bytes_received += n as u64;
        self.recv_off += n;
        if self.recv_off >= self.resp {
            self.recv_off = 0;
            self.counters.transactions += 1;
            return true;
        }
        false
    }
}

/// The responding side: read a request of `req` bytes, answer with `resp`
/// bytes, until the requester's end of stream.
#[derive(Clone, Debug)]
pub struct RrRespond {
    req: usize,
    resp: usize,
    recv_off: usize,
    send_off: Option<usize>,
    done: bool,
    pub counters: FlowCounters,
}

impl RrRespond {
    pub fn new(req: usize, resp: usize) -> RrRespond {
        RrRespond {
            req,
            resp,
            recv_off: 0,
            send_off: None,
            done: false,
            counters: FlowCounters::default(),
        }
    }

    #[inline]
    pub fn next(&self) -> Io {
        if self.done {
            return Io::Done;
        }
        match self.send_off {
            Some(off) => Io::Send {
                offset: off,
                len: self.resp - off,
            },
            None => Io::Recv {
                offset: self.recv_off,
                len: self.req - self.recv_off,
            },
        }
    }

    /// A receive returned `n` bytes (0: the requester's end). An end in the
    /// middle of a request is an error the caller reports.
    #[inline]
    pub fn received(&mut self, n: usize) -> Result<(), MidMessage> {
        self.counters.recv_calls += 1;
        if n == 0 {
            self.done = true;
            return if self.recv_off == 0 {
                Ok(())
            } else {
                Err(MidMessage)
            };
        }
        self.counters.bytes_received += n as u64;
        self.recv_off += n;
        if self.recv_off >= self.req {
            self.recv_off = 0;
            self.send_off = Some(0);
        }
        Ok(())
    }

    /// `n` bytes of the response went; returns whether they completed a
    /// transaction.
    #[inline]
    pub fn sent(&mut self, n: usize) -> bool {
        self.counters.send_calls += 1;
        self.counters.bytes_sent += n as u64;
        let off = self.send_off.unwrap_or(0) + n;
        if off >= self.resp {
            self.send_off = None;
            self.counters.transactions += 1;
            true
        } else {
            self.send_off = Some(off);
            false
        }
    }
}

/// Where a connection-per-transaction flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crr {
    Idle,
    Sending(usize),
    Receiving(usize),
    Closing,
}

/// The requesting side of TCP_CRR and TCP_CC: connect, send a request of
/// `preamble + req` bytes (the data connection's proof, then the request),
/// receive `resp` bytes, close; until `limit` transactions or stopped.
/// The preamble is not counted as the test's bytes.
#[derive(Clone, Debug)]
pub struct CrrRequest {
    preamble: usize,
    req: usize,
    resp: usize,
    limit: u64,
    stopped: bool,
    at: Crr,
    pub counters: FlowCounters,
}

impl CrrRequest {
    pub fn new(preamble: usize, req: usize, resp: usize, limit: Option<u64>) -> CrrRequest {
        CrrRequest {
            preamble,
            req,
            resp,
            limit: limit.unwrap_or(u64::MAX),
            stopped: false,
            at: Crr::Idle,
            counters: FlowCounters::default(),
        }
    }

    /// No more connections; the one open finishes.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    #[inline]
    pub fn next(&self) -> Io {
        let whole = self.preamble + self.req;
        match self.at {
            Crr::Idle if !self.stopped && self.counters.transactions < self.limit => Io::Connect,
            Crr::Idle => Io::Done,
            Crr::Sending(off) => Io::Send {
                offset: off,
                len: whole - off,
            },
            Crr::Receiving(off) => Io::Recv {
                offset: off,
                len: self.resp - off,
            },
            Crr::Closing => Io::Close,
        }
    }

    /// After the request: the response, or the close when none is due.
    fn after_request(&self) -> Crr {
        if self.resp > 0 {
            Crr::Receiving(0)
        } else {
            Crr::Closing
        }
    }

    /// The connection is open.
    pub fn connected(&mut self) {
        self.at = if self.preamble + self.req > 0 {
            Crr::Sending(0)
        } else {
            self.after_request()
        };
    }

    /// `n` bytes of the request went (one call).
    #[inline]
    pub fn sent(&mut self, n: usize) {
        let Crr::Sending(off) = self.at else { return };
        let end = off + n;
        // The part of [off, end) past the preamble is the test's.
        let payload = end.saturating_sub(self.preamble.max(off)) as u64;
        self.counters.bytes_sent += payload;
        self.counters.send_calls += 1;
        self.at = if end >= self.preamble + self.req {
            self.after_request()
        } else {
            Crr::Sending(end)
        };
    }

    /// `n` bytes of the response arrived (0: the peer closed, an error
    /// before the whole response).
    #[inline]
    pub fn received(&mut self, n: usize) -> Result<(), MidMessage> {
        let Crr::Receiving(off) = self.at else {
            return Ok(());
        };
        if n == 0 {
            return Err(MidMessage);
        }
        self.counters.recv_calls += 1;
        self.counters.bytes_received += n as u64;
        let end = off + n;
        self.at = if end >= self.resp {
            Crr::Closing
        } else {
            Crr::Receiving(end)
        };
        Ok(())
    }

    /// The connection is closed at both ends: the transaction is done.
    #[inline]
    pub fn closed(&mut self) {
        self.at = Crr::Idle;
        self.counters.transactions += 1;
    }
}

/// The peer ended its stream in the middle of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MidMessage;

/// Run `f(i)` for every flow `i < n` on a thread of its own, all released
/// together once every thread is up; a thread that panicked gives
/// `panicked()`. The results are in flow order.
pub fn together<T: Send, E: Send>(
    n: usize,
    f: impl Fn(usize) -> Result<T, E> + Sync,
    panicked: impl Fn() -> E,
) -> Vec<Result<T, E>> {
    // one flow runs here, without a thread of its own (a panic is caught
    // as a flow thread's would be)
    if n == 1 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(0)));
        return vec![r.unwrap_or_else(|_| Err(panicked()))];
    }
    let go = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let (f, go) = (&f, &go);
                // (its CPU time counts toward its starter's test)
                crate::cpu::spawn_scoped(s, move || {
                    go.wait();
                    f(i)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_send_counts_to_the_byte() {
        let mut s = StreamSend::new(3000, Some(10_001));
        let mut calls = 0;
        while let Some(n) = s.next_len() {
            s.sent(n);
            calls += 1;
        }
        assert_eq!((s.counters.bytes_sent, calls), (10_001, 4));
        let mut r = StreamRecv::default();
        assert!(!r.received(5000));
        assert!(r.received(0));
        assert_eq!(
            (r.counters.bytes_received, r.counters.recv_calls),
            (5000, 2)
        );
    }

    /// A sender that ends on whole blocks: a count or a stop in the
    /// middle of one sends what completes it, short sends included; with
    /// blocks of 1 a stop ends at once.
    #[test]
    fn stream_send_ends_on_whole_blocks() {
        let mut s = StreamSend::new(3000, Some(10_001)).with_block(4096);
        while let Some(n) = s.next_len() {
            s.sent(n);
        }
        assert_eq!(s.counters.bytes_sent, 12_288);
        let mut s = StreamSend::new(3000, None).with_block(4096);
        s.sent(2999);
        s.sent(1000);
        s.stop();
        assert_eq!(s.next_len(), Some(97));
        s.sent(50);
        assert_eq!(s.next_len(), Some(47));
        s.sent(47);
        assert_eq!((s.next_len(), s.counters.bytes_sent), (None, 4096));
        let mut s = StreamSend::new(3000, None);
        s.sent(1234);
        s.stop();
        assert_eq!(s.next_len(), None);
    }

    /// A requester and a responder, shuttled in memory with short reads.
    #[test]
    fn rr_in_memory_with_a_window_and_short_reads() {
        for burst in [0, 3] {
            let mut q = RrRequest::new(10, 7, burst, Some(100));
            let mut r = RrRespond::new(10, 7);
            let (mut to_r, mut to_q) = (0usize, 0usize);
            let mut max_in_flight = 0;
            loop {
                match q.next() {
                    Io::Send { len, .. } => {
                        let n = len.min(4);
                        q.sent(n);
                        to_r += n;
                    }
                    Io::Recv { len, .. } if to_q > 0 => {
                        let n = len.min(to_q).min(3);
                        q.received(n);
                        to_q -= n;
                    }
                    Io::Recv { .. } => {}
                    Io::Done => break,
                    Io::Connect | Io::Close => unreachable!("not a connection per transaction"),
                }
                max_in_flight = max_in_flight.max(q.in_flight());
                // the responder takes what it can
                loop {
                    match r.next() {
                        Io::Recv { len, .. } if to_r > 0 => {
                            let n = len.min(to_r);
                            r.received(n).unwrap();
                            to_r -= n;
                        }
                        Io::Send { len, .. } => {
                            r.sent(len);
                            to_q += len;
                        }
                        _ => break,
                    }
                }
            }
            assert_eq!(q.counters.transactions, 100);
            assert_eq!(r.counters.transactions, 100);
            assert_eq!(q.counters.bytes_sent, 1000);
            assert_eq!(r.counters.bytes_received, 1000);
            assert_eq!(q.counters.bytes_received, 700);
            assert!(max_in_flight <= u64::from(burst) + 1, "{max_in_flight}");
            assert_eq!(r.received(0), Ok(()));
            assert_eq!(r.next(), Io::Done);
        }
    }

    #[test]
    fn crr_counts_the_payload_not_the_preamble() {
        let mut c = CrrRequest::new(32, 10, 5, Some(2));
        for _ in 0..2 {
            assert_eq!(c.next(), Io::Connect);
            c.connected();
            assert_eq!(c.next(), Io::Send { offset: 0, len: 42 });
            c.sent(20);
            assert_eq!(
                c.next(),
                Io::Send {
                    offset: 20,
                    len: 22
                }
            );
            c.sent(22);
            assert_eq!(c.next(), Io::Recv { offset: 0, len: 5 });
            c.received(5).unwrap();
            assert_eq!(c.next(), Io::Close);
            c.closed();
        }
        assert_eq!(c.next(), Io::Done);
        let k = c.counters;
        assert_eq!((k.bytes_sent, k.send_calls, k.bytes_received), (20, 4, 10));
        assert_eq!((k.recv_calls, k.transactions), (2, 2));
        // TCP_CC: no response, the close is the answer
        let mut cc = CrrRequest::new(32, 0, 0, None);
        cc.connected();
        cc.sent(32);
        assert_eq!(cc.next(), Io::Close);
        let mut cut = CrrRequest::new(0, 1, 4, None);
        cut.connected();
        cut.sent(1);
        cut.received(2).unwrap();
        assert_eq!(cut.received(0), Err(MidMessage));
    }

    #[test]
    fn an_end_mid_request_is_an_error() {
        let mut r = RrRespond::new(10, 1);
        r.received(4).unwrap();
        assert_eq!(r.received(0), Err(MidMessage));
    }

    #[test]
    fn a_stopped_requester_finishes_what_is_in_flight() {
        let mut q = RrRequest::new(1, 1, 2, None);
        for _ in 0..3 {
            assert!(matches!(q.next(), Io::Send { .. }));
            q.sent(1);
        }
        assert!(matches!(q.next(), Io::Recv { .. }));
        q.stop();
        for _ in 0..3 {
            assert!(matches!(q.next(), Io::Recv { .. }));
            assert!(q.received(1));
        }
        assert_eq!(q.next(), Io::Done);
    }
}
