//! STAMP, the Simple Two-way Active Measurement Protocol (RFC 8762), with
//! its optional TLVs (RFC 8972): the test packets of a Session-Sender and
//! a Session-Reflector, in both modes, and the reflector's rules, sans-IO
//! (bytes and the times and IP header fields a socket read, in; bytes and
//! the codepoint to send with, out).
//!
//! Not to be confused with [`crate::stamp`], the one-way probes of our own
//! protocol (`UDP_STAMP`): this module speaks the IETF's wire, to any
//! RFC 8762 peer.
//!
//! Layouts (big-endian, offsets in the UDP payload):
//! - unauthenticated, 44 octets: sender `seq 0..4, T1 4..12, error
//!   estimate 12..14, SSID 14..16, MBZ 16..44`; reflector `seq 0..4, T3
//!   4..12, EE 12..14, SSID 14..16, T2 16..24, sender seq 24..28, T1
//!   28..36, sender EE 36..38, MBZ, sender TTL 40, MBZ 41..44`.
//! - authenticated, 112 octets: the same fields spread over 16-octet
//!   blocks, the last block an HMAC-SHA-256 (first 16 octets) of octets
//!   0..96 under the session's key.
//! - TLVs from octet 44 (or 112) to the end: `flags (U 0x80, M 0x40, I
//!   0x20), type, length of the value (u16), value`.

use std::{collections::HashMap, net::SocketAddr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// STAMP's well-known port (TWAMP-Test's).
pub const PORT: u16 = 862;
/// The base test packet's size in each mode.
pub const UNAUTH_LEN: usize = 44;
pub const AUTH_LEN: usize = 112;
/// The largest test packet a reflector takes (a UDP payload that fits a
/// 9000-octet jumbo frame's IPv6 packet).
pub const MAX_PACKET: usize = 8952;

/// TLV flags (RFC 8972 §4).
pub const FLAG_U: u8 = 0x80;
pub const FLAG_M: u8 = 0x40;
pub const FLAG_I: u8 = 0x20;

/// TLV types this reflector knows (RFC 8972 §4).
pub const TLV_EXTRA_PADDING: u8 = 1;
pub const TLV_LOCATION: u8 = 2;
pub const TLV_TIMESTAMP_INFO: u8 = 3;
pub const TLV_CLASS_OF_SERVICE: u8 = 4;
pub const TLV_DIRECT_MEASUREMENT: u8 = 5;
pub const TLV_FOLLOW_UP_TELEMETRY: u8 = 7;
pub const TLV_HMAC: u8 = 8;

/// Timestamp Information's codes: a clock running free, stamped by
/// software on this host (RFC 8972 §4.3).
pub const SYNC_LOCAL_FREE_RUNNING: u8 = 5;
pub const SYNC_NTP: u8 = 1;
pub const STAMPED_SW_LOCAL: u8 = 2;

/// Seconds between NTP's epoch (1900) and Unix's (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// A time as NTP's 64 bits (seconds since 1900, fraction in 2^-32 s),
/// from nanoseconds since the Unix epoch.
pub fn ntp_from_unix_nanos(nanos: u128) -> u64 {
    let secs = (nanos / 1_000_000_000) as u64 + NTP_UNIX_OFFSET;
    let frac = ((nanos % 1_000_000_000) << 32) / 1_000_000_000;
    (secs << 32) | frac as u64
}

/// Nanoseconds since the Unix epoch of an NTP 64-bit time.
pub fn ntp_to_unix_nanos(ntp: u64) -> i128 {
    let secs = i128::from(ntp >> 32) - i128::from(NTP_UNIX_OFFSET);
    // (to the nearest nanosecond: a fraction is 0.23 ns at best)
    let frac = (i128::from(ntp & 0xFFFF_FFFF) * 1_000_000_000 + (1 << 31)) >> 32;
    secs * 1_000_000_000 + frac
}

/// An Error Estimate (RFC 4656 §4.1.2, Z from RFC 8186): synchronised to
/// UTC (S), NTP format (Z = 0), and the error bound `multiplier *
/// 2^(scale - 32)` seconds.
pub fn error_estimate(synced: bool, scale: u8, multiplier: u8) -> u16 {
    (u16::from(synced) << 15) | (u16::from(scale & 0x3F) << 8) | u16::from(multiplier.max(1))
}

/// The Error Estimate of a clock whose error is at most `seconds`: the
/// smallest scale whose multiplier (at most 255) bounds it.
pub fn error_estimate_of(synced: bool, seconds: f64) -> u16 {
    let s = if seconds.is_finite() {
        seconds.max(0.0)
    } else {
        1e9
    };
    for scale in 0u8..64 {
        let m = (s * 2f64.powi(32 - i32::from(scale))).ceil();
        if m <= 255.0 {
            return error_estimate(synced, scale, m.max(1.0) as u8);
        }
    }
    error_estimate(synced, 63, 255)
}

/// Whether a test packet is authenticated (a session's setting: nothing
/// in the packet says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Unauthenticated,
    Authenticated,
}

impl Mode {
    pub fn base_len(self) -> usize {
        match self {
            Mode::Unauthenticated => UNAUTH_LEN,
            Mode::Authenticated => AUTH_LEN,
        }
    }
}

/// The fields' offsets of a mode's layout.
struct Layout {
    ts: usize,
    ee: usize,
    ssid: usize,
    rx_ts: usize,
    s_seq: usize,
    s_ts: usize,
    s_ee: usize,
    ttl: usize,
}

const UNAUTH: Layout = Layout {
    ts: 4,
    ee: 12,
    ssid: 14,
    rx_ts: 16,
    s_seq: 24,
    s_ts: 28,
    s_ee: 36,
    ttl: 40,
};

const AUTH: Layout = Layout {
    ts: 16,
    ee: 24,
    ssid: 26,
    rx_ts: 32,
    s_seq: 48,
    s_ts: 64,
    s_ee: 72,
    ttl: 80,
};

fn layout(mode: Mode) -> &'static Layout {
    match mode {
        Mode::Unauthenticated => &UNAUTH,
        Mode::Authenticated => &AUTH,
    }
}

