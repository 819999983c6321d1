//! netperf's grammar in two stages: global options, then, after `--`, the
//! test-specific options. Raw words become one validated [`Plan`]; nothing
//! downstream looks at the command line again.

pub mod global;
pub mod test_name;
pub mod test_opts;

use std::path::PathBuf;

use optparse::{
    Parsed,
    value::{self, AddrFamily, ValueError},
};
use proto::{Protocol, SideSpec, TestKind};

pub use test_name::TestName;

/// A command-line error: one line naming the option at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CliError(pub String);

fn bad(opt: &str, e: ValueError) -> CliError {
    CliError(format!("{opt}: {e}"))
}

/// One line saying what a word that is not a clean number was taken as,
/// as netperf 2.7 reads it.
fn taken(o: &str, s: &str, clean: bool, as_what: impl std::fmt::Display, w: &mut Vec<String>) {
    if !clean {
        warn(
            w,
            format!(
                "warning: {o} '{s}' is not a clean number: taken as {as_what}, as netperf 2.7 reads it"
            ),
        );
    }
}

/// A warning, once however often the option or value repeats (a lone
/// value of a pair sets both sides).
fn warn(w: &mut Vec<String>, line: String) {
    if !w.contains(&line) {
        w.push(line);
    }
}

/// netperf 2.7's `convert()` of an option's value (see [`taken`]).
fn num(o: &str, s: &str, w: &mut Vec<String>) -> Result<i64, CliError> {
    let r = value::convert(s).map_err(|e| bad(o, e))?;
    taken(o, s, r.clean, r.value, w);
    Ok(r.value)
}

/// C's `atoi` of an option's value (see [`taken`]).
fn atoi(o: &str, s: &str, w: &mut Vec<String>) -> Result<i64, CliError> {
    let r = value::atoi_lenient(s).map_err(|e| bad(o, e))?;
    taken(o, s, r.clean, r.value, w);
    Ok(r.value)
}

/// [`num`] for a size or count: what does not fit a `u32` is refused (2.7
/// would wrap or crash on it), a negative only where `negative` says what
/// it means (`None`: refused).
fn unsigned(o: &str, s: &str, w: &mut Vec<String>) -> Result<u32, CliError> {
    let n = num(o, s, w)?;
    u32::try_from(n).map_err(|_| {
        CliError(if n < 0 {
            format!("{o}: '{s}' must not be negative")
        } else {
            format!("{o}: '{s}' is more than {}", u32::MAX)
        })
    })
}

/// A port as netperf 2.7 gives it to getaddrinfo: digits (wrapped past
/// 65535) or a service name.
fn port_of(o: &str, s: &str, w: &mut Vec<String>) -> Result<u16, CliError> {
    let r = value::service_port(s).map_err(|e| bad(o, e))?;
    if !r.clean {
        warn(
            w,
            format!(
                "warning: {o} '{s}': port {}, as netperf 2.7's getaddrinfo reads it",
                r.value
            ),
        );
    }
    Ok(r.value)
}

/// An address family after a comma; netperf 2.7 warns about a word it does
/// not know and goes on with either family.
fn family_of(o: &str, s: &str, w: &mut Vec<String>) -> AddrFamily {
    value::address_family(s).unwrap_or_else(|e| {
        warn(
            w,
            format!("warning: {o}: {e}; either family, as netperf 2.7 goes on"),
        );
        AddrFamily::Unspec
    })
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    Help,
    TestHelp,
    Version,
    /// `--version`.
    OurVersion,
    /// `-o ?` and `-k ?` (one line), `-O ?` (one per line): list the
    /// output selectors; with ours too at `-v 3` and above.
    ListSelectors {
        one_line: bool,
        ours: bool,
    },
    Run(Box<Plan>),
}

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
    fn parse(s: &str, warnings: &mut Vec<String>) -> Units {
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

/// Which control protocol to speak (`--dialect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DialectChoice {
    /// Ours, or netperf 2.7's when the netserver answers in it.
    #[default]
    Auto,
    Native,
    Netperf2,
}

/// Where the key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthSource {
    File(PathBuf),
    /// `-Z`: used as the key; unlike netperf 2.7, never sent.
    Passphrase(String),
}

