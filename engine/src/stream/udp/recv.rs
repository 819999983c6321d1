//! The UDP_STREAM receiver: [`Tally`], the flow machine that counts
//! datagrams exactly (sequence numbers, reordering, duplicates, another
//! test's datagrams, jitter) and knows when the test is over, and
//! [`receive`], the blocking loop of one flow that feeds it. The event
//! loops feed the same machine for many flows ([`crate::evloop::udp`]).

use std::{
    io,
    time::{Duration, Instant},
};

use proto::{Token, UdpFast};

use super::{Drain, GRACE, ID_END, Link, MAX_DRAIN, POLL, SEQ_END, STAMP_END, is_hello, test_id};
use crate::conventions::UdpHeader;
use crate::{
    EngineError,
    conventions::{Conventions, UdpEnd},
    live::Live,
    sys::MsgBatch,
};

#[derive(Debug, Default, Clone, PartialEq)]
pub struct RecvOutcome {
    /// Distinct datagrams of this test.
    pub received: u64,
    /// Bytes of those datagrams.
    pub bytes: u64,
    /// Every successful receive call.
    pub calls: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Datagrams without this test's identifier.
    pub foreign: u64,
    pub jitter_ns: u64,
    /// First to last datagram.
    pub elapsed: Duration,
    /// The datagrams' ECN codepoints, where counted (`--ecn`).
    pub ecn: Option<proto::ecn::EcnReport>,
}

impl RecvOutcome {
    /// The receiver's side of the results, with the socket's drops (read
    /// by the caller once the socket is drained) and where they came from.
    pub fn results(
        &self,
        rcvbuf_drops: u64,
        drops_source: proto::DropSource,
    ) -> proto::SideResults {
        proto::SideResults {
            elapsed_ns: crate::flow::nanos(self.elapsed),
            bytes_received: self.bytes,
            // netperf 2.7 counts the datagrams of the test, not the calls
            recv_calls: self.received,
            udp: Some(proto::UdpRecvStats {
                received: self.received,
                out_of_order: self.out_of_order,
                duplicates: self.duplicates,
                foreign: self.foreign,
                rcvbuf_drops,
                drops_source,
                jitter_ns: self.jitter_ns,
            }),
            ecn: self.ecn.clone(),
            ..proto::SideResults::default()
        }
    }
}

/// Which sequence numbers arrived, over a sliding window behind the
/// highest one seen.
#[derive(Debug)]
pub struct SeqTracker {
    max: Option<u64>,
    bits: Vec<u64>,
    pub received: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
}

pub(crate) const WINDOW: u64 = 1 << 16;

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker {
            max: None,
            bits: vec![0; (WINDOW / 64) as usize],
            received: 0,
            out_of_order: 0,
            duplicates: 0,
        }
    }
}

impl SeqTracker {
    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    fn seen(&self, seq: u64) -> bool {
        let (w, b) = Self::slot(seq);
        self.bits.get(w).is_some_and(|x| x & b != 0)
    }

    fn mark(&mut self, seq: u64, on: bool) {
        let (w, b) = Self::slot(seq);
        if let Some(x) = self.bits.get_mut(w) {
            if on {
                *x |= b;
            } else {
                *x &= !b;
            }
        }
    }

    /// Record a datagram; true if it is new (not a duplicate).
    pub fn observe(&mut self, seq: u64) -> bool {
        match self.max {
            Some(max) if seq <= max => {
                self.out_of_order += u64::from(seq < max);
                if max - seq >= WINDOW {
                    // Too old to tell: count it as a late arrival.
                    self.received += 1;
                    return true;
                }
                if self.seen(seq) {
                    self.out_of_order -= u64::from(seq < max);
                    self.duplicates += 1;
                    return false;
                }
                self.mark(seq, true);
                self.received += 1;
                true
            }
            _ => {
                // Slide the window: forget the slots of sequence numbers
                // that fall out of it.
                let from = self.max.map_or(0, |m| m + 1);
                if seq - from >= WINDOW {
                    self.bits.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in from..=seq {
                        self.mark(s, false);
                    }
                }
                self.mark(seq, true);
                self.max = Some(seq);
                self.received += 1;
                true
            }
        }
    }
}

