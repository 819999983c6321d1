//! The request/response tables: TCP_RR, UDP_RR, TCP_CRR, TCP_CC.

use std::fmt::Write as _;

use proto::TestKind;

use super::*;

/// TCP_CRR and TCP_CC print the same table.
fn is_crr(t: &Test) -> bool {
    matches!(t.name, TestName::TcpCrr | TestName::TcpCc)
}

/// TCP_RR, UDP_RR, TCP_CRR and TCP_CC.
pub fn rr(t: &Test, m: &Measurement, f: &Figures, extras: bool) -> String {
    let mut s = String::new();
    // TCP_CRR's and TCP_CC's rows carry no brand in netperf.
    let crr = is_crr(t);
    let brand = if crr { "" } else { brand(t) };
    if t.verbosity == 0 {
        if with_cpu(t) {
            let sd = or_minus_one(if t.local_cpu { f.local_sd } else { f.remote_sd });
            if crr {
                let _ = writeln!(s, "{sd:6.3}");
            } else {
                let _ = writeln!(s, "{sd:6.3} S {brand}");
            }
        } else if crr {
            let _ = writeln!(s, "{:7.2}", f.result);
        } else {
            let _ = writeln!(s, "{:7.2} {}", f.result, brand);
        }
        return s;
    }
    if with_cpu(t) {
        rr_cpu(t, m, f, brand, &mut s);
    } else {
        rr_plain(t, m, f, brand, &mut s);
    }
    if t.verbosity > 1 {
        match t.name {
            TestName::TcpRr => s.push_str(&rr_detail(t, m)),
            TestName::TcpCrr | TestName::TcpCc => s.push_str(&crr_detail(m)),
            _ => {}
        }
    }
    if extras {
        if t.kind() == TestKind::UdpRr {
            s.push_str(&udp_rr_loss_line(t, m));
        }
        s.push_str(&latency_lines(m));
    }
    s
}

/// TCP_CRR's and TCP_CC's `-v 2` block: where the buffers sat.
fn crr_detail(m: &Measurement) -> String {
    format!(
        "\nAlignment      Offset\n\
         Local  Remote  Local  Remote\n\
         Send   Recv    Send   Recv\n\
         {:5}  {:5}   {:5}  {:5}\n",
        m.local.asked.send_align,
        m.remote.asked.recv_align,
        m.local.asked.send_offset,
        m.remote.asked.recv_offset
    )
}

/// The RR table with CPU columns.
fn rr_cpu(t: &Test, m: &Measurement, f: &Figures, brand: &str, s: &mut String) {
    let crr = is_crr(t);
    if t.headers {
        let units = t.units;
        let per_tr = units == Units::Transactions || crr;
        let _ = write!(
            s,
            "Local /Remote\n\
             Socket Size   Request Resp.  Elapsed {}CPU    CPU    S.dem   S.dem\n\
             Send   Recv   Size    Size   Time    {} local  remote local   remote\n\
             bytes  bytes  bytes   bytes  secs.   per sec  {}    {}    {}   {}\n\n",
            if per_tr { "Trans.   " } else { "Tput     " },
            if per_tr {
                "Rate    ".to_string()
            } else {
                format!("{:<8.8}", units.label())
            },
            if crr {
                "%  ".to_string()
            } else {
                format!("% {}", method(t.local_cpu))
            },
            if crr {
                "%  ".to_string()
            } else {
                format!("% {}", method(t.spec.measure_cpu))
            },
            if per_tr { "us/Tr" } else { "us/KB" },
            if per_tr { "us/Tr" } else { "us/KB" },
        );
    }
    let gap = if t.name == TestName::TcpRr {
        "  "
    } else {
        "   "
    };
    let _ = write!(
        s,
        "{:<6} {:<6} {:<6}  {:<6} {:<6.2}  {:<6.2}{gap}{:<6.2} {:<6.2} {:<6.3}  {:<6.3}",
        m.local.send_buf,
        m.local.recv_buf,
        t.sizes(m).0,
        t.sizes(m).1,
        f.elapsed,
        f.result,
        or_minus_one(f.local_cpu),
        or_minus_one(f.remote_cpu),
        or_minus_one(f.local_sd),
        or_minus_one(f.remote_sd),
    );
    if crr {
        s.push('\n');
    } else {
        let _ = writeln!(s, " {brand}");
    }
    let _ = writeln!(s, "{:<6} {:<6}", m.remote.send_buf, m.remote.recv_buf);
}