impl AuthSource {
    pub fn load(&self) -> Result<engine::auth::Key, engine::EngineError> {
        match self {
            AuthSource::File(p) => engine::auth::Key::from_file(p),
            AuthSource::Passphrase(s) => engine::auth::Key::from_passphrase(s),
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

/// netserver's well-known control port.
pub const DEFAULT_PORT: u16 = 12865;

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
    pub rate_bps: Option<u64>,
    /// `--batch`: UDP_STREAM datagrams a system call.
    pub udp_batch: u32,
    /// `--gso`: UDP_STREAM bytes a send, cut into datagrams by the kernel.
    pub udp_gso: Option<u32>,
    /// `--zerocopy`: TCP_STREAM sends with MSG_ZEROCOPY.
    pub zerocopy: bool,
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
}

impl Plan {
    fn new(command_line: String) -> Plan {
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
            rate_bps: None,
            udp_batch: 1,
            udp_gso: None,
            zerocopy: false,
            spin: false,
            flows: 1,
            window: None,
            threads: None,
            cpus: Vec::new(),
            selection: None,
            uuid: None,
            notices: Vec::new(),
            warnings: Vec::new(),
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

    /// TCP_SENDFILE: the sender sends with sendfile(2).
    pub fn sendfile(&self) -> bool {
        self.name == TestName::TcpSendfile
    }
}

pub fn usage() -> String {
    let tests: Vec<String> = TestName::ALL
        .iter()
        .map(|t| format!("  {:<13} {}", t.name(), t.describe()))
        .collect();
    format!(
        "Usage: netperf [global options] -- [test options]\n\nGlobal options:\n{}\n\
         For options taking two values: a lone value sets both (or only the first\n\
         where noted), 'a,' sets the first, ',b' the second.\n\n\
         Tests (-t):\n{}\n\n\
         Piped output has netperf 2.7's lines exactly; on a terminal, and at -v 3,\n\
         this netperf adds its own (UDP loss, latency percentiles, confidence).\n\
         Test options: netperf -t TEST -- -h\n",
        optparse::help(global::OPTIONS),
        tests.join("\n")
    )
}

pub fn test_usage() -> String {
    let tests: Vec<&str> = TestName::ALL.iter().map(|t| t.name()).collect();
    format!(
        "Usage: netperf [global options] -- [test options]\n\nTest options:\n{}\n         Tests: {}.\n         TCP_SENDFILE, TCP_CC and TCP_MSS take no -d, -T, -t, -o, -O, -k, -u (netperf 2.7's\n         classic tests); LOC_CPU and REM_CPU take no test options.\n",
        optparse::help(test_opts::OPTIONS),
        tests.join(", ")
    )
}

/// `-V`: netperf 2.7's one line, which scripts test.
pub fn version() -> String {
    "Netperf version 2.7.1".to_string()
}

/// `--version`: ours, and the control protocol's.
pub fn our_version() -> String {
    format!(
        "rsnetperf {}, control protocol version {}",
        env!("CARGO_PKG_VERSION"),
        proto::PROTOCOL_VERSION
    )
}

/// Parse the arguments (without the program name).
pub fn parse(args: &[String]) -> Result<Invocation, CliError> {
    let command_line = std::iter::once("netperf".to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let global = optparse::parse(global::OPTIONS, args).map_err(|e| CliError(e.to_string()))?;
    let mut plan = Plan::new(command_line);
    if let Some(inv) = apply_global(&global, &mut plan)? {
        return Ok(inv);
    }
    let after = global.after_dashdash.clone().unwrap_or_default();
    // LOC_CPU and REM_CPU read nothing after `--`, as netperf 2.7.
    if !matches!(plan.name, TestName::LocCpu | TestName::RemCpu) {
        let (test, warnings) = optparse::parse_lenient(test_opts::OPTIONS, &after)
            .map_err(|e| CliError(e.to_string()))?;
        for w in warnings {
            // netperf 2.7's getopt complains and its test goes on, reading
            // the bad option as -4.
            plan.warnings.push(format!(
                "warning: {w} after --, ignored (netperf 2.7 reads it as -4: an IPv4 data connection)"
            ));
        }
        if let Some(inv) = apply_test(&test, &mut plan)? {
            return Ok(inv);
        }
    }
    finish(&mut plan)?;
    Ok(Invocation::Run(Box::new(plan)))
}

/// A value with netperf's `convert()`, as a u32 that must not be negative.
fn size(o: &str, s: &str) -> Result<u32, CliError> {
    value::u32_size(s).map_err(|e| bad(o, e))
}

fn apply_global(p: &Parsed, plan: &mut Plan) -> Result<Option<Invocation>, CliError> {
    let mut iterations: Option<(Option<i64>, Option<i64>)> = None;
    let mut level_width: Option<(Option<f64>, Option<f64>)> = None;
    let mut result_only = false;
    for occ in &p.options {
        let v = occ.value.as_deref().unwrap_or("");
        let o = occ.spelled.as_str();
        match occ.id {
            "help" => return Ok(Some(Invocation::Help)),
            "version" => return Ok(Some(Invocation::Version)),
            "our_version" => return Ok(Some(Invocation::OurVersion)),
            "local_align" | "remote_align" | "local_offset" | "remote_offset" => {
                let (a, b) = value::pair(v);
                let a = a.map(|x| unsigned(o, x, &mut plan.warnings)).transpose()?;
                let b = b.map(|x| unsigned(o, x, &mut plan.warnings)).transpose()?;
                let align = occ.id.ends_with("align");
                if align && (a == Some(0) || b == Some(0)) {
                    return Err(CliError(format!(
                        "{o}: an alignment of 0 is not one (netperf 2.7 crashes on it); give 1 or more"
                    )));
                }
                let side = if occ.id.starts_with("local") {
                    &mut plan.local
                } else {
                    &mut plan.remote
                };
                let (send, recv) = if align {
                    (&mut side.send_align, &mut side.recv_align)
                } else {
                    (&mut side.send_offset, &mut side.recv_offset)
                };
                if let Some(a) = a {
                    *send = a;
                }
                if let Some(b) = b {
                    *recv = b;
                }
            }
            // netperf 2.7 says so only when the first value is given
            "interval_burst" if value::pair_explicit(v).0.is_some() => plan
                .notices
                .push("Packet burst size is not compiled in. ".into()),
            "interval_wait" if value::pair_explicit(v).0.is_some() => plan
                .notices
                .push("Packet rate control is not compiled in.".into()),
            "interval_burst" | "interval_wait" => {}
            "local_dirty" | "remote_dirty" => {
                plan.notices.push("I don't know how to get dirty.".into())
            }
            "brand" => plan.brand = Some(v.to_string()),
            "local_cpu" => plan.local_cpu = true,
            "remote_cpu" => plan.remote_cpu = true,
            "debug" => plan.debug = plan.debug.saturating_add(1),
            "demo" => {
                let (secs, _units) = value::pair_explicit(v);
                let secs = match secs {
                    Some(s) => value::float(s).map_err(|e| bad(o, e))?,
                    None => 1.0,
                };
                if secs == 0.0 {
                    return Err(CliError(format!("{o}: the interval must not be 0")));
                }
                if secs.abs() > 86_400.0 {
                    return Err(CliError(format!(
                        "{o}: '{}' s is longer than a day; interim results come at most a day apart",
                        secs.abs()
                    )));
                }
                plan.interim = Some((secs.abs(), secs < 0.0));
            }
            "format" => plan.units = Some(Units::parse(v, &mut plan.warnings)),
            "fill" => {
                let (local, remote) = value::pair_explicit(v);
                if let Some(f) = local {
                    plan.fill_file = Some(PathBuf::from(f));
                }
                if let Some(r) = remote {
                    if r.len() >= 32 {
                        return Err(CliError(format!(
                            "{o}: the remote fill file name must be less than 32 characters, as in netperf 2.7"
                        )));
                    }
                    plan.remote_fill = true;
                }
            }
            "host" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.host = Some(h.to_string());
                }
                if let Some(f) = fam {
                    plan.family = family_of(o, f, &mut plan.warnings);
                }
            }
            "iterations" => {
                let (max, min) = value::pair(v);
                let max = max.map(|x| num(o, x, &mut plan.warnings)).transpose()?;
                let min = min.map(|x| num(o, x, &mut plan.warnings)).transpose()?;
                let prev = iterations.unwrap_or((None, None));
                iterations = Some((max.or(prev.0), min.or(prev.1)));
            }
            "confidence" => {
                let (level, width) = value::pair(v);
                let level = level.map(value::float).transpose().map_err(|e| bad(o, e))?;
                // netperf 2.7 takes a width that is 0 or not a number as 5%
                let width = match (width, v.contains(',')) {
                    (Some(w), true) => match value::atof(w) {
                        r if r.value > 0.0 => {
                            taken(o, w, r.clean, r.value, &mut plan.warnings);
                            Some(r.value)
                        }
                        _ => {
                            plan.warnings.push(format!(
                                "warning: {o} width '{w}' is not more than 0: 5%, as netperf 2.7 takes it"
                            ));
                            None
                        }
                    },
                    _ => None,
                };
                let prev = level_width.unwrap_or((None, None));
                level_width = Some((level.or(prev.0), width.or(prev.1)));
            }
            "length" => {
                let r = value::convert(v).map_err(|e| bad(o, e))?;
                let n = r.value;
                // (`30s`, `30secs` are seconds, as netperf 2.7's manual says)
                let seconds = ["seconds", "secs", "sec", "s"]
                    .iter()
                    .find_map(|u| v.trim().strip_suffix(u))
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
                taken(
                    o,
                    v,
                    r.clean || seconds,
                    if n == 0 {
                        "0: the test runs until it is interrupted".to_string()
                    } else {
                        n.to_string()
                    },
                    &mut plan.warnings,
                );
                plan.length = if n < 0 {
                    Length::Count(n.unsigned_abs())
                } else {
                    Length::Seconds(n as u64)
                };
            }
            "local_host" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.local_host = Some(h.to_string());
                }
                if let Some(f) = fam {
                    plan.local_family = family_of(o, f, &mut plan.warnings);
                }
            }
            "num_cpus" => {
                plan.num_cpus =
                    u32::try_from(atoi(o, v, &mut plan.warnings)?.max(0)).unwrap_or(u32::MAX)
            }
            "no_control" => {
                return Err(CliError(
                    "-N: netperf 2.7's tests without a control connection (against the discard, echo and chargen services) are not supported; run a netserver on the far host".into(),
                ));
            }
            "port" => {
                let (port, lport) = value::pair_explicit(v);
                if let Some(port) = port {
                    plan.port = port_of(o, port, &mut plan.warnings)?;
                }
                if let Some(l) = lport {
                    plan.local_port = Some(port_of(o, l, &mut plan.warnings)?);
                }
            }
            "headers" => plan.headers = num(o, v, &mut plan.warnings)? != 0,
            "result_confidence_only" => result_only = true,
            "wait" => {
                let n = num(o, v, &mut plan.warnings)?;
                plan.wait_secs = n.max(0) as u64;
            }
            "keepalive" => plan.keepalive = true,
            "test" => {
                plan.name = TestName::from_name(v).ok_or_else(|| {
                    CliError(format!(
                        "-t: unknown test '{v}'; this netperf runs {}",
                        TestName::ALL.map(|k| k.name()).join(", ")
                    ))
                })?;
            }
            "cpu_bind" => {
                // netperf 2.7 leaves a CPU it cannot bind to (negative,
                // or not this host's) unbound, and runs
                let (l, r) = value::pair(v);
                let have = engine::cpu::count();
                let mut cpu = |x: &str, ours: bool| -> Result<Option<u32>, CliError> {
                    let n = num(o, x, &mut plan.warnings)?;
                    let c = u32::try_from(n).ok().filter(|&c| !ours || c < have);
                    if c.is_none() {
                        warn(
                            &mut plan.warnings,
                            format!(
                                "warning: {o} '{x}': {} has no CPU {n}: not bound, as netperf 2.7 goes on",
                                if ours { "this host" } else { "a host" }
                            ),
                        );
                    }
                    Ok(c)
                };
                plan.local.cpu_bind = l.map(|x| cpu(x, true)).transpose()?.flatten();
                plan.remote.cpu_bind = r.map(|x| cpu(x, false)).transpose()?.flatten();
            }
            "verbosity" => {
                let n = num(o, v, &mut plan.warnings)?;
                plan.verbosity = n.clamp(0, 9) as u8;
            }
            "width" => {
                // 0 (or not a number) is netperf 2.7's default width
                let (s, r) = value::pair(v);
                if let Some(s) = s {
                    plan.local.send_width =
                        Some(unsigned(o, s, &mut plan.warnings)?).filter(|&w| w > 0);
                }
                if let Some(r) = r {
                    plan.local.recv_width =
                        Some(unsigned(o, r, &mut plan.warnings)?).filter(|&w| w > 0);
                }
            }
            "priority" => {
                // netperf 2.7 sets a priority of 0 or more, leaves a negative
                let (l, r) = value::pair(v);
                let mut prio = |x: &str| -> Result<Option<u32>, CliError> {
                    Ok(u32::try_from(num(o, x, &mut plan.warnings)?).ok())
                };
                plan.local.priority = l.map(&mut prio).transpose()?.flatten();
                plan.remote.priority = r.map(&mut prio).transpose()?.flatten();
            }
            "tos" => {
                let (l, r) = value::pair(v);
                plan.local.tos = l.and_then(|s| tos(o, s, &mut plan.warnings));
                plan.remote.tos = r.and_then(|s| tos(o, s, &mut plan.warnings));
            }
            "passphrase" => plan.auth = Some(AuthSource::Passphrase(v.to_string())),
            "ipv4" => plan.family = AddrFamily::V4,
            "ipv6" => plan.family = AddrFamily::V6,
            "json" => plan.json = true,
            "dialect" => {
                plan.dialect = match v.to_ascii_lowercase().as_str() {
                    "auto" => DialectChoice::Auto,
                    "native" => DialectChoice::Native,
                    "netperf2" | "netperf" | "2.7" => DialectChoice::Netperf2,
                    _ => {
                        return Err(CliError(format!(
                            "{o}: '{v}' is not a dialect: auto, native or netperf2"
                        )));
                    }
                }
            }
            "key_file" => plan.auth = Some(AuthSource::File(PathBuf::from(v))),
            "histogram" => plan.histogram = true,
            other => return Err(unhandled(other)),
        }
    }
    if iterations.is_some() || level_width.is_some() {
        plan.confidence = Some(confidence(iterations, level_width, result_only)?);
    }
    let (protocol, _, _) = plan.name.defaults();
    plan.socket_type_label = match protocol {
        Protocol::Tcp => "Stream",
        Protocol::Udp => "Datagram",
    };
    Ok(None)
}

