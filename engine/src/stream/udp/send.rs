//! The UDP_STREAM sender: [`Sender`], the flow machine that numbers,
//! stamps, paces and counts datagrams without doing I/O, and [`send`], the
//! blocking loop of one flow that drives it (one datagram a call, or with
//! the fast paths a batch: sendmmsg, and UDP_SEGMENT's datagrams cut by the
//! kernel). The event loops drive the same machine for many flows
//! ([`crate::evloop::udp`]).

use std::{
    io,
    time::{Duration, Instant},
};

use proto::UdpFast;

use super::{ID_END, Link, SEQ_END, STAMP_END, Until, end_datagrams, transient};
use crate::conventions::UdpHeader;
use crate::{
    EngineError, buffer::Ring, clock, conventions::Conventions, latency::Latency, live::Live,
    sys::MsgBatch, timer::StopFlag,
};

/// What the sender counted.
#[derive(Debug, Default)]
pub struct SendOutcome {
    /// Datagrams the kernel accepted (netperf's "Messages Okay").
    pub sent: u64,
    /// Sends that failed with a transient error (netperf's "Errors").
    pub failed: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub last_error: Option<io::Error>,
}

impl SendOutcome {
    /// A send that failed: interrupted (tried again), transient (counted,
    /// as netperf counts it), or the end of the test.
    pub(crate) fn failed_with(&mut self, e: io::Error, what: &str) -> Result<(), EngineError> {
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(());
        }
        if transient(&e) {
            self.failed += 1;
            self.last_error = Some(e);
            return Ok(());
        }
        Err(EngineError::io(what, e))
    }

    /// The sender's side of the results.
    pub fn results(&self) -> proto::SideResults {
        proto::SideResults {
            elapsed_ns: crate::flow::nanos(self.elapsed),
            bytes_sent: self.bytes,
            send_calls: self.sent,
            send_errors: self.failed,
            ..proto::SideResults::default()
        }
    }
}

/// One UDP_STREAM flow's sending side, without I/O: how many datagrams the
/// next call may carry (the count, the pacing), each one's header (the
/// test's id, its sequence number, its send time), and what went.
#[derive(Debug)]
pub struct Sender {
    id: [u8; 4],
    header: UdpHeader,
    size: usize,
    until: Until,
    start: Instant,
    start_ns: u64,
    /// With a rate: datagram `n` goes no earlier than `start_ns + n *
    /// interval`, so the average rate is exact however coarse the waits.
    interval_ns: Option<f64>,
    pub out: SendOutcome,
}

impl Sender {
    /// Datagrams of `size` bytes carrying the test's `id` (when the
    /// conventions want our header), until `until`, at `rate_bps` if set.
    pub fn new(
        size: usize,
        id: u32,
        conv: &Conventions,
        until: Until,
        rate_bps: Option<u64>,
    ) -> Sender {
        let size = size.max(1);
        Sender {
            id: id.to_be_bytes(),
            header: conv.udp_header,
            size,
            until,
            start: Instant::now(),
            start_ns: clock::now_ns(),
            interval_ns: rate_bps.map(|r| (size as f64 * 8.0 * 1e9) / r.max(1) as f64),
            out: SendOutcome::default(),
        }
    }

    /// Whether another datagram may go (not stopped, the count not out).
    #[inline]
    pub fn more(&self, stopping: bool) -> bool {
        !stopping && !matches!(self.until, Until::Bytes(n) if self.out.bytes >= n)
    }

    /// Of `max` datagrams, how many the count leaves for the next call.
    #[inline]
    pub fn left(&self, max: u64) -> u64 {
        match self.until {
            Until::Stopped => max,
            Until::Bytes(total) => max.min(
                total
                    .saturating_sub(self.out.bytes)
                    .div_ceil(self.size as u64),
            ),
        }
    }

    /// When the next datagram may go (the clock of [`clock::now_ns`]); `None`
    /// when not paced.
    #[inline]
    pub fn due_ns(&self) -> Option<u64> {
        self.interval_ns
            .map(|i| self.start_ns + (self.out.sent as f64 * i) as u64)
    }

