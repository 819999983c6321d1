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

/// Test packets read (recvmmsg) and reflections sent (sendmmsg) a call.
const BATCH: usize = 64;

fn reflect_until_stopped(sock: &UdpSocket, local: SocketAddr, shared: &Shared) {
    let cfg = &shared.config.stamp;
    let mut reflector = Reflector::new(cfg.mode(), cfg.numbering, cfg.key.clone());
    reflector.error_estimate = clock_estimate();
    let mut pace = Pace::new(cfg.per_source);
    let metrics = &shared.config.metrics;
    let log = &shared.config.logger;
    let slot = rfc_stamp::MAX_PACKET + 1;
    let mut rx = MsgBatch::receiving(BATCH, slot);
    let mut tx = Replies {
        batch: MsgBatch::replying(BATCH, slot),
        lens: Vec::with_capacity(BATCH),
        tos: None,
    };
    let mut out = vec![0u8; slot];
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
        // T2: when the batch came out of the kernel's queue
        let at = ntp_now();
        let now = Instant::now();
        for i in 0..n {
            let (req, from, _) = rx.received(i);
            let Some(from) = from else { continue };
            if !allow.0.allows(from.ip()) {
                metrics.stamp_dropped("prefix", 1);
                continue;
            }
            if !pace.admit(from.ip(), now) {
                metrics.stamp_dropped("rate", 1);
                continue;
            }
            if req.len() > rfc_stamp::MAX_PACKET {
                metrics.stamp_dropped("long", 1);
                continue;
            }
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
            match reflector.reflect(req, &meta, ntp_now, &mut out) {
                // Class of Service: the reflection marked with the DSCP
                // asked (never an ECN codepoint of its own)
                Ok(r) => tx.add(
                    sock,
                    from,
                    out.get(..r.len).unwrap_or_default(),
                    r.tos.map(|t| t & !0x03),
                    shared,
                ),
                Err(StampError::Hmac) => metrics.stamp_dropped("hmac", 1),
                Err(StampError::Short(_)) => metrics.stamp_dropped("short", 1),
                Err(StampError::Long(_)) => metrics.stamp_dropped("long", 1),
            }
        }
        tx.flush(sock, shared);
    }
}

/// Reflections waiting to go in one sendmmsg, all with one traffic class.
#[derive(Debug)]
struct Replies {
    batch: MsgBatch,
    lens: Vec<usize>,
    /// The socket's traffic class now (`None`: as it was made).
    tos: Option<u8>,
}

impl Replies {
    /// One more reflection, to `to`, marked `tos` (those before it go
    /// first where the mark changes, or the batch is full).
    fn add(
        &mut self,
        sock: &UdpSocket,
        to: SocketAddr,
        b: &[u8],
        tos: Option<u8>,
        shared: &Shared,
    ) {
        if tos != self.tos || self.lens.len() == self.batch.len() {
            self.flush(sock, shared);
        }
        if tos != self.tos {
            let v6 = to.is_ipv6();
            let _ = engine::sys::opt::set_tos(sock, v6, i32::from(tos.unwrap_or(0)));
            self.tos = tos;
        }
        let i = self.lens.len();
        let slot = self.batch.slot_mut(i);
        if let Some(s) = slot.get_mut(..b.len()) {
            s.copy_from_slice(b);
            self.batch.set_to(i, to);
            self.lens.push(b.len());
        }
    }

    /// Send what waits; what the kernel would not take is counted dropped.
    fn flush(&mut self, sock: &UdpSocket, shared: &Shared) {
        if self.lens.is_empty() {
            return;
        }
        let m = &shared.config.metrics;
        match self.batch.send(sock, &self.lens) {
            Ok(sent) => {
                m.stamp_reflected(sent as u64);
                if sent < self.lens.len() {
                    m.stamp_dropped("send", (self.lens.len() - sent) as u64);
                }
            }
            Err(e) => {
                shared
                    .config
                    .logger
                    .warn_limited("stamp-send", &format!("--stamp: {e}"));
                m.stamp_dropped("send", self.lens.len() as u64);
            }
        }
        self.lens.clear();
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