/// An option in a table that no handler takes: a bug, caught by a test.
fn unhandled(id: &str) -> CliError {
    CliError(format!("internal error: option '{id}' has no handler"))
}

/// netperf's `-I`/`-i` rules: `-I` alone means 3 to 10 iterations; `-i`
/// alone means 99% and 5%; iteration counts are kept between 3 and 30, and
/// max is raised to min.
fn confidence(
    iterations: Option<(Option<i64>, Option<i64>)>,
    level_width: Option<(Option<f64>, Option<f64>)>,
    result_only: bool,
) -> Result<Confidence, CliError> {
    let (level, width) = level_width.unwrap_or((None, None));
    let level = level.unwrap_or(99.0);
    if !(50.0..=99.9).contains(&level) {
        return Err(CliError(format!(
            "-I: confidence level {level} is not between 50 and 99.9 percent"
        )));
    }
    let width = width.unwrap_or(5.0);
    if !(width > 0.0 && width <= 100.0) {
        return Err(CliError(format!(
            "-I: interval width {width}% is not more than 0 and at most 100"
        )));
    }
    let (max, min) = match iterations {
        Some((max, min)) => (max.unwrap_or(1), min.unwrap_or(1)),
        None => (10, 3),
    };
    let max = max.max(min);
    let clamp = |n: i64| n.clamp(3, 30) as u32;
    Ok(Confidence {
        level,
        width: width / 100.0,
        max_iterations: clamp(max),
        min_iterations: clamp(min),
        result_only,
    })
}