    /// Wait until the next datagram may go (a blocking sender).
    pub fn pace(&self) {
        let Some(due) = self.due_ns() else {
            return;
        };
        loop {
            let now = clock::now_ns();
            if now >= due {
                return;
            }
            let left = Duration::from_nanos(due - now);
            if left > Duration::from_micros(300) {
                std::thread::sleep(left - Duration::from_micros(200));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Write datagram `seq`'s header into `buf`, as much of it as fits;
    /// `us` gives the send time, asked for only when it fits.
    #[inline]
    pub fn stamp(&self, buf: &mut [u8], seq: u64, us: &mut impl FnMut() -> u32) {
        match self.header {
            UdpHeader::None => {}
            UdpHeader::Ours => {
                if let Some(h) = buf.get_mut(..ID_END) {
                    h.copy_from_slice(&self.id);
                }
                if let Some(s) = buf.get_mut(ID_END..SEQ_END) {
                    s.copy_from_slice(&seq.to_be_bytes());
                }
                if let Some(s) = buf.get_mut(SEQ_END..STAMP_END) {
                    s.copy_from_slice(&us().to_be_bytes());
                }
            }
            UdpHeader::Iperf3 { counters64 } => super::iperf3_stamp(buf, seq + 1, us(), counters64),
        }
    }

    /// Stamp the next datagram (the next sequence number, now).
    #[inline]
    pub fn stamp_next(&self, buf: &mut [u8]) {
        let start = self.start_ns;
        // (the clock in whole nanoseconds: cheaper than Instant's
        // arithmetic, once a datagram)
        self.stamp(buf, self.out.sent, &mut || {
            (clock::now_ns().wrapping_sub(start) / 1000) as u32
        });
    }

    /// A datagram of `n` bytes went.
    #[inline]
    pub fn went(&mut self, n: usize) {
        self.out.sent += 1;
        self.out.bytes += n as u64;
    }

    /// Fill the next call's messages in `batch`: up to its length, each of
    /// up to `segments` datagrams, as the count leaves; their lengths in
    /// `lens`. Returns how many datagrams they carry.
    pub fn fill(&self, batch: &mut MsgBatch, segments: usize, lens: &mut Vec<usize>) -> u64 {
        let size = self.size;
        let mut left = self.left((batch.len() * segments) as u64);
        let total = left;
        lens.clear();
        let mut seq = self.out.sent;
        // one send time for the call's datagrams: one clock read a call
        let mut stamp = None;
        let start = self.start;
        let mut us = || *stamp.get_or_insert_with(|| start.elapsed().as_micros() as u32);
        for m in 0..batch.len() {
            let here = (segments as u64).min(left) as usize;
            if here == 0 {
                break;
            }
            left -= here as u64;
            for d in batch.slot_mut(m).chunks_mut(size).take(here) {
                self.stamp(d, seq, &mut us);
                seq += 1;
            }
            lens.push(here * size);
        }
        total - left
    }

    /// The first `k` messages of `batch` went.
    pub fn went_batch(&mut self, batch: &MsgBatch, k: usize) {
        for m in 0..k {
            let bytes = batch.sent(m) as u64;
            self.out.sent += bytes.div_ceil(self.size as u64);
            self.out.bytes += bytes;
        }
    }

    /// The machine's count, its time taken from its start to now.
    pub fn finish(mut self) -> SendOutcome {
        self.out.elapsed = self.start.elapsed();
        self.out
    }
}

/// A batch for the fast paths: `fast.batch` messages, each of
/// `fast.segments` datagrams of `size` bytes, filled from `fill` (a
/// ring's next buffers, one datagram after another), sent over a
/// connected socket or to `to`.
pub fn send_batch(
    fast: UdpFast,
    size: usize,
    to: Option<std::net::SocketAddr>,
    mut fill: impl FnMut() -> Vec<u8>,
) -> MsgBatch {
    let segments = fast.segments.max(1) as usize;
    let n = fast.batch.max(1) as usize;
    let mut batch = MsgBatch::sending(n, size * segments, to);
    for m in 0..n {
        for d in batch.slot_mut(m).chunks_mut(size) {
            let f = fill();
            d.copy_from_slice(f.get(..d.len()).unwrap_or_default());
        }
    }
    batch
}

/// Set UDP_SEGMENT for `--gso` on a sending socket.
pub fn set_segment(sock: &impl crate::sys::Sock, size: usize) -> Result<(), EngineError> {
    let gso = i32::try_from(size).unwrap_or(i32::MAX);
    crate::sys::opt::udp_segment(sock, gso)
        .map_err(|e| EngineError::io("--gso: setting UDP_SEGMENT on the sending socket", e))
}

/// Sender role: [`Sender`] driven by blocking calls. The conventions say
/// whether datagrams carry our header and how the receiver learns that we
/// are done (after the loop, netperf 2.7's empty datagrams are sent here).
/// With `fast` on, many datagrams a system call: sendmmsg of `fast.batch`
/// messages, each of `fast.segments` datagrams cut by the kernel
/// (UDP_SEGMENT).
#[allow(clippy::too_many_arguments)]
pub fn send(
    link: Link<'_>,
    ring: &mut Ring,
    id: u32,
    conv: &Conventions,
    until: Until,
    rate_bps: Option<u64>,
    stop: &StopFlag,
    live: &Live,
    mut lat: Option<&mut Latency>,
    calls: impl Into<super::UdpCalls>,
) -> Result<SendOutcome, EngineError> {
    let calls = calls.into();
    let fast = calls.fast;
    let mut s = Sender::new(ring.size(), id, conv, until, rate_bps);
    if calls.uring {
        send_uring(link, ring, &mut s, stop, live, lat)?;
    } else if fast.is_on() {
        send_fast(link, ring, &mut s, stop, live, lat, fast)?;
    } else {
        while s.more(stop.is_set()) {
            s.pace();
            let buf = ring.next_buf();
            s.stamp_next(buf);
            let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
            let r = link.send(buf);
            if let Some(l) = lat.as_deref_mut() {
                l.record(clock::now_ns().wrapping_sub(t0));
            }
            match r {
                Ok(n) => {
                    s.went(n);
                    live.publish(s.out.bytes, s.out.sent);
                }
                Err(e) => s.out.failed_with(e, "UDP send")?,
            }
        }
    }
    let mut out = s.finish();
    finish_send(link, conv, &mut out)?;
    Ok(out)
}

/// After the loop: netperf 2.7's end, and an error if nothing went out.
pub(crate) fn finish_send(
    link: Link<'_>,
    conv: &Conventions,
    out: &mut SendOutcome,
) -> Result<(), EngineError> {
    end_datagrams(link, conv);
    if out.sent == 0 && out.failed > 0 {
        let e = out
            .last_error
            .take()
            .unwrap_or_else(|| io::Error::other("unknown"));
        return Err(EngineError::io(
            format!("every one of {} UDP sends failed", out.failed),
            e,
        ));
    }
    Ok(())
}

/// [`send`]'s loop with sendmmsg (and UDP_SEGMENT). The slots start as
/// copies of the ring's buffers (its fill), one datagram after another.
fn send_fast(
    link: Link<'_>,
    ring: &mut Ring,
    s: &mut Sender,
    stop: &StopFlag,
    live: &Live,
    lat: Option<&mut Latency>,
    fast: UdpFast,
) -> Result<(), EngineError> {
    let segments = fast.segments.max(1) as usize;
    let sock = link.socket();
    if segments > 1 {
        set_segment(sock, ring.size().max(1))?;
    }
    send_batches(
        link,
        ring,
        s,
        stop,
        live,
        lat,
        fast,
        "UDP send (sendmmsg)",
        |b, lens| b.send(sock, lens).map(|k| (k, Vec::new())),
    )
}

/// The batched senders' loop: fill a batch of `fast`'s shape from the
/// ring, pace, `call` it, count what went (and the messages that failed).
#[allow(clippy::too_many_arguments)]
fn send_batches(
    link: Link<'_>,
    ring: &mut Ring,
    s: &mut Sender,
    stop: &StopFlag,
    live: &Live,
    mut lat: Option<&mut Latency>,
    fast: UdpFast,
    what: &str,
    mut call: impl FnMut(&mut MsgBatch, &[usize]) -> io::Result<(usize, Vec<io::Error>)>,
) -> Result<(), EngineError> {
    let size = ring.size().max(1);
    let segments = fast.segments.max(1) as usize;
    let mut batch = send_batch(fast, size, link.peer, || ring.next_buf().to_vec());
    let mut lens = Vec::with_capacity(batch.len());
    while s.more(stop.is_set()) {
        s.pace();
        s.fill(&mut batch, segments, &mut lens);
        let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
        let r = call(&mut batch, &lens);
        if let Some(l) = lat.as_deref_mut() {
            l.record(clock::now_ns().wrapping_sub(t0));
        }
        match r {
            Ok((k, errors)) => {
                s.went_batch(&batch, k);
                live.publish(s.out.bytes, s.out.sent);
                for e in errors {
                    s.out.failed_with(e, what)?;
                }
            }
            Err(e) => s.out.failed_with(e, what)?,
        }
    }
    Ok(())
}

/// [`send`]'s loop through io_uring (`--io-uring`): a batch of datagrams a
/// submission, each its own send, every completion counted.
fn send_uring(
    link: Link<'_>,
    ring: &mut Ring,
    s: &mut Sender,
    stop: &StopFlag,
    live: &Live,
    lat: Option<&mut Latency>,
) -> Result<(), EngineError> {
    let fast = UdpFast {
        batch: crate::uring::UDP_BATCH as u32,
        segments: 1,
    };
    let mut uring = crate::uring::UdpSend::new(crate::uring::UDP_BATCH)?;
    let sock = link.socket();
    send_batches(
        link,
        ring,
        s,
        stop,
        live,
        lat,
        fast,
        "UDP send (io_uring)",
        |b, lens| uring.send(b, sock, lens),
    )
}
