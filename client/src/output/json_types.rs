//! The `--json` document's own types (doc/json.md, `rsnetperf-result/1`):
//! written by [`super::json`], read back by the plot. What the protocol
//! carries (each side's options and counters) is filled from the wire
//! types here, and only here, so that the control protocol can change
//! without changing the schema, and the other way round.

use serde::{Deserialize, Serialize};

/// The whole document.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(default)]
pub struct Document {
    pub schema: String,
    pub version: String,
    pub protocol_version: u32,
    pub command_line: String,
    pub test: String,
    pub options: Options,
    pub control: ControlJson,
    /// The result as printed: the mean over iterations with -I/-i.
    pub result: ResultJson,
    /// The last iteration's counters, both sides.
    pub local: Side,
    pub remote: Side,
    pub sizes: Sizes,
    pub latency_usec: Option<Latency>,
    pub udp: Option<Udp>,
    pub lost_transactions: Option<u64>,
    pub iterations: Vec<Iteration>,
    pub confidence: Option<ConfidenceJson>,
    pub interim: Vec<crate::report::Sample>,
    /// The netserver's figures every interval of the last iteration.
    pub remote_interim: Vec<RemoteInterim>,
    /// `--under-load`: the idle phase and the load (the loaded phase is
    /// `result`, `latency_usec`).
    pub under_load: Option<UnderLoadJson>,
    /// `-t RPM`: the responsiveness figures and every probe (`result` is
    /// the RPM).
    pub rpm: Option<RpmJson>,
    /// Queueing delay each way (`--one-way`, and under load where the
    /// netserver answers probes).
    pub one_way: Option<OneWayJson>,
    /// What both ends were, for comparing runs (`netperf compare`); a
    /// document from before it has none.
    #[serde(default)]
    pub environment: EnvironmentJson,
    /// `--ecn`: the codepoints that arrived and the path's verdict.
    pub ecn: Option<EcnJson>,
    /// `-t STAMP`: the session's counts, loss each way.
    pub stamp: Option<StampJson>,
}

/// A STAMP session's counts (doc/json.md): test packets sent and
/// reflected, loss (each way where the reflector is stateful),
/// duplicates, reordering, the least TTL the packets arrived with.
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StampJson {
    pub sent: u64,
    pub reflected: u64,
    pub lost: u64,
    pub lost_forward: Option<u64>,
    pub lost_backward: Option<u64>,
    pub duplicates: u64,
    pub reordered: u64,
    pub stateful: bool,
    pub ttl: Option<u8>,
    pub foreign: u64,
    /// `-Y`: the traffic class each way (Class of Service).
    pub cos: Option<StampCosJson>,
}

/// A STAMP session's traffic class each way (doc/json.md): the DSCP and
/// ECN codepoint sent and asked back; toward the reflector as its Class of
/// Service answers say; back as each reflection arrived.
#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StampCosJson {
    pub dscp: u8,
    pub ecn: u8,
    pub answered: u64,
    pub forward_remarked: u64,
    pub forward_dscp_seen: Option<u8>,
    pub forward_ce: u64,
    pub forward_not_ect: u64,
    pub back_dscp_read: u64,
    pub back_remarked: u64,
    pub back_dscp_seen: Option<u8>,
    pub back_ecn_read: u64,
    pub back_ce: u64,
    pub back_not_ect: u64,
}

/// `--ecn`'s figures (doc/json.md): the receivers' counts together, and
/// each direction's (UDP); TCP's negotiation and CE as its sender saw it.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct EcnJson {
    /// The codepoint the sends carried (`ect0`, `ect1`).
    pub sent: String,
    pub received: Option<proto::ecn::EcnCounts>,
    pub ce_fraction: Option<f64>,
    /// `passes`, `bleached`, `mangled` or `unknown` (UDP; TCP: absent).
    pub path: Option<String>,
    /// Toward the netserver, and toward us (UDP_RR).
    pub up: Option<EcnWayJson>,
    pub down: Option<EcnWayJson>,
    pub tcp: Option<EcnTcpJson>,
    /// `--under-load`: the load flows' ECN, each direction that ran.
    pub load_up: Option<EcnTcpJson>,
    pub load_down: Option<EcnTcpJson>,
}

/// One direction's datagrams, in total and by interval.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct EcnWayJson {
    pub received: proto::ecn::EcnCounts,
    pub ce_fraction: f64,
    pub path: String,
    pub interval_seconds: f64,
    pub intervals: Vec<EcnIntervalJson>,
}

/// One interval's counts, from the direction's first datagram.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct EcnIntervalJson {
    pub start_seconds: f64,
    pub not_ect: u64,
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
    pub ce_fraction: f64,
}

