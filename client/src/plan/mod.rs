//! A test as asked: the validated [`Plan`] each dialect's speaker
//! produces (netperf's command line, in the netperf program; a typed
//! third-party request, in a netserver) and the families consume. Nothing
//! downstream reads a command line again to complete it.
//!
//! # Layout
//! - this file: the [`Plan`] and the values it holds.
//! - [`test_name`]: the tests `-t` names and the data path each resolves to.
//! - [`check`]: the checks of a whole plan, once everything is read
//!   ([`finish`]), whichever speaker made it.

use std::path::PathBuf;

use optparse::value::AddrFamily;
use proto::{SideSpec, TestKind};

pub mod check;
pub mod test_name;

pub use check::{RPM_LOAD, RPM_MAX_FLOWS, Shape, finish, label_socket_type, resolve_shape};
pub use test_name::TestName;

/// A plan that cannot run: one line naming the option (or the request's
/// field) at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct PlanError(pub String);

/// `--under-load`: how many bulk TCP flows load the path, which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnderLoad {
    pub flows: u32,
    /// `-t RPM` without `--flows`: flows are added a second at a time, up
    /// to `flows`, until the goodput stops growing (the draft's ramp).
    pub ramp: bool,
    /// We send (TCP_STREAM flows), and we receive (TCP_MAERTS flows).
    pub up: bool,
    pub down: bool,
}

/// `--one-way`: queueing delay each way, from probes beside the test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OneWayAsk {
    /// Taken under load (`--under-load`, `-t RPM`) where the netserver
    /// answers probes; otherwise not.
    #[default]
    Default,
    /// Asked for: a netserver that cannot is an error.
    Asked,
}

/// netserver's well-known control port.
pub const DEFAULT_PORT: u16 = 12865;

/// Most flows one test may ask for (a netserver may allow fewer).
pub const MAX_FLOWS: u32 = 100_000;

/// When a test ends, as `-l` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// Seconds; 0 runs until interrupted.
    Seconds(u64),
    /// Bytes, datagrams or transactions, depending on the test.
    Count(u64),
}

/// Output format of the figures (`-f`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    /// Powers of 1024 bytes: 'B', 'K', 'M', 'G'.
    Bytes(char),
    /// Powers of 1000 bits: 'b', 'k', 'm', 'g'.
    Bits(char),
    /// Transactions (the _RR tests' default).
    Transactions,
    /// Microseconds a transaction (netperf 2.7's `-f u`): the inverse of
    /// the rate, times a million.
    Usec,
}

impl Units {
    /// `-f`'s first letter; netperf 2.7 takes any other as KBytes (said on
    /// stderr).
    pub fn parse(s: &str, warnings: &mut Vec<String>) -> Units {
        match s.chars().next() {
            Some(c @ ('B' | 'K' | 'M' | 'G')) => Units::Bytes(c),
            Some(c @ ('b' | 'k' | 'm' | 'g')) => Units::Bits(c),
            Some('x') => Units::Transactions,
            Some('u') => Units::Usec,
            _ => {
                warnings.push(format!(
                    "warning: -f '{s}' is not a unit (G M K B bytes, g m k b bits, x transactions, u microseconds a transaction): KBytes, as netperf 2.7 takes it"
                ));
                Units::Bytes('K')
            }
        }
    }
}

impl Units {
    /// The label in table titles (netperf's `format_units()`).
    pub fn label(self) -> &'static str {
        match self {
            Units::Bytes('B') => "Bytes",
            Units::Bytes('K') => "KBytes",
            Units::Bytes('M') => "MBytes",
            Units::Bytes('G') => "GBytes",
            Units::Bits('b') => "10^0bits",
            Units::Bits('k') => "10^3bits",
            Units::Bits('m') => "10^6bits",
            Units::Bits('g') => "10^9bits",
            Units::Transactions => "Trans",
            Units::Usec => "Usec",
            _ => "KBytes",
        }
    }

    /// `amount` (bytes, or transactions for [`Units::Transactions`]) over
    /// `secs`, in these units per second. Bits are bits: netperf 2.7's `-f b`
    /// prints bytes under a bits label; we do not.
    pub fn rate(self, amount: f64, secs: f64) -> f64 {
        if secs <= 0.0 {
            return 0.0;
        }
        // netperf 2.7's `-f u`: microseconds an amount (a transaction, or
        // for a stream test a byte), the inverse of the rate
        if self == Units::Usec {
            return if amount > 0.0 {
                secs * 1e6 / amount
            } else {
                0.0
            };
        }
        let per = match self {
            Units::Bytes('B') => 1.0,
            Units::Bytes('K') => 1024.0,
            Units::Bytes('M') => 1024.0 * 1024.0,
            Units::Bytes('G') => 1024.0 * 1024.0 * 1024.0,
            Units::Bits('b') => 1.0 / 8.0,
            Units::Bits('k') => 1000.0 / 8.0,
            Units::Bits('m') => 1e6 / 8.0,
            Units::Bits('g') => 1e9 / 8.0,
            Units::Transactions => 1.0,
            _ => 1024.0,
        };
        amount / per / secs
    }
}