/// IP TOS as netperf's `parse_ipqos` reads it: a DSCP name (`ef`, `af11`
/// to `af43`, `cs0` to `cs7`) or one of the old TOS names, else a number in
/// C's notation (decimal, 0x hex, 0 octal), 0 to 255, the whole byte (ECN
/// bits included). netperf 2.7 sets it only when it is more than 0, so 0
/// means "leave it", as `None` here.
fn tos(opt: &str, s: &str, warnings: &mut Vec<String>) -> Option<u8> {
    const NAMES: &[(&str, u8)] = &[
        ("af11", 0x28),
        ("af12", 0x30),
        ("af13", 0x38),
        ("af21", 0x48),
        ("af22", 0x50),
        ("af23", 0x58),
        ("af31", 0x68),
        ("af32", 0x70),
        ("af33", 0x78),
        ("af41", 0x88),
        ("af42", 0x90),
        ("af43", 0x98),
        ("cs0", 0x00),
        ("cs1", 0x20),
        ("cs2", 0x40),
        ("cs3", 0x60),
        ("cs4", 0x80),
        ("cs5", 0xa0),
        ("cs6", 0xc0),
        ("cs7", 0xe0),
        ("ef", 0xb8),
        ("lowdelay", 0x10),
        ("throughput", 0x08),
        ("reliability", 0x04),
    ];
    let t = s.trim();
    let v = NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(t))
        .map(|&(_, v)| u32::from(v))
        .or_else(|| {
            if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u32::from_str_radix(h, 16).ok()
            } else if t.len() > 1 && t.starts_with('0') {
                u32::from_str_radix(&t[1..], 8).ok()
            } else {
                t.parse::<u32>().ok()
            }
        })
        .filter(|&v| v <= 255);
    match v {
        Some(v) => (v > 0).then_some(v as u8),
        None => {
            // netperf 2.7 leaves the TOS unset, without a word
            warn(
                warnings,
                format!(
                    "warning: {opt} '{s}' is not a TOS byte (0 to 255 in decimal, 0x hex or 0 octal, or a name: ef, af11..af43, cs0..cs7, lowdelay, throughput, reliability): not set, as netperf 2.7 leaves it"
                ),
            );
            None
        }
    }
}

