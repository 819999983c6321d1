//! netperf's grammar in two stages: global options, then, after `--`, the
//! test-specific options. Raw words become one validated [`Plan`]; nothing
//! downstream looks at the command line again.

pub mod global;
pub mod test_opts;

use std::path::PathBuf;

use optparse::{
    Parsed,
    value::{self, AddrFamily, ValueError},
};
use proto::{SideSpec, TestKind};

/// A command-line error: one line naming the option at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CliError(pub String);

fn bad(opt: &str, e: ValueError) -> CliError {
    CliError(format!("{opt}: {e}"))
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    Help,
    TestHelp,
    Version,
    /// `-o ?` and `-k ?` (one line), `-O ?` (one per line): list the
    /// output selectors.
    ListSelectors(bool),
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
}

impl Units {
    fn parse(s: &str) -> Result<Units, CliError> {
        match s.chars().next() {
            Some(c @ ('B' | 'K' | 'M' | 'G')) => Ok(Units::Bytes(c)),
            Some(c @ ('b' | 'k' | 'm' | 'g')) => Ok(Units::Bits(c)),
            Some('x') => Ok(Units::Transactions),
            _ => Err(CliError(format!(
                "-f: '{s}' is not a unit (G M K B for bytes, g m k b for bits, x for transactions)"
            ))),
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

/// Everything one netperf run will do.
#[derive(Clone, Debug)]
pub struct Plan {
    pub command_line: String,
    pub test: TestKind,
    /// `-H`; `None` means localhost, where an embedded netserver may stand in.
    pub host: Option<String>,
    pub family: AddrFamily,
    pub port: u16,
    pub local_host: Option<String>,
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
    pub fill_file: Option<PathBuf>,
    pub json: bool,
    /// `--key-file` or `-Z`: how we authenticate to netserver.
    pub auth: Option<AuthSource>,
    /// Our side's socket settings.
    pub local: SideSpec,
    /// The netserver's side.
    pub remote: SideSpec,
    pub request_size: u32,
    pub response_size: u32,
    pub burst: u32,
    pub port_range: Option<(u16, u16)>,
    pub local_data_port: Option<u16>,
    pub remote_data_port: Option<u16>,
    pub data_host: Option<String>,
    pub data_family: AddrFamily,
    /// `-e`: a UDP_RR transaction with no answer within this is lost.
    pub recv_timeout: Option<std::time::Duration>,
    /// `--no-latency`: do not time transactions (to measure what timing costs).
    pub latency: bool,
    pub rate_bps: Option<u64>,
    pub spin: bool,
    pub send_width: Option<u32>,
    pub selection: Option<Selection>,
    pub uuid: Option<String>,
}

impl Plan {
    fn new(command_line: String) -> Plan {
        Plan {
            command_line,
            test: TestKind::TcpStream,
            host: None,
            family: AddrFamily::Unspec,
            port: DEFAULT_PORT,
            local_host: None,
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
            fill_file: None,
            json: false,
            auth: None,
            local: SideSpec::default(),
            remote: SideSpec::default(),
            request_size: 1,
            response_size: 1,
            burst: 0,
            port_range: None,
            local_data_port: None,
            remote_data_port: None,
            data_host: None,
            data_family: AddrFamily::Unspec,
            recv_timeout: None,
            latency: true,
            rate_bps: None,
            spin: false,
            send_width: None,
            selection: None,
            uuid: None,
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
}

pub fn usage() -> String {
    format!(
        "Usage: netperf [global options] -- [test options]\n\nGlobal options:\n{}\n\
         For options taking two values: a lone value sets both (or only the first\n\
         where noted), 'a,' sets the first, ',b' the second.\n\
         Test options: netperf -t TEST -- -h\n",
        optparse::help(global::OPTIONS)
    )
}

pub fn test_usage() -> String {
    format!(
        "Usage: netperf [global options] -- [test options]\n\nTest options:\n{}",
        optparse::help(test_opts::OPTIONS)
    )
}

pub fn version() -> String {
    format!(
        "netperf (rsnetperf) {}, control protocol version {}",
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
    let test = optparse::parse(test_opts::OPTIONS, &after).map_err(|e| CliError(e.to_string()))?;
    if let Some(inv) = apply_test(&test, &mut plan)? {
        return Ok(inv);
    }
    Ok(Invocation::Run(Box::new(plan)))
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
                plan.interim = Some((secs.abs(), secs < 0.0));
            }
            "format" => plan.units = Some(Units::parse(v)?),
            "fill" => {
                let (local, _remote) = value::pair_explicit(v);
                if let Some(f) = local {
                    plan.fill_file = Some(PathBuf::from(f));
                }
            }
            "host" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.host = Some(h.to_string());
                }
                if let Some(f) = fam {
                    plan.family = value::address_family(f).map_err(|e| bad(o, e))?;
                }
            }
            "iterations" => {
                let (max, min) = value::pair(v);
                let max = max.map(value::int).transpose().map_err(|e| bad(o, e))?;
                let min = min.map(value::int).transpose().map_err(|e| bad(o, e))?;
                let prev = iterations.unwrap_or((None, None));
                iterations = Some((max.or(prev.0), min.or(prev.1)));
            }
            "confidence" => {
                let (level, width) = value::pair(v);
                let level = level.map(value::float).transpose().map_err(|e| bad(o, e))?;
                let width = match (width, v.contains(',')) {
                    (Some(w), true) => Some(value::float(w).map_err(|e| bad(o, e))?),
                    _ => None,
                };
                let prev = level_width.unwrap_or((None, None));
                level_width = Some((level.or(prev.0), width.or(prev.1)));
            }
            "length" => {
                let n = value::test_length(v).map_err(|e| bad(o, e))?;
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
                    value::address_family(f).map_err(|e| bad(o, e))?;
                }
            }
            "num_cpus" => plan.num_cpus = value::u32_size(v).map_err(|e| bad(o, e))?,
            "no_control" => {
                return Err(CliError(
                    "-N: tests without a control connection are not supported".into(),
                ));
            }
            "port" => {
                let (port, lport) = value::pair_explicit(v);
                if let Some(port) = port {
                    plan.port = value::port(port).map_err(|e| bad(o, e))?;
                }
                if let Some(l) = lport {
                    plan.local_port = Some(value::port(l).map_err(|e| bad(o, e))?);
                }
            }
            "headers" => plan.headers = value::int(v).map_err(|e| bad(o, e))? != 0,
            "result_confidence_only" => result_only = true,
            "wait" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                plan.wait_secs = n.max(0) as u64;
            }
            "keepalive" => plan.keepalive = true,
            "test" => {
                plan.test = TestKind::from_name(v).ok_or_else(|| {
                    CliError(format!(
                        "-t: unknown test '{v}'; this netperf runs {}",
                        TestKind::ALL.map(|k| k.name()).join(", ")
                    ))
                })?;
            }
            "cpu_bind" => {
                let (l, r) = value::pair(v);
                plan.local.cpu_bind = l.map(value::u32_size).transpose().map_err(|e| bad(o, e))?;
                plan.remote.cpu_bind = r.map(value::u32_size).transpose().map_err(|e| bad(o, e))?;
            }
            "verbosity" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                plan.verbosity = n.clamp(0, 9) as u8;
            }
            "width" => {
                let (s, _r) = value::pair(v);
                if let Some(s) = s {
                    plan.send_width = Some(value::u32_size(s).map_err(|e| bad(o, e))?.max(1));
                }
            }
            "priority" => {
                let (l, r) = value::pair(v);
                plan.local.priority = l.map(value::u32_size).transpose().map_err(|e| bad(o, e))?;
                plan.remote.priority = r.map(value::u32_size).transpose().map_err(|e| bad(o, e))?;
            }
            "tos" => {
                let (l, r) = value::pair(v);
                plan.local.tos = l.map(|s| tos(o, s)).transpose()?;
                plan.remote.tos = r.map(|s| tos(o, s)).transpose()?;
            }
            "passphrase" => plan.auth = Some(AuthSource::Passphrase(v.to_string())),
            "ipv4" => plan.family = AddrFamily::V4,
            "ipv6" => plan.family = AddrFamily::V6,
            "json" => plan.json = true,
            "key_file" => plan.auth = Some(AuthSource::File(PathBuf::from(v))),
            // accepted for compatibility, no effect (see the option table)
            _ => {}
        }
    }
    if iterations.is_some() || level_width.is_some() {
        plan.confidence = Some(confidence(iterations, level_width, result_only)?);
    }
    Ok(None)
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

