//! `--stamp`: a STAMP Session-Reflector (RFC 8762, with RFC 8972's TLVs)
//! on a UDP port, a thread of its own. What a reflection holds is
//! `proto::rfc_stamp`'s (sans-IO); this module reads each test packet with
//! the IP header's TTL and traffic class, stamps its receipt and its
//! reflection from the system clock, holds each address to a rate, and
//! sends the reflection back from the port it came to.
//!
//! It answers nothing larger than what it was sent (no amplification), and
//! no more than `--stamp-rate` packets a second to one address, so that
//! it cannot be turned on a third party by spoofed packets at more than
//! that pace.

use std::{
    collections::HashMap,
    io,
    net::{IpAddr, SocketAddr, UdpSocket},
    sync::Arc,
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use engine::sys::MsgBatch;
use proto::rfc_stamp::{self, Received, Reflector, StampError};

use crate::shared::Shared;

/// Start reflecting on `sock` until the daemon shuts down.
pub(crate) fn spawn(sock: UdpSocket, shared: &Arc<Shared>) -> io::Result<thread::JoinHandle<()>> {
    let shared = shared.clone();
    let local = sock.local_addr()?;
    let v6 = local.is_ipv6();
    // the IP header's TTL and traffic class with each packet (Ses-Sender
    // TTL, Class of Service); a platform that cannot tell says 255 and
    // reflects no DSCP2, as the RFCs allow
    let ttl = engine::sys::opt::recv_ttl(&sock, v6);
    let tos = engine::sys::opt::recv_codepoint(&sock, v6);
    if let Err(e) = ttl.and(tos) {
        shared.config.logger.log(
            1,
            &format!("--stamp on {local}: the received TTL and DSCP are not read here: {e}"),
        );
    }
    // each test packet's arrival as the kernel took it (T2), where it can
    if let Err(e) = engine::sys::opt::recv_timestamps(&sock) {
        shared.config.logger.log(
            1,
            &format!("--stamp on {local}: receipt times are taken when read: {e}"),
        );
    }
    // a read times out now and then, to see the daemon stop
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    thread::Builder::new()
        .name("stamp-reflector".into())
        .spawn(move || reflect_until_stopped(&sock, local, &shared))
}

/// The reflector's Error Estimate: the system clock's maximum error as the
/// kernel keeps it (adjtimex), and whether it is synchronised; where
/// that cannot be read, unsynchronised and a second.
fn clock_estimate() -> u16 {
    let (synced, err) = engine::sys::clock_error().unwrap_or((false, 1.0));
    rfc_stamp::error_estimate_of(synced, err)
}

/// The system clock now, as NTP's 64 bits.
fn ntp_now() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    rfc_stamp::ntp_from_unix_nanos(nanos)
}

/// Messages read (recvmmsg) and sent (sendmmsg) a call.
const BATCH: usize = 64;

/// A message's room where the kernel coalesces test packets (UDP_GRO): as
/// much as one receive can hold.
const COALESCED: usize = 65_536;

/// Reflections sent as one message (UDP_SEGMENT) at most, and their
/// octets: within what every kernel that has GSO takes (64 segments).
const RUN_PACKETS: usize = 64;
const RUN_OCTETS: usize = 65_000;

/// Reflections larger than this go one a message: a run's datagrams must
/// each fit the path's MTU whole, and 1,232 octets do on any IPv6 path.
const RUN_PACKET_MAX: usize = 1_232;