/// What `--` options said about the direction and protocol, resolved once
/// every option is read.
#[derive(Debug, Default)]
struct Shape {
    /// `-d`'s bits (OMNI): they replace what `-m`, `-M`, `-r` implied.
    explicit: Option<u32>,
    /// The bits `-m`, `-M`, `-r` imply (OMNI only).
    implied: u32,
    protocol: Option<Protocol>,
    /// `-T` named a protocol netperf 2.7 does not know: it runs TCP.
    default_protocol: bool,
    connection: bool,
    socket_type: Option<String>,
    /// `-R`.
    routing: Option<bool>,
}

/// OMNI's options that the classic grammar of TCP_SENDFILE, TCP_CC and
/// TCP_MSS does not have (its letters are `aAbCDnNhHLmMpPrRsSTVwWz46`):
/// netperf 2.7 reads each as -4 and ignores it.
const CLASSIC_UNKNOWN: &[&str] = &[
    "pktinfo",
    "connection_test",
    "direction",
    "recv_timeout",
    "mtu_discover",
    "fastopen",
    "so_debug",
    "mss",
    "check_interval",
    "use_write",
    "parallel",
    "keyval",
    "cong_control",
    "multicast_ttl",
    "csv",
    "human",
    "pacing",
    "socket_type",
    "uuid",
    "dont_give_up",
];

