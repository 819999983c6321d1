//! `-t STAMP`: netperf as a STAMP Session-Sender (RFC 8762) against any
//! STAMP reflector (a router's, a probe's, `netserver --stamp`): no
//! netserver and no control connection, so it is a source of its
//! own ([`crate::source::Source`]), whose measurements every output reads as
//! a test's.
//!
//! - `-H HOST -- -P ,PORT`: the reflector (STAMP's port 862 by default).
//! - `-l SECS` or `-l -COUNT`; `-- -m SIZE`: each test packet's octets (44
//!   at least; more is an Extra Padding TLV); `-- --rate BITS`: the pace
//!   (100 packets a second by default); `-Y`: the DSCP and ECN codepoint
//!   the packets carry and the reflections are asked to come back with
//!   (a Class of Service TLV: how each arrived, each way, is counted);
//!   `-- --stamp-key FILE`: authenticated mode
//!   (112-octet packets, HMAC-SHA-256 under the file's key).
//! - Figures: the round trip of each reflection (`(T4 - T1) - (T3 - T2)`:
//!   the reflector's residence taken out) as the test's latency; the
//!   queueing delay each way by the one-way method (`report::one_way`: no
//!   synchronised clocks, the drift fitted); loss each way, duplicates and
//!   reordering from the sequence numbers (`report::stamp`).

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};

use anyhow::{Context as _, Result, anyhow};
use engine::rfc_stamp::{Reflected, SenderPlan};
use proto::{
    TestSpec,
    rfc_stamp::{Mode, PORT},
    stamp::Stamps,
};

use crate::{
    family::{self, Context},
    output::Server,
    plan::{Length, Plan},
    report::{Measurement, one_way, stamp::StampFigures},
    source::Source,
};

/// Test packets a second where `--rate` does not say.
pub const DEFAULT_PACKETS_PER_SECOND: f64 = 100.0;
/// The fastest pace asked: a packet each 10 us.
const MIN_INTERVAL_NS: f64 = 10_000.0;

/// A Session-Sender to the reflector a plan names.
#[derive(Debug)]
pub struct Sender {
    reflector: SocketAddr,
    sock: UdpSocket,
}

impl Sender {
    /// The reflector's address (`-H`, `-- -P ,PORT`), a socket connected
    /// to it, marked as `-Y` asks.
    pub fn new(plan: &Plan) -> Result<Sender> {
        let host = plan.host.as_deref().unwrap_or("localhost");
        let port = plan.remote_data_port.filter(|&p| p > 0).unwrap_or(PORT);
        let reflector = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("-H {host}: no address"))?
            .find(|a| match plan.data_family {
                optparse::value::AddrFamily::V4 => a.is_ipv4(),
                optparse::value::AddrFamily::V6 => a.is_ipv6(),
                optparse::value::AddrFamily::Unspec => true,
            })
            .ok_or_else(|| anyhow!("-H {host}: no address of the family asked"))?;
        let any: SocketAddr = if reflector.is_ipv6() {
            "[::]:0".parse()?
        } else {
            "0.0.0.0:0".parse()?
        };
        let sock = UdpSocket::bind(any).context("the STAMP sender's socket")?;
        sock.connect(reflector)
            .with_context(|| format!("the reflector {reflector}"))?;
        if let Some(tos) = plan.local.tos {
            engine::sys::opt::set_tos(&sock, reflector.is_ipv6(), i32::from(tos))
                .context("-Y: the test packets' DSCP")?;
        }
        Ok(Sender { reflector, sock })
    }

    /// What a session of the plan sends.
    fn session_plan(plan: &Plan) -> Result<SenderPlan> {
        let key = plan
            .stamp_key
            .as_ref()
            .map(|p| {
                let b = std::fs::read(p).with_context(|| format!("--stamp-key {}", p.display()))?;
                let k = b.trim_ascii_end().to_vec();
                if k.is_empty() {
                    anyhow::bail!("--stamp-key {}: the file holds no key", p.display());
                }
                Ok(k)
            })
            .transpose()?;
        let mode = if key.is_some() {
            Mode::Authenticated
        } else {
            Mode::Unauthenticated
        };
        // -Y: the Class of Service TLV (8 octets) in every test packet
        let cos = plan.local.tos;
        let least = mode.base_len() + if cos.is_some() { 8 } else { 0 };
        let size = plan
            .local
            .send_size
            .map_or(least, |n| n as usize)
            .max(least);
        if size > proto::rfc_stamp::MAX_PACKET {
            anyhow::bail!(
                "-- -m {size}: a STAMP test packet is at most {} octets",
                proto::rfc_stamp::MAX_PACKET
            );
        }
        let per_second = match plan.rate_bps {
            Some(bits) => bits as f64 / (size as f64 * 8.0),
            None => DEFAULT_PACKETS_PER_SECOND,
        };
        let interval_ns = (1e9 / per_second).max(MIN_INTERVAL_NS);
        let (count, duration) = match plan.length {
            Length::Count(n) => (Some(n), None),
            Length::Seconds(0) => (None, None),
            Length::Seconds(s) => (None, Some(std::time::Duration::from_secs(s))),
        };
        let mut r = [0u8; 6];
        let _ = getrandom::fill(&mut r);
        Ok(SenderPlan {
            count,
            duration,
            interval: std::time::Duration::from_nanos(interval_ns as u64),
            size,
            ssid: u16::from_be_bytes([r[0], r[1]]).max(1),
            // a random start: a stateless reflector's copy of it is then
            // told from a stateful one's count from 0
            first_seq: u32::from_be_bytes([r[2], r[3], r[4], r[5]]) | 0x8000_0000,
            mode,
            key,
            linger: std::time::Duration::from_secs(1),
            cos,
        })
    }
}