/// RFC 3550 interarrival jitter, in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct Jitter {
    last: Option<(i64, u32)>,
    pub(crate) j: f64,
}

impl Jitter {
    pub(crate) fn observe(&mut self, arrival_ns: i64, sent_us: u32) {
        if let Some((a, s)) = self.last {
            let transit_change =
                (arrival_ns - a) - i64::from(sent_us.wrapping_sub(s) as i32) * 1000;
            self.j += (transit_change.unsigned_abs() as f64 - self.j) / 16.0;
        }
        self.last = Some((arrival_ns, sent_us));
    }
}

/// What one datagram did to the count.
pub(crate) enum Took {
    /// Counted, or set aside (a hello, a duplicate, another test's).
    Went,
    /// An empty datagram that ends the test (netperf 2.7's conventions).
    End,
    /// The last one the sender said it sent.
    AllIn,
}

/// The receiver's count, datagram by datagram, whichever call brought
/// them.
pub(crate) struct Tally<'a> {
    header: UdpHeader,
    empty_ends: bool,
    id: [u8; 4],
    token: &'a Token,
    origin: Instant,
    seqs: SeqTracker,
    jitter: Jitter,
    out: RecvOutcome,
    first: Option<Instant>,
    last: Instant,
    ecn: Option<crate::ecn::EcnTally>,
}

