//! What the output needs to know of what was asked, taken once from the
//! command line's plan: the formats read this and the measurements, never
//! the plan itself, so that the command line can grow (or a fleet
//! orchestrator can build a run without one) without touching them.

use std::{path::PathBuf, time::Duration};

use optparse::value::AddrFamily;
use proto::TestKind;

use crate::cli::{Confidence, Length, LocalOnly, Plan, TestName, Units};

/// The request as the output shows it.
#[derive(Clone, Debug)]
pub struct Asked {
    pub command_line: String,
    pub name: TestName,
    pub test: TestKind,
    pub protocol_label: &'static str,
    pub socket_type_label: &'static str,
    /// The host as netperf shows it (`localhost` or `::1` without `-H`).
    pub host_name: String,
    pub family: AddrFamily,
    pub port: u16,
    pub local_host: Option<String>,
    pub length: Length,
    /// `-f`, or the test's default.
    pub units: Units,
    pub headers: bool,
    pub verbosity: u8,
    pub brand: Option<String>,
    pub local_cpu: bool,
    pub remote_cpu: bool,
    pub num_cpus: u32,
    pub confidence: Option<Confidence>,
    pub interim: Option<(f64, bool)>,
    pub fill_file: Option<PathBuf>,
    /// `-D` on either side (the banner says so); what each side asked is
    /// in the measurement's sides.
    pub nodelay: bool,
    /// `-T` bound either side's CPU (the banner says so).
    pub cpu_bind: bool,
    pub local_only: LocalOnly,
    pub request_size: u32,
    pub response_size: u32,
    pub burst: u32,
    /// The burst in effect (TCP_RR and UDP_RR only).
    pub effective_burst: u32,
    pub port_range: Option<(u16, u16)>,
    pub local_data_port: Option<u16>,
    pub remote_data_port: Option<u16>,
    pub data_host: Option<String>,
    pub data_family: AddrFamily,
    pub data_local: Option<String>,
    pub copy_avoidance: bool,
    pub recv_timeout: Option<Duration>,
    pub latency: bool,
    pub rate_bps: Option<u64>,
    pub spin: bool,
    pub flows: u32,
    pub window: Option<proto::Window>,
    /// `--rx-zerocopy`, `--rx-discard`: how the receiving end took its
    /// bytes; `--zerocopy`, `--io-uring`: how the data moved.
    pub rx: proto::RxPath,
    pub zerocopy: bool,
    pub uring: bool,
}

impl Asked {
    pub fn of(p: &Plan) -> Asked {
        Asked {
            command_line: p.command_line.clone(),
            name: p.name,
            test: p.test,
            protocol_label: p.protocol_label,
            socket_type_label: p.socket_type_label,
            host_name: p.host_name().to_string(),
            family: p.family,
            port: p.port,
            local_host: p.local_host.clone(),
            length: p.length,
            units: p.units(),
            headers: p.headers,
            verbosity: p.verbosity,
            brand: p.brand.clone(),
            local_cpu: p.local_cpu,
            remote_cpu: p.remote_cpu,
            num_cpus: p.num_cpus,
            confidence: p.confidence,
            interim: p.interim,
            fill_file: p.fill_file.clone(),
            nodelay: p.local.nodelay || p.remote.nodelay,
            cpu_bind: p.local.cpu_bind.is_some() || p.remote.cpu_bind.is_some(),
            local_only: p.local_only.clone(),
            request_size: p.request_size,
            response_size: p.response_size,
            burst: p.burst,
            effective_burst: p.effective_burst(),
            port_range: p.port_range,
            local_data_port: p.local_data_port,
            remote_data_port: p.remote_data_port,
            data_host: p.data_host.clone(),
            data_family: p.data_family,
            data_local: p.data_local.clone(),
            copy_avoidance: p.copy_avoidance,
            recv_timeout: p.recv_timeout,
            latency: p.latency,
            rate_bps: p.rate_bps,
            spin: p.spin,
            flows: p.flows,
            window: p.window,
            rx: p.rx,
            zerocopy: p.zerocopy,
            uring: p.uring,
        }
    }

    pub fn units(&self) -> Units {
        self.units
    }

    pub fn host_name(&self) -> &str {
        &self.host_name
    }

    pub fn effective_burst(&self) -> u32 {
        self.effective_burst
    }

    /// TCP_SENDFILE: the sender sends with sendfile(2).
    pub fn sendfile(&self) -> bool {
        self.name == TestName::TcpSendfile
    }
}
