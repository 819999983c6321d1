//! `--json`: one document with the test, every option in force, every
//! result, every interim sample and every confidence iteration. The schema
//! is in doc/json.md (its types in [`super::json_types`]); `schema` names
//! its version.

use super::json_types::*;
use crate::{
    output::{Out, Reporter, Results, Test},
    report::{
        Figures, LoadFigures, Measurement, RpmFigures, figures::sd_per_transaction,
        scenario::category,
    },
};

/// The schema's name and version.
pub const SCHEMA: &str = "rsnetperf-result/1";

/// `--json`: the document on stdout.
#[derive(Debug)]
pub struct Json {
    pub out: Out,
}

impl Reporter for Json {
    fn finish(&mut self, r: &Results<'_>) -> anyhow::Result<()> {
        self.out.emit(render(r)?.as_bytes())
    }
}

/// The document, pretty-printed, with a final newline.
pub fn render(r: &Results<'_>) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(&document(r))?;
    s.push('\n');
    Ok(s)
}

/// The document of a run's results.
pub fn document(r: &Results<'_>) -> Document {
    let (t, m, f) = (r.test, r.last, r.figures);
    Document {
        schema: SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: proto::PROTOCOL_VERSION,
        command_line: t.command_line.clone(),
        test: t.label().into(),
        options: options(t, m),
        environment: EnvironmentJson {
            local: engine::sys::host_facts(Some(r.server.local.ip())),
            remote: RemoteFacts {
                software: r.server.software.clone(),
                congestion_control: m
                    .remote
                    .counts
                    .tcp
                    .as_ref()
                    .map(|t| t.cong_control.clone())
                    .filter(|c| !c.is_empty()),
                send_buf: m.remote.send_buf,
                recv_buf: m.remote.recv_buf,
                host: m.remote_facts.as_deref().cloned(),
            },
        },
        control: ControlJson {
            local: r.server.local.to_string(),
            remote: r.server.remote.to_string(),
            server_software: r.server.software.clone(),
            embedded_server: r.server.embedded,
        },
        result: result(t, m, f),
        local: (&m.local.counts).into(),
        remote: (&m.remote.counts).into(),
        sizes: Sizes {
            local_send_buf: m.local.send_buf,
            local_recv_buf: m.local.recv_buf,
            remote_send_buf: m.remote.send_buf,
            remote_recv_buf: m.remote.recv_buf,
            local_send_size: m.local.send_size,
            local_recv_size: m.local.recv_size,
            remote_send_size: m.remote.send_size,
            remote_recv_size: m.remote.recv_size,
            mss: m.mss,
        },
        latency_usec: m.latency.as_ref().map(latency_of),
        udp: udp(m),
        lost_transactions: (t.kind() == proto::TestKind::UdpRr).then_some(m.lost),
        iterations: r
            .runs
            .iter()
            .enumerate()
            .map(|(i, (m, f))| Iteration {
                iteration: i + 1,
                elapsed_seconds: f.elapsed,
                value: f.result,
                local_cpu_util: f.local_cpu,
                remote_cpu_util: f.remote_cpu,
                local: (&m.local.counts).into(),
                remote: (&m.remote.counts).into(),
            })
            .collect(),
        confidence: confidence(r),
        interim: r.runs.iter().flat_map(|(m, _)| m.interim.clone()).collect(),
        remote_interim: m
            .remote_interim
            .iter()
            .map(|i| RemoteInterim {
                elapsed_seconds: i.elapsed_ns as f64 / 1e9,
                bytes: i.bytes,
                calls: i.calls,
                transactions: i.transactions,
                tcp: i.tcp.clone(),
            })
            .collect(),
        under_load: m.load().map(under_load),
        rpm: m.rpm().map(rpm),
        one_way: m.one_way.as_ref().map(one_way),
        ecn: m.ecn(&t.spec).map(|e| ecn(&e)),
        stamp: m.stamp.map(stamp),
    }
}

/// A STAMP session's counts as JSON.
fn stamp(s: crate::report::stamp::StampFigures) -> StampJson {
    StampJson {
        sent: s.sent,
        reflected: s.reflected,
        lost: s.lost_round_trip,
        lost_forward: s.lost_forward,
        lost_backward: s.lost_backward,
        duplicates: s.duplicates,
        reordered: s.reordered,
        stateful: s.stateful,
        ttl: s.ttl,
        foreign: s.foreign,
        cos: s.cos.map(|c| StampCosJson {
            dscp: c.dscp,
            ecn: c.ecn,
            answered: c.answered,
            forward_remarked: c.forward_remarked,
            forward_dscp_seen: c.forward_dscp_seen,
            forward_ce: c.forward_ce,
            forward_not_ect: c.forward_not_ect,
            back_dscp_read: c.back_dscp_read,
            back_remarked: c.back_remarked,
            back_dscp_seen: c.back_dscp_seen,
            back_ecn_read: c.back_ecn_read,
            back_ce: c.back_ce,
            back_not_ect: c.back_not_ect,
        }),
    }
}

