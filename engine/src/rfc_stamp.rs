//! A STAMP Session-Sender's data path (RFC 8762): test packets paced at
//! an interval to a reflector (any RFC 8762 reflector, ours or another),
//! each reflection read back with its arrival time. The packets' octets
//! are `proto::rfc_stamp`'s; what the times mean is the client's report.
//!
//! Our times (T1, T4) are the system clock's at one reading, carried on by
//! the monotonic clock, so that a step of the system clock during the
//! session moves no figure; the reflector's (T2, T3) are its own.

use std::{
    io,
    net::UdpSocket,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use proto::rfc_stamp::{self, CosAnswer, Mode, ReflectorPacket, SenderPacket, Tlv};

use crate::timer::StopFlag;

/// What a session sends.
#[derive(Clone, Debug)]
pub struct SenderPlan {
    /// Packets to send (`None`: until `duration` or the stop flag).
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// Between two test packets.
    pub interval: Duration,
    /// Each test packet's length (at least the mode's base packet; the
    /// rest an Extra Padding TLV, which RFC 8972 reflectors return).
    pub size: usize,
    pub ssid: u16,
    /// The first packet's sequence number (the next ones count on).
    pub first_seq: u32,
    pub mode: Mode,
    pub key: Option<Vec<u8>>,
    /// How long to wait for late reflections once the last is sent.
    pub linger: Duration,
    /// The traffic class (DSCP and ECN) the test packets carry and their
    /// reflections are asked to come back with: a Class of Service TLV in
    /// each packet (RFC 8972, with the cos-ecn draft's EC1), and the
    /// reflections' own read as they arrive.
    pub cos: Option<u8>,
}

/// One reflection, with the four times in nanoseconds since the Unix
/// epoch (T2 and T3 on the reflector's clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reflected {
    pub sender_seq: u32,
    /// The reflector's own sequence number.
    pub seq: u32,
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
    /// The TTL (hop limit) the test packet arrived with.
    pub ttl: u8,
    /// How the test packet arrived at the reflector and what the
    /// reflection was sent with, as its Class of Service TLV says.
    pub cos: Option<CosAnswer>,
    /// The traffic class the reflection arrived here with, where read.
    pub back_tos: Option<u8>,
}

/// What a session saw.
#[derive(Clone, Debug, Default)]
pub struct Session {
    pub sent: u64,
    pub replies: Vec<Reflected>,
    /// Datagrams that were no reflection of ours (too short, not our
    /// session's, an HMAC that did not verify).
    pub foreign: u64,
    /// When the first packet went out, nanoseconds since the Unix epoch.
    pub started_unix_ns: u64,
    /// Our time from the first send to the last reflection awaited.
    pub elapsed: Duration,
}

/// The system clock read once, then carried on by the monotonic clock.
#[derive(Clone, Copy, Debug)]
struct Clock {
    unix_ns: u64,
    at: Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            unix_ns: unix_now(),
            at: Instant::now(),
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.at).as_nanos();
        self.unix_ns
            .saturating_add(u64::try_from(d).unwrap_or(u64::MAX))
    }
}

/// The session's first test packet (each next one is made in place,
/// [`SenderPacket::restamp`]).
fn packet(plan: &SenderPlan) -> Vec<u8> {
    let base = plan.mode.base_len();
    let mut tlvs = Vec::new();
    if let Some(tos) = plan.cos {
        tlvs.push(Tlv::request(
            rfc_stamp::TLV_CLASS_OF_SERVICE,
            rfc_stamp::class_of_service_request(tos),
        ));
    }
    let pad = plan
        .size
        .saturating_sub(base + tlvs.iter().map(Tlv::wire_len).sum::<usize>());
    if pad >= 4 {
        tlvs.push(Tlv::request(rfc_stamp::TLV_EXTRA_PADDING, vec![0; pad - 4]));
    }
    // NTP format; the system clock's error, as the kernel keeps it
    let (synced, err) = crate::sys::clock_error().unwrap_or((false, 1.0));
    let mut b = SenderPacket {
        seq: plan.first_seq,
        timestamp: 0,
        error_estimate: rfc_stamp::error_estimate_of(synced, err),
        ssid: plan.ssid,
        tlvs,
    }
    .encode(plan.mode, plan.key.as_deref());
    // fewer than a TLV's 4 octets over the base: zeros (a reflector
    // returns them as they came)
    b.resize(plan.size.max(base), 0);
    b
}

