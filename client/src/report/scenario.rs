//! What a test ran beside and around the phase it measured: `--under-load`
//! (an idle phase, then bulk flows loading the path) and `-t RPM` (its
//! probes, idle and loaded, and its load). One optional value of a
//! [`Measurement`](super::Measurement): a test runs in one scenario at
//! most.

use engine::{crr::Probe, latency::LatencySummary};

/// The scenario a measured phase ran in.
#[derive(Clone, Debug, PartialEq)]
pub enum Scenario {
    UnderLoad(LoadFigures),
    Rpm(RpmFigures),
}

/// What the idle phase and the load measured, beside the loaded phase's
/// own figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadFigures {
    /// The idle phase: its latency and transactions a second.
    pub idle: Option<LatencySummary>,
    pub idle_rate: f64,
    /// Load flows a direction.
    pub flows: u32,
    /// The load's goodput, 10^6 bits a second, each way it ran.
    pub up_mbps: Option<f64>,
    pub down_mbps: Option<f64>,
    /// Each load flow's bloat (its sending end's TCP_INFO), where read.
    pub bloat: Vec<super::bloat::FlowBloat>,
    /// `--ecn`: each direction's load flows' ECN (up, down).
    pub ecn: (Option<super::ecn::TcpWay>, Option<super::ecn::TcpWay>),
}

/// What a responsiveness test measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RpmFigures {
    /// The idle probes and the load.
    pub load: LoadFigures,
    /// Every probe, idle and loaded.
    pub idle: Vec<Probe>,
    pub loaded: Vec<Probe>,
    /// The load connections' round-trip times read while the probes ran
    /// (self probes).
    pub self_samples: Vec<SelfSample>,
    pub idle_rpm: f64,
    pub foreign_rpm: f64,
    pub self_rpm: Option<f64>,
    /// The result: foreign and self RPM's mean (foreign alone without
    /// self probes), over the last intervals.
    pub rpm: f64,
    /// Where those intervals begin, since the loaded probes began.
    pub final_from_ns: u64,
    /// Each second's moving-window RPM of the loaded phase.
    pub intervals: Vec<f64>,
    pub confidence: Confidence,
}

/// A self probe: a load connection's TCP_INFO round trip, and when it was
/// read, since the loaded probes began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SelfSample {
    pub at_ns: u64,
    pub rtt_us: u32,
}

/// The draft's confidence in a result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Confidence {
    /// Fewer intervals than the moving window holds.
    #[default]
    Low,
    /// Enough intervals, not stable.
    Medium,
    /// Stable.
    High,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

/// The draft's words for an RPM.
pub fn category(rpm: f64) -> &'static str {
    match rpm {
        r if r < 300.0 => "Poor",
        r if r < 1000.0 => "Fair",
        r if r < 6000.0 => "Good",
        _ => "Excellent",
    }
}
