//! ECN on the path (`--ecn`): the codepoints of RFC 3168, what a receiver
//! counted of them, and the path's verdict.
//!
//! A sender marks its datagrams with ECT(0) or ECT(1); the receiver reads
//! each datagram's codepoint as it arrives (IP_RECVTOS / IPV6_RECVTCLASS)
//! and counts them, in total and by interval. What arrived against what was
//! sent says what the path does to ECN: passes it (ECT arrives, CE on
//! some), bleaches it (not-ECT arrives) or mangles it (every datagram CE,
//! or the other ECT than was sent). TCP negotiates ECN itself; its
//! sender's TCP_INFO says whether it did and how many of its packets were
//! delivered CE-marked ([`TcpEcn`]).

use serde::{Deserialize, Serialize};

/// The two low bits of the TOS byte (IPv4) or the traffic class (IPv6).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codepoint {
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Codepoint {
    /// The codepoint of a TOS byte or traffic class.
    pub fn of_tos(tos: u8) -> Codepoint {
        match tos & 0x03 {
            0 => Codepoint::NotEct,
            1 => Codepoint::Ect1,
            2 => Codepoint::Ect0,
            _ => Codepoint::Ce,
        }
    }

    /// Its two bits.
    pub fn bits(self) -> u8 {
        match self {
            Codepoint::NotEct => 0,
            Codepoint::Ect1 => 1,
            Codepoint::Ect0 => 2,
            Codepoint::Ce => 3,
        }
    }

    /// As `--ecn` and the JSON name it.
    pub fn name(self) -> &'static str {
        match self {
            Codepoint::NotEct => "not-ect",
            Codepoint::Ect1 => "ect1",
            Codepoint::Ect0 => "ect0",
            Codepoint::Ce => "ce",
        }
    }

    /// `--ecn`'s value: a codepoint a sender may mark with.
    pub fn parse_mark(s: &str) -> Option<Codepoint> {
        match s.to_ascii_lowercase().as_str() {
            "ect0" | "ect(0)" => Some(Codepoint::Ect0),
            "ect1" | "ect(1)" => Some(Codepoint::Ect1),
            _ => None,
        }
    }
}

/// The TOS byte a netserver marks its own sends with, one function both
/// ends use: `-Y`'s byte as asked, ECN bits included, as netperf 2.7's
/// netserver sets it, but never CE (a congestion mark is a queue's to
/// set: the DSCP then goes out not-ECT); with `--ecn`, a UDP test's sends
/// carry the asked codepoint beside the DSCP (TCP negotiates its own).
/// `None`: the socket's default is left alone.
pub fn server_tos(asked: Option<u8>, ecn: Option<EcnAsk>, udp: bool) -> Option<u8> {
    let mut tos = asked.map(|t| {
        if Codepoint::of_tos(t) == Codepoint::Ce {
            t & !0x03
        } else {
            t
        }
    });
    if let Some(e) = ecn
        && udp
    {
        tos = Some((tos.unwrap_or(0) & !0x03) | e.mark.bits());
    }
    tos.filter(|&t| t > 0)
}

/// Datagrams a receiver counted, by the codepoint they arrived with.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EcnCounts {
    pub not_ect: u64,
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

impl EcnCounts {
    pub fn add(&mut self, cp: Codepoint) {
        let slot = match cp {
            Codepoint::NotEct => &mut self.not_ect,
            Codepoint::Ect0 => &mut self.ect0,
            Codepoint::Ect1 => &mut self.ect1,
            Codepoint::Ce => &mut self.ce,
        };
        *slot += 1;
    }

    pub fn total(&self) -> u64 {
        self.not_ect + self.ect0 + self.ect1 + self.ce
    }

    pub fn merge(&mut self, o: &EcnCounts) {
        self.not_ect += o.not_ect;
        self.ect0 += o.ect0;
        self.ect1 += o.ect1;
        self.ce += o.ce;
    }

    /// The share of the datagrams that arrived CE-marked (0 when none
    /// arrived).
    pub fn ce_fraction(&self) -> f64 {
        match self.total() {
            0 => 0.0,
            n => self.ce as f64 / n as f64,
        }
    }
}

/// The most intervals a receiver keeps: past them it doubles its interval
/// and folds pairs together, so a test of any length is bounded.
pub const MAX_ECN_INTERVALS: usize = 512;

/// A receiver's count by interval, bounded by [`MAX_ECN_INTERVALS`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct EcnSeries {
    /// The length of each interval, from the first datagram counted.
    pub interval_ms: u32,
    pub intervals: Vec<EcnCounts>,
}

impl EcnSeries {
    pub fn new(interval_ms: u32) -> EcnSeries {
        EcnSeries {
            interval_ms: interval_ms.max(1),
            intervals: Vec::new(),
        }
    }