/// The system clock now, nanoseconds since the Unix epoch.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// T4 on the session's clock: read now (`read`), less how long the
/// reflection waited in the socket, where the kernel stamped its receipt
/// (`kernel`, against the system clock, `unix_now`); an age past a second
/// is a clock that stepped, and is not taken.
fn received_at(read: u64, kernel: Option<u64>, unix_now: impl FnOnce() -> u64) -> u64 {
    // (the system clock read only where there is a stamp to age)
    let age = kernel
        .and_then(|k| unix_now().checked_sub(k))
        .filter(|&a| a < 1_000_000_000)
        .unwrap_or(0);
    read.saturating_sub(age)
}

/// A datagram that arrived at `t4` with traffic class `tos`, read as a
/// reflection of one of this session's test packets (sent at `sent_at`,
/// by their place in it); `None`: it is none (too short, another
/// session's, an HMAC that does not verify).
fn reflection(
    got: &[u8],
    tos: Option<u8>,
    t4: u64,
    plan: &SenderPlan,
    sent_at: &[u64],
) -> Option<Reflected> {
    let r = ReflectorPacket::decode(got, plan.mode, plan.key.as_deref()).ok()?;
    let place = r.sender_seq.wrapping_sub(plan.first_seq) as usize;
    let &t1 = sent_at.get(place).filter(|_| r.ssid == plan.ssid)?;
    let ns = |ntp: u64| u64::try_from(rfc_stamp::ntp_to_unix_nanos(ntp)).unwrap_or(0);
    // a Class of Service answer the reflector understood (no U, M, I)
    let cos = r
        .tlvs
        .iter()
        .find(|t| t.typ == rfc_stamp::TLV_CLASS_OF_SERVICE && t.flags == 0)
        .and_then(|t| CosAnswer::parse(&t.value))
        .filter(|_| plan.cos.is_some());
    Some(Reflected {
        sender_seq: r.sender_seq,
        seq: r.seq,
        t1,
        t2: ns(r.receive_timestamp),
        t3: ns(r.timestamp),
        t4,
        ttl: r.sender_ttl,
        cos,
        back_tos: tos.filter(|_| plan.cos.is_some()),
    })
}