/// HMAC-SHA-256 of `data` under `key`, its first 16 octets (RFC 8762
/// §4.4).
pub fn hmac16(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    // (HMAC takes a key of any length: `new_from_slice` never fails)
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return [0; 16];
    };
    for p in parts {
        mac.update(p);
    }
    get(&mac.finalize().into_bytes(), 0)
}

/// `N` octets at `at` (zeros past the end: every caller checked the
/// length first).
fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..at.saturating_add(N))
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}

/// Write `v` at `at` (nothing past the end).
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at.saturating_add(v.len())) {
        d.copy_from_slice(v);
    }
}

fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(get(b, at))
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(get(b, at))
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(get(b, at))
}

fn octet(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// `b[from..to]`, or nothing where it is not there.
fn span(b: &[u8], from: usize, to: usize) -> &[u8] {
    b.get(from..to).unwrap_or_default()
}

/// A Session-Sender test packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderPacket {
    pub seq: u32,
    /// T1, NTP format.
    pub timestamp: u64,
    pub error_estimate: u16,
    pub ssid: u16,
    pub tlvs: Vec<Tlv>,
}

impl SenderPacket {
    /// The packet's octets (`key`: the session's, in authenticated mode).
    pub fn encode(&self, mode: Mode, key: Option<&[u8]>) -> Vec<u8> {
        let l = layout(mode);
        let mut b = vec![0u8; mode.base_len()];
        put(&mut b, 0, &self.seq.to_be_bytes());
        put(&mut b, l.ts, &self.timestamp.to_be_bytes());
        put(&mut b, l.ee, &self.error_estimate.to_be_bytes());
        put(&mut b, l.ssid, &self.ssid.to_be_bytes());
        if mode == Mode::Authenticated {
            let mac = hmac16(key.unwrap_or_default(), &[span(&b, 0, 96)]);
            put(&mut b, 96, &mac);
        }
        for t in &self.tlvs {
            t.encode_into(&mut b);
        }
        b
    }

    /// A packet [`SenderPacket::encode`] made, made the next one in place:
    /// its sequence number and timestamp written, signed again in
    /// authenticated mode (a sender sends without building each anew).
    pub fn restamp(b: &mut [u8], mode: Mode, key: Option<&[u8]>, seq: u32, timestamp: u64) {
        put(b, 0, &seq.to_be_bytes());
        put(b, layout(mode).ts, &timestamp.to_be_bytes());
        if mode == Mode::Authenticated {
            let mac = hmac16(key.unwrap_or_default(), &[span(b, 0, 96)]);
            put(b, 96, &mac);
        }
    }

    /// A test packet's fields (its TLVs read as [`parse_tlvs`] does).
    pub fn decode(b: &[u8], mode: Mode) -> Result<SenderPacket, StampError> {
        if b.len() < mode.base_len() {
            return Err(StampError::Short(b.len()));
        }
        let l = layout(mode);
        Ok(SenderPacket {
            seq: get_u32(b, 0),
            timestamp: get_u64(b, l.ts),
            error_estimate: get_u16(b, l.ee),
            ssid: get_u16(b, l.ssid),
            tlvs: parse_tlvs(span(b, mode.base_len(), b.len())).0,
        })
    }
}

/// A Session-Reflector test packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReflectorPacket {
    pub seq: u32,
    /// T3, NTP format.
    pub timestamp: u64,
    pub error_estimate: u16,
    pub ssid: u16,
    /// T2, NTP format.
    pub receive_timestamp: u64,
    pub sender_seq: u32,
    pub sender_timestamp: u64,
    pub sender_error_estimate: u16,
    pub sender_ttl: u8,
    pub tlvs: Vec<Tlv>,
}

impl ReflectorPacket {
    /// The packet's base octets, without its HMAC (filled by the caller).
    fn encode_base(&self, mode: Mode, b: &mut [u8]) {
        let l = layout(mode);
        if let Some(base) = b.get_mut(..mode.base_len()) {
            base.fill(0);
        }
        put(b, 0, &self.seq.to_be_bytes());
        put(b, l.ts, &self.timestamp.to_be_bytes());
        put(b, l.ee, &self.error_estimate.to_be_bytes());
        put(b, l.ssid, &self.ssid.to_be_bytes());
        put(b, l.rx_ts, &self.receive_timestamp.to_be_bytes());
        put(b, l.s_seq, &self.sender_seq.to_be_bytes());
        put(b, l.s_ts, &self.sender_timestamp.to_be_bytes());
        put(b, l.s_ee, &self.sender_error_estimate.to_be_bytes());
        put(b, l.ttl, &[self.sender_ttl]);
    }

    /// The packet's octets (`key`: the session's, in authenticated mode).
    pub fn encode(&self, mode: Mode, key: Option<&[u8]>) -> Vec<u8> {
        let mut b = vec![0u8; mode.base_len()];
        self.encode_base(mode, &mut b);
        if mode == Mode::Authenticated {
            let mac = hmac16(key.unwrap_or_default(), &[span(&b, 0, 96)]);
            put(&mut b, 96, &mac);
        }
        for t in &self.tlvs {
            t.encode_into(&mut b);
        }
        b
    }

    /// A reflected packet's fields; in authenticated mode its HMAC is
    /// checked against `key` first.
    pub fn decode(b: &[u8], mode: Mode, key: Option<&[u8]>) -> Result<ReflectorPacket, StampError> {
        if b.len() < mode.base_len() {
            return Err(StampError::Short(b.len()));
        }
        if mode == Mode::Authenticated {
            let want = hmac16(key.unwrap_or_default(), &[span(b, 0, 96)]);
            if !crate::session::constant_time_eq(&want, span(b, 96, 112)) {
                return Err(StampError::Hmac);
            }
        }
        let l = layout(mode);
        Ok(ReflectorPacket {
            seq: get_u32(b, 0),
            timestamp: get_u64(b, l.ts),
            error_estimate: get_u16(b, l.ee),
            ssid: get_u16(b, l.ssid),
            receive_timestamp: get_u64(b, l.rx_ts),
            sender_seq: get_u32(b, l.s_seq),
            sender_timestamp: get_u64(b, l.s_ts),
            sender_error_estimate: get_u16(b, l.s_ee),
            sender_ttl: octet(b, l.ttl),
            tlvs: parse_tlvs(span(b, mode.base_len(), b.len())).0,
        })
    }
}