fn reflect_until_stopped(sock: &UdpSocket, local: SocketAddr, shared: &Shared) {
    let cfg = &shared.config.stamp;
    let mut reflector = Reflector::new(cfg.mode(), cfg.numbering, cfg.key.clone());
    reflector.error_estimate = clock_estimate();
    let mut pace = Pace::new(cfg.per_source);
    let metrics = &shared.config.metrics;
    let log = &shared.config.logger;
    // test packets the kernel took back to back from one sender come in
    // one message where it can coalesce them (UDP_GRO); reflections to one
    // sender go out the same way (UDP_SEGMENT): one pass through the
    // stack for a run of them, each still its own datagram on the wire
    let segmented = engine::sys::SEGMENTED_SENDS && engine::sys::opt::udp_gro(sock).is_ok();
    let one = rfc_stamp::MAX_PACKET + 1;
    let mut rx = MsgBatch::receiving(BATCH, if segmented { COALESCED } else { one });
    let mut tx = Replies::new(segmented);
    let mut left = Vec::new();
    let mut out = vec![0u8; one];
    // `--policy`'s [stamp] allow: read again each second (SIGHUP reloads it)
    let mut allow = (shared.config.policy.stamp(), Instant::now());
    while !shared.shutdown.is_triggered() {
        if allow.1.elapsed() >= Duration::from_secs(1) {
            allow = (shared.config.policy.stamp(), Instant::now());
            reflector.error_estimate = clock_estimate();
        }
        let n = match rx.recv(sock, BATCH) {
            Ok(n) => n,
            Err(e) if engine::sys::nothing_yet(&e) => continue,
            Err(e) => {
                log.warn_limited("stamp", &format!("--stamp on {local}: {e}"));
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // when the reflections asked about left (Follow-Up Telemetry)
        tx.departures(sock, &mut left);
        for (to, ssid, seq, ns) in left.drain(..) {
            reflector.transmitted(
                to,
                ssid,
                seq,
                rfc_stamp::ntp_from_unix_nanos(u128::from(ns)),
            );
        }
        // T2: when the batch came out of the kernel's queue
        let at = ntp_now();
        let now = Instant::now();
        for i in 0..n {
            let (message, from, coalesced) = rx.received(i);
            let Some(from) = from else { continue };
            // test packets the kernel coalesced share the first one's
            // receipt, TTL and traffic class (it coalesces only those whose
            // IP headers agree, taken in one poll)
            let meta = Received {
                from,
                // T2: the kernel's receipt, else when the batch was read
                at: rx
                    .arrived(i)
                    .map_or(at, |ns| rfc_stamp::ntp_from_unix_nanos(u128::from(ns))),
                ttl: rx.ttl(i),
                tos: rx.tos(i),
                to_port: local.port(),
            };
            if message.is_empty() {
                metrics.stamp_dropped("short", 1);
                continue;
            }
            let size = coalesced.unwrap_or(message.len()).max(1);
            if !allow.0.allows(from.ip()) {
                // (each test packet of it counted)
                metrics.stamp_dropped("prefix", message.len().div_ceil(size) as u64);
                continue;
            }
            for (k, req) in message.chunks(size).enumerate() {
                if !pace.admit(from.ip(), now) {
                    metrics.stamp_dropped("rate", 1);
                    continue;
                }
                if req.len() > rfc_stamp::MAX_PACKET {
                    metrics.stamp_dropped("long", 1);
                    continue;
                }
                match reflector.reflect(req, &meta, ntp_now, &mut out) {
                    // Class of Service: the reflection marked with the DSCP
                    // and the ECN codepoint asked (ECT at most: never CE)
                    Ok(r) => tx.add(
                        sock,
                        Reply {
                            to: from,
                            b: out.get(..r.len).unwrap_or_default(),
                            tos: r.tos,
                            // the reflections of what came coalesced go
                            // back so, those of packets that came one by
                            // one each as its own: a path's drops then
                            // fall on the reflections as on single packets
                            joins: k > 0,
                            // the kernel to tell when it left, for the
                            // session's next reflection
                            follow_up: r.follow_up.then_some((r.ssid, r.seq)),
                        },
                        shared,
                    ),
                    Err(StampError::Hmac) => metrics.stamp_dropped("hmac", 1),
                    Err(StampError::Short(_)) => metrics.stamp_dropped("short", 1),
                    Err(StampError::Long(_)) => metrics.stamp_dropped("long", 1),
                }
            }
        }
        tx.flush(sock, shared);
    }
}

/// Reflections waiting to go in one sendmmsg, all with one traffic class:
/// each message a run of reflections to one sender, of one length, that
/// the kernel cuts into datagrams (UDP_SEGMENT), or one reflection.
#[derive(Debug)]
struct Replies {
    batch: MsgBatch,
    runs: Vec<Run>,
    /// Whether runs may hold more than one reflection (until the kernel
    /// refuses one).
    segmented: bool,
    /// The socket's traffic class now (`None`: as it was made).
    tos: Option<u8>,
    /// Whether the kernel can tell when a given reflection left (its
    /// transmit timestamp by ID): found out when a sender first asks.
    stamps: Option<bool>,
    /// The next transmit timestamp's ID, and the reflections sent whose
    /// departure the kernel is to tell, oldest first: (ID, to, SSID, seq).
    next_id: u32,
    awaited: std::collections::VecDeque<(u32, SocketAddr, u16, u32)>,
    /// Whether the kernel has told any departure yet.
    told: bool,
}

/// Departures awaited at most; past them the oldest are given up.
const AWAITED: usize = 4096;

/// One reflection for [`Replies::add`].
struct Reply<'a> {
    to: SocketAddr,
    b: &'a [u8],
    /// Its traffic class.
    tos: Option<u8>,
    /// Whether it may go at the end of the last run.
    joins: bool,
    /// Its SSID and sequence number, where the sender asked when it left.
    follow_up: Option<(u16, u32)>,
}

/// One message of [`Replies`]: `count` reflections of `size` octets to `to`
/// (one alone where its departure is awaited: `follow_up`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    to: SocketAddr,
    size: usize,
    count: usize,
    follow_up: Option<(u16, u32)>,
}

