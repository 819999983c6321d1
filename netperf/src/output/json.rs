//! `--json`: one document with the test, every option in force, every
//! result, every interim sample and every confidence iteration. The schema
//! is in doc/json.md; `schema` names its version.

use serde::Serialize;

use super::json_types::{Side, SideOptions};
use crate::{
    cli::Length,
    confidence::Verdict,
    output::asked::Asked,
    report::{Figures, Measurement, Sample, figures::sd_per_transaction, scenario::category},
};

/// The schema's name and version.
pub const SCHEMA: &str = "rsnetperf-result/1";

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    version: &'static str,
    protocol_version: u32,
    command_line: &'a str,
    test: &'static str,
    options: Options<'a>,
    control: Control<'a>,
    /// The result as printed: the mean over iterations with -I/-i.
    result: Result_,
    /// The last iteration's counters, both sides.
    local: Side,
    remote: Side,
    sizes: Sizes,
    latency_usec: Option<Latency>,
    udp: Option<Udp>,
    lost_transactions: Option<u64>,
    iterations: Vec<Iteration>,
    confidence: Option<Confidence>,
    interim: Vec<Sample>,
    /// The netserver's figures every interval of the last iteration.
    remote_interim: Vec<RemoteInterim>,
    /// `--under-load`: the idle phase and the load (the loaded phase is
    /// `result`, `latency_usec`).
    under_load: Option<UnderLoadJson>,
    /// `-t RPM`: the responsiveness figures and every probe (`result` is
    /// the RPM).
    rpm: Option<RpmJson>,
}

#[derive(Serialize)]
struct RpmJson {
    rpm: f64,
    category: &'static str,
    confidence: &'static str,
    idle_rpm: f64,
    foreign_rpm: f64,
    self_rpm: Option<f64>,
    /// Each second's moving-window RPM of the loaded phase.
    intervals: Vec<f64>,
    idle_probes: Vec<ProbeJson>,
    loaded_probes: Vec<ProbeJson>,
    /// The load connections' TCP_INFO round-trip times read while the
    /// probes ran (self probes).
    self_samples: Vec<SelfJson>,
    /// The result is of the probes and samples from here on (the last 4
    /// seconds), since the loaded probes began.
    final_from_seconds: f64,
}

#[derive(Serialize)]
struct SelfJson {
    at_seconds: f64,
    rtt_usec: u32,
}

/// One probe: when it began (since its phase began), its connection's
/// handshake and its request's response.
#[derive(Serialize)]
struct ProbeJson {
    at_seconds: f64,
    connect_usec: f64,
    response_usec: f64,
}

fn probes_json(p: &[engine::crr::Probe]) -> Vec<ProbeJson> {
    p.iter()
        .map(|p| ProbeJson {
            at_seconds: p.at_ns as f64 / 1e9,
            connect_usec: p.connect_ns as f64 / 1e3,
            response_usec: p.response_ns as f64 / 1e3,
        })
        .collect()
}

#[derive(Serialize)]
struct UnderLoadJson {
    idle_transaction_rate: f64,
    idle_latency_usec: Option<Latency>,
    load_flows: u32,
    load_up_mbps: Option<f64>,
    load_down_mbps: Option<f64>,
}

/// One of the netserver's interim reports.
#[derive(Serialize)]
struct RemoteInterim {
    /// Since the netserver's side of the test began.
    elapsed_seconds: f64,
    /// What its side had moved (both ways), in calls, and transactions.
    bytes: u64,
    calls: u64,
    transactions: u64,
    /// TCP_INFO of its first data connections, in flow order.
    tcp: Vec<proto::TcpSample>,
}