/// IP TOS as netperf's `parse_ipqos` reads it: hex with 0x, else decimal.
fn tos(opt: &str, s: &str) -> Result<u8, CliError> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u8::from_str_radix(h, 16).ok()
    } else {
        s.parse::<u8>().ok()
    };
    v.ok_or_else(|| {
        CliError(format!(
            "{opt}: '{s}' is not a TOS byte (0 to 255, or 0x00 to 0xff)"
        ))
    })
}

fn apply_test(p: &Parsed, plan: &mut Plan) -> Result<Option<Invocation>, CliError> {
    for occ in &p.options {
        let v = occ.value.as_deref().unwrap_or("");
        let o = occ.spelled.as_str();
        let size = |s: &str| value::u32_size(s).map_err(|e| bad(o, e));
        match occ.id {
            "help" => return Ok(Some(Invocation::TestHelp)),
            // netperf 2.7 takes a negative burst as none at all (its manual
            // still describes a ramp-up that a negative value skipped; we
            // never ramp up).
            "burst" => {
                let n = value::int(v).map_err(|e| bad(o, e))?;
                plan.burst = u32::try_from(n.max(0))
                    .map_err(|_| CliError(format!("{o}: '{v}' is more than {}", u32::MAX)))?;
            }
            "nodelay" => {
                plan.local.nodelay = true;
                plan.remote.nodelay = true;
            }
            "recv_timeout" => {
                // netperf takes whole seconds; fractions are ours (-e 0.01).
                let secs = value::float(v).map_err(|e| bad(o, e))?;
                if !(0.001..=3600.0).contains(&secs) {
                    return Err(CliError(format!(
                        "{o}: '{v}' is not between 0.001 and 3600 seconds"
                    )));
                }
                plan.recv_timeout = Some(std::time::Duration::from_secs_f64(secs));
            }
            "data_host" => {
                let (host, fam) = value::pair_explicit(v);
                if let Some(h) = host {
                    plan.data_host = Some(h.to_string());
                }
                if let Some(f) = fam {
                    plan.data_family = value::address_family(f).map_err(|e| bad(o, e))?;
                }
            }
            "keyval" | "csv" | "human" => {
                let style = match occ.id {
                    "keyval" => SelectorStyle::KeyVal,
                    "csv" => SelectorStyle::Csv,
                    _ => SelectorStyle::Columns,
                };
                if occ.value.as_deref() == Some("?") {
                    return Ok(Some(Invocation::ListSelectors(
                        style != SelectorStyle::Columns,
                    )));
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
            "local_data" => {}
            "send_size" => {
                let (l, r) = value::pair_explicit(v);
                if let Some(l) = l {
                    plan.local.send_size = Some(size(l)?);
                }
                if let Some(r) = r {
                    plan.remote.send_size = Some(size(r)?);
                }
            }
            "recv_size" => {
                // netperf: the first value is the remote receive size.
                let (r, l) = value::pair_explicit(v);
                if let Some(r) = r {
                    plan.remote.recv_size = Some(size(r)?);
                }
                if let Some(l) = l {
                    plan.local.recv_size = Some(size(l)?);
                }
            }
            "port_range" => {
                let (lo, hi) = value::pair(v);
                let lo = lo.map(value::port).transpose().map_err(|e| bad(o, e))?;
                let hi = hi.map(value::port).transpose().map_err(|e| bad(o, e))?;
                let (lo, hi) = (lo.unwrap_or(5000), hi.unwrap_or(65535));
                if lo == 0 || hi < lo {
                    return Err(CliError(format!("{o}: '{v}' is not a port range min,max")));
                }
                plan.port_range = Some((lo, hi));
            }
            "data_port" => {
                let (l, r) = value::pair(v);
                plan.local_data_port = l.map(value::port).transpose().map_err(|e| bad(o, e))?;
                plan.remote_data_port = r.map(value::port).transpose().map_err(|e| bad(o, e))?;
            }
            "rr_size" => {
                let (q, r) = value::pair(v);
                if let Some(q) = q {
                    plan.request_size = size(q)?;
                }
                if let Some(r) = r {
                    plan.response_size = size(r)?;
                }
            }
            "local_bufs" => {
                let (s, r) = value::pair(v);
                if let Some(s) = s {
                    plan.local.send_buf = Some(size(s)?);
                }
                if let Some(r) = r {
                    plan.local.recv_buf = Some(size(r)?);
                }
            }
            "remote_bufs" => {
                let (s, r) = value::pair(v);
                if let Some(s) = s {
                    plan.remote.send_buf = Some(size(s)?);
                }
                if let Some(r) = r {
                    plan.remote.recv_buf = Some(size(r)?);
                }
            }
            "uuid" => plan.uuid = Some(v.to_string()),
            "send_width" => plan.send_width = Some(size(v)?.max(1)),
            "ipv4" => plan.data_family = AddrFamily::V4,
            "ipv6" => plan.data_family = AddrFamily::V6,
            "rate" => plan.rate_bps = Some(value::bits_per_second(v).map_err(|e| bad(o, e))?),
            "spin" => plan.spin = true,
            "no_latency" => plan.latency = false,
            _ => {}
        }
    }
    Ok(None)
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