impl Run {
    fn octets(&self) -> usize {
        self.size * self.count
    }

    /// Whether a reflection of `size` octets to `to` goes at the end of
    /// this run.
    fn takes(&self, to: SocketAddr, size: usize) -> bool {
        self.to == to
            && self.follow_up.is_none()
            && self.size == size
            && size <= RUN_PACKET_MAX
            && self.count < RUN_PACKETS
            && self.octets() + size <= RUN_OCTETS
    }
}

impl Replies {
    fn new(segmented: bool) -> Replies {
        let slot = if segmented {
            RUN_OCTETS
        } else {
            rfc_stamp::MAX_PACKET
        };
        Replies {
            batch: MsgBatch::replying(BATCH, slot),
            runs: Vec::with_capacity(BATCH),
            segmented,
            tos: None,
            stamps: None,
            next_id: 0,
            awaited: std::collections::VecDeque::new(),
            told: false,
        }
    }

    /// The awaited reflections whose departure the kernel has told since:
    /// (to, SSID, seq, when, ns since the Unix epoch) into `out`.
    fn departures(&mut self, sock: &UdpSocket, out: &mut Vec<(SocketAddr, u16, u32, u64)>) {
        if self.awaited.is_empty() {
            return;
        }
        let mut told = Vec::new();
        let _ = engine::sys::tx_stamps(sock, &mut told);
        self.told |= !told.is_empty();
        for (id, ns) in told {
            // IDs go up: those before this one were not told (dropped)
            while let Some(&(first, to, ssid, seq)) = self.awaited.front() {
                if id.wrapping_sub(first) >= 1 << 31 {
                    break;
                }
                self.awaited.pop_front();
                if first == id {
                    out.push((to, ssid, seq, ns));
                    break;
                }
            }
        }
    }

    /// One more reflection, to `to`, marked `tos` (those before it go
    /// first where the mark changes, or the batch is full): at the end of
    /// the last run where it `joins` it and the run takes it.
    fn add(&mut self, sock: &UdpSocket, reply: Reply<'_>, shared: &Shared) {
        let Reply {
            to,
            b,
            tos,
            joins,
            follow_up,
        } = reply;
        if follow_up.is_some() && self.stamps.is_none() {
            // the first sender to ask: the socket asks the kernel from now
            let ok = if engine::sys::tx_stamp_ids() {
                engine::sys::opt::tx_timestamps(sock).map_err(|e| e.to_string())
            } else {
                Err("a send stamped by its own ID on 127.0.0.1 told no departure (SCM_TS_OPT_ID needs Linux 6.13, and a loopback that is up)".into())
            };
            if let Err(e) = &ok {
                shared.config.logger.log(
                    1,
                    &format!("--stamp: Follow-Up Telemetry gets no departure times: {e}"),
                );
            }
            self.stamps = Some(ok.is_ok());
        }
        let follow_up = follow_up.filter(|_| self.stamps == Some(true));
        if tos != self.tos {
            self.flush(sock, shared);
            let v6 = to.is_ipv6();
            let _ = engine::sys::opt::set_tos(sock, v6, i32::from(tos.unwrap_or(0)));
            self.tos = tos;
        }
        let i = match self.runs.last() {
            Some(r) if joins && follow_up.is_none() && self.segmented && r.takes(to, b.len()) => {
                self.runs.len() - 1
            }
            _ => {
                if self.runs.len() == self.batch.len() {
                    self.flush(sock, shared);
                }
                self.runs.push(Run {
                    to,
                    size: b.len(),
                    count: 0,
                    follow_up,
                });
                self.runs.len() - 1
            }
        };
        let Some(run) = self.runs.get_mut(i) else {
            return;
        };
        let at = run.octets();
        if let Some(s) = self.batch.slot_mut(i).get_mut(at..at + b.len()) {
            s.copy_from_slice(b);
            run.count += 1;
        }
    }