/// One TLV (RFC 8972 §4): flags, type, value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tlv {
    pub flags: u8,
    pub typ: u8,
    pub value: Vec<u8>,
}

impl Tlv {
    /// A sender's TLV: U set, as RFC 8972 asks of a sender.
    pub fn request(typ: u8, value: Vec<u8>) -> Tlv {
        Tlv {
            flags: FLAG_U,
            typ,
            value,
        }
    }

    /// Its octets on the wire.
    pub fn wire_len(&self) -> usize {
        4 + self.value.len()
    }

    pub fn encode_into(&self, b: &mut Vec<u8>) {
        b.push(self.flags);
        b.push(self.typ);
        b.extend_from_slice(&(self.value.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
        b.extend_from_slice(&self.value);
    }
}

/// The TLVs of the octets after a base packet, and the offset where
/// reading stopped: at the end, or at a TLV whose length runs past it (a
/// malformed one, whose octets are left unread).
pub fn parse_tlvs(b: &[u8]) -> (Vec<Tlv>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while b.len() - at >= 4 {
        let len = usize::from(get_u16(b, at + 2));
        if b.len() - at - 4 < len {
            break;
        }
        out.push(Tlv {
            flags: octet(b, at),
            typ: octet(b, at + 1),
            value: span(b, at + 4, at + 4 + len).to_vec(),
        });
        at += 4 + len;
    }
    (out, at)
}

/// What a test packet cannot be read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StampError {
    #[error("a STAMP test packet of {0} octets is shorter than its mode's base packet")]
    Short(usize),
    #[error("the STAMP test packet's HMAC does not verify under the session's key")]
    Hmac,
    #[error("a STAMP test packet of {0} octets is longer than a reflector takes")]
    Long(usize),
}

/// What the socket read of a test packet, beside its octets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub from: SocketAddr,
    /// T2, NTP format.
    pub at: u64,
    /// The IP header's TTL or hop limit, if the socket told it.
    pub ttl: Option<u8>,
    /// The IP header's traffic class (DSCP and ECN), if told.
    pub tos: Option<u8>,
    /// The port it came to (Location TLV).
    pub to_port: u16,
}

/// A reflection to send: its length in the buffer, and the traffic class
/// to send it with (Class of Service: the sender's DSCP1, else as it came).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reflection {
    pub len: usize,
    pub tos: Option<u8>,
    /// Its sequence number and session (SSID), to name it when its
    /// transmit time is known ([`Reflector::transmitted`]).
    pub seq: u32,
    pub ssid: u16,
    /// Whether the sender asked for Follow-Up Telemetry: the time this
    /// reflection really left, in the session's next reflection.
    pub follow_up: bool,
}

/// How the reflector numbers its packets (RFC 8762 §4.3): stateless, its
/// sequence number the sender's; stateful, its own count of what it
/// reflected in each session (so that the sender tells loss each way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    Stateless,
    Stateful,
}

/// A session's state at a stateful reflector.
#[derive(Clone, Copy, Debug, Default)]
struct Session {
    /// Reflected so far (its next sequence number).
    sent: u32,
    /// Test packets received (Direct Measurement's R_RxC).
    received: u32,
    /// The last reflection whose transmit time is known: its sequence
    /// number and that time (Follow-Up Telemetry).
    left: Option<(u32, u64)>,
}

/// The most sessions a stateful reflector remembers; past them, the
/// least recently seen is forgotten (its next packet starts it again).
pub const MAX_SESSIONS: usize = 4096;

/// A Session-Reflector's rules, with its sessions' counts.
#[derive(Debug)]
pub struct Reflector {
    pub mode: Mode,
    pub numbering: Numbering,
    key: Option<Vec<u8>>,
    /// Its clock's Error Estimate (its own T2 and T3; the daemon sets it
    /// from its clock's state).
    pub error_estimate: u16,
    /// Timestamp Information's synchronisation source.
    pub sync_source: u8,
    sessions: HashMap<(SocketAddr, u16), (Session, u64)>,
    /// A count of packets, to tell the least recently seen session.
    tick: u64,
}

impl Reflector {
    pub fn new(mode: Mode, numbering: Numbering, key: Option<Vec<u8>>) -> Reflector {
        Reflector {
            mode,
            numbering,
            key,
            error_estimate: error_estimate(false, 0, 1),
            sync_source: SYNC_LOCAL_FREE_RUNNING,
            sessions: HashMap::new(),
            tick: 0,
        }
    }

    fn key(&self) -> &[u8] {
        self.key.as_deref().unwrap_or_default()
    }

    /// Sessions remembered (stateful).
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Reflect `req` into `out` (at least as long as `req`), taking T3
    /// from `t3` as late as can be: the reflection, never longer than the
    /// request; or why the request gets none.
    pub fn reflect(
        &mut self,
        req: &[u8],
        rx: &Received,
        t3: impl FnOnce() -> u64,
        out: &mut [u8],
    ) -> Result<Reflection, StampError> {
        let base = self.mode.base_len();
        if req.len() < base {
            return Err(StampError::Short(req.len()));
        }
        if req.len() > MAX_PACKET || out.len() < req.len() {
            return Err(StampError::Long(req.len()));
        }
        if self.mode == Mode::Authenticated {
            let want = hmac16(self.key(), &[span(req, 0, 96)]);
            if !crate::session::constant_time_eq(&want, span(req, 96, 112)) {
                return Err(StampError::Hmac);
            }
        }
        let sender = SenderPacket::decode(req, self.mode)?;
        let session = self.count(rx.from, sender.ssid);
        let key = self.key();
        let seq = match self.numbering {
            Numbering::Stateless => sender.seq,
            Numbering::Stateful => session.sent,
        };
        // the TLVs, answered in place: the reflection is the request's size
        let (Some(out), Some(req_tlvs)) = (out.get_mut(..req.len()), req.get(base..)) else {
            return Err(StampError::Long(req.len()));
        };
        out.copy_from_slice(req);
        let (head, out_tlvs) = out.split_at_mut(base);
        let (tos, signed, follow_up) =
            self.answer_tlvs(req_tlvs, rx, (sender.seq, &session), out_tlvs);
        let mut r = ReflectorPacket {
            seq,
            timestamp: 0,
            error_estimate: self.error_estimate,
            ssid: sender.ssid,
            receive_timestamp: rx.at,
            sender_seq: sender.seq,
            sender_timestamp: sender.timestamp,
            sender_error_estimate: sender.error_estimate,
            // TWAMP's rule where the header's TTL cannot be read: 255
            sender_ttl: rx.ttl.unwrap_or(255),
            tlvs: Vec::new(),
        };
        r.timestamp = t3();
        r.encode_base(self.mode, head);
        if self.mode == Mode::Authenticated {
            let mac = hmac16(key, &[span(head, 0, 96)]);
            put(head, 96, &mac);
        }
        // its own HMAC TLV: over its sequence number and its TLVs before it
        if let Some(at) = signed {
            let mac = hmac16(key, &[span(head, 0, 4), span(out_tlvs, 0, at)]);
            put(out_tlvs, at + 4, &mac);
        }
        Ok(Reflection {
            len: req.len(),
            tos,
            seq,
            ssid: sender.ssid,
            follow_up,
        })
    }