fn apply_test(p: &Parsed, plan: &mut Plan) -> Result<Option<Invocation>, CliError> {
    let mut shape = Shape::default();
    let omni = plan.name == TestName::Omni;
    let omni_options = plan.name.takes_omni_options();
    for occ in &p.options {
        let v = occ.value.as_deref().unwrap_or("");
        let o = occ.spelled.as_str();
        let size = |s: &str| size(o, s);
        // netperf 2.7's TCP_SENDFILE, TCP_CC and TCP_MSS have the classic
        // grammar, without OMNI's options.
        if !omni_options && CLASSIC_UNKNOWN.contains(&occ.id) {
            plan.warnings.push(format!(
                "warning: {o} is not an option of {}, ignored (netperf 2.7 reads it as -4)",
                plan.name
            ));
            plan.data_family = AddrFamily::V4;
            continue;
        }
        // the classic grammar takes -T's value and ignores it, and -z
        if !omni_options && matches!(occ.id, "protocol" | "classic_z") {
            continue;
        }
        match occ.id {
            "help" => return Ok(Some(Invocation::TestHelp)),
            optparse::BAD_OPTION | "ipv4" => plan.data_family = AddrFamily::V4,
            // OMNI has no -z: netperf 2.7 reads it as -4
            "classic_z" => {
                plan.warnings.push(format!(
                    "warning: {o} is not an option of {}, ignored (netperf 2.7 reads it as -4)",
                    plan.name
                ));
                plan.data_family = AddrFamily::V4;
            }
            "ipv6" => plan.data_family = AddrFamily::V6,
            // netperf 2.7 takes a negative burst as none at all (its manual
            // still describes a ramp-up that a negative value skipped; we
            // never ramp up).
            "burst" => {
                let n = atoi(o, v, &mut plan.warnings)?;
                plan.burst = u32::try_from(n.max(0))
                    .map_err(|_| CliError(format!("{o}: '{v}' is more than {}", u32::MAX)))?;
            }
            "connection_test" => shape.connection = true,
            "cork" => plan.local_only.cork = true,
            "direction" => {
                if !omni {
                    // netperf 2.7 reads -d for OMNI only; a named test keeps
                    // its direction.
                    continue;
                }
                let (bits, unknown) = test_name::parse_direction(v);
                for u in unknown {
                    plan.warnings.push(format!(
                        "warning: {o} '{u}' is not a direction; read as 0, as netperf 2.7 does (send, recv, rr or a number)"
                    ));
                }
                shape.explicit = Some(bits);
            }
            "nodelay" => {
                plan.local.nodelay = true;
                plan.remote.nodelay = true;
            }
            "recv_timeout" => {
                // netperf takes whole seconds; fractions are ours (-e
                // 0.01). 0, or not a number, is no timeout, as in 2.7.
                let r = value::atof(v);
                if r.value == 0.0 {
                    taken(o, v, r.clean, "0: no timeout", &mut plan.warnings);
                    plan.recv_timeout = None;
                    continue;
                }
                if !(0.001..=3600.0).contains(&r.value) {
                    return Err(CliError(format!(
                        "{o}: '{v}' is not between 0.001 and 3600 seconds (0: no timeout)"
                    )));
                }
                taken(o, v, r.clean, r.value, &mut plan.warnings);
                plan.recv_timeout = Some(std::time::Duration::from_secs_f64(r.value));
            }
            "mtu_discover" => plan.local_only.mtu_discover = true,
            "fastopen" => plan.local_only.fastopen = true,
            "so_debug" => plan.local_only.so_debug = true,
            "mss" => {
                let n = atoi(o, v, &mut plan.warnings)?;
                plan.local_only.mss = u32::try_from(n).ok().filter(|&n| n > 0);
            }
            "data_host" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.data_host = Some(strip_mask(h).to_string());
                }
                if let Some(f) = fam {
                    plan.data_family = family_of(o, f, &mut plan.warnings);
                }
            }
            "check_interval" => plan.warnings.push(format!(
                "warning: {o}: netperf 2.7 removed this option; ignored"
            )),
            "use_write" => plan.local_only.use_write = true,
            // netperf 2.7 stores -j and never uses it; -l is a multicast
            // TTL, -w nothing, -U and -B change nothing on Linux.
            "parallel" | "multicast_ttl" | "wait" | "dont_give_up" | "pktinfo" => {}
            "keyval" | "csv" | "human" => {
                let style = match occ.id {
                    "keyval" => SelectorStyle::KeyVal,
                    "csv" => SelectorStyle::Csv,
                    _ => SelectorStyle::Columns,
                };
                if occ.value.as_deref() == Some("?") {
                    return Ok(Some(Invocation::ListSelectors {
                        one_line: style != SelectorStyle::Columns,
                        ours: plan.verbosity >= 3,
                    }));
                }
                plan.selection = Some(Selection {
                    style,
                    spec: occ.value.clone(),
                });
            }
            "cong_control" => {
                let (l, r) = value::pair(v);
                plan.local.cong_control = l.map(str::to_string);
                plan.remote.cong_control = r.map(str::to_string);
            }
            "local_data" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.data_local = Some(strip_mask(h).to_string());
                }
                if let Some(f) = fam {
                    plan.data_family = family_of(o, f, &mut plan.warnings);
                }
            }
            // A size of 0 (or not a number) is the default size, as in
            // netperf 2.7. The classic TCP_SENDFILE, TCP_CC and TCP_MSS
            // take the whole word as one size (`-m 1,64K` is 1024 there).
            "send_size" => {
                let (l, r) = if omni_options {
                    value::pair_explicit(v)
                } else {
                    (Some(v), None)
                };
                if let Some(l) = l {
                    plan.local.send_size =
                        Some(unsigned(o, l, &mut plan.warnings)?).filter(|&n| n > 0);
                    shape.implied |= test_name::XMIT;
                }
                if let Some(r) = r {
                    plan.remote.send_size =
                        Some(unsigned(o, r, &mut plan.warnings)?).filter(|&n| n > 0);
                    shape.implied |= test_name::RECV;
                }
            }
            "recv_size" => {
                // netperf: the first value is the remote receive size.
                let (r, l) = if omni_options {
                    value::pair_explicit(v)
                } else {
                    (Some(v), None)
                };
                if let Some(r) = r {
                    plan.remote.recv_size =
                        Some(unsigned(o, r, &mut plan.warnings)?).filter(|&n| n > 0);
                    shape.implied |= test_name::XMIT;
                }
                if let Some(l) = l {
                    plan.local.recv_size =
                        Some(unsigned(o, l, &mut plan.warnings)?).filter(|&n| n > 0);
                    shape.implied |= test_name::RECV;
                }
            }
            "local_connected" => plan.local_only.connected_udp = true,
            "remote_connected" => plan.remote_connected_udp = true,
            "port_range" => {
                let (lo, hi) = value::pair(v);
                let mut atoi_port = |s: &str| -> Result<u16, CliError> {
                    let n = atoi(o, s, &mut plan.warnings)?;
                    u16::try_from(n).map_err(|_| {
                        CliError(format!("{o}: '{s}' is not a port number (0 to 65535)"))
                    })
                };
                let lo = lo.map(&mut atoi_port).transpose()?;
                let hi = hi.map(&mut atoi_port).transpose()?;
                let (lo, hi) = (lo.unwrap_or(5000), hi.unwrap_or(65535));
                // 0,0: netperf 2.7 binds port 0, the kernel choosing each
                if hi < lo || (lo == 0 && hi != 0) {
                    return Err(CliError(format!("{o}: '{v}' is not a port range min,max")));
                }
                plan.port_range = Some((lo, hi));
            }
            "data_port" => {
                let (l, r) = value::pair(v);
                plan.local_data_port = l.map(|x| port_of(o, x, &mut plan.warnings)).transpose()?;
                plan.remote_data_port = r.map(|x| port_of(o, x, &mut plan.warnings)).transpose()?;
            }
            "pacing" => {
                let n = atoi(o, v, &mut plan.warnings)?;
                plan.local_only.pacing = u64::try_from(n).ok().filter(|&n| n > 0);
            }
            "rr_size" => {
                let (q, r) = value::pair(v);
                if let Some(q) = q {
                    plan.request_size = unsigned(o, q, &mut plan.warnings)?;
                    plan.request_size_given = true;
                }
                if let Some(r) = r {
                    plan.response_size = unsigned(o, r, &mut plan.warnings)?;
                }
                shape.implied |= test_name::XMIT | test_name::RECV;
            }
            "routing" => {
                shape.routing = Some(atoi(o, v, &mut plan.warnings)? != 0);
            }
            // netperf 2.7 sets a buffer of 0 or more (0: the kernel's
            // least), and leaves a negative one
            "local_bufs" | "remote_bufs" => {
                let (s, r) = value::pair(v);
                let mut buf = |x: &str| -> Result<Option<u32>, CliError> {
                    let n = num(o, x, &mut plan.warnings)?;
                    Ok(u32::try_from(n).ok())
                };
                let (send, recv) = (
                    s.map(&mut buf).transpose()?.flatten(),
                    r.map(&mut buf).transpose()?.flatten(),
                );
                let side = if occ.id == "local_bufs" {
                    &mut plan.local
                } else {
                    &mut plan.remote
                };
                if s.is_some() {
                    side.send_buf = send;
                }
                if r.is_some() {
                    side.recv_buf = recv;
                }
            }
            "socket_type" => shape.socket_type = Some(v.to_string()),
            "protocol" => match test_name::parse_protocol(o, v)? {
                test_name::ProtocolWord::Known(p) => {
                    shape.protocol = Some(p);
                    shape.default_protocol = false;
                }
                test_name::ProtocolWord::Default => {
                    plan.warnings.push(format!(
                        "warning: {o} '{v}' is not a protocol this netperf knows; TCP runs, as in netperf 2.7"
                    ));
                    shape.protocol = Some(Protocol::Tcp);
                    shape.default_protocol = true;
                }
            },
            "uuid" => plan.uuid = Some(v.chars().take(37).collect()),
            "copy_avoid" => plan.copy_avoidance = true,
            "defer_accept" => plan.defer_accept = true,
            "send_width" => {
                plan.local.send_width = Some(unsigned(o, v, &mut plan.warnings)?).filter(|&w| w > 0)
            }
            "rate" => plan.rate_bps = Some(value::bits_per_second(v).map_err(|e| bad(o, e))?),
            "spin" => plan.spin = true,
            "batch" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                let max = proto::test::MAX_UDP_BATCH;
                if !(1..=i64::from(max)).contains(&n) {
                    return Err(CliError(format!(
                        "{o}: '{v}': a batch goes from 1 to {max} datagrams"
                    )));
                }
                plan.udp_batch = n as u32;
            }
            "gso" => plan.udp_gso = Some(size(v)?.max(1)),
            "zerocopy" => plan.zerocopy = true,
            "no_latency" => plan.latency = false,
            "flows" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                if !(1..=MAX_FLOWS as i64).contains(&n) {
                    return Err(CliError(format!(
                        "{o}: '{v}': flows go from 1 to {MAX_FLOWS}"
                    )));
                }
                plan.flows = n as u32;
            }
            "threads" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                if n < 1 {
                    return Err(CliError(format!("{o}: '{v}': at least one thread")));
                }
                plan.threads = Some(n.min(i64::from(MAX_FLOWS)) as u32);
            }
            "cpus" => plan.cpus = cpu_list(o, v)?,
            "warmup" | "cooldown" => {
                let secs = value::float(v).map_err(|e| bad(o, e))?;
                if !(0.0..=3600.0).contains(&secs) {
                    return Err(CliError(format!(
                        "{o}: '{v}' is not between 0 and 3600 seconds"
                    )));
                }
                let ms = (secs * 1000.0).round() as u32;
                let w = plan.window.get_or_insert_with(proto::Window::default);
                if occ.id == "warmup" {
                    w.warmup_ms = ms;
                } else {
                    w.cooldown_ms = ms;
                }
            }
            other => return Err(unhandled(other)),
        }
    }
    resolve_shape(plan, shape)
}

