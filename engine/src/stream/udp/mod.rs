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
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use proto::Token;

use crate::{
    EngineError,
    conventions::{Conventions, UdpEnd},
    handshake,
};

mod hello;
mod recv;
mod send;

pub use hello::{client_hello, client_hello_flow, server_hello, server_hellos};
pub(crate) use recv::{Call, Calls, Tally, recv_batch};
pub use recv::{RecvOutcome, SeqTracker, receive};
pub use send::{SendOutcome, Sender, send, send_batch, set_segment};

/// How a UDP_STREAM end makes its calls: one datagram a call, the fast
/// paths (`--batch`, `--gso`), or io_uring (`--io-uring`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCalls {
    pub fast: proto::UdpFast,
    pub uring: bool,
    /// A receiver counts each datagram's ECN codepoint, by intervals of
    /// this many milliseconds (`--ecn`).
    pub ecn: Option<u32>,
}

impl From<proto::UdpFast> for UdpCalls {
    fn from(fast: proto::UdpFast) -> UdpCalls {
        UdpCalls {
            fast,
            uring: false,
            ecn: None,
        }
    }
}

/// iperf3's datagram header: the send time (seconds, microseconds; here
/// the sender's clock since it started, wrapping), then `seq` (32 or 64
/// bits), big-endian; as much of it as fits.
#[inline]
pub(crate) fn iperf3_stamp(buf: &mut [u8], seq: u64, us: u32, counters64: bool) {
    if let Some(t) = buf.get_mut(..4) {
        t.copy_from_slice(&(us / 1_000_000).to_be_bytes());
    }
    if let Some(t) = buf.get_mut(4..8) {
        t.copy_from_slice(&(us % 1_000_000).to_be_bytes());
    }
    if counters64 {
        if let Some(s) = buf.get_mut(8..16) {
            s.copy_from_slice(&seq.to_be_bytes());
        }
    } else if let Some(s) = buf.get_mut(8..12) {
        s.copy_from_slice(&(seq as u32).to_be_bytes());
    }
}

/// An iperf3 datagram's sequence number and send time (microseconds,
/// wrapping), as much as it carries.
#[inline]
pub(crate) fn iperf3_read(d: &[u8], counters64: bool) -> (Option<u64>, Option<u32>) {
    let word = |r: std::ops::Range<usize>| {
        d.get(r)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .map(u32::from_be_bytes)
    };
    let stamp = word(0..4)
        .zip(word(4..8))
        .map(|(s, u)| s.wrapping_mul(1_000_000).wrapping_add(u));
    let seq = if counters64 {
        d.get(8..16)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map(u64::from_be_bytes)
    } else {
        word(8..12).map(u64::from)
    };
    (seq, stamp)
}

/// Bytes of header fields, cumulatively.
pub const ID_END: usize = 4;
pub const SEQ_END: usize = 12;
pub const STAMP_END: usize = 16;

/// How often the receiver looks up from its socket when nothing arrives.
pub(crate) const POLL: Duration = Duration::from_millis(20);
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
    /// Where the codepoint of every datagram from the peer is counted
    /// (`--ecn` on UDP_RR: each end counts what it receives).
    ecn: Option<&'a std::cell::RefCell<crate::ecn::EcnTally>>,
}