#[derive(Serialize)]
struct Options<'a> {
    host: &'a str,
    port: u16,
    length_seconds: Option<u64>,
    length_count: Option<u64>,
    flows: u32,
    warmup_seconds: Option<f64>,
    cooldown_seconds: Option<f64>,
    units: String,
    headers: bool,
    verbosity: u8,
    local: SideOptions,
    remote: SideOptions,
    request_size: u32,
    response_size: u32,
    burst: u32,
    recv_timeout_seconds: Option<f64>,
    rate_bps: Option<u64>,
    spin: bool,
    latency: bool,
    rx_path: &'static str,
    zerocopy: bool,
    io_uring: bool,
    local_cpu: bool,
    remote_cpu: bool,
    num_cpus: u32,
    interim_seconds: Option<f64>,
    confidence_level: Option<f64>,
    confidence_width_percent: Option<f64>,
    max_iterations: Option<u32>,
    min_iterations: Option<u32>,
    port_range: Option<(u16, u16)>,
    brand: Option<&'a str>,
    fill_file: Option<String>,
}

#[derive(Serialize)]
struct Control<'a> {
    local: String,
    remote: String,
    server_software: &'a str,
    embedded_server: bool,
}

#[derive(Serialize)]
struct Result_ {
    elapsed_seconds: f64,
    /// Throughput, or transactions per second, in `units`.
    value: f64,
    units: String,
    transaction_rate: Option<f64>,
    send_rate: f64,
    recv_rate: f64,
    local_cpu_util: Option<f64>,
    remote_cpu_util: Option<f64>,
    local_service_demand: Option<f64>,
    remote_service_demand: Option<f64>,
    service_demand_units: &'static str,
}

#[derive(Serialize)]
struct Sizes {
    local_send_buf: u32,
    local_recv_buf: u32,
    remote_send_buf: u32,
    remote_recv_buf: u32,
    local_send_size: u32,
    local_recv_size: u32,
    remote_send_size: u32,
    remote_recv_size: u32,
    mss: Option<u32>,
}

#[derive(Serialize)]
struct Latency {
    count: u64,
    min: f64,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    stddev: f64,
}

#[derive(Serialize)]
struct Udp {
    sent: u64,
    send_errors: u64,
    received: u64,
    lost: u64,
    lost_percent: f64,
    rcvbuf_drops: u64,
    drops_source: &'static str,
    out_of_order: u64,
    duplicates: u64,
    jitter_usec: f64,
}

#[derive(Serialize)]
struct Iteration {
    iteration: usize,
    elapsed_seconds: f64,
    value: f64,
    local_cpu_util: Option<f64>,
    remote_cpu_util: Option<f64>,
    local: Side,
    remote: Side,
}

#[derive(Serialize)]
struct Confidence {
    level: f64,
    width_target_percent: f64,
    iterations: usize,
    confident: bool,
    mean: f64,
    half_width: f64,
    width_percent: f64,
    local_cpu_width_percent: Option<f64>,
    remote_cpu_width_percent: Option<f64>,
}

/// Everything the document is made of.
#[derive(Debug)]
pub struct Report<'a> {
    pub asked: &'a Asked,
    pub control_local: std::net::SocketAddr,
    pub control_remote: std::net::SocketAddr,
    pub server_software: &'a str,
    pub embedded: bool,
    pub runs: &'a [(Measurement, Figures)],
    pub figures: &'a Figures,
    pub verdict: Option<&'a Verdict>,
}

fn latency(m: &Measurement) -> Option<Latency> {
    m.latency.as_ref().map(latency_of)
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
        },
        out_of_order: u.out_of_order,
        duplicates: u.duplicates,
        jitter_usec: u.jitter_ns as f64 / 1000.0,
    })
}