    /// Reflection `seq` of the session of `from` and `ssid` left at `at`
    /// (NTP format), as the kernel saw it go: what that session's next
    /// Follow-Up Telemetry says (stateful; a session forgotten since, or a
    /// later reflection's time already known, leaves it as it is).
    pub fn transmitted(&mut self, from: SocketAddr, ssid: u16, seq: u32, at: u64) {
        if let Some((s, _)) = self.sessions.get_mut(&(from, ssid))
            && s.left
                .is_none_or(|(last, _)| seq.wrapping_sub(last) < 1 << 31)
        {
            s.left = Some((seq, at));
        }
    }

    /// The session's counts before this packet (stateful: counted; a
    /// stateless reflector keeps nothing).
    fn count(&mut self, from: SocketAddr, ssid: u16) -> Session {
        if self.numbering == Numbering::Stateless {
            return Session::default();
        }
        self.tick += 1;
        if self.sessions.len() >= MAX_SESSIONS && !self.sessions.contains_key(&(from, ssid)) {
            // forget the least recently seen
            if let Some(oldest) = self
                .sessions
                .iter()
                .min_by_key(|(_, (_, seen))| *seen)
                .map(|(k, _)| *k)
            {
                self.sessions.remove(&oldest);
            }
        }
        let tick = self.tick;
        let (s, seen) = self
            .sessions
            .entry((from, ssid))
            .or_insert((Session::default(), tick));
        *seen = tick;
        let before = *s;
        s.sent = s.sent.wrapping_add(1);
        s.received = s.received.wrapping_add(1);
        before
    }

    /// Answer the request's TLVs in `out` (a copy of them, as long): each
    /// known one filled and its U flag cleared, an unknown one returned
    /// with U set, a malformed one (and what follows it) with M set. The
    /// traffic class to reflect with, where Class of Service asks one;
    /// where the request's HMAC TLV verified, where the reflection's is;
    /// whether Follow-Up Telemetry was asked.
    fn answer_tlvs(
        &self,
        tlv_area: &[u8],
        rx: &Received,
        (seq, session): (u32, &Session),
        out: &mut [u8],
    ) -> (Option<u8>, Option<usize>, bool) {
        let (_, end) = parse_tlvs(tlv_area);
        let mut tos = None;
        let mut follow_up = false;
        // the HMAC TLV, if any: it must verify before any TLV is used
        let hmac_ok = self.tlv_hmac_ok(seq.to_be_bytes(), tlv_area);
        let mut at = 0;
        while at < end {
            let len = usize::from(get_u16(tlv_area, at + 2));
            let typ = octet(tlv_area, at + 1);
            let Some(value) = out.get_mut(at + 4..at + 4 + len) else {
                break;
            };
            let mut flags = 0u8;
            if hmac_ok == Some(false) {
                flags |= FLAG_I;
            } else {
                match (typ, len) {
                    (TLV_EXTRA_PADDING, _) => {}
                    (TLV_TIMESTAMP_INFO, 4..) => put(
                        value,
                        0,
                        &[
                            self.sync_source,
                            STAMPED_SW_LOCAL,
                            self.sync_source,
                            STAMPED_SW_LOCAL,
                        ],
                    ),
                    (TLV_CLASS_OF_SERVICE, 4) => tos = class_of_service(value, rx),
                    (TLV_DIRECT_MEASUREMENT, 12) => {
                        // the session's counts with this packet and its
                        // reflection (a stateless reflector keeps none)
                        if self.numbering == Numbering::Stateful {
                            put(value, 4, &session.received.wrapping_add(1).to_be_bytes());
                            put(value, 8, &session.sent.wrapping_add(1).to_be_bytes());
                        }
                    }
                    (TLV_LOCATION, 4..) => {
                        put(value, 0, &rx.to_port.to_be_bytes());
                        put(value, 2, &rx.from.port().to_be_bytes());
                    }
                    (TLV_HMAC, 16) => {}
                    (TLV_FOLLOW_UP_TELEMETRY, 16) => {
                        // the session's last reflection whose departure
                        // the kernel told (stateful); zeros where none is
                        // known, and always where stateless (RFC 8972 4.7)
                        follow_up = self.numbering == Numbering::Stateful;
                        let left = session.left.filter(|_| follow_up);
                        let (last, at) = left.unwrap_or((0, 0));
                        put(value, 0, &last.to_be_bytes());
                        put(value, 4, &at.to_be_bytes());
                        let mode = if left.is_some() { STAMPED_SW_LOCAL } else { 0 };
                        put(value, 12, &[mode, 0, 0, 0]);
                    }
                    (TLV_FOLLOW_UP_TELEMETRY, _) => {
                        flags |= FLAG_M;
                        if let Some(v) = value.get_mut(..len.min(12)) {
                            v.fill(0);
                        }
                    }
                    (
                        TLV_TIMESTAMP_INFO
                        | TLV_CLASS_OF_SERVICE
                        | TLV_DIRECT_MEASUREMENT
                        | TLV_LOCATION
                        | TLV_HMAC,
                        _,
                    ) => flags |= FLAG_M,
                    _ => flags |= FLAG_U,
                }
            }
            put(out, at, &[flags]);
            at += 4 + len;
        }
        // a TLV running past the packet: malformed, the rest left as it came
        if tlv_area.len().saturating_sub(end) >= 4
            && let Some(f) = out.get_mut(end)
        {
            *f |= FLAG_M;
        }
        let signed = match hmac_ok {
            Some(true) => hmac_tlv_at(span(out, 0, end)),
            _ => None,
        };
        (tos, signed, follow_up)
    }