/// Most flows one test may ask for (a netserver may allow fewer).
pub const MAX_FLOWS: u32 = 100_000;

/// `--cpus 0,2,4-7`: CPU numbers, each one that exists on this host.
fn cpu_list(o: &str, v: &str) -> Result<Vec<u32>, CliError> {
    let have = engine::cpu::count();
    let mut out = Vec::new();
    for part in v.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| CliError(format!("{o}: '{part}' is not a CPU number or range")))
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if a > b {
            return Err(CliError(format!("{o}: '{part}' is not a range")));
        }
        for c in a..=b {
            if c >= have {
                return Err(CliError(format!(
                    "{o}: CPU {c} does not exist (this host has CPUs 0 to {})",
                    have.saturating_sub(1)
                )));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(CliError(format!("{o}: '{v}' names no CPU")));
    }
    Ok(out)
}

/// `-H addr/len`: netperf 2.7 randomises the address within the mask;
/// we take the address.
fn strip_mask(h: &str) -> &str {
    h.split_once('/').map_or(h, |(a, _)| a)
}

/// Turn the name's defaults and what `--` said into the data path.
fn resolve_shape(plan: &mut Plan, shape: Shape) -> Result<Option<Invocation>, CliError> {
    let (default_protocol, default_dir, default_conn) = plan.name.defaults();
    let protocol = if plan.name.takes_omni_options() {
        shape.protocol.unwrap_or(default_protocol)
    } else {
        default_protocol
    };
    let mut dir = default_dir;
    if plan.name == TestName::Omni {
        dir = shape.explicit.unwrap_or(shape.implied);
        if dir == 0 && !shape.connection {
            dir = test_name::XMIT;
        }
    }
    let connection = default_conn || (shape.connection && plan.name.takes_omni_options());
    if plan.name.is_info() {
        plan.test = TestKind::TcpStream;
        return Ok(None);
    }
    plan.test = test_name::resolve(plan.name, protocol, dir, connection)?;
    if let Some(t) = &shape.socket_type {
        let want = match protocol {
            Protocol::Tcp => "stream",
            Protocol::Udp => "dgram",
        };
        if !t.contains(want) {
            return Err(CliError(format!(
                "-- -t {t}: the socket type must match the protocol ({want} for {}); netperf 2.7 hangs here",
                match protocol {
                    Protocol::Tcp => "TCP",
                    Protocol::Udp => "UDP",
                }
            )));
        }
    }
    plan.protocol_label = match (shape.default_protocol, protocol) {
        (true, _) => "IP Default",
        (false, Protocol::Tcp) => "TCP",
        (false, Protocol::Udp) => "UDP",
    };
    // netperf 2.7: no routing for UDP tests that do not expect answers,
    // unless -R says otherwise.
    let dont_route = match shape.routing {
        Some(allowed) => !allowed,
        None => protocol == Protocol::Udp && !plan.test.is_rr(),
    };
    plan.local.dont_route = dont_route;
    plan.remote.dont_route = dont_route;
    Ok(None)
}