    /// Send what waits; what the kernel would not take is counted dropped.
    fn flush(&mut self, sock: &UdpSocket, shared: &Shared) {
        if self.runs.is_empty() {
            return;
        }
        let m = &shared.config.metrics;
        let mut lens = [0usize; BATCH];
        let first_id = self.next_id;
        for (i, r) in self.runs.iter().enumerate() {
            let size = (r.count > 1).then(|| u16::try_from(r.size).unwrap_or(u16::MAX));
            self.batch.set_segment(i, size);
            self.batch.set_to(i, r.to);
            let id = r.follow_up.map(|_| {
                self.next_id = self.next_id.wrapping_add(1);
                self.next_id.wrapping_sub(1)
            });
            self.batch.set_tx_stamp(i, id);
            if let Some(l) = lens.get_mut(i) {
                *l = r.octets();
            }
        }
        let lens = lens.get(..self.runs.len()).unwrap_or_default();
        // sendmmsg says why a message was refused only when it is the first
        let (sent, error) = match self.batch.send(sock, lens) {
            Ok(sent) => (sent.min(self.runs.len()), None),
            Err(e) => (0, Some(e)),
        };
        let went = self.runs.get(..sent).unwrap_or_default();
        m.stamp_reflected(went.iter().map(|r| r.count as u64).sum());
        // the departures to hear of: those that went, by the IDs given
        let mut id = first_id;
        for r in went {
            if let Some((ssid, seq)) = r.follow_up {
                if self.awaited.len() >= AWAITED {
                    self.awaited.pop_front();
                }
                self.awaited.push_back((id, r.to, ssid, seq));
                id = id.wrapping_add(1);
            }
        }
        if self.awaited.len() >= AWAITED && !self.told {
            // thousands asked, none told (a driver that stamps nothing it
            // sends): asked no more
            self.stamps = Some(false);
            self.awaited.clear();
            shared.config.logger.log(
                1,
                "--stamp: Follow-Up Telemetry gets no departure times: the kernel told none of 4,096",
            );
        }
        if let Some(&refused) = self.runs.get(sent) {
            // the refused one and those after it: a reflection a call,
            // each as it goes
            let alone = self.resend_from(sock, sent, shared);
            if refused.count > 1 && alone && self.segmented {
                // a run refused whose reflections go one by one: a kernel
                // or route that will not cut datagrams (EIO: no checksum
                // offload; EINVAL), not the destination: one a message
                // from here on
                self.segmented = false;
                let why = error.as_ref().map_or("refused".into(), ToString::to_string);
                shared.config.logger.log(
                    1,
                    &format!(
                        "--stamp: a run of reflections was refused ({why}): one a message from now"
                    ),
                );
            } else if let Some(e) = error {
                shared
                    .config
                    .logger
                    .warn_limited("stamp-send", &format!("--stamp: {e}"));
            }
        }
        self.runs.clear();
    }