fn tcp(t: crate::report::ecn::TcpWay) -> EcnTcpJson {
    EcnTcpJson {
        negotiated: t.negotiated,
        delivered: t.delivered,
        delivered_ce: t.delivered_ce,
        ce_fraction: t.ce_fraction(),
        local_tcp_ecn: t.local_sysctl,
        remote_tcp_ecn: t.remote_sysctl,
    }
}

/// `--ecn`'s figures as the document has them.
fn ecn(e: &crate::report::ecn::EcnFigures) -> EcnJson {
    let way = |w: &crate::report::ecn::Way| {
        let (step, intervals) = w.series.as_ref().map_or((0.0, Vec::new()), |s| {
            let step = f64::from(s.interval_ms) / 1000.0;
            let rows = s
                .intervals
                .iter()
                .enumerate()
                .map(|(i, c)| EcnIntervalJson {
                    start_seconds: i as f64 * step,
                    not_ect: c.not_ect,
                    ect0: c.ect0,
                    ect1: c.ect1,
                    ce: c.ce,
                    ce_fraction: c.ce_fraction(),
                })
                .collect();
            (step, rows)
        });
        EcnWayJson {
            received: w.received,
            ce_fraction: w.received.ce_fraction(),
            path: w.verdict.name().into(),
            interval_seconds: step,
            intervals,
        }
    };
    EcnJson {
        sent: e.sent.name().into(),
        received: e.received(),
        ce_fraction: e.ce_fraction(),
        path: e.path().map(|p| p.name().into()),
        up: e.up.as_ref().map(way),
        down: e.down.as_ref().map(way),
        tcp: e.tcp.map(tcp),
        load_up: e.load.0.map(tcp),
        load_down: e.load.1.map(tcp),
    }
}

fn one_way(w: &crate::report::one_way::OneWay) -> OneWayJson {
    let pct = |p: Option<crate::report::one_way::Percentiles>| {
        p.map(|p| PercentilesJson {
            p50: p.p50,
            p90: p.p90,
            p99: p.p99,
            count: p.count,
        })
    };
    let way = |x: &crate::report::one_way::Way| WayJson {
        idle: pct(x.idle),
        loaded: pct(x.loaded),
    };
    OneWayJson {
        up: way(&w.up),
        down: way(&w.down),
        drift_ppm: w.drift_ppm,
        error_bound_usec: w.bound_us,
        probes_sent: w.sent,
        probes_answered: w.answered,
        started_unix: w.started_unix,
        observer: w.observer.as_ref().map(|o| ObserverJson {
            host: o.host.clone(),
            up: way(&o.up),
            down: way(&o.down),
        }),
        series: w
            .samples
            .iter()
            .map(|s| OneWaySampleJson {
                at_seconds: s.at,
                up_usec: s.up_us,
                down_usec: s.down_us,
                phase: s.phase.name().into(),
            })
            .collect(),
    }
}

/// A side's options as asked, but its congestion control as its socket
/// held it (read back: a kernel that refused `-K` ran its default).
fn held(side: &crate::report::Side) -> SideOptions {
    let mut o = SideOptions::from(&side.asked);
    if let Some(tcp) = &side.counts.tcp
        && !tcp.cong_control.is_empty()
    {
        o.cong_control = Some(tcp.cong_control.clone());
    }
    o
}

/// Every option in force: the request's, and what only the command line
/// knows.
fn options(t: &Test, m: &Measurement) -> Options {
    let (length_seconds, length_count) = match t.spec.end {
        proto::TestEnd::Time { millis } => (Some(millis / 1000), None),
        proto::TestEnd::Bytes(n) | proto::TestEnd::Transactions(n) => (None, Some(n)),
    };
    let (request_size, response_size) = t.sizes(m);
    Options {
        host: t.host_name.clone(),
        port: t.port,
        length_seconds,
        length_count,
        flows: t.spec.flows,
        warmup_seconds: t.spec.window.map(|w| f64::from(w.warmup_ms) / 1000.0),
        cooldown_seconds: t.spec.window.map(|w| f64::from(w.cooldown_ms) / 1000.0),
        units: t.units.label().to_string(),
        headers: t.headers,
        verbosity: t.verbosity,
        local: held(&m.local),
        remote: held(&m.remote),
        request_size,
        response_size,
        burst: t.ours.burst,
        recv_timeout_seconds: t.ours.recv_timeout.map(|d| d.as_secs_f64()),
        rate_bps: t.spec.rate_bps,
        spin: t.spec.spin,
        latency: t.ours.latency,
        rx_path: match t.ours.rx {
            proto::RxPath::Copy => "copy",
            proto::RxPath::Discard => "discard",
            proto::RxPath::ZeroCopy => "zerocopy",
        }
        .into(),
        zerocopy: t.ours.zerocopy,
        io_uring: t.spec.paths.uring,
        local_cpu: t.local_cpu,
        remote_cpu: t.spec.measure_cpu,
        num_cpus: t.spec.num_cpus,
        interim_seconds: t.interim.map(|(s, _)| s),
        confidence_level: t.confidence.map(|c| c.level),
        confidence_width_percent: t.confidence.map(|c| c.width * 100.0),
        max_iterations: t.confidence.map(|c| c.max_iterations),
        min_iterations: t.confidence.map(|c| c.min_iterations),
        port_range: t.ours.port_range,
        brand: t.brand.clone(),
        fill_file: t.ours.fill_file.as_ref().map(|f| f.display().to_string()),
    }
}

