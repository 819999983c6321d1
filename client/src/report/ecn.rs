//! `--ecn`'s figures, from what each end counted: per direction, the
//! codepoints that arrived and the path's verdict (UDP); whether TCP
//! negotiated ECN and how much its sender saw echoed as CE (TCP).

use proto::{
    TestKind,
    ecn::{Codepoint, EcnCounts, EcnSeries, PathVerdict, TcpEcn},
};

use super::Measurement;

/// One direction's datagrams: what they were sent with, what arrived.
#[derive(Clone, Debug, PartialEq)]
pub struct Way {
    pub received: EcnCounts,
    pub series: Option<EcnSeries>,
    pub verdict: PathVerdict,
}

/// TCP's ECN as the test's sender saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpWay {
    /// Both ends' connections negotiated it (each end says of its own).
    pub negotiated: bool,
    pub delivered: u64,
    pub delivered_ce: u64,
    /// Each end's net.ipv4.tcp_ecn, where told.
    pub local_sysctl: Option<u8>,
    pub remote_sysctl: Option<u8>,
}

/// What a test with `--ecn` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct EcnFigures {
    pub sent: Codepoint,
    /// Toward the netserver (UDP_STREAM, UDP_RR's requests).
    pub up: Option<Way>,
    /// Toward us (UDP_RR's answers).
    pub down: Option<Way>,
    pub tcp: Option<TcpWay>,
    /// `--under-load`: each direction's load flows' ECN (up, down).
    pub load: (Option<TcpWay>, Option<TcpWay>),
}

impl EcnFigures {
    /// From an iteration's counts, for a test that asked `--ecn`.
    pub fn of(kind: TestKind, sent: Codepoint, m: &Measurement) -> EcnFigures {
        let way = |r: &Option<proto::ecn::EcnReport>| {
            let r = r.as_ref()?;
            let received = r.received?;
            Some(Way {
                received,
                series: r.series.clone(),
                verdict: PathVerdict::of(sent, &received),
            })
        };
        let (up, down) = match kind {
            TestKind::UdpStream => (way(&m.remote.ecn), None),
            TestKind::UdpRr => (way(&m.remote.ecn), way(&m.local.ecn)),
            _ => (None, None),
        };
        let tcp_of = |r: &Option<proto::ecn::EcnReport>| r.as_ref().and_then(|r| r.tcp);
        let tcp = match kind {
            TestKind::TcpStream | TestKind::TcpMaerts => {
                let (l, r) = (tcp_of(&m.local.ecn), tcp_of(&m.remote.ecn));
                let sender = if kind == TestKind::TcpStream { l } else { r };
                let negotiated = |t: Option<TcpEcn>| {
                    t.is_some_and(|t| t.connections > 0 && t.negotiated == t.connections)
                };
                Some(TcpWay {
                    negotiated: negotiated(l) && (r.is_none() || negotiated(r)),
                    delivered: sender.map_or(0, |s| s.delivered),
                    delivered_ce: sender.map_or(0, |s| s.delivered_ce),
                    local_sysctl: l.and_then(|t| t.sysctl),
                    remote_sysctl: r.and_then(|t| t.sysctl),
                })
            }
            _ => None,
        };
        EcnFigures {
            sent,
            up,
            down,
            tcp,
            load: m.load().map_or((None, None), |l| l.ecn),
        }
    }

    /// What every receiver of the test counted, both directions together.
    pub fn received(&self) -> Option<EcnCounts> {
        let mut all: Option<EcnCounts> = None;
        for w in self.up.iter().chain(&self.down) {
            all.get_or_insert_with(EcnCounts::default)
                .merge(&w.received);
        }
        all
    }

    /// The share that arrived CE-marked: of the datagrams (UDP), of the
    /// packets the sender had delivered (TCP).
    pub fn ce_fraction(&self) -> Option<f64> {
        if let Some(r) = self.received() {
            return Some(r.ce_fraction());
        }
        Some(self.tcp?.ce_fraction())
    }

    /// The path's verdict, the worse of the two directions (UDP); TCP's
    /// cannot be told from its counters, and is `None`.
    pub fn path(&self) -> Option<PathVerdict> {
        let ways: Vec<PathVerdict> = self
            .up
            .iter()
            .chain(&self.down)
            .map(|w| w.verdict)
            .collect();
        if ways.is_empty() {
            return None;
        }
        let rank = |v: &PathVerdict| match v {
            PathVerdict::Mangled => 3,
            PathVerdict::Bleached => 2,
            PathVerdict::Unknown => 1,
            PathVerdict::Passes => 0,
        };
        ways.into_iter().max_by_key(rank)
    }