/// The document, pretty-printed, with a final newline.
pub fn render(r: &Report) -> Result<String, serde_json::Error> {
    let p = r.asked;
    let last = r.runs.last().map(|(m, _)| m);
    let empty = Measurement::default();
    let m = last.unwrap_or(&empty);
    let f = r.figures;
    let doc = Document {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        protocol_version: proto::PROTOCOL_VERSION,
        command_line: &p.command_line,
        test: p.test.name(),
        options: Options {
            host: p.host_name(),
            port: p.port,
            length_seconds: match p.length {
                Length::Seconds(s) => Some(s),
                Length::Count(_) => None,
            },
            length_count: match p.length {
                Length::Count(n) => Some(n),
                Length::Seconds(_) => None,
            },
            flows: p.flows,
            warmup_seconds: p.window.map(|w| f64::from(w.warmup_ms) / 1000.0),
            cooldown_seconds: p.window.map(|w| f64::from(w.cooldown_ms) / 1000.0),
            units: p.units().label().to_string(),
            headers: p.headers,
            verbosity: p.verbosity,
            local: (&m.local.asked).into(),
            remote: (&m.remote.asked).into(),
            request_size: p.request_size,
            response_size: p.response_size,
            burst: p.burst,
            recv_timeout_seconds: p.recv_timeout.map(|d| d.as_secs_f64()),
            rate_bps: p.rate_bps,
            spin: p.spin,
            latency: p.latency,
            rx_path: match p.rx {
                proto::RxPath::Copy => "copy",
                proto::RxPath::Discard => "discard",
                proto::RxPath::ZeroCopy => "zerocopy",
            },
            zerocopy: p.zerocopy,
            io_uring: p.uring,
            local_cpu: p.local_cpu,
            remote_cpu: p.remote_cpu,
            num_cpus: p.num_cpus,
            interim_seconds: p.interim.map(|(s, _)| s),
            confidence_level: p.confidence.map(|c| c.level),
            confidence_width_percent: p.confidence.map(|c| c.width * 100.0),
            max_iterations: p.confidence.map(|c| c.max_iterations),
            min_iterations: p.confidence.map(|c| c.min_iterations),
            port_range: p.port_range,
            brand: p.brand.as_deref(),
            fill_file: p.fill_file.as_ref().map(|f| f.display().to_string()),
        },
        control: Control {
            local: r.control_local.to_string(),
            remote: r.control_remote.to_string(),
            server_software: r.server_software,
            embedded_server: r.embedded,
        },
        result: Result_ {
            elapsed_seconds: f.elapsed,
            value: f.result,
            units: if m.rpm().is_some() {
                "RPM".to_string()
            } else {
                format!("{}/s", p.units().label())
            },
            transaction_rate: p.test.is_rr().then(|| {
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
            service_demand_units: if sd_per_transaction(p.test, p.units()) {
                "usec/Tran"
            } else {
                "usec/KB"
            },
        },
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
        latency_usec: latency(m),
        udp: udp(m),
        lost_transactions: (p.test == proto::TestKind::UdpRr).then_some(m.lost),
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
        confidence: match (p.confidence, r.verdict) {
            (Some(c), Some(v)) => Some(Confidence {
                level: c.level,
                width_target_percent: c.width * 100.0,
                iterations: r.runs.len(),
                confident: v.confident,
                mean: v.result.mean,
                half_width: v.result.half_width,
                width_percent: 100.0 * v.result.relative_width(),
                local_cpu_width_percent: v.local_cpu.map(|i| 100.0 * i.relative_width()),
                remote_cpu_width_percent: v.remote_cpu.map(|i| 100.0 * i.relative_width()),
            }),
            _ => None,
        },
        interim: r.runs.iter().flat_map(|(m, _)| m.interim.clone()).collect(),
        under_load: m.load().map(|u| UnderLoadJson {
            idle_transaction_rate: u.idle_rate,
            idle_latency_usec: u.idle.as_ref().map(latency_of),
            load_flows: u.flows,
            load_up_mbps: u.up_mbps,
            load_down_mbps: u.down_mbps,
        }),
        rpm: m.rpm().map(|r| RpmJson {
            rpm: r.rpm,
            category: category(r.rpm),
            confidence: r.confidence.name(),
            idle_rpm: r.idle_rpm,
            foreign_rpm: r.foreign_rpm,
            self_rpm: r.self_rpm,
            intervals: r.intervals.clone(),
            idle_probes: probes_json(&r.idle),
            loaded_probes: probes_json(&r.loaded),
            self_samples: r
                .self_samples
                .iter()
                .map(|s| SelfJson {
                    at_seconds: s.at_ns as f64 / 1e9,
                    rtt_usec: s.rtt_us,
                })
                .collect(),
            final_from_seconds: r.final_from_ns as f64 / 1e9,
        }),
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
    };
    let mut s = serde_json::to_string_pretty(&doc)?;
    s.push('\n');
    Ok(s)
}