/// What `-o`, `-O` or `-k` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub style: SelectorStyle,
    /// A comma-separated list of selectors, or a file naming them; `None`
    /// for netperf's default list.
    pub spec: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorStyle {
    Csv,
    Columns,
    KeyVal,
}

/// iperf3's control port, the default with `--iperf3`.
pub const IPERF3_PORT: u16 = 5201;

/// Which control protocol to speak (`--dialect`, `--iperf3`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DialectChoice {
    /// Ours, or netperf 2.7's when the netserver answers in it.
    #[default]
    Auto,
    Native,
    Netperf2,
    /// iperf3's: an iperf3 server (`iperf3 -s`, or `netserver --iperf3`).
    Iperf3,
}

impl DialectChoice {
    /// The control port when `-p` does not say.
    pub fn default_port(self) -> u16 {
        match self {
            DialectChoice::Iperf3 => IPERF3_PORT,
            _ => DEFAULT_PORT,
        }
    }

    /// What the other end can do, where the choice says it before any
    /// connection (an iperf3 server's is iperf3's): what it cannot run is
    /// refused by name before connecting.
    pub fn known_capabilities(self) -> Option<proto::Capabilities> {
        match self {
            DialectChoice::Iperf3 => Some(proto::Capabilities::iperf3()),
            _ => None,
        }
    }

    /// Whether a netserver embedded in this process may stand in when none
    /// listens on loopback (it speaks ours, not iperf3's).
    pub fn embeddable(self) -> bool {
        self != DialectChoice::Iperf3
    }

    /// Why our key (`-Z`, `--key-file`) cannot prove us to the other end,
    /// where it cannot.
    pub fn refuses_key(self) -> Option<&'static str> {
        match self {
            DialectChoice::Iperf3 => Some(
                "an iperf3 server authenticates with RSA keys (iperf3's --username), which --iperf3 does not speak; use this suite's netserver at that end",
            ),
            _ => None,
        }
    }

    /// What listens at the other end, for messages.
    pub fn server(self) -> &'static str {
        match self {
            DialectChoice::Iperf3 => "an iperf3 server",
            _ => "netserver",
        }
    }
}

/// Where the key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthSource {
    File(PathBuf),
    /// `-Z`: used as the key; unlike netperf 2.7, never sent.
    Passphrase(String),
    /// A key the program holds already (a `--fleet` netserver's own, for
    /// its third-party tests): required of the other end, as a file's is.
    Given(engine::auth::Key),
}

impl AuthSource {
    pub fn load(&self) -> Result<engine::auth::Key, engine::EngineError> {
        match self {
            AuthSource::File(p) => engine::auth::Key::from_file(p),
            AuthSource::Passphrase(s) => engine::auth::Key::from_passphrase(s),
            AuthSource::Given(k) => Ok(k.clone()),
        }
    }
}

/// `-I` and `-i`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Confidence {
    /// Percent, e.g. 99.
    pub level: f64,
    /// Full width of the interval as a fraction of the mean, e.g. 0.05.
    pub width: f64,
    pub max_iterations: u32,
    pub min_iterations: u32,
    /// `-r`: CPU utilisation need not be confident.
    pub result_only: bool,
}

/// What we do on our own data sockets that netperf 2.7 does on the local
/// side only (`-- -C -G -g -q -I -f -F`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalOnly {
    /// TCP_CORK (`-C`).
    pub cork: bool,
    /// TCP_MAXSEG (`-G`).
    pub mss: Option<u32>,
    /// SO_DEBUG (`-g`).
    pub so_debug: bool,
    /// SO_MAX_PACING_RATE, bytes per second (`-q`).
    pub pacing: Option<u64>,
    /// write() rather than send() (`-I`).
    pub use_write: bool,
    /// IP_MTU_DISCOVER = do (`-f`).
    pub mtu_discover: bool,
    /// TCP Fast Open (`-F`).
    pub fastopen: bool,
    /// Connect our UDP socket (`-n`); netperf 2.7 sends with sendto()
    /// otherwise.
    pub connected_udp: bool,
}

