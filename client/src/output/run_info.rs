//! What the outputs know of a run: what only the command line knows
//! ([`RunInfo`]), and the request each iteration sends ([`Test`]). Test
//! parameters (sizes, lengths, flows, the netserver's side) are read from
//! the request, not from a copy of the command line's plan, so that the
//! command line can grow (or a fleet orchestrator can build a run without
//! one) without touching the outputs.

use std::{path::PathBuf, time::Duration};

use optparse::value::AddrFamily;
use proto::{Protocol, SideSpec, TestKind, TestSpec};

use crate::plan::{Confidence, TestName, Units};

/// What only the command line knows.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub command_line: String,
    pub name: TestName,
    /// The protocol as netperf 2.7's PROTOCOL selector names it.
    pub protocol_label: &'static str,
    /// The host as netperf shows it (`localhost` or `::1` without `-H`),
    /// and the control port.
    pub host_name: String,
    pub port: u16,
    /// `-f`, or the test's default.
    pub units: Units,
    pub verbosity: u8,
    pub headers: bool,
    pub brand: Option<String>,
    /// `-c` (the netserver's `-C` is in the request).
    pub local_cpu: bool,
    pub confidence: Option<Confidence>,
    pub interim: Option<(f64, bool)>,
    /// Our lines beside netperf 2.7's (UDP loss, latency percentiles, the
    /// confidence summary): on a terminal, or at `-v 3`.
    pub extras: bool,
    /// `--one-way` (or `--observer`) was given: its lines print with
    /// netperf 2.7's, as asked for by an option of ours.
    pub one_way_asked: bool,
    /// Our end as the command line set it up.
    pub ours: Ours,
}

/// Our end as the command line set it up: what the request does not carry.
#[derive(Clone, Debug)]
pub struct Ours {
    /// The names the data connection's ends were given, as netperf shows
    /// them: `-H host,fam`/`-4`/`-6`, `-L`; `-- -L`, `-- -4`/`-6`, `-- -H`.
    pub family: AddrFamily,
    pub local_host: Option<String>,
    pub data_local: Option<String>,
    pub data_family: AddrFamily,
    pub data_host: Option<String>,
    /// `-- -P`'s port for our data socket.
    pub data_port: Option<u16>,
    pub fill_file: Option<PathBuf>,
    /// TCP_CORK (`-- -C`).
    pub cork: bool,
    /// `-- -V` (shown in the banner; no effect).
    pub copy_avoidance: bool,
    /// `-b` as given (the request's is the burst in effect).
    pub burst: u32,
    /// `-e` as given (the request's is in milliseconds).
    pub recv_timeout: Option<Duration>,
    /// Transactions are timed unless `--no-latency`.
    pub latency: bool,
    /// How the end that receives a TCP stream took its bytes, and whether
    /// we sent with MSG_ZEROCOPY.
    pub rx: proto::RxPath,
    pub zerocopy: bool,
    /// `-- -p`: TCP_CRR's local ports.
    pub port_range: Option<(u16, u16)>,
}

impl RunInfo {
    /// TCP_SENDFILE: the sender sends with sendfile(2).
    pub fn is_sendfile(&self) -> bool {
        self.name == TestName::TcpSendfile
    }

    /// netperf 2.7's SOCKET_TYPE: fixed by the test's name, before `-T`.
    pub fn socket_type(&self) -> &'static str {
        match self.name.defaults().0 {
            Protocol::Tcp => "Stream",
            Protocol::Udp => "Datagram",
        }
    }
}

/// The test as the outputs show it: what only the command line knows,
/// the request each iteration sends (before our data socket exists), and
/// our side's settings (the netserver's are the request's).
#[derive(Clone, Debug)]
pub struct Test {
    pub info: RunInfo,
    pub spec: TestSpec,
    pub local: SideSpec,
}

impl std::ops::Deref for Test {
    type Target = RunInfo;
    fn deref(&self) -> &RunInfo {
        &self.info
    }
}

impl Test {
    pub fn kind(&self) -> TestKind {
        self.spec.kind
    }

    /// The test as a document names it: as `-t` named it (RPM,
    /// TCP_SENDFILE), or, for OMNI, the data path its options chose.
    pub fn label(&self) -> &'static str {
        match self.name {
            TestName::Omni => self.kind().name(),
            named => named.name(),
        }
    }

    /// `-D` on either side (the banner says so).
    pub fn nodelay(&self) -> bool {
        self.local.nodelay || self.spec.server.nodelay
    }

    /// `-T` bound either side's CPU (the banner says so).
    pub fn cpu_bind(&self) -> bool {
        self.local.cpu_bind.is_some() || self.spec.server.cpu_bind.is_some()
    }

    /// The request and response sizes as netperf shows them: the
    /// request's, or TCP_CC's (which carries none) as our side was given.
    pub fn sizes(&self, m: &crate::report::Measurement) -> (u32, u32) {
        match self.kind() {
            TestKind::TcpCc => (m.local.send_size, m.local.recv_size),
            _ => (self.spec.request_size, self.spec.response_size),
        }
    }
}