    /// The runs from `start` on, sent a reflection a call: whether any
    /// reflection of the first of them went.
    fn resend_from(&mut self, sock: &UdpSocket, start: usize, shared: &Shared) -> bool {
        let m = &shared.config.metrics;
        let (mut went, mut dropped, mut first) = (0u64, 0u64, false);
        for (i, r) in self.runs.iter().enumerate().skip(start) {
            let slot = self.batch.slot_mut(i);
            for k in 0..r.count {
                let b = slot.get(k * r.size..(k + 1) * r.size).unwrap_or_default();
                match sock.send_to(b, r.to) {
                    Ok(_) => {
                        went += 1;
                        first |= i == start;
                    }
                    Err(_) => dropped += 1,
                }
            }
        }
        m.stamp_reflected(went);
        if dropped > 0 {
            m.stamp_dropped("send", dropped);
        }
        first
    }
}

/// Each address's pace: a bucket of a second's reflections, refilled as
/// time passes; the most addresses remembered is bounded (the idlest are
/// forgotten first, a full bucket being what a forgotten address gets).
#[derive(Debug)]
struct Pace {
    per_second: f64,
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

/// Addresses whose pace is remembered at once.
const PACED_ADDRESSES: usize = 16_384;

impl Pace {
    fn new(per_second: u32) -> Pace {
        Pace {
            per_second: f64::from(per_second.max(1)),
            buckets: HashMap::new(),
        }
    }

    /// Whether `ip` may have one more reflection at `now`.
    fn admit(&mut self, ip: IpAddr, now: Instant) -> bool {
        if self.buckets.len() >= PACED_ADDRESSES && !self.buckets.contains_key(&ip) {
            // forget those whose buckets are full again (idle a second)
            self.buckets
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < Duration::from_secs(1));
            if self.buckets.len() >= PACED_ADDRESSES {
                return false;
            }
        }
        let rate = self.per_second;
        let (tokens, at) = self.buckets.entry(ip).or_insert((rate, now));
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * rate).min(rate);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_held_to_its_pace_and_others_are_not() {
        let mut p = Pace::new(100);
        let t0 = Instant::now();
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let b: IpAddr = "198.18.0.2".parse().unwrap();
        let admitted = (0..150).filter(|_| p.admit(a, t0)).count();
        assert_eq!(admitted, 100, "a second's worth at once");
        assert!(p.admit(b, t0), "another address has its own");
        // a tenth of a second later: ten more
        let t1 = t0 + Duration::from_millis(100);
        let more = (0..50).filter(|_| p.admit(a, t1)).count();
        assert!((9..=10).contains(&more), "{more}");
    }

    #[test]
    fn a_run_takes_only_its_own_size_to_its_own_sender_within_bounds() {
        let a: SocketAddr = "198.18.0.1:862".parse().unwrap();
        let b: SocketAddr = "198.18.0.1:863".parse().unwrap();
        let r = Run {
            to: a,
            size: 44,
            count: 1,
            follow_up: None,
        };
        assert!(r.takes(a, 44));
        assert!(!r.takes(b, 44), "another sender");
        assert!(!r.takes(a, 45), "another size");
        let full = Run {
            count: RUN_PACKETS,
            ..r
        };
        assert!(!full.takes(a, 44), "as many as a run holds");
        let big = Run {
            to: a,
            size: 1_200,
            count: RUN_OCTETS / 1_200,
            follow_up: None,
        };
        assert!(big.count < RUN_PACKETS && !big.takes(a, 1_200), "octets");
        let over = Run {
            to: a,
            size: RUN_PACKET_MAX + 1,
            count: 1,
            follow_up: None,
        };
        let awaited = Run {
            follow_up: Some((7, 0)),
            ..r
        };
        assert!(!awaited.takes(a, 44), "its departure told alone");
        assert!(
            !over.takes(a, RUN_PACKET_MAX + 1),
            "past what every MTU takes"
        );
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let mut p = Pace::new(10);
        let t0 = Instant::now();
        for i in 0..PACED_ADDRESSES as u32 {
            assert!(p.admit(IpAddr::from(i.to_be_bytes()), t0));
        }
        // full, none idle: a new address waits
        assert!(!p.admit("203.0.113.1".parse().unwrap(), t0));
        // a second on, the idle are forgotten
        assert!(p.admit("203.0.113.1".parse().unwrap(), t0 + Duration::from_secs(2)));
        assert!(p.buckets.len() <= 2);
    }
}
