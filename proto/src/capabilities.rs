//! What the netserver at the other end can do, as one typed value: from
//! the capabilities its hello names (ours), or what netperf 2.7's netserver
//! is known to do. The client asks this value, never which protocol it
//! speaks.

use crate::{
    dialect::Dialect,
    test::{TestKind, TestSpec},
};

/// A feature a test may need of the netserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// More than one data connection in a test (`--flows`).
    Flows,
    /// Traffic before and after the measured interval (`--warmup`,
    /// `--cooldown`).
    Window,
    /// Our UDP fast paths, told to the receiver (`--batch`, `--gso`).
    UdpFast,
    /// Both data sockets with one port on one host (`-- -P N`).
    SharedPort,
    /// The netserver's data path through other calls than netperf's
    /// (`--rx-zerocopy`, `--rx-discard` where it receives, `--io-uring`).
    Paths,
    /// One-way delay probes (`UDP_STAMP`): each end's receive and send
    /// times (`--one-way`, the queueing-delay selectors).
    Stamps,
    /// ECN codepoints marked and counted (`--ecn`).
    Ecn,
}

impl Feature {
    fn option(self) -> &'static str {
        match self {
            Feature::Flows => "--flows",
            Feature::Window => "--warmup/--cooldown",
            Feature::UdpFast => "--batch, --gso",
            Feature::SharedPort => "-- -P with one port for both ends",
            Feature::Paths => "--rx-zerocopy, --rx-discard, --io-uring",
            Feature::Stamps => "--one-way (queueing delay each way)",
            Feature::Ecn => "--ecn",
        }
    }
}

/// What a netserver can do and tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Its protocol, for the data path's conventions and for messages.
    pub dialect: Dialect,
    /// Its own description of itself.
    pub software: String,
    pub flows: bool,
    pub window: bool,
    /// It takes our UDP fast paths' settings (netperf 2.7's needs none: it
    /// receives one datagram a call whatever we send).
    pub udp_fast: bool,
    pub shared_port: bool,
    /// It closes a TCP_CRR connection first, after its response.
    pub crr_server_closes: bool,
    /// It tells how many connections it turned away from the data port.
    pub foreign: bool,
    /// It reports its figures every interval of a test (`-D`).
    pub interim: bool,
    /// It takes what we made of each test (for its `--record`).
    pub summary: bool,
    /// Its data path takes other calls than netperf's (`SetupPaths`).
    pub paths: bool,
    /// It answers one-way delay probes with its own times (`UDP_STAMP`).
    pub stamps: bool,
    /// It marks its sends and counts ECN codepoints (`--ecn`).
    pub ecn: bool,
    /// It reports where UDP datagrams were lost, TCP_INFO, and the like
    /// (netperf 2.7's reports counters, buffers, CPU and retransmissions).
    pub details: bool,
    /// It counts exactly what its side moved, as ours checks (netperf
    /// 2.7's ends a test on its own timer: it does not count the send the
    /// timer cut short, and may count one connection more).
    pub exact_counts: bool,
    /// Its sender stops by itself, at the test's length or count (ours,
    /// netperf 2.7's); else it sends until the client tells the end on the
    /// control connection (iperf3's TEST_END), which a receiving client
    /// does when its time is up or its count is in.
    pub stops_itself: bool,
    /// It runs one test a control connection (iperf3's servers).
    pub one_test: bool,
    /// What its policy allows one test (ours, from `limit:` names).
    pub limits: ServerLimits,
}

/// What a netserver's policy allows one test (`--policy`'s `[test]`),
/// told in its hello as `limit:` names, so that a client fits its test to
/// them before asking, and says what it changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerLimits {
    /// Seconds a test may run.
    pub max_seconds: Option<u64>,
    /// Flows a test may have.
    pub max_flows: Option<u32>,
    /// Bits a second a test may move, in all.
    pub max_rate: Option<u64>,
}