impl Source for Sender {
    fn server(&self) -> Server {
        Server {
            local: self
                .sock
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            remote: self.reflector,
            software: "STAMP reflector (RFC 8762)".into(),
            embedded: false,
        }
    }

    fn preflight(&mut self, plan: &Plan) -> Result<TestSpec> {
        let sp = Sender::session_plan(plan)?;
        let fam = if self.reflector.is_ipv6() {
            proto::Family::V6
        } else {
            proto::Family::V4
        };
        // (the request is each test packet, the response its reflection)
        let mut spec = family::spec_for(plan, fam)?;
        spec.request_size = sp.size as u32;
        spec.response_size = sp.size as u32;
        Ok(spec)
    }

    fn measure(&mut self, plan: &Plan, ctx: &Context) -> Result<Measurement> {
        let sp = Sender::session_plan(plan)?;
        let stop = engine::timer::StopFlag::new();
        let _guard = crate::interrupt::stop_on_interrupt(&stop);
        let s = engine::rfc_stamp::run(&self.sock, &sp, &stop)
            .with_context(|| format!("STAMP to {}", self.reflector))?;
        let _ = ctx;
        let mut m = measurement(&s, &sp);
        let sock = socket2::SockRef::from(&self.sock);
        m.local.send_buf = sock.send_buffer_size().unwrap_or(0) as u32;
        m.local.recv_buf = sock.recv_buffer_size().unwrap_or(0) as u32;
        m.local.addr = self.sock.local_addr().ok();
        Ok(m)
    }
}

/// A session's measurement: its round trips as the test's latency, its
/// queueing delay each way, its counts.
fn measurement(s: &engine::rfc_stamp::Session, sp: &SenderPlan) -> Measurement {
    let figures = StampFigures::of(&s.replies, s.sent, s.foreign).with_cos(sp.cos, &s.replies);
    let mut first: Vec<&Reflected> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in &s.replies {
        if seen.insert(r.sender_seq) {
            first.push(r);
        }
    }
    let mut latency = engine::latency::Latency::new();
    for r in &first {
        let round = r.t4.saturating_sub(r.t1);
        let residence = r.t3.saturating_sub(r.t2);
        latency.record(round.saturating_sub(residence).max(1));
    }
    let stamps: Vec<Stamps> = first
        .iter()
        .map(|r| Stamps {
            seq: u64::from(r.sender_seq),
            t1: r.t1,
            t2: r.t2,
            t3: r.t3,
            t4: r.t4,
        })
        .collect();
    let span = first
        .iter()
        .map(|r| r.t1)
        .min()
        .zip(first.iter().map(|r| r.t1).max())
        .map(|(a, b)| (a, b.saturating_add(1)));
    // (the session's span as the test's own, as `--one-way` beside a test)
    let spans = one_way::Spans {
        idle: None,
        loaded: span,
    };
    let one_way = one_way::analyse(&stamps, spans, s.sent).map(|mut o| {
        o.started_unix = s.started_unix_ns as f64 / 1e9;
        o
    });
    let bytes = |n: u64| n.saturating_mul(sp.size as u64);
    let mut m = Measurement {
        elapsed: s.elapsed.as_secs_f64(),
        latency: latency.summary(),
        lost: figures.lost_round_trip,
        one_way,
        stamp: Some(figures),
        ..Measurement::default()
    };
    m.local.counts.bytes_sent = bytes(s.sent);
    m.local.counts.bytes_received = bytes(figures.reflected);
    m.local.counts.transactions = figures.reflected;
    m.local.send_size = sp.size as u32;
    m.local.recv_size = sp.size as u32;
    m.remote.counts.transactions = figures.reflected;
    m
}