    /// Whether the request's HMAC TLV verifies (`None`: it carries none).
    /// It covers the sequence number and every TLV before it.
    fn tlv_hmac_ok(&self, seq: [u8; 4], tlvs: &[u8]) -> Option<bool> {
        let at = hmac_tlv_at(tlvs)?;
        let want = hmac16(self.key(), &[&seq, span(tlvs, 0, at)]);
        Some(crate::session::constant_time_eq(
            &want,
            span(tlvs, at + 4, at + 20),
        ))
    }
}

/// Where the HMAC TLV begins among `tlvs`, if it is there with its 16
/// octets.
fn hmac_tlv_at(tlvs: &[u8]) -> Option<usize> {
    let mut at = 0;
    while tlvs.len() - at >= 4 {
        let len = usize::from(get_u16(tlvs, at + 2));
        if tlvs.len() - at - 4 < len {
            return None;
        }
        if octet(tlvs, at + 1) == TLV_HMAC && len == 16 {
            return Some(at);
        }
        at += 4 + len;
    }
    None
}

/// Class of Service (RFC 8972 §4.4, with draft-ietf-ippm-stamp-cos-ecn's
/// EC1 and RPE in octet 2, which RFC 8972 reserved): DSCP2 and EC2 as
/// received; the reflection marked with DSCP1 (RPD 0) and with the ECN
/// codepoint EC1 asks (RPE 0b11), except CE, which a reflector does not
/// put on a packet itself (its ECN then 0, RPE 0b10). The traffic class
/// to send with, ECN bits included.
fn class_of_service(value: &mut [u8], rx: &Received) -> Option<u8> {
    let dscp1 = octet(value, 0) >> 2;
    let ec1 = octet(value, 2) >> 6;
    let received = rx.tos.unwrap_or(0);
    let (dscp2, ec2) = (received >> 2, received & 0x03);
    let (ecn, rpe) = if ec1 == 0b11 { (0, 0b10) } else { (ec1, 0b11) };
    put(
        value,
        0,
        &[
            (dscp1 << 2) | (dscp2 >> 4),
            ((dscp2 & 0x0F) << 4) | (ec2 << 2),
            (ec1 << 6) | (rpe << 4),
            0,
        ],
    );
    Some((dscp1 << 2) | ecn)
}

/// A Class of Service TLV's value as a sender asks it: the reflection to
/// come back with `tos`'s DSCP (DSCP1) and ECN codepoint (EC1).
pub fn class_of_service_request(tos: u8) -> Vec<u8> {
    vec![tos & !0x03, 0, (tos & 0x03) << 6, 0]
}

/// What a reflection's Class of Service TLV says: how the test packet
/// arrived at the reflector (DSCP2, EC2), whether the reflection carries
/// the DSCP asked (RPD 0) and the ECN codepoint asked (RPE 0b11; `None`: a
/// reflector that does not say, RFC 8972's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CosAnswer {
    pub dscp2: u8,
    pub ec2: u8,
    pub dscp_applied: bool,
    pub ecn_applied: Option<bool>,
}

