//! `--flows`: after the aggregate row, one line of per-flow spread (min,
//! median, max, and Jain's fairness index), and at `-v 2` a row per flow.
//! netperf 2.7 has no multi-flow output; the aggregate keeps its table, and
//! `-P 0` at `-v 0/1` prints that row alone.

use std::fmt::Write as _;

use proto::TestKind;

use super::*;

/// Each flow's share of the result, in the result's units, over the common
/// interval (the aggregate is their sum).
pub fn per_flow(t: &Test, m: &Measurement) -> Vec<f64> {
    let u = t.units;
    let amount = |i: usize| -> f64 {
        let (l, r) = (m.local.flows.get(i), m.remote.flows.get(i));
        match t.kind() {
            TestKind::TcpStream => r.map_or(0, |f| f.bytes_received) as f64,
            TestKind::TcpMaerts => l.map_or(0, |f| f.bytes_received) as f64,
            _ if u == Units::Transactions => l.map_or(0, |f| f.transactions) as f64,
            // an _RR test in byte units: what the netserver moved both ways
            _ => r.map_or(0, |f| f.bytes_sent + f.bytes_received) as f64,
        }
    };
    (0..m.local.flows.len())
        .map(|i| u.rate(amount(i), m.elapsed))
        .collect()
}

/// Jain's fairness index: 1 when every flow got the same, 1/n when one
/// got everything.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        return 1.0;
    }
    sum * sum / (x.len() as f64 * sq)
}

/// (min, median, max) of the flows' figures.
pub fn spread(x: &[f64]) -> (f64, f64, f64) {
    let mut v = x.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (v[0], median, v[n - 1])
}

fn unit_label(t: &Test) -> String {
    match t.units {
        Units::Transactions => "Trans/s".into(),
        u => format!("{}/s", u.label()),
    }
}

/// The lines after the aggregate row.
pub fn block(t: &Test, m: &Measurement) -> String {
    let n = m.local.flows.len();
    if n < 2 || (!t.headers && t.verbosity < 2) {
        return String::new();
    }
    let x = per_flow(t, m);
    let (lo, med, hi) = spread(&x);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{n} flows: per flow min {lo:.2}, median {med:.2}, max {hi:.2} {}; Jain's fairness index {:.4}",
        unit_label(t),
        jain(&x)
    );
    if t.verbosity >= 2 {
        let rr = t.kind().is_rr();
        let udp = t.kind() == TestKind::UdpStream;
        let _ = writeln!(
            s,
            "\nFlow   Local  Remote {:>14} {:>14}  {}",
            if rr {
                "Transactions"
            } else if udp {
                "Datagrams"
            } else {
                "Bytes"
            },
            unit_label(t),
            if udp { "Lost" } else { "Retrans" }
        );
        let remote_port = m.remote.addr.map_or(0, |a| a.port());
        for (i, v) in x.iter().enumerate() {
            let f = m.local.flows.get(i).copied().unwrap_or_default();
            let r = m.remote.flows.get(i).copied().unwrap_or_default();
            let count = match t.kind() {
                TestKind::TcpStream => r.bytes_received,
                TestKind::TcpMaerts => f.bytes_received,
                // what arrived of what the flow sent
                TestKind::UdpStream => r.recv_calls,
                _ => f.transactions,
            };
            let end = m.flows.get(i).cloned().unwrap_or_default();
            let last = if udp {
                f.send_calls.saturating_sub(r.recv_calls).to_string()
            } else {
                end.retransmits
                    .map_or_else(|| "-".to_string(), |r| r.to_string())
            };
            let _ = writeln!(
                s,
                "{i:<6} {:>5}  {remote_port:>6} {count:>14} {v:>14.2}  {last}",
                end.local_port,
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn fairness_and_spread() {
        assert!((super::jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((super::jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(super::spread(&[3.0, 1.0, 2.0, 10.0]), (1.0, 2.5, 10.0));
    }
}