impl<'a> Tally<'a> {
    pub(crate) fn new(token: &'a Token, conv: &Conventions) -> Tally<'a> {
        let origin = Instant::now();
        Tally {
            header: conv.udp_header,
            empty_ends: matches!(conv.udp_end, UdpEnd::EmptyDatagrams(_)),
            id: test_id(token).to_be_bytes(),
            token,
            origin,
            seqs: SeqTracker::default(),
            jitter: Jitter::default(),
            out: RecvOutcome::default(),
            first: None,
            last: origin,
            ecn: None,
        }
    }

    /// Count each datagram's ECN codepoint too, by intervals of this
    /// length (the socket must hand them: `sys::opt::recv_codepoint`).
    pub(crate) fn counting_ecn(mut self, interval_ms: Option<u32>) -> Self {
        self.ecn = interval_ms.map(crate::ecn::EcnTally::new);
        self
    }

    /// Whether the datagrams' codepoints are counted.
    pub(crate) fn counts_ecn(&self) -> bool {
        self.ecn.is_some()
    }

    /// One datagram from the peer.
    pub(crate) fn take(
        &mut self,
        d: &[u8],
        tos: Option<u8>,
        now: Instant,
        drain: &dyn Drain,
        live: &Live,
    ) -> Result<Took, EngineError> {
        if d.is_empty() {
            if drain.aborted() {
                return Err(EngineError::Aborted);
            }
            if self.empty_ends {
                return Ok(Took::End);
            }
        }
        let ours = self.header == UdpHeader::Ours;
        if ours && is_hello(d, self.token) {
            return Ok(Took::Went);
        }
        self.out.calls += 1;
        if ours && d.len() >= ID_END && d.get(..ID_END) != Some(&self.id[..]) {
            self.out.foreign += 1;
            return Ok(Took::Went);
        }
        let (seq, stamp) = match self.header {
            UdpHeader::None => (None, None),
            UdpHeader::Ours => (
                d.get(ID_END..SEQ_END)
                    .and_then(|s| <[u8; 8]>::try_from(s).ok())
                    .map(u64::from_be_bytes),
                d.get(SEQ_END..STAMP_END)
                    .and_then(|s| <[u8; 4]>::try_from(s).ok())
                    .map(u32::from_be_bytes),
            ),
            UdpHeader::Iperf3 { counters64 } => super::iperf3_read(d, counters64),
        };
        let new = if let Some(s) = seq {
            self.seqs.observe(s)
        } else {
            self.seqs.received += 1;
            true
        };
        if !new {
            return Ok(Took::Went);
        }
        if let Some(s) = stamp {
            let arrival = now.duration_since(self.origin).as_nanos() as i64;
            self.jitter.observe(arrival, s);
        }
        self.out.bytes += d.len() as u64;
        if let Some(e) = &mut self.ecn {
            e.observe(tos, now);
        }
        self.first.get_or_insert(now);
        self.last = now;
        live.publish(self.out.bytes, self.seqs.received);
        if drain.expected().is_some_and(|e| self.seqs.received >= e) {
            return Ok(Took::AllIn);
        }
        Ok(Took::Went)
    }

    /// Nothing came for a while: whether the test is over.
    pub(crate) fn quiet(
        &self,
        drain: &dyn Drain,
        done_at: &mut Option<Instant>,
    ) -> Result<bool, EngineError> {
        if drain.aborted() {
            return Err(EngineError::Aborted);
        }
        if let Some(expected) = drain.expected() {
            let now = Instant::now();
            let done = *done_at.get_or_insert(now);
            return Ok(self.seqs.received >= expected
                || now.duration_since(self.last.max(done)) >= GRACE
                || now.duration_since(done) >= MAX_DRAIN);
        }
        Ok(false)
    }

    /// Distinct datagrams of the test so far.
    pub(crate) fn received(&self) -> u64 {
        self.seqs.received
    }

    pub(crate) fn finish(mut self) -> RecvOutcome {
        self.out.received = self.seqs.received;
        self.out.out_of_order = self.seqs.out_of_order;
        self.out.duplicates = self.seqs.duplicates;
        self.out.jitter_ns = self.jitter.j as u64;
        self.out.ecn = self.ecn.as_ref().map(crate::ecn::EcnTally::report);
        self.out.elapsed = self
            .first
            .map_or(Duration::ZERO, |f| self.last.duration_since(f));
        self.out
    }
}

/// What one receive call brought.
pub(crate) enum Call {
    /// Datagrams of the test, all counted.
    Went,
    /// Nothing from the peer (none waiting, or only someone else's: a
    /// flood of those must not keep the test from ending).
    Quiet,
    /// A datagram that ends the test: netperf 2.7's empty one, or the last
    /// the sender said it sent.
    Ended,
}

/// How a receiver calls: one datagram a call into `buf` (which holds the
/// largest expected), or many with recvmmsg (UDP_GRO's coalesced messages
/// cut back into their datagrams).
pub(crate) enum Calls<'b> {
    One(&'b mut [u8]),
    Batch(&'b mut MsgBatch),
    Uring(&'b mut crate::uring::UdpRecv),
}

impl Calls<'_> {
    /// One call's datagrams into the tally. Datagrams from anyone but the
    /// link's peer are counted as foreign.
    pub(crate) fn take(
        &mut self,
        link: Link<'_>,
        tally: &mut Tally<'_>,
        drain: &dyn Drain,
        live: &Live,
    ) -> Result<Call, EngineError> {
        let no_more = |e: io::Error, what: &str| {
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(Call::Went)
            } else if crate::error::no_datagram(&e) {
                Ok(Call::Quiet)
            } else {
                Err(EngineError::io(what, e))
            }
        };
        match self {
            Calls::One(buf) => match link.recv_marked(buf, tally.counts_ecn()) {
                Ok((None, _)) => {
                    tally.out.foreign += 1;
                    Ok(Call::Quiet)
                }
                Ok((Some(n), tos)) => {
                    let d = buf.get(..n).unwrap_or_default();
                    Ok(match tally.take(d, tos, Instant::now(), drain, live)? {
                        Took::Went => Call::Went,
                        Took::End | Took::AllIn => Call::Ended,
                    })
                }
                Err(e) => no_more(e, "UDP receive"),
            },
            Calls::Uring(u) => {
                let (mut theirs, mut ended) = (0, false);
                let now = Instant::now();
                u.take(POLL, |d, from| {
                    if link.peer.is_some_and(|p| from != Some(p)) {
                        tally.out.foreign += 1;
                        return Ok(false);
                    }
                    theirs += 1;
                    ended = !matches!(tally.take(d, None, now, drain, live)?, Took::Went);
                    Ok(ended)
                })?;
                Ok(match (ended, theirs) {
                    (true, _) => Call::Ended,
                    (false, 0) => Call::Quiet,
                    (false, _) => Call::Went,
                })
            }
            Calls::Batch(batch) => {
                let k = match batch.recv(link.socket(), batch.len()) {
                    Ok(k) => k,
                    Err(e) => return no_more(e, "UDP receive (recvmmsg)"),
                };
                let now = Instant::now();
                let mut theirs = 0;
                for i in 0..k {
                    let (d, from, gro) = batch.received(i);
                    // (its control messages walked again only when counted)
                    let tos = if tally.counts_ecn() {
                        batch.tos(i)
                    } else {
                        None
                    };
                    if link.peer.is_some_and(|p| from != Some(p)) {
                        tally.out.foreign += 1;
                        continue;
                    }
                    theirs += 1;
                    // a coalesced message is its datagrams, end to end
                    // (an empty one is one datagram)
                    let size = gro.unwrap_or(d.len()).max(1);
                    let mut at = 0;
                    loop {
                        let seg = d.get(at..(at + size).min(d.len())).unwrap_or_default();
                        if !matches!(tally.take(seg, tos, now, drain, live)?, Took::Went) {
                            return Ok(Call::Ended);
                        }
                        at += size;
                        if at >= d.len() {
                            break;
                        }
                    }
                }
                Ok(if theirs == 0 { Call::Quiet } else { Call::Went })
            }
        }
    }
}

/// A batch for receiving with the fast paths (and UDP_GRO set on `sock`
/// when they coalesce).
pub(crate) fn recv_batch(
    sock: &impl crate::sys::Sock,
    fast: UdpFast,
) -> Result<MsgBatch, EngineError> {
    if fast.segments > 1 {
        crate::sys::opt::udp_gro(sock)
            .map_err(|e| EngineError::io("--gso: setting UDP_GRO on the receiving socket", e))?;
    }
    Ok(MsgBatch::receiving(
        fast.batch.max(1) as usize,
        proto::test::UDP_SLOT as usize,
    ))
}

/// Receiver role: a [`Tally`] fed by blocking calls; `buf` must hold the
/// largest datagram expected. Without our header (netperf 2.7's
/// conventions) every datagram from the peer counts, and an empty one ends
/// the test. With `fast` on, many datagrams a call, each counted as if it
/// had come alone.
pub fn receive(
    link: Link<'_>,
    buf: &mut [u8],
    token: &Token,
    conv: &Conventions,
    drain: &dyn Drain,
    live: &Live,
    calls: impl Into<super::UdpCalls>,
) -> Result<RecvOutcome, EngineError> {
    let calls: super::UdpCalls = calls.into();
    let (fast, ecn) = (calls.fast, calls.ecn);
    let sock = link.socket();
    sock.set_read_timeout(Some(POLL))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    if ecn.is_some() {
        if calls.uring {
            return Err(EngineError::Invalid(
                "--ecn: io_uring's receive does not read a datagram's codepoint here; leave out --io-uring".into(),
            ));
        }
        crate::ecn::ask_codepoints(sock)?;
    }
    let mut batch = if fast.is_on() {
        Some(recv_batch(sock, fast)?)
    } else {
        None
    };
    let mut uring = if calls.uring {
        Some(crate::uring::UdpRecv::new(sock, buf.len())?)
    } else {
        None
    };
    let mut calls = match (&mut batch, &mut uring) {
        (_, Some(u)) => Calls::Uring(u),
        (Some(b), None) => Calls::Batch(b),
        (None, None) => Calls::One(buf),
    };
    let mut tally = Tally::new(token, conv).counting_ecn(ecn);
    let mut done_at: Option<Instant> = None;
    loop {
        match calls.take(link, &mut tally, drain, live)? {
            Call::Went => {}
            Call::Ended => break,
            // time to look at how the test ends
            Call::Quiet => {
                if tally.quiet(drain, &mut done_at)? {
                    break;
                }
            }
        }
    }
    Ok(tally.finish())
}
