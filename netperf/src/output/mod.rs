//! Everything the client prints. Figures are computed once, in
//! [`Figures`], from both sides' counters; each format only lays them out.

pub mod classic;
pub mod units;

use std::net::SocketAddr;

use proto::TestKind;

use crate::{
    cli::{Plan, Units},
    family::Measurement,
};

/// The addresses the banner names.
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// `-L` name or the wildcard netperf shows ("0.0.0.0", "::0").
    pub local_name: String,
    pub local_addr: String,
    pub remote_name: String,
    pub remote_addr: String,
    pub ipv6: bool,
}

impl Endpoints {
    pub fn new(plan: &Plan, peer: SocketAddr) -> Endpoints {
        let ipv6 = peer.is_ipv6();
        let (local_name, local_addr) = match (&plan.local_host, ipv6) {
            (Some(h), _) => (h.clone(), h.clone()),
            (None, false) => ("0.0.0.0".into(), "0.0.0.0".into()),
            (None, true) => ("::0".into(), "::".into()),
        };
        Endpoints {
            local_name,
            local_addr,
            remote_name: plan.host_name().to_string(),
            remote_addr: peer.ip().to_string(),
            ipv6,
        }
    }

    pub fn family(&self) -> &'static str {
        if self.ipv6 { "AF_INET6" } else { "AF_INET" }
    }
}

/// The figures of one test result, in the plan's units.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub elapsed: f64,
    /// Throughput or transaction rate, in the plan's units per second.
    pub result: f64,
    /// What we sent, per second (UDP_STREAM's first row).
    pub send_rate: f64,
    /// What the netserver received, per second (UDP_STREAM's second row).
    pub recv_rate: f64,
}

impl Figures {
    pub fn of(plan: &Plan, m: &Measurement) -> Figures {
        let u = plan.units();
        Figures {
            elapsed: m.elapsed,
            result: rate(u, plan.test, m),
            send_rate: u.rate(m.local.bytes_sent as f64, m.elapsed),
            recv_rate: u.rate(m.remote.bytes_received as f64, m.elapsed),
        }
    }
}

/// The test's result in `units` per second.
pub fn rate(units: Units, kind: TestKind, m: &Measurement) -> f64 {
    units.rate(m.result_units(kind), m.elapsed)
}