/// The result as printed (the mean over iterations with -I/-i).
fn result(t: &Test, m: &Measurement, f: &Figures) -> ResultJson {
    ResultJson {
        elapsed_seconds: f.elapsed,
        value: f.result,
        units: if m.rpm().is_some() {
            "RPM".to_string()
        } else {
            format!("{}/s", t.units.label())
        },
        transaction_rate: t.kind().is_rr().then(|| {
            if m.elapsed > 0.0 {
                m.local.transactions as f64 / m.elapsed
            } else {
                0.0
            }
        }),
        send_rate: f.send_rate,
        recv_rate: f.recv_rate,
        local_cpu_util: f.local_cpu,
        remote_cpu_util: f.remote_cpu,
        local_service_demand: f.local_sd,
        remote_service_demand: f.remote_sd,
        service_demand_units: if sd_per_transaction(t.kind(), t.units) {
            "usec/Tran"
        } else {
            "usec/KB"
        }
        .into(),
    }
}

fn confidence(r: &Results<'_>) -> Option<ConfidenceJson> {
    let (c, v) = (r.test.confidence?, r.verdict?);
    Some(ConfidenceJson {
        level: c.level,
        width_target_percent: c.width * 100.0,
        iterations: r.runs.len(),
        confident: v.confident,
        mean: v.result.mean,
        half_width: v.result.half_width,
        width_percent: 100.0 * v.result.relative_width(),
        local_cpu_width_percent: v.local_cpu.map(|i| 100.0 * i.relative_width()),
        remote_cpu_width_percent: v.remote_cpu.map(|i| 100.0 * i.relative_width()),
    })
}

fn under_load(u: &LoadFigures) -> UnderLoadJson {
    UnderLoadJson {
        idle_transaction_rate: u.idle_rate,
        idle_latency_usec: u.idle.as_ref().map(latency_of),
        load_flows: u.flows,
        load_up_mbps: u.up_mbps,
        load_down_mbps: u.down_mbps,
        bloat: u
            .bloat
            .iter()
            .map(|b| BloatJson {
                way: if b.up { "up" } else { "down" }.into(),
                flow: b.flow,
                min_rtt_usec: b.min_rtt_us,
                median: b.median,
                max: b.max,
                series: b.series.clone(),
            })
            .collect(),
    }
}

fn rpm(r: &RpmFigures) -> RpmJson {
    let probes = |p: &[engine::crr::Probe]| -> Vec<ProbeJson> {
        p.iter()
            .map(|p| ProbeJson {
                at_seconds: p.at_ns as f64 / 1e9,
                connect_usec: p.connect_ns as f64 / 1e3,
                response_usec: p.response_ns as f64 / 1e3,
            })
            .collect()
    };
    RpmJson {
        rpm: r.rpm,
        category: category(r.rpm).into(),
        confidence: r.confidence.name().into(),
        idle_rpm: r.idle_rpm,
        foreign_rpm: r.foreign_rpm,
        self_rpm: r.self_rpm,
        intervals: r.intervals.clone(),
        idle_probes: probes(&r.idle),
        loaded_probes: probes(&r.loaded),
        self_samples: r
            .self_samples
            .iter()
            .map(|s| SelfJson {
                at_seconds: s.at_ns as f64 / 1e9,
                rtt_usec: s.rtt_us,
            })
            .collect(),
        final_from_seconds: r.final_from_ns as f64 / 1e9,
    }
}

fn latency_of(l: &engine::latency::LatencySummary) -> Latency {
    Latency {
        count: l.count,
        min: l.min as f64 / 1000.0,
        mean: l.mean / 1000.0,
        p50: l.p50 as f64 / 1000.0,
        p90: l.p90 as f64 / 1000.0,
        p99: l.p99 as f64 / 1000.0,
        p999: l.p999 as f64 / 1000.0,
        max: l.max as f64 / 1000.0,
        stddev: l.stddev / 1000.0,
    }
}

fn udp(m: &Measurement) -> Option<Udp> {
    let u = m.remote.udp.as_ref()?;
    let sent = m.local.send_calls;
    let lost = sent.saturating_sub(u.received);
    Some(Udp {
        sent,
        send_errors: m.send_errors,
        received: u.received,
        lost,
        lost_percent: if sent == 0 {
            0.0
        } else {
            100.0 * lost as f64 / sent as f64
        },
        rcvbuf_drops: u.rcvbuf_drops,
        drops_source: match u.drops_source {
            proto::DropSource::Socket => "socket",
            proto::DropSource::SocketCoalesced => "socket-coalesced",
            proto::DropSource::Host => "host",
            proto::DropSource::Unavailable => "unavailable",
        }
        .into(),
        out_of_order: u.out_of_order,
        duplicates: u.duplicates,
        jitter_usec: u.jitter_ns as f64 / 1000.0,
    })
}