impl CosAnswer {
    /// From a Class of Service TLV's 4 octets as a reflector filled them.
    pub fn parse(value: &[u8]) -> Option<CosAnswer> {
        let [a, b, c, _] = *value else {
            return None;
        };
        let rpe = (c >> 4) & 0x03;
        Some(CosAnswer {
            dscp2: ((a & 0x03) << 4) | (b >> 4),
            ec2: (b >> 2) & 0x03,
            dscp_applied: b & 0x03 == 0,
            ecn_applied: match rpe {
                0b11 => Some(true),
                0b10 => Some(false),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a STAMP session key";

    fn rx(ttl: u8, tos: u8) -> Received {
        Received {
            from: "198.18.0.1:40000".parse().unwrap(),
            at: 0x0102_0304_0506_0708,
            ttl: Some(ttl),
            tos: Some(tos),
            to_port: PORT,
        }
    }

    fn sender(seq: u32, tlvs: Vec<Tlv>) -> SenderPacket {
        SenderPacket {
            seq,
            timestamp: 0xE000_0001_8000_0000,
            error_estimate: 0x8103,
            ssid: 0xABCD,
            tlvs,
        }
    }

    fn reflect(r: &mut Reflector, req: &[u8], rx: &Received) -> (Vec<u8>, Reflection) {
        let mut out = vec![0u8; req.len() + 64];
        let refl = r
            .reflect(req, rx, || 0x1111_2222_3333_4444, &mut out)
            .unwrap();
        out.truncate(refl.len);
        (out, refl)
    }

    #[test]
    fn a_senders_packet_is_laid_out_as_rfc_8972_says() {
        let b = sender(0x0102_0304, Vec::new()).encode(Mode::Unauthenticated, None);
        assert_eq!(b.len(), 44);
        assert_eq!(&b[0..4], &[1, 2, 3, 4]);
        assert_eq!(&b[4..12], &0xE000_0001_8000_0000u64.to_be_bytes());
        assert_eq!(&b[12..14], &[0x81, 0x03]);
        assert_eq!(&b[14..16], &[0xAB, 0xCD]);
        assert!(b[16..44].iter().all(|&x| x == 0), "MBZ");
        let a = sender(7, Vec::new()).encode(Mode::Authenticated, Some(KEY));
        assert_eq!(a.len(), 112);
        assert_eq!(&a[0..4], &[0, 0, 0, 7]);
        assert!(a[4..16].iter().all(|&x| x == 0));
        assert_eq!(&a[16..24], &0xE000_0001_8000_0000u64.to_be_bytes());
        assert_eq!(&a[24..26], &[0x81, 0x03]);
        assert_eq!(&a[26..28], &[0xAB, 0xCD]);
        assert!(a[28..96].iter().all(|&x| x == 0));
        assert_eq!(&a[96..112], &hmac16(KEY, &[&a[..96]]));
        // made the next one in place: as if encoded anew
        let mut next = a.clone();
        SenderPacket::restamp(&mut next, Mode::Authenticated, Some(KEY), 8, 42);
        let fresh = SenderPacket {
            seq: 8,
            timestamp: 42,
            ..sender(0, Vec::new())
        };
        assert_eq!(next, fresh.encode(Mode::Authenticated, Some(KEY)));
        // TLVs after the base packet: flags, type, length of the value
        let t = sender(1, vec![Tlv::request(TLV_EXTRA_PADDING, vec![9; 6])])
            .encode(Mode::Unauthenticated, None);
        assert_eq!(&t[44..], &[0x80, 1, 0, 6, 9, 9, 9, 9, 9, 9]);
        assert_eq!(
            SenderPacket::decode(&t, Mode::Unauthenticated).unwrap(),
            sender(1, vec![Tlv::request(1, vec![9; 6])])
        );
    }

    #[test]
    fn a_reflection_fills_every_field_at_its_offset() {
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateless, None);
        let req = sender(0x0A0B_0C0D, Vec::new()).encode(Mode::Unauthenticated, None);
        let (b, refl) = reflect(&mut r, &req, &rx(61, 0xB9));
        assert_eq!(refl.len, 44);
        assert_eq!(
            &b[0..4],
            &[0x0A, 0x0B, 0x0C, 0x0D],
            "stateless: the sender's"
        );
        assert_eq!(&b[4..12], &0x1111_2222_3333_4444u64.to_be_bytes(), "T3");
        assert_eq!(&b[12..14], &r.error_estimate.to_be_bytes());
        assert_eq!(&b[14..16], &[0xAB, 0xCD], "SSID");
        assert_eq!(&b[16..24], &0x0102_0304_0506_0708u64.to_be_bytes(), "T2");
        assert_eq!(&b[24..28], &[0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!(&b[28..36], &0xE000_0001_8000_0000u64.to_be_bytes(), "T1");
        assert_eq!(&b[36..38], &[0x81, 0x03]);
        assert_eq!(&b[38..40], &[0, 0]);
        assert_eq!(b[40], 61, "the received TTL");
        assert_eq!(&b[41..44], &[0, 0, 0]);
        let d = ReflectorPacket::decode(&b, Mode::Unauthenticated, None).unwrap();
        assert_eq!(
            (d.sender_seq, d.sender_ttl, d.receive_timestamp),
            (0x0A0B_0C0D, 61, 0x0102_0304_0506_0708)
        );
        // no TTL told: TWAMP's 255
        let none = Received {
            ttl: None,
            ..rx(0, 0)
        };
        assert_eq!(reflect(&mut r, &req, &none).0[40], 255);
    }

    #[test]
    fn the_authenticated_layout_and_its_hmac() {
        let mut r = Reflector::new(Mode::Authenticated, Numbering::Stateful, Some(KEY.to_vec()));
        let req = sender(5, Vec::new()).encode(Mode::Authenticated, Some(KEY));
        let (b, _) = reflect(&mut r, &req, &rx(64, 0));
        assert_eq!(b.len(), 112);
        assert_eq!(&b[0..4], &[0, 0, 0, 0], "stateful: its own count");
        assert_eq!(&b[32..40], &0x0102_0304_0506_0708u64.to_be_bytes(), "T2");
        assert_eq!(&b[48..52], &[0, 0, 0, 5]);
        assert_eq!(&b[64..72], &0xE000_0001_8000_0000u64.to_be_bytes());
        assert_eq!(&b[72..74], &[0x81, 0x03]);
        assert_eq!(b[80], 64);
        for (from, to) in [(4, 16), (28, 32), (40, 48), (52, 64), (74, 80), (81, 96)] {
            assert!(b[from..to].iter().all(|&x| x == 0), "MBZ {from}..{to}");
        }
        assert_eq!(&b[96..112], &hmac16(KEY, &[&b[..96]]));
        assert!(ReflectorPacket::decode(&b, Mode::Authenticated, Some(KEY)).is_ok());
        assert_eq!(
            ReflectorPacket::decode(&b, Mode::Authenticated, Some(b"other")),
            Err(StampError::Hmac)
        );
        // a request under another key gets no reflection
        let wrong = sender(6, Vec::new()).encode(Mode::Authenticated, Some(b"other"));
        let mut out = [0u8; 200];
        assert_eq!(
            r.reflect(&wrong, &rx(64, 0), || 0, &mut out),
            Err(StampError::Hmac)
        );
        let mut flipped = req.clone();
        flipped[0] ^= 1;
        assert_eq!(
            r.reflect(&flipped, &rx(64, 0), || 0, &mut out),
            Err(StampError::Hmac)
        );
    }

    #[test]
    fn stateful_numbering_counts_each_session_apart() {
        let mut stateful = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let mut stateless = Reflector::new(Mode::Unauthenticated, Numbering::Stateless, None);
        let mut other = sender(0, Vec::new());
        other.ssid = 2;
        let mut seqs = Vec::new();
        for s in [10, 11, 13] {
            let req = sender(s, Vec::new()).encode(Mode::Unauthenticated, None);
            let a = ReflectorPacket::decode(
                &reflect(&mut stateful, &req, &rx(64, 0)).0,
                Mode::Unauthenticated,
                None,
            )
            .unwrap();
            let b = ReflectorPacket::decode(
                &reflect(&mut stateless, &req, &rx(64, 0)).0,
                Mode::Unauthenticated,
                None,
            )
            .unwrap();
            seqs.push((a.seq, a.sender_seq, b.seq));
            // another session from the same address counts on its own
            let o = other.encode(Mode::Unauthenticated, None);
            let _ = reflect(&mut stateful, &o, &rx(64, 0));
        }
        assert_eq!(seqs, [(0, 10, 10), (1, 11, 11), (2, 13, 13)]);
        assert_eq!(stateful.sessions(), 2);
        assert_eq!(stateless.sessions(), 0);
    }

    #[test]
    fn a_reflection_is_never_longer_than_its_request() {
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let mut out = [0u8; 100];
        assert_eq!(
            r.reflect(&[0u8; 43], &rx(64, 0), || 0, &mut out),
            Err(StampError::Short(43))
        );
        for len in [44, 45, 60, 100] {
            let mut req = sender(1, Vec::new()).encode(Mode::Unauthenticated, None);
            req.resize(len, 0xEE);
            let refl = r.reflect(&req, &rx(64, 0), || 0, &mut out).unwrap();
            assert_eq!(refl.len, len);
        }
        let big = vec![0u8; MAX_PACKET + 1];
        let mut out = vec![0u8; MAX_PACKET + 1];
        assert!(r.reflect(&big, &rx(64, 0), || 0, &mut out).is_err());
    }

    #[test]
    fn each_tlv_is_answered_as_rfc_8972_says() {
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let tlvs = vec![
            Tlv::request(TLV_EXTRA_PADDING, vec![0x5A; 8]),
            Tlv::request(TLV_TIMESTAMP_INFO, vec![0; 4]),
            // DSCP1 = AF41 (34) asked for the reflection
            Tlv::request(TLV_CLASS_OF_SERVICE, vec![34 << 2, 0, 0, 0]),
            Tlv::request(
                TLV_DIRECT_MEASUREMENT,
                [7u32.to_be_bytes(), [0; 4], [0; 4]].concat(),
            ),
            Tlv::request(TLV_LOCATION, vec![0; 4]),
            Tlv::request(200, vec![1, 2, 3]),
            // a Class of Service of 3 octets: malformed
            Tlv::request(TLV_CLASS_OF_SERVICE, vec![0; 3]),
        ];
        let req = sender(0, tlvs).encode(Mode::Unauthenticated, None);
        // received with DSCP 46 (EF) and ECT(1)
        let (b, refl) = reflect(&mut r, &req, &rx(64, (46 << 2) | 1));
        assert_eq!(b.len(), req.len());
        let got = ReflectorPacket::decode(&b, Mode::Unauthenticated, None)
            .unwrap()
            .tlvs;
        assert_eq!(
            got[0],
            Tlv {
                flags: 0,
                typ: 1,
                value: vec![0x5A; 8]
            }
        );
        assert_eq!(got[1].flags, 0);
        assert_eq!(
            got[1].value,
            [
                SYNC_LOCAL_FREE_RUNNING,
                STAMPED_SW_LOCAL,
                SYNC_LOCAL_FREE_RUNNING,
                STAMPED_SW_LOCAL
            ]
        );
        // DSCP1 kept, DSCP2 = 46 and ECN = 1 as received, RP 0
        let cos = u16::from_be_bytes([got[2].value[0], got[2].value[1]]);
        assert_eq!(
            (cos >> 10, (cos >> 4) & 0x3F, (cos >> 2) & 0x3, cos & 0x3),
            (34, 46, 1, 0)
        );
        assert_eq!(refl.tos, Some(34 << 2), "reflected with DSCP1");
        assert_eq!(
            got[3].value,
            [7u32.to_be_bytes(), 1u32.to_be_bytes(), 1u32.to_be_bytes()].concat()
        );
        assert_eq!(
            &got[4].value[..],
            &[&PORT.to_be_bytes()[..], &40000u16.to_be_bytes()[..]].concat()[..]
        );
        assert_eq!(
            (got[5].flags, &got[5].value[..]),
            (FLAG_U, &[1u8, 2, 3][..]),
            "unknown: U, as sent"
        );
        assert_eq!(got[6].flags, FLAG_M, "malformed: M");
        // a TLV whose length runs past the packet: M, the rest as it came
        let mut cut = sender(1, Vec::new()).encode(Mode::Unauthenticated, None);
        cut.extend_from_slice(&[FLAG_U, TLV_EXTRA_PADDING, 0, 50, 1, 2]);
        let (b, _) = reflect(&mut r, &cut, &rx(64, 0));
        assert_eq!(&b[44..], &[FLAG_U | FLAG_M, TLV_EXTRA_PADDING, 0, 50, 1, 2]);
    }

    #[test]
    fn class_of_service_reflects_the_dscp_and_ecn_asked() {
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let ask = |tos: u8| {
            sender(
                0,
                vec![Tlv::request(
                    TLV_CLASS_OF_SERVICE,
                    class_of_service_request(tos),
                )],
            )
            .encode(Mode::Unauthenticated, None)
        };
        // AF41 with ECT(0) asked back; the packet came in AF11 with CE
        assert_eq!(
            class_of_service_request((34 << 2) | 2),
            vec![34 << 2, 0, 2 << 6, 0]
        );
        let (b, refl) = reflect(&mut r, &ask((34 << 2) | 2), &rx(64, (10 << 2) | 3));
        assert_eq!(refl.tos, Some((34 << 2) | 2), "DSCP1 and EC1");
        let got = ReflectorPacket::decode(&b, Mode::Unauthenticated, None).unwrap();
        assert_eq!(got.tlvs[0].flags, 0);
        let a = CosAnswer::parse(&got.tlvs[0].value).unwrap();
        assert_eq!(
            a,
            CosAnswer {
                dscp2: 10,
                ec2: 3,
                dscp_applied: true,
                ecn_applied: Some(true)
            }
        );
        // CE asked: not put on a reflection (ECN 0, RPE 0b10)
        let (b, refl) = reflect(&mut r, &ask((34 << 2) | 3), &rx(64, 0));
        assert_eq!(refl.tos, Some(34 << 2));
        let got = ReflectorPacket::decode(&b, Mode::Unauthenticated, None).unwrap();
        assert_eq!(
            CosAnswer::parse(&got.tlvs[0].value).unwrap().ecn_applied,
            Some(false)
        );
        // an RFC 8972 reflector's answer (RPE 0): ECN back unknown
        assert_eq!(
            CosAnswer::parse(&[34 << 2, 0, 0, 0]).unwrap().ecn_applied,
            None
        );
        assert_eq!(CosAnswer::parse(&[0, 0, 0]), None);
    }

    #[test]
    fn follow_up_telemetry_tells_the_last_reflections_departure() {
        let ask = || vec![Tlv::request(TLV_FOLLOW_UP_TELEMETRY, vec![0xEE; 16])];
        let follow_up = |b: &[u8]| {
            let t = ReflectorPacket::decode(b, Mode::Unauthenticated, None)
                .unwrap()
                .tlvs
                .remove(0);
            assert_eq!(t.flags, 0);
            let v = t.value;
            (
                u32::from_be_bytes(v[0..4].try_into().unwrap()),
                u64::from_be_bytes(v[4..12].try_into().unwrap()),
                v[12..16].to_vec(),
            )
        };
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let from = rx(64, 0);
        // the first: nothing has left yet; zeros
        let (b, refl) = reflect(
            &mut r,
            &sender(10, ask()).encode(Mode::Unauthenticated, None),
            &from,
        );
        assert!(refl.follow_up);
        assert_eq!((refl.seq, refl.ssid), (0, 0xABCD));
        assert_eq!(follow_up(&b), (0, 0, vec![0; 4]));
        // the kernel tells when reflection 0 left; the next says so
        r.transmitted(from.from, 0xABCD, refl.seq, 0x1111_2222_3333_5555);
        let (b, refl) = reflect(
            &mut r,
            &sender(11, ask()).encode(Mode::Unauthenticated, None),
            &from,
        );
        assert_eq!(
            follow_up(&b),
            (0, 0x1111_2222_3333_5555, vec![STAMPED_SW_LOCAL, 0, 0, 0])
        );
        // an older one's time, told late, does not go back
        r.transmitted(from.from, 0xABCD, refl.seq, 0x1111_2222_3333_6666);
        r.transmitted(from.from, 0xABCD, 0, 0x1111_2222_3333_5555);
        let (b, _) = reflect(
            &mut r,
            &sender(12, ask()).encode(Mode::Unauthenticated, None),
            &from,
        );
        assert_eq!(follow_up(&b).0, 1);
        // another session (SSID) knows nothing of it
        let mut other = sender(0, ask());
        other.ssid = 7;
        let (b, _) = reflect(&mut r, &other.encode(Mode::Unauthenticated, None), &from);
        assert_eq!(follow_up(&b), (0, 0, vec![0; 4]));
        // stateless: zeros, and nothing to stamp
        let mut r = Reflector::new(Mode::Unauthenticated, Numbering::Stateless, None);
        let (b, refl) = reflect(
            &mut r,
            &sender(5, ask()).encode(Mode::Unauthenticated, None),
            &from,
        );
        assert!(!refl.follow_up);
        assert_eq!(follow_up(&b), (0, 0, vec![0; 4]));
        // a Follow-Up Telemetry of 8 octets: M, zeroed
        let req = sender(
            6,
            vec![Tlv::request(TLV_FOLLOW_UP_TELEMETRY, vec![0xEE; 8])],
        )
        .encode(Mode::Unauthenticated, None);
        let (b, _) = reflect(&mut r, &req, &from);
        assert_eq!(
            &b[44..],
            &[
                FLAG_M,
                TLV_FOLLOW_UP_TELEMETRY,
                0,
                8,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0
            ]
        );
    }

    #[test]
    fn the_hmac_tlv_is_checked_and_answered() {
        let mut r = Reflector::new(
            Mode::Unauthenticated,
            Numbering::Stateless,
            Some(KEY.to_vec()),
        );
        let pad = Tlv::request(TLV_EXTRA_PADDING, vec![0; 4]);
        let mut head = sender(9, vec![pad.clone()]).encode(Mode::Unauthenticated, None);
        let mac = hmac16(KEY, &[&head[0..4], &head[44..]]);
        Tlv::request(TLV_HMAC, mac.to_vec()).encode_into(&mut head);
        let (b, _) = reflect(&mut r, &head, &rx(64, 0));
        let tlvs = ReflectorPacket::decode(&b, Mode::Unauthenticated, None)
            .unwrap()
            .tlvs;
        assert_eq!((tlvs[0].flags, tlvs[1].flags), (0, 0));
        // the reflection's own HMAC TLV: its sequence number and TLVs before it
        assert_eq!(tlvs[1].value, hmac16(KEY, &[&b[0..4], &b[44..52]]).to_vec());
        // a wrong one: every TLV comes back with I set
        let mut bad = head.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        let (b, _) = reflect(&mut r, &bad, &rx(64, 0));
        let tlvs = ReflectorPacket::decode(&b, Mode::Unauthenticated, None)
            .unwrap()
            .tlvs;
        assert!(tlvs.iter().all(|t| t.flags == FLAG_I), "{tlvs:?}");
    }

    #[test]
    fn ntp_times_round_trip() {
        let nanos: u128 = 1_765_000_000_123_456_789;
        let ntp = ntp_from_unix_nanos(nanos);
        assert_eq!(ntp >> 32, 1_765_000_000 + NTP_UNIX_OFFSET);
        assert_eq!(ntp_to_unix_nanos(ntp), nanos as i128);
        for n in [1u128, 999, 1_000_000, 999_999_999] {
            assert_eq!(ntp_to_unix_nanos(ntp_from_unix_nanos(n)), n as i128, "{n}");
        }
        assert_eq!(
            error_estimate(true, 0, 0),
            0x8001,
            "a multiplier of 0 is not one"
        );
    }

    #[test]
    fn any_bytes_are_refused_or_reflected_without_a_panic() {
        let mut r = Reflector::new(Mode::Authenticated, Numbering::Stateful, None);
        let mut u = Reflector::new(Mode::Unauthenticated, Numbering::Stateful, None);
        let mut out = vec![0u8; 400];
        let mut x: u32 = 1;
        for len in 0..300 {
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = r.reflect(&b, &rx(1, 1), || 0, &mut out);
            let _ = u.reflect(&b, &rx(1, 1), || 0, &mut out);
            let _ = parse_tlvs(&b);
        }
    }
}