/// Checks of the whole plan, once everything is read.
fn finish(plan: &mut Plan) -> Result<(), CliError> {
    // netperf 2.7: a send-only test with -r sends requests of that size.
    if plan.request_size_given
        && plan.test.direction() == proto::Direction::Send
        && plan.local.send_size.is_none()
    {
        plan.local.send_size = Some(plan.request_size);
    }
    // our fast paths, refused before anything is printed where they do
    // not apply
    if (plan.udp_batch > 1 || plan.udp_gso.is_some()) && plan.test != TestKind::UdpStream {
        return Err(CliError(format!(
            "--batch, --gso: only UDP_STREAM has them ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.zerocopy
        && (plan.name != TestName::TcpStream || plan.flows > 1 || plan.window.is_some())
    {
        return Err(CliError(format!(
            "--zerocopy: TCP_STREAM of one flow has it ({}{} was asked for)",
            plan.name.name(),
            if plan.flows > 1 || plan.window.is_some() {
                " with --flows/--warmup/--cooldown"
            } else {
                ""
            }
        )));
    }
    // TCP_MSS: one connection, whatever -l says.
    if plan.name == TestName::TcpMss {
        plan.length = Length::Count(1);
    }
    // netperf 2.7 uses our send width for the netserver's send ring too.
    if plan.remote.send_width.is_none() {
        plan.remote.send_width = plan.local.send_width;
    }
    if plan.remote.recv_width.is_none() {
        plan.remote.recv_width = plan.local.recv_width;
    }
    Ok(())
}

/// Tests: the plan a command line (without the program name) parses to.
#[cfg(test)]
pub(crate) fn test_plan(words: &[&str]) -> Plan {
    let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
    match parse(&v) {
        Ok(Invocation::Run(p)) => *p,
        other => panic!("{words:?}: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