/// TCP's ECN: negotiated, and the sender's packets delivered CE-marked.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(default)]
pub struct EcnTcpJson {
    pub negotiated: bool,
    pub delivered: u64,
    pub delivered_ce: u64,
    pub ce_fraction: f64,
    pub local_tcp_ecn: Option<u8>,
    pub remote_tcp_ecn: Option<u8>,
}

/// What each end was while the test ran: our host's facts, and what the
/// netserver's end told of itself (its software, its sockets' congestion
/// control and buffers).
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct EnvironmentJson {
    pub local: engine::sys::HostFacts,
    pub remote: RemoteFacts,
}

/// The netserver's end as its results and hello tell it, and its host as
/// it tells it (a netserver that names `facts`; else `host` is absent).
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct RemoteFacts {
    pub software: String,
    pub congestion_control: Option<String>,
    pub send_buf: u32,
    pub recv_buf: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<engine::sys::HostFacts>,
}

/// Queueing delay each way: percentiles by phase, and every probe.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct OneWayJson {
    /// Toward the netserver, and back (microseconds).
    pub up: WayJson,
    pub down: WayJson,
    /// The drift found between the two ends' clocks and removed.
    pub drift_ppm: f64,
    /// The idle phase's 90th percentile, either way: what the probes read
    /// with no queue to see.
    pub error_bound_usec: Option<f64>,
    pub probes_sent: u64,
    pub probes_answered: u64,
    /// When the first probe was sent, seconds since the Unix epoch.
    #[serde(default)]
    pub started_unix: f64,
    /// Every answered probe, in the order sent.
    pub series: Vec<OneWaySampleJson>,
    /// `--observer`: a second netserver's probes to the same netserver,
    /// by this run's phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer: Option<ObserverJson>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ObserverJson {
    pub host: String,
    pub up: WayJson,
    pub down: WayJson,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct WayJson {
    pub idle: Option<PercentilesJson>,
    pub loaded: Option<PercentilesJson>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct PercentilesJson {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub count: usize,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct OneWaySampleJson {
    /// Since the first probe was sent.
    pub at_seconds: f64,
    pub up_usec: f64,
    pub down_usec: f64,
    /// idle, loaded, or between (the load ramping, a phase's setup).
    pub phase: String,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct RpmJson {
    pub rpm: f64,
    pub category: String,
    pub confidence: String,
    pub idle_rpm: f64,
    pub foreign_rpm: f64,
    pub self_rpm: Option<f64>,
    /// Each second's moving-window RPM of the loaded phase.
    pub intervals: Vec<f64>,
    pub idle_probes: Vec<ProbeJson>,
    pub loaded_probes: Vec<ProbeJson>,
    /// The load connections' TCP_INFO round-trip times read while the
    /// probes ran (self probes).
    pub self_samples: Vec<SelfJson>,
    /// The result is of the probes and samples from here on (the last 4
    /// seconds), since the loaded probes began.
    pub final_from_seconds: f64,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct SelfJson {
    pub at_seconds: f64,
    pub rtt_usec: u32,
}

/// One probe: when it began (since its phase began), its connection's
/// handshake and its request's response.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ProbeJson {
    pub at_seconds: f64,
    pub connect_usec: f64,
    pub response_usec: f64,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct UnderLoadJson {
    pub idle_transaction_rate: f64,
    pub idle_latency_usec: Option<Latency>,
    pub load_flows: u32,
    pub load_up_mbps: Option<f64>,
    pub load_down_mbps: Option<f64>,
    /// Each load flow's bloat: bytes in flight over its minimum round trip
    /// times its delivery rate (its sending end's TCP_INFO).
    #[serde(default)]
    pub bloat: Vec<BloatJson>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct BloatJson {
    /// up (we send) or down.
    pub way: String,
    pub flow: usize,
    pub min_rtt_usec: u32,
    pub median: f64,
    pub max: f64,
    /// (seconds since the Unix epoch, bloat) at each reading.
    pub series: Vec<(f64, f64)>,
}

/// One of the netserver's interim reports.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct RemoteInterim {
    /// Since the netserver's side of the test began.
    pub elapsed_seconds: f64,
    /// What its side had moved (both ways), in calls, and transactions.
    pub bytes: u64,
    pub calls: u64,
    pub transactions: u64,
    /// TCP_INFO of its first data connections, in flow order.
    pub tcp: Vec<proto::TcpSample>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Options {
    pub host: String,
    pub port: u16,
    pub length_seconds: Option<u64>,
    pub length_count: Option<u64>,
    pub flows: u32,
    pub warmup_seconds: Option<f64>,
    pub cooldown_seconds: Option<f64>,
    pub units: String,
    pub headers: bool,
    pub verbosity: u8,
    pub local: SideOptions,
    pub remote: SideOptions,
    pub request_size: u32,
    pub response_size: u32,
    pub burst: u32,
    pub recv_timeout_seconds: Option<f64>,
    pub rate_bps: Option<u64>,
    pub spin: bool,
    pub latency: bool,
    pub rx_path: String,
    pub zerocopy: bool,
    pub io_uring: bool,
    pub local_cpu: bool,
    pub remote_cpu: bool,
    pub num_cpus: u32,
    pub interim_seconds: Option<f64>,
    pub confidence_level: Option<f64>,
    pub confidence_width_percent: Option<f64>,
    pub max_iterations: Option<u32>,
    pub min_iterations: Option<u32>,
    pub port_range: Option<(u16, u16)>,
    pub brand: Option<String>,
    pub fill_file: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ControlJson {
    pub local: String,
    pub remote: String,
    pub server_software: String,
    pub embedded_server: bool,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ResultJson {
    pub elapsed_seconds: f64,
    /// Throughput, or transactions per second, in `units`.
    pub value: f64,
    pub units: String,
    pub transaction_rate: Option<f64>,
    pub send_rate: f64,
    pub recv_rate: f64,
    pub local_cpu_util: Option<f64>,
    pub remote_cpu_util: Option<f64>,
    pub local_service_demand: Option<f64>,
    pub remote_service_demand: Option<f64>,
    pub service_demand_units: String,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Sizes {
    pub local_send_buf: u32,
    pub local_recv_buf: u32,
    pub remote_send_buf: u32,
    pub remote_recv_buf: u32,
    pub local_send_size: u32,
    pub local_recv_size: u32,
    pub remote_send_size: u32,
    pub remote_recv_size: u32,
    pub mss: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Latency {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub stddev: f64,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Udp {
    pub sent: u64,
    pub send_errors: u64,
    pub received: u64,
    pub lost: u64,
    pub lost_percent: f64,
    pub rcvbuf_drops: u64,
    pub drops_source: String,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub jitter_usec: f64,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Iteration {
    pub iteration: usize,
    pub elapsed_seconds: f64,
    pub value: f64,
    pub local_cpu_util: Option<f64>,
    pub remote_cpu_util: Option<f64>,
    pub local: Side,
    pub remote: Side,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ConfidenceJson {
    pub level: f64,
    pub width_target_percent: f64,
    pub iterations: usize,
    pub confident: bool,
    pub mean: f64,
    pub half_width: f64,
    pub width_percent: f64,
    pub local_cpu_width_percent: Option<f64>,
    pub remote_cpu_width_percent: Option<f64>,
}

/// One side's socket options, as asked.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct SideOptions {
    pub send_buf: Option<u32>,
    pub recv_buf: Option<u32>,
    pub send_size: Option<u32>,
    pub recv_size: Option<u32>,
    pub nodelay: bool,
    pub tos: Option<u8>,
    pub cong_control: Option<String>,
    pub priority: Option<u32>,
    pub cpu_bind: Option<u32>,
    pub dont_route: bool,
    pub send_align: u32,
    pub recv_align: u32,
    pub send_offset: u32,
    pub recv_offset: u32,
    pub send_width: Option<u32>,
    pub recv_width: Option<u32>,
}

impl From<&proto::SideSpec> for SideOptions {
    fn from(s: &proto::SideSpec) -> SideOptions {
        SideOptions {
            send_buf: s.send_buf,
            recv_buf: s.recv_buf,
            send_size: s.send_size,
            recv_size: s.recv_size,
            nodelay: s.nodelay,
            tos: s.tos,
            cong_control: s.cong_control.clone(),
            priority: s.priority,
            cpu_bind: s.cpu_bind,
            dont_route: s.dont_route,
            send_align: s.send_align,
            recv_align: s.recv_align,
            send_offset: s.send_offset,
            recv_offset: s.recv_offset,
            send_width: s.send_width,
            recv_width: s.recv_width,
        }
    }
}

/// CPU utilisation of one side.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Cpu {
    pub util: f64,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub peak_cpu: u32,
    pub peak_util: f64,
    pub num_cpus: u32,
    pub method: char,
}

/// TCP_INFO at the end of the test.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Tcp {
    pub retransmits: u64,
    pub mss: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub cwnd: u32,
    pub cong_control: String,
}

/// What a UDP receiver counted.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct UdpReceived {
    pub received: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub rcvbuf_drops: u64,
    /// "Socket", "Host" or "Unavailable".
    pub drops_source: String,
    pub jitter_ns: u64,
}

/// One flow's counters.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Flow {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
}

/// What one side measured.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Side {
    pub elapsed_ns: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
    pub send_errors: u64,
    pub send_buf_end: u32,
    pub recv_buf_end: u32,
    pub cpu: Option<Cpu>,
    pub tcp: Option<Tcp>,
    pub udp: Option<UdpReceived>,
    pub flow_count: u32,
    pub flows: Vec<Flow>,
    pub spread: Option<Spread>,
    /// Data connections the side closed as not the test's (the netserver's
    /// data port), and how many of them came during the measurement.
    pub foreign_connections: ForeignConnections,
    /// Of the bytes received, those that came as mapped pages
    /// (`--rx-zerocopy`; 0 on every other path).
    pub rx_mapped_bytes: u64,
    /// `--zerocopy` sends (our end's; 0 on every other path), and of them
    /// those made with a copy because the kernel would not pin their pages.
    #[serde(default)]
    pub zerocopy_sends: u64,
    #[serde(default)]
    pub zerocopy_copied_sends: u64,
}

/// Data connections turned away from a test's data port.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ForeignConnections {
    pub closed: u64,
    pub during_measurement: u64,
}

/// The least and the most one flow moved.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Spread {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub min_transactions: u64,
    pub max_transactions: u64,
}

impl From<&proto::SideResults> for Side {
    fn from(r: &proto::SideResults) -> Side {
        Side {
            elapsed_ns: r.elapsed_ns,
            bytes_sent: r.bytes_sent,
            bytes_received: r.bytes_received,
            send_calls: r.send_calls,
            recv_calls: r.recv_calls,
            transactions: r.transactions,
            send_errors: r.send_errors,
            send_buf_end: r.send_buf_end,
            recv_buf_end: r.recv_buf_end,
            cpu: r.cpu.as_ref().map(|c| Cpu {
                util: c.util,
                user: c.user,
                system: c.system,
                iowait: c.iowait,
                irq: c.irq,
                softirq: c.softirq,
                peak_cpu: c.peak_cpu,
                peak_util: c.peak_util,
                num_cpus: c.num_cpus,
                method: c.method,
            }),
            tcp: r.tcp.as_ref().map(|t| Tcp {
                retransmits: t.retransmits,
                mss: t.mss,
                rtt_us: t.rtt_us,
                rttvar_us: t.rttvar_us,
                cwnd: t.cwnd,
                cong_control: t.cong_control.clone(),
            }),
            udp: r.udp.as_ref().map(|u| UdpReceived {
                received: u.received,
                out_of_order: u.out_of_order,
                duplicates: u.duplicates,
                foreign: u.foreign,
                rcvbuf_drops: u.rcvbuf_drops,
                drops_source: match u.drops_source {
                    proto::DropSource::Socket => "Socket",
                    proto::DropSource::SocketCoalesced => "SocketCoalesced",
                    proto::DropSource::Host => "Host",
                    proto::DropSource::Unavailable => "Unavailable",
                }
                .into(),
                jitter_ns: u.jitter_ns,
            }),
            flow_count: r.flow_count,
            flows: r
                .flows
                .iter()
                .map(|f| Flow {
                    bytes_sent: f.bytes_sent,
                    bytes_received: f.bytes_received,
                    send_calls: f.send_calls,
                    recv_calls: f.recv_calls,
                    transactions: f.transactions,
                })
                .collect(),
            spread: r.spread.map(|s| Spread {
                min_bytes: s.min_bytes,
                max_bytes: s.max_bytes,
                min_transactions: s.min_transactions,
                max_transactions: s.max_transactions,
            }),
            foreign_connections: ForeignConnections {
                closed: r.foreign_connections.closed,
                during_measurement: r.foreign_connections.measured,
            },
            rx_mapped_bytes: r.rx.mapped_bytes,
            zerocopy_sends: r.tx.zerocopy_sends,
            zerocopy_copied_sends: r.tx.copied_sends,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's side objects serialize as the wire types did when
    /// the schema was written (same names, same shapes): the JSON does not
    /// move when they do.
    #[test]
    fn sides_keep_the_schema() {
        let mut r = proto::SideResults {
            bytes_sent: 5,
            ..Default::default()
        };
        r.udp = Some(proto::UdpRecvStats {
            received: 1,
            out_of_order: 0,
            duplicates: 0,
            foreign: 0,
            rcvbuf_drops: 0,
            drops_source: proto::DropSource::Host,
            jitter_ns: 9,
        });
        let ours = serde_json::to_value(Side::from(&r)).unwrap();
        assert_eq!(ours["bytes_sent"], 5);
        assert_eq!(ours["udp"]["drops_source"], "Host");
        assert_eq!(ours["udp"]["jitter_ns"], 9);
        assert_eq!(ours["rx_mapped_bytes"], 0);
        let keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
        // 17 fields, and the two zerocopy counts doc/json.md added.
        assert_eq!(ours["zerocopy_sends"], 0);
        assert_eq!(ours["zerocopy_copied_sends"], 0);
        assert_eq!(keys.len(), 19, "{keys:?}");
        let o = serde_json::to_value(SideOptions::from(&proto::SideSpec::default())).unwrap();
        assert_eq!(o.as_object().unwrap().len(), 16);
    }
}
