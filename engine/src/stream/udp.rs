//! UDP_STREAM: the sender's and the receiver's loops, with exact counting.
//!
//! Every datagram starts with a header, as much of it as the message size
//! allows:
//!
//! ```text
//! 0      4              12       16
//! +------+--------------+--------+----------
//! | id   | seq (u64 BE) | send µs| netperf's fill pattern ...
//! +------+--------------+--------+----------
//! ```
//!
//! `id` is derived from the test's token, so that the receiver counts only
//! this test's datagrams; `seq` numbers the datagrams sent successfully, so
//! the receiver can tell loss from reordering and duplication; the send time
//! (microseconds since the sender started, wrapping) gives RFC 3550 jitter.
//! Messages shorter than 12 bytes are counted without sequence numbers:
//! they come from the one address the receiver's connected socket accepts.
//!
//! Before data flows, the sender sends the test's 36-byte preamble until the
//! receiver echoes it: the receiver then knows (and connects to) the
//! sender's exact address and port, and sends nothing to anyone else.

use std::{
    io,
    net::{IpAddr, SocketAddr, UdpSocket},
    thread,
    time::{Duration, Instant},
};

use proto::{Token, UdpFast};

use crate::{
    EngineError,
    buffer::Ring,
    clock,
    conventions::{Conventions, UdpEnd},
    handshake,
    latency::Latency,
    live::Live,
    sys::MsgBatch,
    timer::StopFlag,
};

/// Bytes of header fields, cumulatively.
pub const ID_END: usize = 4;
pub const SEQ_END: usize = 12;
pub const STAMP_END: usize = 16;

/// How often the receiver looks up from its socket when nothing arrives.
const POLL: Duration = Duration::from_millis(20);
/// After the sender is done, the receiver stops once nothing has arrived for
/// this long ...
pub const GRACE: Duration = Duration::from_millis(250);
/// ... and in any case this long after the sender said it was done.
pub const MAX_DRAIN: Duration = Duration::from_secs(3);

/// The one peer a UDP data socket talks to: through connect() (netperf's
/// `-- -n` on its side, `-- -N` on netserver's), or, as netperf 2.7 does by
/// default, with sendto() and recvfrom(), where a datagram from anyone else
/// is set aside.
#[derive(Clone, Copy, Debug)]
pub struct Link<'a> {
    sock: &'a UdpSocket,
    /// `None` when the socket is connected.
    peer: Option<SocketAddr>,
}

impl<'a> Link<'a> {
    /// A socket connected to its peer.
    pub fn connected(sock: &'a UdpSocket) -> Link<'a> {
        Link { sock, peer: None }
    }

    /// An unconnected socket and the peer it talks to.
    pub fn to(sock: &'a UdpSocket, peer: SocketAddr) -> Link<'a> {
        Link {
            sock,
            peer: Some(peer),
        }
    }

    pub fn socket(&self) -> &'a UdpSocket {
        self.sock
    }

    #[inline]
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        match self.peer {
            None => self.sock.send(buf),
            Some(p) => self.sock.send_to(buf, p),
        }
    }

    /// A datagram from the peer (`Some` of its length), or one from someone
    /// else (`None`), which the caller ignores.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.peer {
            None => self.sock.recv(buf).map(Some),
            Some(p) => match crate::sys::recv_from(self.sock, buf, false)? {
                (n, Some(from)) => Ok((from == p).then_some(n)),
                // No sender: the socket was shut down to wake us.
                (_, None) => Err(io::ErrorKind::WouldBlock.into()),
            },
        }
    }
}

/// netperf 2.7's conventions have no hello: wait for the first datagram
/// from `peer` (its address, and its port unless that is 0: netperf 2.7's
/// request names its data port when it has bound one) and leave it queued,
/// as the test's first; datagrams from elsewhere are dropped. With
/// `connect`, the socket is connected to the sender's address.
pub fn first_from(
    sock: &UdpSocket,
    peer: SocketAddr,
    connect: bool,
    deadline: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<SocketAddr, EngineError> {
    let peer_ip = peer.ip();
    let is_peer = |from: &SocketAddr| {
        from.ip() == peer_ip && (peer.port() == 0 || from.port() == peer.port())
    };
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut one = [0u8; 1];
    let from = loop {
        if aborted() {
            return Err(EngineError::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(format!(
                "the UDP data socket received nothing from {peer_ip}"
            )));
        }
        match crate::sys::recv_from(sock, &mut one, true) {
            Ok((_, Some(from))) if is_peer(&from) => break from,
            // someone else's: take it off the queue
            Ok((_, Some(_))) => {
                let _ = crate::sys::recv_from(sock, &mut one, false);
            }
            Ok((_, None)) | Err(_) => {}
        }
    };
    if connect {
        sock.connect(from)
            .map_err(|e| EngineError::io("connecting the UDP data socket", e))?;
    }
    Ok(from)
}

/// The identifier this test's datagrams carry.
pub fn test_id(token: &Token) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&token.0[28..32]);
    u32::from_be_bytes(b) ^ 0xA5A5_A5A5
}