impl ServerLimits {
    /// The names a hello carries.
    pub fn names(&self) -> Vec<String> {
        [
            ("max-seconds", self.max_seconds),
            ("max-flows", self.max_flows.map(u64::from)),
            ("max-rate", self.max_rate),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some(format!("limit:{k}={}", v?)))
        .collect()
    }

    /// The limits a hello's names tell (a name this end does not know, or
    /// a value that is not a number, is left out).
    pub fn from_names(names: &[String]) -> ServerLimits {
        let get = |k: &str| {
            names.iter().find_map(|n| {
                n.strip_prefix("limit:")?
                    .strip_prefix(k)?
                    .strip_prefix('=')?
                    .parse::<u64>()
                    .ok()
                    .filter(|v| *v > 0)
            })
        };
        ServerLimits {
            max_seconds: get("max-seconds"),
            max_flows: get("max-flows").and_then(|v| u32::try_from(v).ok()),
            max_rate: get("max-rate"),
        }
    }
}

/// What a test asks that a netserver's limits read: its length in seconds
/// (0: until interrupted; `None`: a count, which no length can promise),
/// its flows, which ends send a stream, and its pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsAsked {
    pub seconds: Option<u64>,
    pub flows: u32,
    pub client_sends: bool,
    pub server_sends: bool,
    pub rate_bps: Option<u64>,
}

/// A test held to the limits: the seconds it may run and the pace of its
/// streams (each as asked where the limits allow it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsFit {
    pub seconds: Option<u64>,
    pub rate_bps: Option<u64>,
}

/// A limit no change of length or pace can fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverLimit {
    /// A count (`-l -N`) under a limit of seconds.
    Counted {
        max: u64,
    },
    TooManyFlows {
        max: u32,
        asked: u32,
    },
}

impl ServerLimits {
    /// A test held to these limits: one rule, which both ends apply (the
    /// client fits its test to the limits its netserver told, and says
    /// what it changed; the netserver checks what arrives against its own:
    /// a length or a client's pace that would need changing is refused
    /// there, its own sends paced at the fitted rate).
    pub fn fit(&self, a: LimitsAsked) -> Result<LimitsFit, OverLimit> {
        let mut fit = LimitsFit {
            seconds: a.seconds,
            rate_bps: a.rate_bps,
        };
        if let Some(max) = self.max_seconds {
            match a.seconds {
                Some(s) if s > 0 && s <= max => {}
                Some(_) => fit.seconds = Some(max),
                None => return Err(OverLimit::Counted { max }),
            }
        }
        if let Some(max) = self.max_flows
            && a.flows > max
        {
            return Err(OverLimit::TooManyFlows {
                max,
                asked: a.flows,
            });
        }
        if let Some(max) = self.max_rate
            && (a.client_sends || a.server_sends)
            && a.rate_bps.is_none_or(|r| r > max)
        {
            fit.rate_bps = Some(max);
        }
        Ok(fit)
    }
}

impl Capabilities {
    /// What a netserver of ours can do, from the names in its hello.
    pub fn from_names(software: &str, names: &[String]) -> Capabilities {
        let has = |n: &str| names.iter().any(|c| c == n);
        Capabilities {
            dialect: Dialect::Native,
            software: software.to_string(),
            flows: has("flows"),
            window: has("window"),
            udp_fast: has("tuning"),
            shared_port: has("shared-port"),
            crr_server_closes: has("crr-server-closes"),
            foreign: has("foreign"),
            interim: has("interim"),
            summary: has("summary"),
            paths: has("paths"),
            stamps: has("stamps"),
            ecn: has("ecn"),
            details: true,
            exact_counts: true,
            limits: ServerLimits::from_names(names),
            stops_itself: true,
            one_test: false,
        }
    }

