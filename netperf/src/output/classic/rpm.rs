//! `-t RPM`'s table (ours: netperf 2.7 has no such test), in netperf's
//! style: headers, then one row of figures; then the result in words.

use std::fmt::Write as _;

use super::*;
use crate::report::scenario::category;

/// The median of microsecond values.
fn median_us(v: &[u32]) -> Option<f64> {
    let mut v: Vec<u32> = v.iter().copied().filter(|r| *r > 0).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    v.get(v.len() / 2).map(|r| f64::from(*r))
}

/// The table, and the line that says the result.
pub fn rpm(t: &Test, m: &Measurement, f: &Figures) -> String {
    let mut s = String::new();
    let Some(r) = m.rpm() else {
        return s;
    };
    let u = &r.load;
    if t.verbosity == 0 {
        let _ = writeln!(s, "{:.0}", f.result);
        return s;
    }
    if t.headers {
        s.push_str("Idle     Loaded   Loaded   Self     Load       Load       Probes   RPM\n");
        s.push_str("RTT p50  RTT p50  RTT p99  RTT p50  Up         Down       Loaded\n");
        s.push_str("usec     usec     usec     usec     10^6bits/s 10^6bits/s\n\n");
    }
    let us = |ns: Option<u64>| ns.map_or(-1.0, |n| n as f64 / 1000.0);
    let _ = writeln!(
        s,
        "{:<8.0} {:<8.0} {:<8.0} {:<8.0} {:<10.2} {:<10.2} {:<8} {:.0}",
        us(u.idle.as_ref().map(|l| l.p50)),
        us(m.latency.as_ref().map(|l| l.p50)),
        us(m.latency.as_ref().map(|l| l.p99)),
        median_us(&r.self_samples.iter().map(|s| s.rtt_us).collect::<Vec<_>>()).unwrap_or(-1.0),
        u.up_mbps.unwrap_or(-1.0),
        u.down_mbps.unwrap_or(-1.0),
        r.loaded.len(),
        f.result
    );
    let own = r
        .self_rpm
        .map_or("no self probes".to_string(), |v| format!("self {v:.0} RPM"));
    let _ = writeln!(
        s,
        "\nResponsiveness: {:.0} RPM ({}), confidence {}; idle {:.0} RPM; loaded: foreign {:.0} RPM, {own}",
        f.result,
        category(f.result),
        r.confidence.name(),
        r.idle_rpm,
        r.foreign_rpm
    );
    s.push_str(&super::rr::bloat_line(u));
    s
}