fn is_hello(datagram: &[u8], token: &Token) -> bool {
    datagram.len() == handshake::PREAMBLE_LEN && handshake::parse_preamble(datagram, token).is_ok()
}

/// The first bytes of a return-routability challenge (see [`server_hello`]).
const CHALLENGE_TAG: &[u8; 8] = b"rsnetprf";
/// A challenge: the tag and a random cookie.
const CHALLENGE_LEN: usize = 8 + 32;

/// netperf's side of the handshake: send the preamble until the netserver
/// echoes it; answer the netserver's challenge if it sends one (it does
/// when our data address is not our control connection's). netperf 2.7's
/// conventions have no hello: nothing to do.
pub fn client_hello(
    link: Link<'_>,
    token: &Token,
    conv: &Conventions,
    deadline: Instant,
) -> Result<(), EngineError> {
    client_hello_flow(link, token, conv, 0, deadline)
}

/// [`client_hello`] of flow `flow` of a many-flow test: its hello names it.
pub fn client_hello_flow(
    link: Link<'_>,
    token: &Token,
    conv: &Conventions,
    flow: u32,
    deadline: Instant,
) -> Result<(), EngineError> {
    if conv.proof == crate::conventions::Proof::ControlPeer {
        return Ok(());
    }
    let sock = link.socket();
    let hello = handshake::preamble(token, flow);
    let mut buf = [0u8; 64];
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    loop {
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(
                "the netserver did not answer the UDP data socket's hello".into(),
            ));
        }
        // Errors here (an ICMP error from an earlier try) are retried.
        let _ = link.send(&hello);
        match link.recv(&mut buf) {
            Ok(Some(n)) if buf.get(..n) == Some(&hello[..]) => break,
            Ok(Some(CHALLENGE_LEN)) if buf.starts_with(CHALLENGE_TAG) => {
                let _ = link.send(buf.get(..CHALLENGE_LEN).unwrap_or_default());
            }
            _ => {}
        }
    }
    sock.set_read_timeout(None)
        .map_err(|e| EngineError::io("clearing a receive timeout", e))
}