    /// A datagram `at_ms` after the first.
    pub fn add(&mut self, at_ms: u64, cp: Codepoint) {
        let mut i = at_ms / u64::from(self.interval_ms.max(1));
        while i >= MAX_ECN_INTERVALS as u64 {
            self.fold();
            i = at_ms / u64::from(self.interval_ms.max(1));
        }
        let i = i as usize;
        if self.intervals.len() <= i {
            self.intervals.resize(i + 1, EcnCounts::default());
        }
        if let Some(c) = self.intervals.get_mut(i) {
            c.add(cp);
        }
    }

    /// Twice the interval, half the entries.
    fn fold(&mut self) {
        self.interval_ms = self.interval_ms.saturating_mul(2);
        self.intervals = self
            .intervals
            .chunks(2)
            .map(|p| {
                let mut c = EcnCounts::default();
                p.iter().for_each(|x| c.merge(x));
                c
            })
            .collect();
    }

    /// Another flow's series of the same test, interval by interval (the
    /// coarser interval wins).
    pub fn merge(&mut self, o: &EcnSeries) {
        let mut o = o.clone();
        while o.interval_ms < self.interval_ms && !o.intervals.is_empty() {
            o.fold();
        }
        while self.interval_ms < o.interval_ms {
            self.fold();
        }
        if self.intervals.len() < o.intervals.len() {
            self.intervals
                .resize(o.intervals.len(), EcnCounts::default());
        }
        for (a, b) in self.intervals.iter_mut().zip(&o.intervals) {
            a.merge(b);
        }
    }
}

/// What a test asks of ECN: the codepoint the netserver marks its own
/// sends with (a UDP test; TCP negotiates its own), and whether and by
/// what interval it counts the codepoints it receives. Travels in
/// `SetupEcn`, to a netserver that names the `ecn` capability.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnAsk {
    pub mark: Codepoint,
    pub count: bool,
    pub interval_ms: u32,
}

/// TCP's ECN on one end's data connections, from its TCP_INFO.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpEcn {
    /// Data connections, and how many of them negotiated ECN.
    pub connections: u32,
    pub negotiated: u32,
    /// Packets the peer acknowledged, and those of them it echoed as
    /// CE-marked (tcpi_delivered, tcpi_delivered_ce): a sender's count.
    pub delivered: u64,
    pub delivered_ce: u64,
    /// This host's net.ipv4.tcp_ecn, where it has one.
    pub sysctl: Option<u8>,
}

impl TcpEcn {
    pub fn merge(&mut self, o: &TcpEcn) {
        self.connections += o.connections;
        self.negotiated += o.negotiated;
        self.delivered += o.delivered;
        self.delivered_ce += o.delivered_ce;
        self.sysctl = self.sysctl.or(o.sysctl);
    }
}

/// What one end saw of ECN: the codepoints of the datagrams it received
/// (UDP), and its TCP connections' ECN (TCP). The netserver's travels in an
/// `Ecn` frame before its results.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct EcnReport {
    pub received: Option<EcnCounts>,
    pub series: Option<EcnSeries>,
    pub tcp: Option<TcpEcn>,
}

