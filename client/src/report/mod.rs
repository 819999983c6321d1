//! What a run measured, and what it tells as it goes. Results flow one
//! way: `family` produces them, `run` gathers them, the outputs read them;
//! nothing here knows who reads.
//!
//! # Layout
//! - this file: what one iteration measured ([`Measurement`]: a [`Side`]
//!   each way, the same type for both, so that every `LOCAL_*`/`REMOTE_*`
//!   comes from one accessor; [`FlowEnd`]; the [`Scenario`] it ran in).
//! - [`ecn`]: `--ecn`'s figures, each direction's codepoints and verdict.
//! - [`figures`]: a run's [`Figures`], computed once from a measurement.
//! - [`scenario`]: `--under-load`'s and `-t RPM`'s own figures;
//!   [`stamp`]: `-t STAMP`'s loss each way, duplicates and reordering.
//! - [`observe`]: live events ([`Observer`]: interim [`Sample`]s,
//!   iterations, data phases) and how a rate is counted ([`Rate`]).

pub mod bloat;
pub mod ecn;
pub mod figures;
pub mod observe;
pub mod one_way;
pub mod scenario;
pub mod stamp;

use std::net::SocketAddr;

use proto::{SideResults, SideSpec, TestKind};

pub use figures::Figures;
pub use observe::{Observer, Rate, Sample};
pub use scenario::{LoadFigures, RpmFigures, Scenario};

/// One side of a test as it ran: its counters, and how its data sockets
/// were set up (what was asked of them, what they got).
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// What the side counted (and, for the netserver, reported).
    pub counts: SideResults,
    /// What was asked for this side (`-s`, `-m`, `-a`, ...).
    pub asked: SideSpec,
    /// Socket buffer sizes when the data sockets were set up.
    pub send_buf: u32,
    pub recv_buf: u32,
    /// Message sizes the side used.
    pub send_size: u32,
    pub recv_size: u32,
    /// Buffers in its send and receive rings (netperf's *_WIDTH).
    pub send_width: u32,
    pub recv_width: u32,
    /// Its end of the data connection.
    pub addr: Option<SocketAddr>,
    /// The TOS byte its data socket kept (`-Y`), read back (ours only).
    pub tos: Option<u32>,
    /// TCP_INFO's round-trip time (microseconds) of every data connection
    /// at every interim sample (`-D`), in time order: the series the
    /// `*_TRANSPORT_RTT_MIN/MEDIAN/MAX` selectors summarise.
    pub rtt_over_time: Vec<u32>,
}

impl std::ops::Deref for Side {
    type Target = SideResults;
    fn deref(&self) -> &SideResults {
        &self.counts
    }
}

impl std::ops::DerefMut for Side {
    fn deref_mut(&mut self) -> &mut SideResults {
        &mut self.counts
    }
}

/// What one iteration of a test measured, on both sides.
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    /// Our elapsed time, seconds: the interval every rate is computed over.
    pub elapsed: f64,
    pub local: Side,
    pub remote: Side,
    /// TCP maximum segment size of our data connection.
    pub mss: Option<u32>,
    /// Sends that failed with a transient error (UDP: netperf's "Errors").
    pub send_errors: u64,
    /// Round-trip latency of the transactions (_RR tests).
    pub latency: Option<engine::latency::LatencySummary>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
    /// `--flows`: each flow's local port and retransmissions, in flow
    /// order (their counters are in `local.flows` and `remote.flows`).
    pub flows: Vec<FlowEnd>,
    /// The netserver's figures every interval (`-D`, `--json-stream`,
    /// `--plot`), where it reports them.
    pub remote_interim: Vec<proto::InterimReport>,
    /// Our interim samples (`-D`, `--json`, `--plot`), when they are kept.
    pub interim: Vec<Sample>,
    /// The netserver's host at the test's end, where it tells it.
    pub remote_facts: Option<Box<proto::facts::HostFacts>>,
    /// `--under-load` or `-t RPM`: what the test ran beside and around
    /// the phase measured here.
    pub scenario: Option<Scenario>,
    /// Queueing delay each way, from probes beside the test (`--one-way`,
    /// and by default under load where the netserver answers them).
    pub one_way: Option<one_way::OneWay>,
    /// `-t STAMP`: loss each way, duplicates and reordering.
    pub stamp: Option<stamp::StampFigures>,
}

impl Measurement {
    /// `--ecn`'s figures, where the test asked for them.
    pub fn ecn(&self, spec: &proto::TestSpec) -> Option<ecn::EcnFigures> {
        let ask = spec.ecn?;
        Some(ecn::EcnFigures::of(spec.kind, ask.mark, self))
    }

    /// The load's figures (`--under-load`, and `-t RPM`'s load).
    pub fn load(&self) -> Option<&LoadFigures> {
        match &self.scenario {
            Some(Scenario::UnderLoad(l)) => Some(l),
            Some(Scenario::Rpm(r)) => Some(&r.load),
            None => None,
        }
    }

    /// `-t RPM`'s figures.
    pub fn rpm(&self) -> Option<&RpmFigures> {
        match &self.scenario {
            Some(Scenario::Rpm(r)) => Some(r),
            _ => None,
        }
    }

    /// The quantity the test's result is a rate of: bytes that arrived, or
    /// transactions.
    pub fn result_units(&self, kind: TestKind) -> f64 {
        match kind {
            // What the receiver got, as netperf: the sender's count may
            // include what was lost (UDP) and is checked against it.
            TestKind::TcpStream | TestKind::UdpStream => self.remote.bytes_received as f64,
            TestKind::TcpMaerts | TestKind::UdpMaerts => self.local.bytes_received as f64,
            TestKind::TcpRr
            | TestKind::UdpRr
            | TestKind::TcpCrr
            | TestKind::TcpCc
            | TestKind::UdpStamp => self.local.transactions as f64,
        }
    }
}

/// A flow's view at the end: its local port and TCP's retransmissions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowEnd {
    pub local_port: u16,
    pub retransmits: Option<u64>,
}

impl FlowEnd {
    /// A flow whose data socket is at `addr`.
    pub fn at(addr: Option<SocketAddr>) -> FlowEnd {
        FlowEnd {
            local_port: addr.map_or(0, |a| a.port()),
            retransmits: None,
        }
    }
}