/// netserver's side of the handshake: wait for the token, and echo it to
/// the sender's exact address and port, which is from then on the only one
/// the socket talks to; with `connect`, the socket is connected to it.
/// Until then the socket sends nothing but challenges.
///
/// A hello from `peer_ip` (the control connection's peer) is taken at once.
/// A hello from another address (netperf's data address is another of its
/// host's) is answered with a challenge, a random cookie, and taken once
/// the cookie comes back from there: whoever knows the token can only
/// direct our datagrams to an address it receives at, never to a third
/// party's.
pub fn server_hello(
    sock: &UdpSocket,
    token: &Token,
    peer_ip: IpAddr,
    connect: bool,
    deadline: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<SocketAddr, EngineError> {
    let mut buf = [0u8; 128];
    // Challenges sent, to at most a few addresses.
    let mut challenged: Vec<(SocketAddr, [u8; CHALLENGE_LEN])> = Vec::new();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let hello = handshake::preamble(token, 0);
    let from = loop {
        if aborted() {
            return Err(EngineError::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(
                "the UDP data socket received no hello with the test's token".into(),
            ));
        }
        let Ok((n, Some(from))) = crate::sys::recv_from(sock, &mut buf, false) else {
            continue;
        };
        let d = buf.get(..n).unwrap_or_default();
        if is_hello(d, token) {
            if from.ip() == peer_ip {
                break from;
            }
            let c = match challenged.iter().find(|(a, _)| *a == from) {
                Some((_, c)) => *c,
                None => {
                    let mut c = [0u8; CHALLENGE_LEN];
                    c[..8].copy_from_slice(CHALLENGE_TAG);
                    getrandom::fill(&mut c[8..])
                        .map_err(|e| EngineError::Invalid(format!("no random numbers: {e}")))?;
                    if challenged.len() >= 8 {
                        challenged.remove(0);
                    }
                    challenged.push((from, c));
                    c
                }
            };
            let _ = sock.send_to(&c, from);
        } else if n == CHALLENGE_LEN
            && challenged
                .iter()
                .any(|(a, c)| *a == from && handshake::bytes_eq(c, d))
        {
            break from;
        }
        // anything else, from anyone, is ignored
    };
    let link = if connect {
        sock.connect(from)
            .map_err(|e| EngineError::io("connecting the UDP data socket", e))?;
        Link::connected(sock)
    } else {
        Link::to(sock, from)
    };
    link.send(&hello)
        .map_err(|e| EngineError::io("answering the UDP hello", e))?;
    Ok(from)
}

/// netserver's side of a many-flow test's hellos: `flows` hellos, each
/// naming its flow, from `peer_ip` (the control connection's peer); each
/// flow gets a socket of its own from `new_socket` (bound to the same
/// address and port, with SO_REUSEADDR), connected to that hello's sender,
/// which answers it. The kernel then delivers each flow's datagrams to its
/// own socket (a connected socket is the better match), so each flow is
/// received, and its socket's drops counted, on its own. A repeated hello
/// is answered again from its flow's socket.
pub fn server_hellos(
    sock: &UdpSocket,
    token: &Token,
    peer_ip: IpAddr,
    flows: u32,
    new_socket: &dyn Fn() -> io::Result<UdpSocket>,
    deadline: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<Vec<UdpSocket>, EngineError> {
    let mut buf = [0u8; 128];
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut got: Vec<Option<UdpSocket>> = (0..flows).map(|_| None).collect();
    let mut left = flows as usize;
    while left > 0 {
        if aborted() {
            return Err(EngineError::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(format!(
                "the UDP data socket received the hellos of {} flows of {flows}",
                flows as usize - left
            )));
        }
        let Ok((n, Some(from))) = crate::sys::recv_from(sock, &mut buf, false) else {
            continue;
        };
        let d = buf.get(..n).unwrap_or_default();
        if from.ip() != peer_ip || n != handshake::PREAMBLE_LEN {
            continue;
        }
        let Ok(i) = handshake::parse_preamble(d, token) else {
            continue;
        };
        let Some(slot) = got.get_mut(i as usize) else {
            continue;
        };
        let hello = handshake::preamble(token, i);
        if let Some(s) = slot {
            let _ = s.send(&hello);
            continue;
        }
        let s = new_socket().map_err(|e| EngineError::io("a flow's UDP socket", e))?;
        s.connect(from)
            .map_err(|e| EngineError::io("connecting a flow's UDP socket", e))?;
        s.send(&hello)
            .map_err(|e| EngineError::io("answering a UDP hello", e))?;
        *slot = Some(s);
        left -= 1;
    }
    Ok(got.into_iter().flatten().collect())
}

/// When the sender stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    Stopped,
    /// Once this many bytes were sent successfully, as netperf 2.7 counts
    /// a UDP stream test's negative `-l`: whole datagrams, the last one
    /// taking the count to or past it.
    Bytes(u64),
}

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
    fn failed_with(&mut self, e: io::Error, what: &str) -> Result<(), EngineError> {
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

/// Errors a UDP sender counts and goes on after: a full queue (ENOBUFS,
/// EAGAIN), a firewall (EPERM), an ICMP error reported on the socket
/// (ECONNREFUSED, host or network unreachable). UDP_RR's ends count them
/// the same way.
pub(crate) fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOBUFS
                | libc::EAGAIN
                | libc::EPERM
                | libc::ECONNREFUSED
                | libc::EHOSTUNREACH
                | libc::ENETUNREACH
        )
    )
}

/// Spaces sends evenly at a bit rate: datagram `n` goes no earlier than
/// `start + n * interval`, so the average rate is exact however coarse the
/// sleeps are.
#[derive(Debug)]
struct Pacer {
    start: Instant,
    interval_ns: f64,
}

impl Pacer {
    fn new(start: Instant, size: usize, bps: u64) -> Pacer {
        Pacer {
            start,
            interval_ns: (size as f64 * 8.0 * 1e9) / bps as f64,
        }
    }