/// Run a session on `sock` (connected to the reflector) until its count
/// or duration, or `stop`; then wait `linger` for late reflections.
pub fn run(sock: &UdpSocket, plan: &SenderPlan, stop: &StopFlag) -> io::Result<Session> {
    let clock = Clock::new();
    let start = Instant::now();
    let mut s = Session {
        started_unix_ns: clock.ns(start),
        ..Session::default()
    };
    // each packet's T1, by its place in the session
    let mut sent_at: Vec<u64> = Vec::new();
    let mut test_packet = packet(plan);
    // T4: the kernel's receipt of each reflection, where it says
    let _ = crate::sys::opt::recv_timestamps(sock);
    if plan.cos.is_some() {
        // the reflections' traffic class, as they arrive (a platform that
        // cannot tell leaves the way back unknown)
        let v6 = sock.peer_addr().is_ok_and(|a| a.is_ipv6());
        let _ = crate::sys::opt::recv_codepoint(sock, v6);
    }
    let mut buf = vec![0u8; rfc_stamp::MAX_PACKET + 1];
    let mut next = start;
    let mut last_send = start;
    loop {
        let now = Instant::now();
        let sending = !stop.is_set()
            && plan.count.is_none_or(|n| s.sent < n)
            && plan
                .duration
                .is_none_or(|d| now.saturating_duration_since(start) < d);
        if sending && now >= next {
            let t1 = clock.ns(now);
            let seq = plan.first_seq.wrapping_add(s.sent as u32);
            let t1_ntp = rfc_stamp::ntp_from_unix_nanos(u128::from(t1));
            SenderPacket::restamp(
                &mut test_packet,
                plan.mode,
                plan.key.as_deref(),
                seq,
                t1_ntp,
            );
            match sock.send(&test_packet) {
                Ok(_) => {}
                // a reflector not (yet) there: the packet counts as lost
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
            sent_at.push(t1);
            s.sent += 1;
            last_send = now;
            next += plan.interval;
            // a late sender catches up no more than one interval
            if next < now {
                next = now;
            }
            continue;
        }
        let deadline = if sending {
            next
        } else {
            let all_in = s.replies.len() as u64 >= s.sent;
            if all_in || now.saturating_duration_since(last_send) >= plan.linger || stop.is_set() {
                break;
            }
            last_send + plan.linger
        };
        let wait = deadline
            .saturating_duration_since(now)
            .min(Duration::from_millis(50));
        if !crate::sys::wait_one_readable(sock, wait)? {
            continue;
        }
        let d = match crate::sys::recv_stamped(sock, &mut buf) {
            Ok(d) => d,
            // (a reflector not there yet: its ICMP refusal, not an end)
            Err(e)
                if crate::sys::nothing_yet(&e) || e.kind() == io::ErrorKind::ConnectionRefused =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        let t4 = received_at(clock.ns(Instant::now()), d.arrived, unix_now);
        let got = buf.get(..d.len).unwrap_or_default();
        match reflection(got, d.tos, t4, plan, &sent_at) {
            Some(r) => s.replies.push(r),
            None => s.foreign += 1,
        }
    }
    s.elapsed = Instant::now().saturating_duration_since(start);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::rfc_stamp::{Numbering, Received, Reflector};

    #[test]
    fn t4_is_the_kernels_receipt_on_the_sessions_clock() {
        let at = |ns: u64| move || ns;
        // read 40 us after the kernel took it: 40 us earlier
        assert_eq!(
            received_at(1_000_000, Some(9_960_000), at(10_000_000)),
            960_000
        );
        // no kernel stamp, or a clock that stepped: as read
        assert_eq!(received_at(1_000_000, None, at(10_000_000)), 1_000_000);
        assert_eq!(
            received_at(1_000_000, Some(11_000_000), at(10_000_000)),
            1_000_000
        );
        assert_eq!(
            received_at(1_000_000, Some(1), at(5_000_000_000)),
            1_000_000
        );
    }

    /// A session against a reflector on a thread of its own (proto's
    /// rules over a real socket), every packet answered.
    #[test]
    fn a_session_reads_back_each_reflection_with_its_times() {
        let refl = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = refl.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
            let mut b = [0u8; 2048];
            let mut out = [0u8; 2048];
            refl.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            for _ in 0..20 {
                let Ok((n, from)) = refl.recv_from(&mut b) else {
                    return;
                };
                let rx = Received {
                    from,
                    at: rfc_stamp::ntp_from_unix_nanos(1),
                    ttl: Some(64),
                    tos: None,
                    to_port: at.port(),
                };
                let now = || rfc_stamp::ntp_from_unix_nanos(2);
                let r = r.reflect(&b[..n], &rx, now, &mut out).unwrap();
                refl.send_to(&out[..r.len], from).unwrap();
            }
        });
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(at).unwrap();
        let plan = SenderPlan {
            count: Some(20),
            duration: None,
            interval: Duration::from_millis(1),
            size: 100,
            ssid: 9,
            first_seq: 1000,
            mode: Mode::Unauthenticated,
            key: None,
            linger: Duration::from_secs(1),
            cos: None,
        };
        let s = run(&sock, &plan, &StopFlag::new()).unwrap();
        t.join().unwrap();
        assert_eq!(s.sent, 20);
        assert_eq!(s.replies.len(), 20);
        for (i, r) in s.replies.iter().enumerate() {
            assert_eq!(r.sender_seq, 1000 + i as u32);
            assert_eq!(r.seq, i as u32, "the reflector's own count");
            assert!(r.t4 >= r.t1);
            assert_eq!((r.t2, r.t3, r.ttl), (1, 2, 64));
        }
        assert_eq!(s.foreign, 0);
    }
}
