//! A run's figures, computed once from a measurement in the units asked;
//! each output only lays them out.

use proto::TestKind;

use super::Measurement;
use crate::plan::Units;

/// The figures of one test result, in the units asked.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub elapsed: f64,
    /// Throughput or transaction rate, in the units asked per second.
    pub result: f64,
    /// What we sent, per second (UDP_STREAM's first row).
    pub send_rate: f64,
    /// What the netserver received, per second (UDP_STREAM's second row).
    pub recv_rate: f64,
    /// CPU utilisation, percent, when measured (`-c`, `-C`).
    pub local_cpu: Option<f64>,
    pub remote_cpu: Option<f64>,
    /// Service demand: microseconds of CPU per KB (or per transaction).
    pub local_sd: Option<f64>,
    pub remote_sd: Option<f64>,
}

impl Figures {
    /// The figures of a `kind` test's measurement in `units`.
    pub fn of(units: Units, kind: TestKind, m: &Measurement) -> Figures {
        let u = units;
        let per_tran = sd_per_transaction(kind, units);
        Figures {
            elapsed: m.elapsed,
            // the responsiveness test's result is its RPM
            result: m.rpm().map_or_else(|| rate(u, kind, m), |r| r.rpm),
            send_rate: u.rate(m.local.bytes_sent as f64, m.elapsed),
            recv_rate: u.rate(m.remote.bytes_received as f64, m.elapsed),
            local_cpu: m.local.cpu.as_ref().map(|c| c.util),
            remote_cpu: m.remote.cpu.as_ref().map(|c| c.util),
            local_sd: service_demand(per_tran, m, m.local.cpu.as_ref()),
            remote_sd: service_demand(per_tran, m, m.remote.cpu.as_ref()),
        }
    }

    /// The mean of several iterations' figures (netperf prints the means).
    pub fn mean(all: &[Figures]) -> Figures {
        let n = all.len().max(1) as f64;
        let avg = |f: fn(&Figures) -> f64| all.iter().map(f).sum::<f64>() / n;
        let avg_opt = |f: fn(&Figures) -> Option<f64>| -> Option<f64> {
            let v: Vec<f64> = all.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        Figures {
            elapsed: avg(|f| f.elapsed),
            result: avg(|f| f.result),
            send_rate: avg(|f| f.send_rate),
            recv_rate: avg(|f| f.recv_rate),
            local_cpu: avg_opt(|f| f.local_cpu),
            remote_cpu: avg_opt(|f| f.remote_cpu),
            local_sd: avg_opt(|f| f.local_sd),
            remote_sd: avg_opt(|f| f.remote_sd),
        }
    }
}

/// Whether service demand is per transaction (an _RR test in transaction
/// units) rather than per KB.
pub fn sd_per_transaction(kind: TestKind, units: Units) -> bool {
    kind.is_rr() && units == Units::Transactions
}

/// netperf's service demand of one side: its CPU time per KB moved by us
/// (both ways), or per transaction. netperf charges both sides against our
/// byte count, and so do we.
fn service_demand(per_tran: bool, m: &Measurement, cpu: Option<&proto::CpuStats>) -> Option<f64> {
    let c = cpu?;
    let (units, divisor) = if per_tran {
        (m.local.transactions as f64, 1.0)
    } else {
        ((m.local.bytes_sent + m.local.bytes_received) as f64, 1024.0)
    };
    Some(engine::cpu::service_demand(
        c.util, c.num_cpus, units, divisor, m.elapsed,
    ))
}

/// The test's result in `units` per second. An _RR test in byte or bit
/// units reports the bytes the netserver moved both ways, as netperf does.
pub fn rate(units: Units, kind: TestKind, m: &Measurement) -> f64 {
    if kind.is_rr() && !matches!(units, Units::Transactions | Units::Usec) {
        let bytes = m.remote.bytes_sent + m.remote.bytes_received;
        return units.rate(bytes as f64, m.elapsed);
    }
    units.rate(m.result_units(kind), m.elapsed)
}