impl<'a> Link<'a> {
    /// A socket connected to its peer.
    pub fn connected(sock: &'a UdpSocket) -> Link<'a> {
        Link {
            sock,
            peer: None,
            ecn: None,
        }
    }

    /// An unconnected socket and the peer it talks to.
    pub fn to(sock: &'a UdpSocket, peer: SocketAddr) -> Link<'a> {
        Link {
            sock,
            peer: Some(peer),
            ecn: None,
        }
    }

    /// Count the codepoint of every datagram from the peer into `tally`
    /// (the socket must hand them: [`crate::ecn::ask_codepoints`]).
    pub fn counting(mut self, tally: &'a std::cell::RefCell<crate::ecn::EcnTally>) -> Link<'a> {
        self.ecn = Some(tally);
        self
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

    /// As [`Link::recv`], with the TOS byte the datagram came with when
    /// `marked` (the socket asks for it: `sys::opt::recv_codepoint`).
    #[inline]
    pub fn recv_marked(
        &self,
        buf: &mut [u8],
        marked: bool,
    ) -> io::Result<(Option<usize>, Option<u8>)> {
        if !marked {
            return Link { ecn: None, ..*self }.recv(buf).map(|n| (n, None));
        }
        let (n, from, tos) = crate::sys::recv_marked(self.sock, buf)?;
        match (self.peer, from) {
            (None, _) => Ok((Some(n), tos)),
            (Some(p), Some(from)) => Ok(((from == p).then_some(n), tos)),
            // No sender: the socket was shut down to wake us.
            (Some(_), None) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// A datagram from the peer (`Some` of its length), or one from someone
    /// else (`None`), which the caller ignores.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if let Some(tally) = self.ecn {
            let (n, tos) = self.recv_marked(buf, true)?;
            if n.is_some() {
                tally.borrow_mut().observe(tos, std::time::Instant::now());
            }
            return Ok(n);
        }
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

pub(crate) fn is_hello(datagram: &[u8], token: &Token) -> bool {
    datagram.len() == handshake::PREAMBLE_LEN && handshake::parse_preamble(datagram, token).is_ok()
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

/// Errors a UDP sender counts and goes on after: a full queue (ENOBUFS,
/// EAGAIN), a firewall (EPERM), an ICMP error reported on the socket
/// (ECONNREFUSED, Windows' WSAECONNRESET, host or network unreachable). UDP_RR's ends count them
/// the same way.
pub(crate) fn transient(e: &io::Error) -> bool {
    crate::sys::no_buffer_space(e)
        || matches!(
            e.kind(),
            io::ErrorKind::WouldBlock
                | io::ErrorKind::PermissionDenied
                | io::ErrorKind::ConnectionRefused
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::HostUnreachable
                | io::ErrorKind::NetworkUnreachable
        )
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

/// A drain a test tells the senders' count through (`u64::MAX`: not
/// yet).
#[cfg(test)]
pub(crate) struct Told(pub std::sync::atomic::AtomicU64);

#[cfg(test)]
impl Drain for Told {
    fn expected(&self) -> Option<u64> {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            u64::MAX => None,
            n => Some(n),
        }
    }
    fn aborted(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::{
        hello::CHALLENGE_TAG,
        recv::{Jitter, WINDOW},
        *,
    };
    use crate::{buffer::Ring, handshake::new_token, live::Live, timer::StopFlag};
    use proto::UdpFast;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::{net::UdpSocket, thread};

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
            let never = Told(AtomicU64::new(u64::MAX));
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

    /// iperf3's conventions: a UDP stream says iperf3's connect message
    /// and waits for the answer the server makes of it; a TCP stream
    /// presents the cookie its token makes.
    #[test]
    fn iperf3_streams_connect_as_iperf3s_do() {
        let conv = Conventions::iperf3(false);
        let token = new_token().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx_addr = rx.local_addr().unwrap();
        let server = thread::spawn(move || {
            let mut b = [0u8; 64];
            let (n, from) = rx.recv_from(&mut b).unwrap();
            let reply = proto::iperf3::udp_connect_reply(&b[..n]).unwrap();
            rx.send_to(&reply, from).unwrap();
            b[..n].to_vec()
        });
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dl = Instant::now() + Duration::from_secs(5);
        client_hello(Link::to(&tx, rx_addr), &token, &conv, dl).unwrap();
        assert_eq!(server.join().unwrap(), b"9876");
        // nobody answers: a timeout that says so
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = client_hello(
            Link::to(&tx, quiet.local_addr().unwrap()),
            &token,
            &conv,
            Instant::now() + Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(e.to_string().contains("connect message"), "{e}");
        let mut cookie = Vec::new();
        conv.present(&mut cookie, &token, 3).unwrap();
        assert_eq!(cookie, proto::iperf3::cookie_of(&token));
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
        let drain = std::sync::Arc::new(Told(AtomicU64::new(u64::MAX)));
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
        let drain = std::sync::Arc::new(Told(AtomicU64::new(u64::MAX)));
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