impl EcnReport {
    /// Whether what came over the wire is within what a receiver keeps.
    pub fn check(&self) -> Result<(), crate::ProtoError> {
        match &self.series {
            Some(s) if s.intervals.len() > MAX_ECN_INTERVALS => {
                Err(crate::ProtoError::Malformed(format!(
                    "an ECN report of {} intervals (at most {MAX_ECN_INTERVALS})",
                    s.intervals.len()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Another flow's report of the same test.
    pub fn merge(&mut self, o: &EcnReport) {
        if let Some(r) = &o.received {
            self.received
                .get_or_insert_with(EcnCounts::default)
                .merge(r);
        }
        if let Some(s) = &o.series {
            match &mut self.series {
                Some(m) => m.merge(s),
                None => self.series = Some(s.clone()),
            }
        }
        if let Some(t) = &o.tcp {
            self.tcp.get_or_insert_with(TcpEcn::default).merge(t);
        }
    }
}

/// What a path does to ECN, from what was sent and what arrived.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathVerdict {
    /// ECT arrives as it was sent (CE on some, where a queue marked).
    Passes,
    /// ECT sent, not-ECT arrived: the path clears the bits.
    Bleached,
    /// Every datagram CE, or the other ECT than was sent.
    Mangled,
    /// Nothing arrived to judge by.
    Unknown,
}

/// Fewer datagrams than this, all CE, may be a queue marking hard; from
/// this many on, all CE is the path rewriting the bits.
pub const ALL_CE_AT_LEAST: u64 = 10;

impl PathVerdict {
    pub fn of(sent: Codepoint, got: &EcnCounts) -> PathVerdict {
        let other = match sent {
            Codepoint::Ect0 => got.ect1,
            Codepoint::Ect1 => got.ect0,
            // not-ECT sent: any ECN bits at all were made by the path
            Codepoint::NotEct => got.ect0 + got.ect1 + got.ce,
            Codepoint::Ce => got.ect0 + got.ect1,
        };
        if got.total() == 0 {
            PathVerdict::Unknown
        } else if other > 0
            || (sent != Codepoint::Ce && got.ce == got.total() && got.ce >= ALL_CE_AT_LEAST)
        {
            PathVerdict::Mangled
        } else if sent != Codepoint::NotEct && got.not_ect > 0 {
            PathVerdict::Bleached
        } else {
            PathVerdict::Passes
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PathVerdict::Passes => "passes",
            PathVerdict::Bleached => "bleached",
            PathVerdict::Mangled => "mangled",
            PathVerdict::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(not_ect: u64, ect0: u64, ect1: u64, ce: u64) -> EcnCounts {
        EcnCounts {
            not_ect,
            ect0,
            ect1,
            ce,
        }
    }

    #[test]
    fn codepoints_of_the_tos_byte() {
        assert_eq!(Codepoint::of_tos(0xb8), Codepoint::NotEct);
        assert_eq!(Codepoint::of_tos(0xb9), Codepoint::Ect1);
        assert_eq!(Codepoint::of_tos(0x02), Codepoint::Ect0);
        assert_eq!(Codepoint::of_tos(0xff), Codepoint::Ce);
        for cp in [
            Codepoint::NotEct,
            Codepoint::Ect0,
            Codepoint::Ect1,
            Codepoint::Ce,
        ] {
            assert_eq!(Codepoint::of_tos(cp.bits() | 0x20), cp);
        }
        assert_eq!(Codepoint::parse_mark("ECT0"), Some(Codepoint::Ect0));
        assert_eq!(Codepoint::parse_mark("ect(1)"), Some(Codepoint::Ect1));
        assert_eq!(Codepoint::parse_mark("ce"), None);
    }

    #[test]
    fn the_netservers_tos() {
        let ask = |mark| {
            Some(EcnAsk {
                mark,
                count: true,
                interval_ms: 1000,
            })
        };
        assert_eq!(server_tos(Some(0xb9), None, true), Some(0xb9));
        assert_eq!(server_tos(Some(0x0b), None, true), Some(0x08));
        assert_eq!(server_tos(Some(0x03), None, true), None);
        assert_eq!(server_tos(None, ask(Codepoint::Ect0), true), Some(0x02));
        assert_eq!(
            server_tos(Some(0x89), ask(Codepoint::Ect0), true),
            Some(0x8a)
        );
        assert_eq!(
            server_tos(Some(0x88), ask(Codepoint::Ect1), false),
            Some(0x88)
        );
        assert_eq!(server_tos(None, None, true), None);
    }

    #[test]
    fn verdicts() {
        use PathVerdict::*;
        let e0 = Codepoint::Ect0;
        assert_eq!(PathVerdict::of(e0, &counts(0, 1000, 0, 0)), Passes);
        assert_eq!(PathVerdict::of(e0, &counts(0, 900, 0, 100)), Passes);
        assert_eq!(PathVerdict::of(e0, &counts(1000, 0, 0, 0)), Bleached);
        assert_eq!(PathVerdict::of(e0, &counts(10, 990, 0, 0)), Bleached);
        assert_eq!(PathVerdict::of(e0, &counts(0, 0, 0, 1000)), Mangled);
        assert_eq!(PathVerdict::of(e0, &counts(0, 0, 1000, 0)), Mangled);
        assert_eq!(
            PathVerdict::of(Codepoint::Ect1, &counts(0, 5, 995, 0)),
            Mangled
        );
        // a few datagrams, all marked: a queue may have done it
        assert_eq!(PathVerdict::of(e0, &counts(0, 0, 0, 3)), Passes);
        assert_eq!(PathVerdict::of(e0, &counts(0, 0, 0, 0)), Unknown);
    }

    #[test]
    fn series_fold_past_their_bound() {
        let mut s = EcnSeries::new(1000);
        for ms in (0..2_000_000).step_by(500) {
            s.add(ms, Codepoint::Ce);
        }
        assert!(
            s.intervals.len() <= MAX_ECN_INTERVALS,
            "{}",
            s.intervals.len()
        );
        assert_eq!(s.interval_ms, 4000);
        let total: u64 = s.intervals.iter().map(|c| c.ce).sum();
        assert_eq!(total, 4000);
        let mut t = EcnSeries::new(1000);
        t.add(0, Codepoint::Ect0);
        t.add(1500, Codepoint::Ect0);
        let mut m = t.clone();
        m.merge(&s);
        assert_eq!(m.interval_ms, 4000);
        assert_eq!(m.intervals.first().map(|c| (c.ect0, c.ce)), Some((2, 8)));
    }
}