/// Everything one netperf run will do.
#[derive(Clone, Debug)]
pub struct Plan {
    pub command_line: String,
    /// The test as `-t` named it: what is printed.
    pub name: TestName,
    /// The data path that runs: the name with `-- -d -T -c` applied.
    pub test: TestKind,
    /// The protocol as netperf 2.7's PROTOCOL selector names it.
    pub protocol_label: &'static str,
    /// The socket type as netperf 2.7's SOCKET_TYPE selector names it:
    /// fixed by the test name, before `-T` (as in netperf 2.7).
    pub socket_type_label: &'static str,
    /// `-H`; `None` means localhost, where an embedded netserver may stand in.
    pub host: Option<String>,
    pub family: AddrFamily,
    pub port: u16,
    pub local_host: Option<String>,
    /// The family of `-L host,fam`.
    pub local_family: AddrFamily,
    pub local_port: Option<u16>,
    pub length: Length,
    /// `-f`; `None` for the test's default.
    pub units: Option<Units>,
    pub headers: bool,
    pub verbosity: u8,
    pub debug: u8,
    pub brand: Option<String>,
    pub wait_secs: u64,
    pub keepalive: bool,
    pub local_cpu: bool,
    pub remote_cpu: bool,
    pub num_cpus: u32,
    pub confidence: Option<Confidence>,
    /// `-D`: interval in seconds, and whether timing is "precise" (negative).
    pub interim: Option<(f64, bool)>,
    /// `-j`: keep timing statistics in stream tests too.
    pub histogram: bool,
    pub fill_file: Option<PathBuf>,
    /// `-F ,rfill`: the netserver fills its buffers with its own data.
    pub remote_fill: bool,
    pub json: bool,
    /// `--json-stream`: JSON lines as the run goes; the last holds the
    /// `--json` document.
    pub json_stream: bool,
    /// `--plot`: the SVG file the run is drawn into.
    pub plot: Option<PathBuf>,
    /// `-- --under-load N[,dir]`: bulk flows loading the path while a
    /// request/response test runs.
    pub under_load: Option<UnderLoad>,
    /// `-t RPM`: its load (flows a direction, which directions).
    pub rpm: Option<UnderLoad>,
    /// `--one-way` (or a queueing-delay selector).
    pub one_way: OneWayAsk,
    /// `--observer HOST[:PORT]`: a second netserver (`--fleet`) that
    /// probes the same netserver while the test runs.
    pub observer: Option<(String, u16)>,
    /// `--dialect`.
    pub dialect: DialectChoice,
    /// `--key-file` or `-Z`: how we authenticate to netserver.
    pub auth: Option<AuthSource>,
    /// Our side's socket settings.
    pub local: SideSpec,
    /// The netserver's side.
    pub remote: SideSpec,
    pub local_only: LocalOnly,
    pub request_size: u32,
    pub response_size: u32,
    /// Whether `-r` was given (a send-only test then sends requests of its
    /// size, as netperf 2.7).
    pub request_size_given: bool,
    pub burst: u32,
    pub port_range: Option<(u16, u16)>,
    pub local_data_port: Option<u16>,
    pub remote_data_port: Option<u16>,
    /// `-- -H`: the data connection's host, when not the control host.
    pub data_host: Option<String>,
    pub data_family: AddrFamily,
    /// `-- -L`: the address our data sockets bind to.
    pub data_local: Option<String>,
    /// `-- -a`: TCP_DEFER_ACCEPT on the netserver's data listener.
    pub defer_accept: bool,
    /// `-- -N`: the netserver connects its UDP socket.
    pub remote_connected_udp: bool,
    /// `-- -V`: copy avoidance asked for (shown in the banner; no effect).
    pub copy_avoidance: bool,
    /// `-e`: a UDP_RR transaction with no answer within this is lost.
    pub recv_timeout: Option<std::time::Duration>,
    /// `--no-latency`: do not time transactions (to measure what timing costs).
    pub latency: bool,
    /// `-- --stamp-key`: `-t STAMP` in authenticated mode, under this file's key.
    pub stamp_key: Option<std::path::PathBuf>,
    pub rate_bps: Option<u64>,
    /// `--batch`: UDP_STREAM datagrams a system call.
    pub udp_batch: u32,
    /// `--gso`: UDP_STREAM bytes a send, cut into datagrams by the kernel.
    pub udp_gso: Option<u32>,
    /// `--zerocopy`: TCP_STREAM sends with MSG_ZEROCOPY.
    pub zerocopy: bool,
    /// `--rx-zerocopy`, `--rx-discard`: how the end that receives a TCP
    /// stream takes its bytes (the netserver in TCP_STREAM, we in
    /// TCP_MAERTS).
    pub rx: proto::RxPath,
    /// `--io-uring`: both ends move a stream test's data through io_uring.
    pub uring: bool,
    /// `--ecn`: the codepoint a UDP test's sends carry at both ends, and
    /// ECN measured (UDP: each datagram's codepoint where it arrives; TCP:
    /// negotiated, and CE echoed to the sender).
    pub ecn: Option<proto::ecn::Codepoint>,
    pub spin: bool,
    /// `--flows`: data connections in one test.
    pub flows: u32,
    /// `--threads`: threads driving them at each end.
    pub threads: Option<u32>,
    /// `--cpus`: CPUs the flow threads are pinned to, in turn.
    pub cpus: Vec<u32>,
    /// `--warmup`/`--cooldown`: uncounted traffic around the measured
    /// interval.
    pub window: Option<proto::Window>,
    pub selection: Option<Selection>,
    pub uuid: Option<String>,
    /// Lines netperf 2.7 prints on stdout while it parses its options
    /// (options it does not have in a default build).
    pub notices: Vec<String>,
    /// Warnings for stderr: options netperf 2.7 tolerates with a word.
    pub warnings: Vec<String>,
    /// Who else may stop the run's tests, besides Ctrl-C (no option
    /// sets it: a netserver's third-party test, stopped when its client
    /// goes away).
    pub stop_group: Option<crate::interrupt::StopGroup>,
}