    /// What netperf 2.7's netserver does.
    pub fn netperf2() -> Capabilities {
        Capabilities {
            dialect: Dialect::Netperf2,
            software: "netperf 2.7 netserver".to_string(),
            flows: false,
            window: false,
            udp_fast: true,
            shared_port: true,
            crr_server_closes: true,
            foreign: false,
            interim: false,
            summary: false,
            paths: false,
            stamps: false,
            ecn: false,
            details: false,
            exact_counts: false,
            stops_itself: true,
            one_test: false,
            limits: ServerLimits::default(),
        }
    }

    /// What an iperf3 server (3.x) does: streams of TCP or UDP either
    /// way, as many as asked, counted exactly, one test a connection,
    /// ended when the client says.
    pub fn iperf3() -> Capabilities {
        Capabilities {
            dialect: Dialect::Iperf3,
            software: "iperf3 server".to_string(),
            flows: true,
            window: false,
            udp_fast: false,
            shared_port: false,
            crr_server_closes: true,
            foreign: false,
            interim: false,
            summary: false,
            paths: false,
            stamps: false,
            ecn: false,
            details: false,
            exact_counts: true,
            stops_itself: false,
            one_test: true,
            limits: ServerLimits::default(),
        }
    }

    /// Why this end does not run tests of `kind` (an iperf3 server runs
    /// the stream tests only); `None` when it does.
    pub fn refuses_kind(&self, kind: TestKind) -> Option<String> {
        match self.dialect {
            Dialect::Iperf3 if !crate::iperf3::RUNS.contains(&kind) => Some(format!(
                "an iperf3 server runs {}; use this suite's netserver at that end",
                crate::iperf3::RUNS.map(|k| k.to_string()).join(", ")
            )),
            _ => None,
        }
    }

    /// Why this end cannot run `spec` as asked, where its dialect has no
    /// word for what it asks (iperf3's parameters), in one line naming the
    /// option; `None` when it can.
    pub fn refuses(&self, spec: &TestSpec) -> Option<String> {
        match self.dialect {
            Dialect::Iperf3 => crate::iperf3::Params::of_spec(spec, "")
                .err()
                .map(|e| e.message),
            Dialect::Native | Dialect::Netperf2 => None,
        }
    }

    fn has(&self, f: Feature) -> bool {
        match f {
            Feature::Flows => self.flows,
            Feature::Window => self.window,
            Feature::UdpFast => self.udp_fast,
            Feature::SharedPort => self.shared_port,
            Feature::Paths => self.paths,
            Feature::Stamps => self.stamps,
            Feature::Ecn => self.ecn,
        }
    }

