//! What a run tells as it goes, to whoever shows it live (the JSON
//! stream, netperf's interim lines, the progress line): the [`Observer`]
//! trait, the interim [`Sample`], and how a rate is counted ([`Rate`]).
//! The observers are implemented above `family`, which holds them as trait
//! objects and knows none of them.

use std::sync::Arc;

use engine::live::{Live, LiveSnapshot};

use super::Figures;
use crate::plan::Units;

/// One interim sample, as `--json` keeps it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub index: u32,
    /// The rate over the interval, in `units` per second.
    pub rate: f64,
    pub units: String,
    /// Seconds the interval lasted.
    pub interval: f64,
    /// When it ended: seconds since the Unix epoch, to the millisecond.
    pub ending: f64,
    /// What our side moved over the interval (both ways added), and in how
    /// many calls (UDP: datagrams).
    pub bytes: u64,
    pub calls: u64,
    /// With `--flows`: each flow's rate over the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<f64>,
    /// TCP_INFO of our first data connections at the interval's end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<proto::TcpSample>,
}

/// How a run's rate is counted and shown.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub units: Units,
    /// Transactions (RR tests), or bytes.
    pub transactions: bool,
    /// Bytes per transaction, for an RR test shown in bytes or bits.
    pub bytes_per_transaction: f64,
}

impl Rate {
    /// The amount done by a snapshot, in what the units count.
    pub fn amount(&self, s: &LiveSnapshot) -> f64 {
        match (self.transactions, self.units) {
            (true, Units::Transactions | Units::Usec) => s.transactions as f64,
            (true, _) => s.transactions as f64 * self.bytes_per_transaction,
            (false, _) => s.bytes as f64,
        }
    }
}

/// Who is told of a run as it goes. Every event has a default that lets
/// it pass. Samples come from the sampler's thread, the rest from the
/// run's.
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// Iteration `i` (from 1) begins.
    fn iteration_begins(&self, _i: u32) {}
    /// A data phase begins; `live` holds its counters as they grow.
    fn phase_begins(&self, _live: &Arc<Live>) {}
    /// An interim sample of the data phase.
    fn sample(&self, _s: &Sample) {}
    /// The data phase is over (its last sample taken).
    fn phase_ends(&self) {}
    /// Iteration `i` is over, with its figures.
    fn iteration_ends(&self, _i: u32, _f: &Figures) {}
}