impl Plan {
    pub fn new(command_line: String) -> Plan {
        let align = SideSpec {
            send_align: 8,
            recv_align: 8,
            ..SideSpec::default()
        };
        Plan {
            command_line,
            name: TestName::TcpStream,
            test: TestKind::TcpStream,
            protocol_label: "TCP",
            socket_type_label: "Stream",
            host: None,
            family: AddrFamily::Unspec,
            port: DEFAULT_PORT,
            local_host: None,
            local_family: AddrFamily::Unspec,
            local_port: None,
            length: Length::Seconds(10),
            units: None,
            headers: true,
            verbosity: 1,
            debug: 0,
            brand: None,
            wait_secs: 0,
            keepalive: false,
            local_cpu: false,
            remote_cpu: false,
            num_cpus: 0,
            confidence: None,
            interim: None,
            histogram: false,
            fill_file: None,
            remote_fill: false,
            json: false,
            json_stream: false,
            plot: None,
            under_load: None,
            rpm: None,
            one_way: OneWayAsk::Default,
            observer: None,
            dialect: DialectChoice::Auto,
            auth: None,
            local: align.clone(),
            remote: align,
            local_only: LocalOnly::default(),
            request_size: 1,
            response_size: 1,
            request_size_given: false,
            burst: 0,
            port_range: None,
            local_data_port: None,
            remote_data_port: None,
            data_host: None,
            data_family: AddrFamily::Unspec,
            data_local: None,
            defer_accept: false,
            remote_connected_udp: false,
            copy_avoidance: false,
            recv_timeout: None,
            latency: true,
            stamp_key: None,
            rate_bps: None,
            udp_batch: 1,
            udp_gso: None,
            zerocopy: false,
            rx: proto::RxPath::Copy,
            uring: false,
            ecn: None,
            spin: false,
            flows: 1,
            window: None,
            threads: None,
            cpus: Vec::new(),
            selection: None,
            uuid: None,
            notices: Vec::new(),
            warnings: Vec::new(),
            stop_group: None,
        }
    }

    /// Transactions in flight beyond the first: `-b` for TCP_RR and UDP_RR.
    /// netperf 2.7 accepts `-b` with the other tests and ignores it; so do we.
    pub fn effective_burst(&self) -> u32 {
        match self.test {
            TestKind::TcpRr | TestKind::UdpRr => self.burst,
            _ => 0,
        }
    }

    /// The units figures are printed in: `-f`, or the test's default.
    pub fn units(&self) -> Units {
        match (self.units, self.test.is_rr()) {
            (None, true) => Units::Transactions,
            (None, false) | (Some(Units::Transactions), false) => Units::Bits('m'),
            (Some(u), _) => u,
        }
    }

    /// The host name as netperf shows it.
    pub fn host_name(&self) -> &str {
        match (&self.host, self.family) {
            (Some(h), _) => h,
            (None, AddrFamily::V6) => "::1",
            (None, _) => "localhost",
        }
    }

    /// Whether the output is netperf's OMNI selector output rather than a
    /// classic table: always for OMNI, and for the six migrated tests with
    /// `-o`, `-O` or `-k`.
    pub fn selector_output(&self) -> bool {
        self.name == TestName::Omni || self.selection.is_some()
    }

    /// Seconds between interim samples: `-D`'s, or every second for
    /// `--json-stream` and `--plot` without it; `None`: none taken.
    pub fn interim_interval(&self) -> Option<f64> {
        match self.interim {
            Some((secs, _)) => Some(secs),
            None if self.json_stream || self.plot.is_some() => Some(1.0),
            None => None,
        }
    }

    /// TCP_SENDFILE: the sender sends with sendfile(2).
    pub fn sendfile(&self) -> bool {
        self.name == TestName::TcpSendfile
    }
}