    fn wait(&self, n: u64) {
        let target = self.start + Duration::from_nanos((n as f64 * self.interval_ns) as u64);
        loop {
            let now = Instant::now();
            if now >= target {
                return;
            }
            let left = target - now;
            if left > Duration::from_micros(300) {
                thread::sleep(left - Duration::from_micros(200));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Our header, as much of it as the datagram holds: the test's id, the
/// sequence number, the send time (`us`, asked for only when it fits).
#[inline]
fn stamp_header(
    buf: &mut [u8],
    id: &[u8; 4],
    seq: u64,
    us: &mut impl FnMut() -> u32,
    conv: &Conventions,
) {
    if !conv.udp_header {
        return;
    }
    if let Some(h) = buf.get_mut(..ID_END) {
        h.copy_from_slice(id);
    }
    if let Some(s) = buf.get_mut(ID_END..SEQ_END) {
        s.copy_from_slice(&seq.to_be_bytes());
    }
    if let Some(s) = buf.get_mut(SEQ_END..STAMP_END) {
        s.copy_from_slice(&us().to_be_bytes());
    }
}

/// Sender role. The conventions say whether datagrams carry our header
/// and how the receiver learns that we are done (after the loop, netperf
/// 2.7's empty datagrams are sent here). With `fast` on, many datagrams a
/// system call: sendmmsg of `fast.batch` messages, each of `fast.segments`
/// datagrams cut by the kernel (UDP_SEGMENT).
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
    fast: UdpFast,
) -> Result<SendOutcome, EngineError> {
    if fast.is_on() {
        let mut out = send_fast(link, ring, id, conv, until, rate_bps, stop, live, lat, fast)?;
        return finish_send(link, conv, &mut out).map(|()| out);
    }
    let size = ring.size();
    let start = Instant::now();
    let start_ns = clock::now_ns();
    let pacer = rate_bps.map(|r| Pacer::new(start, size, r));
    let mut out = SendOutcome::default();
    let id = id.to_be_bytes();
    loop {
        if stop.is_set() {
            break;
        }
        if let Until::Bytes(n) = until
            && out.bytes >= n
        {
            break;
        }
        if let Some(p) = &pacer {
            p.wait(out.sent);
        }
        let buf = ring.next_buf();
        // (the clock in whole nanoseconds: cheaper than Instant's
        // arithmetic, once a datagram)
        stamp_header(
            buf,
            &id,
            out.sent,
            &mut || (clock::now_ns().wrapping_sub(start_ns) / 1000) as u32,
            conv,
        );
        let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
        let r = link.send(buf);
        if let Some(l) = lat.as_deref_mut() {
            l.record(clock::now_ns().wrapping_sub(t0));
        }
        match r {
            Ok(n) => {
                out.sent += 1;
                out.bytes += n as u64;
                live.publish(out.bytes, out.sent);
            }
            Err(e) => out.failed_with(e, "UDP send")?,
        }
    }
    out.elapsed = start.elapsed();
    finish_send(link, conv, &mut out)?;
    Ok(out)
}

/// After the loop: netperf 2.7's end, and an error if nothing went out.
fn finish_send(
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

/// [`send`] with sendmmsg (and UDP_SEGMENT). The slots start as copies of
/// the ring's buffers (its fill), one datagram after another.
#[allow(clippy::too_many_arguments)]
fn send_fast(
    link: Link<'_>,
    ring: &mut Ring,
    id: u32,
    conv: &Conventions,
    until: Until,
    rate_bps: Option<u64>,
    stop: &StopFlag,
    live: &Live,
    mut lat: Option<&mut Latency>,
    fast: UdpFast,
) -> Result<SendOutcome, EngineError> {
    let size = ring.size().max(1);
    let segments = fast.segments.max(1) as usize;
    let sock = link.socket();
    if segments > 1 {
        let gso = i32::try_from(size).unwrap_or(i32::MAX);
        crate::sys::set_int_option(sock, libc::SOL_UDP, crate::sys::UDP_SEGMENT, gso)
            .map_err(|e| EngineError::io("--gso: setting UDP_SEGMENT on the sending socket", e))?;
    }
    let n = fast.batch.max(1) as usize;
    let mut batch = MsgBatch::sending(n, size * segments, link.peer);
    for m in 0..n {
        for d in batch.slot_mut(m).chunks_mut(size) {
            d.copy_from_slice(ring.next_buf().get(..d.len()).unwrap_or_default());
        }
    }
    let start = Instant::now();
    let pacer = rate_bps.map(|r| Pacer::new(start, size, r));
    let mut out = SendOutcome::default();
    let id = id.to_be_bytes();
    let mut lens = Vec::with_capacity(n);
    loop {
        if stop.is_set() {
            break;
        }
        // this call's datagrams: a whole batch, or what a count leaves
        let mut left = (n * segments) as u64;
        if let Until::Bytes(total) = until {
            if out.bytes >= total {
                break;
            }
            left = left.min((total - out.bytes).div_ceil(size as u64));
        }
        if let Some(p) = &pacer {
            p.wait(out.sent);
        }
        lens.clear();
        let mut seq = out.sent;
        // one send time for the call's datagrams: one clock read a call
        let mut stamp = None;
        let mut us = || *stamp.get_or_insert_with(|| start.elapsed().as_micros() as u32);
        for m in 0..n {
            let here = (segments as u64).min(left) as usize;
            if here == 0 {
                break;
            }
            left -= here as u64;
            for d in batch.slot_mut(m).chunks_mut(size).take(here) {
                stamp_header(d, &id, seq, &mut us, conv);
                seq += 1;
            }
            lens.push(here * size);
        }
        let t0 = if lat.is_some() { clock::now_ns() } else { 0 };
        let r = batch.send(sock, &lens);
        if let Some(l) = lat.as_deref_mut() {
            l.record(clock::now_ns().wrapping_sub(t0));
        }
        match r {
            Ok(k) => {
                for m in 0..k {
                    let bytes = batch.sent(m) as u64;
                    out.sent += bytes.div_ceil(size as u64);
                    out.bytes += bytes;
                }
                live.publish(out.bytes, out.sent);
            }
            Err(e) => out.failed_with(e, "UDP send (sendmmsg)")?,
        }
    }
    out.elapsed = start.elapsed();
    Ok(out)
}

/// netperf 2.7's end of a UDP test: empty datagrams (any of them may be
/// lost; the receiver's timer is the fallback).
pub fn end_datagrams(link: Link<'_>, conv: &Conventions) {
    if let UdpEnd::EmptyDatagrams(n) = conv.udp_end {
        for _ in 0..n {
            let _ = link.send(&[]);
        }
    }
}

/// How the receiver learns that the sender is done, and about aborts.
pub trait Drain {
    /// How many datagrams the sender sent, once it has said so.
    fn expected(&self) -> Option<u64>;
    fn aborted(&self) -> bool;
}

/// What the receiver counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
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

const WINDOW: u64 = 1 << 16;

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
struct Jitter {
    last: Option<(i64, u32)>,
    j: f64,
}

impl Jitter {
    fn observe(&mut self, arrival_ns: i64, sent_us: u32) {
        if let Some((a, s)) = self.last {
            let transit_change =
                (arrival_ns - a) - i64::from(sent_us.wrapping_sub(s) as i32) * 1000;
            self.j += (transit_change.unsigned_abs() as f64 - self.j) / 16.0;
        }
        self.last = Some((arrival_ns, sent_us));
    }
}

/// What one datagram did to the count.
enum Took {
    /// Counted, or set aside (a hello, a duplicate, another test's).
    Went,
    /// An empty datagram that ends the test (netperf 2.7's conventions).
    End,
    /// The last one the sender said it sent.
    AllIn,
}

/// The receiver's count, datagram by datagram, whichever call brought
/// them.
struct Tally<'a> {
    header: bool,
    empty_ends: bool,
    id: [u8; 4],
    token: &'a Token,
    origin: Instant,
    seqs: SeqTracker,
    jitter: Jitter,
    out: RecvOutcome,
    first: Option<Instant>,
    last: Instant,
}

impl<'a> Tally<'a> {
    fn new(token: &'a Token, conv: &Conventions) -> Tally<'a> {
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
        }
    }

    /// One datagram from the peer.
    fn take(
        &mut self,
        d: &[u8],
        now: Instant,
        drain: &dyn Drain,
        live: &Live,
    ) -> Result<Took, EngineError> {
        let header = self.header;
        if d.is_empty() {
            if drain.aborted() {
                return Err(EngineError::Aborted);
            }
            if self.empty_ends {
                return Ok(Took::End);
            }
        }
        if header && is_hello(d, self.token) {
            return Ok(Took::Went);
        }
        self.out.calls += 1;
        if header && d.len() >= ID_END && d.get(..ID_END) != Some(&self.id[..]) {
            self.out.foreign += 1;
            return Ok(Took::Went);
        }
        let seq = d
            .get(ID_END..SEQ_END)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .filter(|_| header);
        let new = if let Some(s) = seq {
            self.seqs.observe(u64::from_be_bytes(s))
        } else {
            self.seqs.received += 1;
            true
        };
        if !new {
            return Ok(Took::Went);
        }
        let stamp = d
            .get(SEQ_END..STAMP_END)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .filter(|_| header);
        if let Some(s) = stamp {
            let arrival = now.duration_since(self.origin).as_nanos() as i64;
            self.jitter.observe(arrival, u32::from_be_bytes(s));
        }
        self.out.bytes += d.len() as u64;
        self.first.get_or_insert(now);
        self.last = now;
        live.publish(self.out.bytes, self.seqs.received);
        if drain.expected().is_some_and(|e| self.seqs.received >= e) {
            return Ok(Took::AllIn);
        }
        Ok(Took::Went)
    }

    /// Nothing came for a while: whether the test is over.
    fn quiet(&self, drain: &dyn Drain, done_at: &mut Option<Instant>) -> Result<bool, EngineError> {
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

    fn finish(mut self) -> RecvOutcome {
        self.out.received = self.seqs.received;
        self.out.out_of_order = self.seqs.out_of_order;
        self.out.duplicates = self.seqs.duplicates;
        self.out.jitter_ns = self.jitter.j as u64;
        self.out.elapsed = self
            .first
            .map_or(Duration::ZERO, |f| self.last.duration_since(f));
        self.out
    }
}

/// Receiver role; `buf` must hold the largest datagram expected. Datagrams
/// from anyone but the link's peer are counted as foreign. Without our
/// header (netperf 2.7's conventions) every datagram from the peer counts,
/// and an empty one ends the test. With `fast` on, many datagrams a call
/// (recvmmsg, and UDP_GRO's coalesced messages cut back into their
/// datagrams), each counted as if it had come alone.
pub fn receive(
    link: Link<'_>,
    buf: &mut [u8],
    token: &Token,
    conv: &Conventions,
    drain: &dyn Drain,
    live: &Live,
    fast: UdpFast,
) -> Result<RecvOutcome, EngineError> {
    let sock = link.socket();
    sock.set_read_timeout(Some(POLL))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    if fast.is_on() {
        return receive_fast(link, token, conv, drain, live, fast);
    }
    let mut tally = Tally::new(token, conv);
    let mut done_at: Option<Instant> = None;
    loop {
        // Quiet (nothing from the peer): time to look at how the test ends.
        // Someone else's datagrams count as quiet, or a flood of them would
        // keep the test from ending.
        let quiet = match link.recv(buf) {
            Ok(None) => {
                tally.out.foreign += 1;
                true
            }
            Ok(Some(n)) => {
                let d = buf.get(..n).unwrap_or_default();
                match tally.take(d, Instant::now(), drain, live)? {
                    Took::Went => false,
                    Took::End | Took::AllIn => break,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
            Err(e) if crate::error::no_datagram(&e) => true,
            Err(e) => return Err(EngineError::io("UDP receive", e)),
        };
        if quiet && tally.quiet(drain, &mut done_at)? {
            break;
        }
    }
    Ok(tally.finish())
}

/// [`receive`] with recvmmsg (and UDP_GRO).
fn receive_fast(
    link: Link<'_>,
    token: &Token,
    conv: &Conventions,
    drain: &dyn Drain,
    live: &Live,
    fast: UdpFast,
) -> Result<RecvOutcome, EngineError> {
    let sock = link.socket();
    if fast.segments > 1 {
        crate::sys::set_int_option(sock, libc::SOL_UDP, crate::sys::UDP_GRO, 1)
            .map_err(|e| EngineError::io("--gso: setting UDP_GRO on the receiving socket", e))?;
    }
    let n = fast.batch.max(1) as usize;
    let mut batch = MsgBatch::receiving(n, proto::test::UDP_SLOT as usize);
    let mut tally = Tally::new(token, conv);
    let mut done_at: Option<Instant> = None;
    'calls: loop {
        let quiet = match batch.recv(sock, n) {
            Ok(k) => {
                let now = Instant::now();
                let mut theirs = 0;
                for i in 0..k {
                    let (d, from, gro) = batch.received(i);
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
                        if !matches!(tally.take(seg, now, drain, live)?, Took::Went) {
                            break 'calls;
                        }
                        at += size;
                        if at >= d.len() {
                            break;
                        }
                    }
                }
                theirs == 0
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
            Err(e) if crate::error::no_datagram(&e) => true,
            Err(e) => return Err(EngineError::io("UDP receive (recvmmsg)", e)),
        };
        if quiet && tally.quiet(drain, &mut done_at)? {
            break;
        }
    }
    Ok(tally.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::new_token;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn sequence_tracking() {
        let mut t = SeqTracker::default();
        for s in [0, 1, 2, 5, 3, 3, 4, 6, 6] {
            t.observe(s);
        }
        assert_eq!(t.received, 7);
        assert_eq!(t.duplicates, 2);
        assert_eq!(t.out_of_order, 2); // 3 and 4 arrived after 5
    }

    #[test]
    fn sequence_window_slides() {
        let mut t = SeqTracker::default();
        t.observe(0);
        t.observe(WINDOW + 10);
        // 10 is out of the window now; WINDOW+5 is not and is new
        assert!(t.observe(WINDOW + 5));
        assert!(!t.observe(WINDOW + 5));
        assert!(t.observe(3 * WINDOW));
        assert!(t.observe(3 * WINDOW - 1));
        assert_eq!(t.received, 5);
        assert_eq!(t.duplicates, 1);
    }

    #[test]
    fn jitter_of_a_steady_stream_is_zero() {
        let mut j = Jitter::default();
        for i in 0..100u32 {
            j.observe(i64::from(i) * 1_000_000 + 777, i * 1000);
        }
        assert!(j.j < 1.0);
        let mut j = Jitter::default();
        for i in 0..1000u32 {
            let wobble = if i % 2 == 0 { 0 } else { 100_000 };
            j.observe(i64::from(i) * 1_000_000 + wobble, i * 1000);
        }
        // alternating 100 µs transit changes: J converges to 100 µs
        assert!((j.j - 100_000.0).abs() < 1_000.0, "{}", j.j);
    }

    struct Expect(AtomicU64);
    impl Drain for Expect {
        fn expected(&self) -> Option<u64> {
            match self.0.load(Ordering::Relaxed) {
                u64::MAX => None,
                n => Some(n),
            }
        }
        fn aborted(&self) -> bool {
            false
        }
    }

    /// netperf 2.7's conventions: no hello, the datagrams are the fill
    /// pattern alone, and the empty datagrams after the last one end the
    /// receiver, which knows no count.
    #[test]
    fn netperf2_conventions_carry_no_header_and_end_with_empty_datagrams() {
        let conv = Conventions::NETPERF2;
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx_addr = rx.local_addr().unwrap();
        let dl = Instant::now() + Duration::from_secs(5);
        let server = thread::spawn(move || {
            let from =
                first_from(&rx, "127.0.0.1:0".parse().unwrap(), false, dl, &|| false).unwrap();
            // the first datagram is still queued: it is the test's
            let mut peek = [0u8; 64];
            let (n, _) = rx.peek_from(&mut peek).unwrap();
            let mut buf = vec![0u8; 2048];
            // a count that never comes: only the empty datagram ends it
            let never = Expect(AtomicU64::new(u64::MAX));
            let r = receive(
                Link::to(&rx, from),
                &mut buf,
                &token,
                &conv,
                &never,
                &Live::new(),
                UdpFast::default(),
            )
            .unwrap();
            (r, peek[..n].to_vec())
        });
        client_hello(Link::to(&tx, rx_addr), &token, &conv, dl).unwrap();
        let fill = b"netperf";
        let sent = send(
            Link::to(&tx, rx_addr),
            &mut Ring::new(64, 2, fill),
            test_id(&token),
            &conv,
            Until::Bytes(64 * 200),
            Some(20_000_000),
            &StopFlag::new(),
            &Live::new(),
            None,
            UdpFast::default(),
        )
        .unwrap();
        let (got, first) = server.join().unwrap();
        assert_eq!(sent.sent, 200);
        assert_eq!((got.received, got.bytes), (200, 64 * 200));
        assert_eq!((got.foreign, got.duplicates, got.out_of_order), (0, 0, 0));
        // the fill pattern from its first byte: no id, sequence or stamp
        assert_eq!(&first[..fill.len()], fill);
    }

    #[test]
    fn exact_count_over_loopback() {
        exact_count(UdpFast::default());
    }

    /// sendmmsg and recvmmsg, UDP_SEGMENT and UDP_GRO, and both: every
    /// datagram counted as if it had come alone.
    #[test]
    fn exact_count_with_the_fast_paths() {
        for (batch, segments) in [(8, 1), (1, 8), (4, 16), (64, 1)] {
            exact_count(UdpFast { batch, segments });
        }
    }

    fn exact_count(fast: UdpFast) {
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let inode = crate::netstat::socket_inode(&rx).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let dl = Instant::now() + Duration::from_secs(5);
        let t = token;
        let drain = std::sync::Arc::new(Expect(AtomicU64::new(u64::MAX)));
        let d2 = drain.clone();
        let server = thread::spawn(move || {
            server_hello(&rx, &t, "127.0.0.1".parse().unwrap(), true, dl, &|| false).unwrap();
            let mut buf = vec![0u8; 2048];
            let r = receive(
                Link::connected(&rx),
                &mut buf,
                &t,
                &Conventions::NATIVE,
                &*d2,
                &Live::new(),
                fast,
            )
            .unwrap();
            // read the socket's own drop counter while it still exists
            let drops = crate::netstat::udp_socket_drops(inode).unwrap();
            (r, drops)
        });
        client_hello(Link::connected(&tx), &token, &Conventions::NATIVE, dl).unwrap();
        let sent = send(
            Link::connected(&tx),
            &mut Ring::new(100, 3, b""),
            test_id(&token),
            &Conventions::NATIVE,
            // 100-byte datagrams until 500,000 bytes are out
            Until::Bytes(500_000),
            Some(40_000_000),
            &StopFlag::new(),
            &Live::new(),
            None,
            fast,
        )
        .unwrap();
        assert_eq!(sent.sent, 5000);
        drain.0.store(5000, Ordering::Relaxed);
        let (got, drops) = server.join().unwrap();
        // On loopback a datagram is received or dropped by the socket
        // (which counts a coalesced message it drops once).
        if fast.segments > 1 {
            assert!(
                got.received <= 5000 && (got.received == 5000 || drops > 0),
                "{fast:?} {got:?}"
            );
        } else {
            assert_eq!(got.received + drops, 5000, "{fast:?}");
        }
        assert_eq!(got.bytes, got.received * 100);
        assert_eq!(got.duplicates, 0);
        assert_eq!(got.foreign, 0);
        // 5000 x 800 bits at 40 Mbit/s is 100 ms
        assert!(
            sent.elapsed >= Duration::from_millis(95),
            "{:?}",
            sent.elapsed
        );
    }

    /// A hello from an address other than the control peer's is taken
    /// only once that address has echoed a challenge.
    #[test]
    fn another_address_must_prove_it_receives() {
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx_addr = rx.local_addr().unwrap();
        // a spoofer's hello cannot be answered: the challenge goes elsewhere
        let victim = UdpSocket::bind("127.0.0.1:0").unwrap();
        let spoofer = UdpSocket::bind("127.0.0.1:0").unwrap();
        spoofer
            .send_to(&handshake::preamble(&token, 0), rx_addr)
            .unwrap();
        let dl = Instant::now() + Duration::from_secs(5);
        let server = thread::spawn(move || {
            server_hello(
                &rx,
                &token,
                "127.0.0.2".parse().unwrap(),
                false,
                dl,
                &|| false,
            )
        });
        // the client that does receive at its address answers and is taken
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        client_hello(Link::to(&tx, rx_addr), &token, &Conventions::NATIVE, dl).unwrap();
        assert_eq!(server.join().unwrap().unwrap(), tx.local_addr().unwrap());
        // the spoofer got a challenge, never the echo
        let mut b = [0u8; 64];
        spoofer
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let n = spoofer.recv(&mut b).unwrap();
        assert!(b[..n].starts_with(CHALLENGE_TAG));
        victim
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        assert!(victim.recv(&mut b).is_err());
    }

    #[test]
    fn hello_from_another_address_is_ignored() {
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&handshake::preamble(&token, 0), rx.local_addr().unwrap())
            .unwrap();
        // the control peer is 127.0.0.2: the hello from 127.0.0.1 is
        // challenged, and nobody answers
        let r = server_hello(
            &rx,
            &token,
            "127.0.0.2".parse().unwrap(),
            false,
            Instant::now() + Duration::from_millis(300),
            &|| false,
        );
        assert!(matches!(r, Err(EngineError::Timeout(_))));
    }

    /// netperf 2.7's default: sendto() and recvfrom() on unconnected
    /// sockets; a stranger's datagrams are set aside, not counted.
    #[test]
    fn unconnected_sockets_talk_only_to_their_peer() {
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (rx_addr, tx_addr) = (rx.local_addr().unwrap(), tx.local_addr().unwrap());
        let dl = Instant::now() + Duration::from_secs(5);
        let drain = std::sync::Arc::new(Expect(AtomicU64::new(u64::MAX)));
        let d2 = drain.clone();
        let (stranger_sent, wait_stranger) = std::sync::mpsc::channel();
        let server = thread::spawn(move || {
            let from = server_hello(
                &rx,
                &token,
                "127.0.0.1".parse().unwrap(),
                false,
                dl,
                &|| false,
            )
            .unwrap();
            assert_eq!(from, tx_addr);
            // a stranger, after the hello (and before the data: the
            // receiver may stop at the last datagram it expects)
            let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
            stranger.send_to(&[0u8; 100], rx_addr).unwrap();
            stranger_sent.send(()).unwrap();
            let mut buf = vec![0u8; 2048];
            receive(
                Link::to(&rx, from),
                &mut buf,
                &token,
                &Conventions::NATIVE,
                &*d2,
                &Live::new(),
                UdpFast::default(),
            )
            .unwrap()
        });
        client_hello(Link::to(&tx, rx_addr), &token, &Conventions::NATIVE, dl).unwrap();
        wait_stranger.recv().unwrap();
        let sent = send(
            Link::to(&tx, rx_addr),
            &mut Ring::new(100, 3, b""),
            test_id(&token),
            &Conventions::NATIVE,
            Until::Bytes(150),
            None,
            &StopFlag::new(),
            &Live::new(),
            None,
            UdpFast::default(),
        )
        .unwrap();
        assert_eq!(sent.sent, 2);
        drain.0.store(2, Ordering::Relaxed);
        let got = server.join().unwrap();
        assert_eq!(got.received, 2);
        assert_eq!(got.foreign, 1);
    }
}