/// The RR table without CPU columns.
fn rr_plain(t: &Test, m: &Measurement, f: &Figures, brand: &str, s: &mut String) {
    let units = t.units;
    if t.headers {
        if units == Units::Transactions || is_crr(t) {
            s.push_str(
                "Local /Remote\n\
                 Socket Size   Request  Resp.   Elapsed  Trans.\n\
                 Send   Recv   Size     Size    Time     Rate         \n\
                 bytes  Bytes  bytes    bytes   secs.    per sec   \n\n",
            );
        } else {
            let _ = write!(
                s,
                "Local /Remote\n\
                 Socket Size   Request  Resp.   Elapsed  \n\
                 Send   Recv   Size     Size    Time     Throughput \n\
                 bytes  Bytes  bytes    bytes   secs.    {}/sec   \n\n",
                units.label()
            );
        }
    }
    let _ = writeln!(
        s,
        "{:<6} {:<6} {:<6}   {:<6}  {:<6.2}   {:7.2}   {}",
        m.local.send_buf,
        m.local.recv_buf,
        t.sizes(m).0,
        t.sizes(m).1,
        f.elapsed,
        f.result,
        brand
    );
    let _ = writeln!(s, "{:<6} {:<6}", m.remote.send_buf, m.remote.recv_buf);
}

/// `--under-load`: the idle phase beside the loaded one, and the load.
pub fn under_load_lines(m: &Measurement, f: &Figures) -> String {
    // (the responsiveness test's table shows its load)
    let Some(crate::report::Scenario::UnderLoad(u)) = &m.scenario else {
        return String::new();
    };
    let lat = |l: Option<&engine::latency::LatencySummary>| match l {
        Some(l) => format!(
            "latency p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} us",
            l.p50 as f64 / 1e3,
            l.p90 as f64 / 1e3,
            l.p99 as f64 / 1e3,
            l.max as f64 / 1e3
        ),
        None => "latency not timed".to_string(),
    };
    let mut load = Vec::new();
    if let Some(up) = u.up_mbps {
        load.push(format!("{} flows up {up:.2} 10^6bits/s", u.flows));
    }
    if let Some(down) = u.down_mbps {
        load.push(format!("{} flows down {down:.2} 10^6bits/s", u.flows));
    }
    format!(
        "Under load ({}):
  idle:   {:.2} Trans/s, {}
  loaded: {:.2} Trans/s, {}
{}",
        load.join(", "),
        u.idle_rate,
        lat(u.idle.as_ref()),
        m.local.transactions as f64 / f.elapsed.max(1e-9),
        lat(m.latency.as_ref()),
        bloat_line(u)
    )
}

/// The load flows' bloat, each flow's median (and max), a direction at a
/// time; empty where none was read.
pub fn bloat_line(u: &crate::report::LoadFigures) -> String {
    if u.bloat.is_empty() {
        return String::new();
    }
    let way = |up: bool| {
        let each: Vec<String> = u
            .bloat
            .iter()
            .filter(|b| b.up == up)
            .map(|b| format!("{:.1} ({:.1})", b.median, b.max))
            .collect();
        (!each.is_empty())
            .then(|| format!("{} {}", if up { "up" } else { "down" }, each.join(", ")))
    };
    let ways: Vec<String> = [way(true), way(false)].into_iter().flatten().collect();
    format!(
        "  bloat, in flight over min RTT x delivery rate, each flow's median (max): {}\n",
        ways.join("; ")
    )
}