    /// Why `f` cannot run against this netserver, in one line naming the
    /// option and what to do; `None` when it can.
    pub fn lacks(&self, f: Feature) -> Option<String> {
        if self.has(f) {
            return None;
        }
        let what = f.option();
        Some(match self.dialect {
            Dialect::Netperf2 if f == Feature::Stamps => format!(
                "{what}: netperf 2.7's netserver keeps no clock of its own in what it answers, so neither direction's delay can be told; use this suite's netserver at that end"
            ),
            Dialect::Netperf2 if f == Feature::Ecn => format!(
                "{what}: netperf 2.7's netserver neither marks its sends nor reads what arrives; use this suite's netserver at that end"
            ),
            Dialect::Netperf2 if f == Feature::Paths => format!(
                "{what}: netperf 2.7's netserver moves its data with plain send and recv; use this suite's netserver at that end"
            ),
            Dialect::Netperf2 => format!(
                "{what}: netperf 2.7's netserver runs one flow per test, with no window; run several netperf processes against it, or use this suite's netserver"
            ),
            Dialect::Iperf3 => format!(
                "{what}: an iperf3 server has no such thing; use this suite's netserver at that end"
            ),
            Dialect::Native => format!(
                "{what}: the netserver ({}) predates it; upgrade it",
                self.software
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_is_held_to_the_limits_by_one_rule() {
        let l = ServerLimits {
            max_seconds: Some(30),
            max_flows: Some(4),
            max_rate: Some(1_000),
        };
        let asked = LimitsAsked {
            seconds: Some(10),
            flows: 1,
            client_sends: true,
            server_sends: false,
            rate_bps: Some(500),
        };
        assert_eq!(
            l.fit(asked),
            Ok(LimitsFit {
                seconds: Some(10),
                rate_bps: Some(500)
            })
        );
        // longer, or until interrupted: the limit
        for s in [0, 60] {
            let f = l.fit(LimitsAsked {
                seconds: Some(s),
                ..asked
            });
            assert_eq!(f.map(|f| f.seconds), Ok(Some(30)), "{s}");
        }
        assert_eq!(
            l.fit(LimitsAsked {
                seconds: None,
                ..asked
            }),
            Err(OverLimit::Counted { max: 30 })
        );
        assert_eq!(
            l.fit(LimitsAsked { flows: 5, ..asked }),
            Err(OverLimit::TooManyFlows { max: 4, asked: 5 })
        );
        // a stream unpaced, or faster: paced at the limit; no stream: no pace
        for r in [None, Some(2_000)] {
            let f = l.fit(LimitsAsked {
                rate_bps: r,
                ..asked
            });
            assert_eq!(f.map(|f| f.rate_bps), Ok(Some(1_000)));
        }
        let rr = LimitsAsked {
            client_sends: false,
            rate_bps: None,
            ..asked
        };
        assert_eq!(l.fit(rr).map(|f| f.rate_bps), Ok(None));
        assert_eq!(
            ServerLimits::default().fit(rr).map(|f| f.seconds),
            Ok(Some(10))
        );
    }

    use super::*;

    #[test]
    fn limits_go_by_name_both_ways() {
        let l = ServerLimits {
            max_seconds: Some(30),
            max_flows: None,
            max_rate: Some(1_000_000_000),
        };
        let names = l.names();
        assert_eq!(names, ["limit:max-seconds=30", "limit:max-rate=1000000000"]);
        let mut all = vec!["flows".to_string(), "limit:max-future=3".to_string()];
        all.extend(names);
        assert_eq!(Capabilities::from_names("x", &all).limits, l);
        assert_eq!(
            ServerLimits::from_names(&["limit:max-flows=x".into(), "limit:max-seconds=0".into()]),
            ServerLimits::default()
        );
    }

    #[test]
    fn names_become_fields_and_refusals_say_why() {
        let c = Capabilities::from_names("x 1.0", &["flows".into(), "tuning".into()]);
        assert!(c.flows && c.udp_fast && !c.window && c.details);
        assert_eq!(c.lacks(Feature::Flows), None);
        assert!(c.lacks(Feature::Window).unwrap().contains("x 1.0"));
        let hp = Capabilities::netperf2();
        assert!(
            hp.lacks(Feature::Flows)
                .unwrap()
                .contains("netperf 2.7's netserver")
        );
        assert_eq!(hp.lacks(Feature::UdpFast), None);
    }

    /// An iperf3 server's refusals, known before connecting: the tests it
    /// does not run, and what its parameters cannot say; ours and netperf
    /// 2.7's refuse nothing here (they say so in answer to the request).
    #[test]
    fn an_iperf3_server_refuses_by_name() {
        use crate::test::Family;
        let i = Capabilities::iperf3();
        for k in [
            TestKind::TcpStream,
            TestKind::TcpMaerts,
            TestKind::UdpStream,
        ] {
            assert_eq!(i.refuses_kind(k), None);
        }
        let why = i.refuses_kind(TestKind::TcpRr).unwrap();
        assert!(why.contains("TCP_STREAM, TCP_MAERTS, UDP_STREAM"), "{why}");
        assert_eq!(Capabilities::netperf2().refuses_kind(TestKind::TcpRr), None);
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        assert_eq!(i.refuses(&spec), None);
        spec.flows = 200;
        assert!(i.refuses(&spec).unwrap().starts_with("--flows 200"));
        assert_eq!(Capabilities::from_names("x", &[]).refuses(&spec), None);
    }
}