    /// The lines a terminal and `-v 3` show.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let way = |name: &str, w: &Way| {
            let r = &w.received;
            format!(
                "ECN {name}: sent {}, received not-ECT {} ECT(0) {} ECT(1) {} CE {} ({:.2}% CE): the path {}",
                self.sent.name(),
                r.not_ect,
                r.ect0,
                r.ect1,
                r.ce,
                r.ce_fraction() * 100.0,
                match w.verdict {
                    PathVerdict::Passes => "passes ECN",
                    PathVerdict::Bleached => "bleaches ECN (ECT sent, not-ECT arrived)",
                    PathVerdict::Mangled => "mangles ECN (CE on every datagram, or the other ECT)",
                    PathVerdict::Unknown => "is not known (nothing arrived)",
                }
            )
        };
        if let Some(w) = &self.up {
            out.push(way("up", w));
        }
        if let Some(w) = &self.down {
            out.push(way("down", w));
        }
        let tcp = |name: &str, t: &TcpWay| {
            if t.negotiated {
                format!(
                    "ECN {name}: negotiated; the sender had {} of {} packets delivered CE-marked ({:.2}%)",
                    t.delivered_ce,
                    t.delivered,
                    t.ce_fraction() * 100.0
                )
            } else {
                format!("ECN {name}: not negotiated: {}", not_negotiated(t))
            }
        };
        if let Some(t) = &self.tcp {
            out.push(tcp("(TCP)", t));
        }
        if let Some(t) = &self.load.0 {
            out.push(tcp("(the load up, TCP)", t));
        }
        if let Some(t) = &self.load.1 {
            out.push(tcp("(the load down, TCP)", t));
        }
        out
    }
}

impl TcpWay {
    /// The share of the sender's delivered packets echoed as CE-marked.
    pub fn ce_fraction(&self) -> f64 {
        if self.delivered == 0 {
            0.0
        } else {
            self.delivered_ce as f64 / self.delivered as f64
        }
    }
}

/// Why TCP did not negotiate ECN, from each end's sysctl.
pub fn not_negotiated(t: &TcpWay) -> String {
    let name = |v: Option<u8>| v.map_or("not told".to_string(), |v| v.to_string());
    format!(
        "net.ipv4.tcp_ecn is {} here and {} at the netserver; the end that connects (netperf) asks for ECN only at 1, and the other agrees at 1 or 2 (or set `ip route ... features ecn` on the route)",
        name(t.local_sysctl),
        name(t.remote_sysctl)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ecn::EcnReport;

    fn report(ect0: u64, ce: u64) -> Option<EcnReport> {
        Some(EcnReport {
            received: Some(EcnCounts {
                ect0,
                ce,
                ..EcnCounts::default()
            }),
            ..EcnReport::default()
        })
    }

    #[test]
    fn udp_rr_has_both_ways_and_the_worse_verdict() {
        let mut m = Measurement::default();
        m.remote.counts.ecn = report(900, 100);
        m.local.counts.ecn = Some(EcnReport {
            received: Some(EcnCounts {
                not_ect: 1000,
                ..EcnCounts::default()
            }),
            ..EcnReport::default()
        });
        let f = EcnFigures::of(TestKind::UdpRr, Codepoint::Ect0, &m);
        assert_eq!(f.up.as_ref().unwrap().verdict, PathVerdict::Passes);
        assert_eq!(f.down.as_ref().unwrap().verdict, PathVerdict::Bleached);
        assert_eq!(f.path(), Some(PathVerdict::Bleached));
        assert_eq!(f.received().unwrap().total(), 2000);
        assert!((f.ce_fraction().unwrap() - 0.05).abs() < 1e-9);
        let lines = f.lines();
        assert!(
            lines[0].contains("CE 100 (10.00% CE): the path passes"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("ECN down:"), "{lines:?}");
    }

    #[test]
    fn tcp_reads_the_sender() {
        let mut m = Measurement::default();
        let tcp = |n, d, ce| {
            Some(EcnReport {
                tcp: Some(TcpEcn {
                    connections: 1,
                    negotiated: n,
                    delivered: d,
                    delivered_ce: ce,
                    sysctl: Some(1),
                }),
                ..EcnReport::default()
            })
        };
        m.local.counts.ecn = tcp(1, 1000, 0);
        m.remote.counts.ecn = tcp(1, 500, 50);
        let f = EcnFigures::of(TestKind::TcpMaerts, Codepoint::Ect0, &m);
        let t = f.tcp.unwrap();
        assert!(t.negotiated);
        assert_eq!((t.delivered, t.delivered_ce), (500, 50));
        assert_eq!(f.path(), None);
        m.remote.counts.ecn = tcp(0, 500, 0);
        let f = EcnFigures::of(TestKind::TcpStream, Codepoint::Ect0, &m);
        assert!(!f.tcp.unwrap().negotiated);
        assert!(f.lines()[0].contains("not negotiated"), "{:?}", f.lines());
    }
}