/// Queueing delay each way (ours: `--one-way`, and under load where
/// the netserver answers probes), a line a direction, then how the
/// figures were made.
pub fn one_way_lines(m: &Measurement) -> String {
    let Some(w) = &m.one_way else {
        return String::new();
    };
    let pct = |p: Option<crate::report::one_way::Percentiles>| match p {
        Some(p) => format!("p50 {:.1} p90 {:.1} p99 {:.1}", p.p50, p.p90, p.p99),
        None => "-".to_string(),
    };
    let way = |name: &str, x: &crate::report::one_way::Way| {
        if x.idle.is_some() {
            format!(
                "  {name} idle {}, loaded {} us\n",
                pct(x.idle),
                pct(x.loaded)
            )
        } else {
            format!("  {name} {} us\n", pct(x.loaded))
        }
    };
    let bound = w
        .bound_us
        .map_or_else(String::new, |b| format!(", error bound {b:.1} us"));
    let observer = w.observer.as_ref().map_or_else(String::new, |o| {
        format!(
            "Observer {} (its probes to the same netserver):\n{}{}",
            o.host,
            way("up:  ", &o.up),
            way("down:", &o.down)
        )
    });
    format!(
        "Queueing delay each way (up: toward the netserver):\n{}{}  {} of {} probes answered, clock drift {:.1} ppm removed{bound}\n{observer}",
        way("up:  ", &w.up),
        way("down:", &w.down),
        w.answered,
        w.sent,
        w.drift_ppm
    )
}

/// UDP_RR: transactions that got no response in time.
pub fn udp_rr_loss_line(t: &Test, m: &Measurement) -> String {
    let done = m.local.transactions;
    let tried = done + m.lost;
    let pct = if tried == 0 {
        0.0
    } else {
        m.lost as f64 * 100.0 / tried as f64
    };
    let timeout = t
        .ours
        .recv_timeout
        .unwrap_or(crate::family::udp::DEFAULT_UDP_TIMEOUT)
        .as_secs_f64();
    format!(
        "Lost {} of {tried} transactions ({pct:.3}%): no response within {timeout:.3} s\n",
        m.lost
    )
}

/// Our latency percentiles of the _RR tests.
fn latency_lines(m: &Measurement) -> String {
    let mut s = String::new();
    if let Some(l) = &m.latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        let _ = write!(
            s,
            "\nLatency (usec)       min       mean        p50        p90        p99      p99.9        max     stddev\n\
             {:14} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3}\n",
            "",
            us(l.min),
            l.mean / 1000.0,
            us(l.p50),
            us(l.p90),
            us(l.p99),
            us(l.p999),
            us(l.max),
            l.stddev / 1000.0
        );
    }
    s
}

/// TCP_RR's `-v 2` block: the round trip and the throughput both ways.
fn rr_detail(t: &Test, m: &Measurement) -> String {
    let mut s = String::new();
    let rate = if m.elapsed > 0.0 {
        m.local.transactions as f64 / m.elapsed
    } else {
        0.0
    };
    let units = match t.units {
        Units::Transactions => Units::Bits('m'),
        u => u,
    };
    let rtt = if rate > 0.0 {
        1e6 / rate * f64::from(1 + t.spec.burst)
    } else {
        0.0
    };
    let _ = write!(
        s,
        "Alignment      Offset         RoundTrip  Trans    Throughput\n\
         Local  Remote  Local  Remote  Latency    Rate     {:<8.8}/s\n\
         Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n\
         {:5}  {:5}   {:5}  {:5}   {:<6.3}   {:<6.3} {:<6.3}    {:<6.3}\n",
        units.label(),
        m.local.asked.send_align,
        m.remote.asked.recv_align,
        m.local.asked.send_offset,
        m.remote.asked.recv_offset,
        rtt,
        rate,
        units.rate(rate * f64::from(t.sizes(m).0), 1.0),
        units.rate(rate * f64::from(t.sizes(m).1), 1.0)
    );
    s
}
