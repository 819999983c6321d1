//! netserver's command line: netperf 2.7's options, and ours as long options.

use std::{path::PathBuf, time::Duration};

use optparse::{
    Arity, OptDef,
    value::{self, AddrFamily},
};

use crate::{admission::MemoryBudget, config::Config};

/// Every option netserver takes: the source of its help and man page.
pub const OPTIONS: &[OptDef] = &[
    OptDef::flag("help", 'h', "Display this text").with_long("help"),
    OptDef::flag(
        "foreground",
        'D',
        "Do not daemonize: stay in the foreground, log to stderr",
    ),
    OptDef::flag(
        "debug",
        'd',
        "Increase debugging output (raises the verbosity)",
    ),
    OptDef::flag(
        "no_fork",
        'f',
        "Accepted for netperf compatibility (sessions are threads)",
    ),
    OptDef::value(
        "listen",
        'L',
        "name,family",
        "Listen on this address only, and/or for this family (4, 6)",
    ),
    OptDef::flag("no_debug", 'N', "Accepted for netperf compatibility"),
    OptDef::value(
        "port",
        'p',
        "port",
        "Listen for control connections on this port (default 12865)",
    ),
    OptDef::flag("ipv4", '4', "IPv4 only"),
    OptDef::flag("ipv6", '6', "IPv6 only"),
    OptDef::value(
        "verbosity",
        'v',
        "level",
        "Log verbosity: 0 errors, 1 one line per test (default), 2 more",
    ),
    OptDef::flag(
        "version",
        'V',
        "Display netperf 2.7's version line, and exit",
    ),
    OptDef::long_only(
        "our_version",
        "version",
        Arity::None,
        "",
        "Display this netserver's version and its control protocol's, and exit",
    ),
    OptDef::value(
        "num_cpus",
        'n',
        "numcpu",
        "Number of CPUs to assume for CPU utilisation",
    ),
    OptDef::long_only(
        "data_ports",
        "data-ports",
        Arity::Required,
        "MIN-MAX",
        "Data sockets use ports in this range; clients may ask for one of them",
    ),
    OptDef::long_only(
        "max_sessions",
        "max-sessions",
        Arity::Required,
        "N",
        "Most control sessions at once (default 256)",
    ),
    OptDef::long_only(
        "max_per_client",
        "max-per-client",
        Arity::Required,
        "N",
        "Most sessions from one client address (default 128)",
    ),
    OptDef::long_only(
        "max_pending",
        "max-pending",
        Arity::Required,
        "N",
        "Most connections waiting for their first bytes (default 4096; when full, the oldest of the address holding the most is closed)",
    ),
    OptDef::long_only(
        "max_test_length",
        "max-test-length",
        Arity::Required,
        "secs",
        "Longest test a client may run (default 86400, a day)",
    ),
    OptDef::long_only(
        "max_flows",
        "max-flows",
        Arity::Required,
        "N",
        "Most flows (data connections) in one test (default 16384)",
    ),
    OptDef::long_only(
        "max_test_fds",
        "max-test-fds",
        Arity::Required,
        "N",
        "Most file descriptors one test may hold (default a quarter of what the open-files limit leaves for tests; an address's tests together twice that)",
    ),
    OptDef::long_only(
        "max_tests_per_client",
        "max-tests-per-client",
        Arity::Required,
        "N",
        "Most tests one client address may run at once (default 64)",
    ),
    OptDef::long_only(
        "schedule",
        "schedule",
        Arity::Required,
        "shared|exclusive",
        "shared (default): tests run at once; exclusive: one client host's tests at a time (its tests join its turn, which ends a second after its last), other hosts waiting their turn in order (every dialect: ours, netperf 2.7's, iperf3's)",
    ),
    OptDef::long_only(
        "max_wait",
        "max-wait",
        Arity::Required,
        "secs",
        "With --schedule exclusive, the longest a test waits its turn before it is refused (default 60)",
    ),
    OptDef::long_only(
        "memory_cap",
        "memory-cap",
        Arity::Required,
        "bytes",
        "Most buffer memory one session may use (default 64M)",
    ),
    OptDef::long_only(
        "memory_budget",
        "memory-budget",
        Arity::Required,
        "bytes",
        "Most buffer memory all running tests together may use (default a quarter of the host's memory, at most 64G)",
    ),
    OptDef::long_only(
        "socket_budget",
        "socket-budget",
        Arity::Required,
        "bytes",
        "Most kernel socket memory (send and receive queues) all running tests together may hold; a test a quarter (default half of net.ipv4.tcp_mem)",
    ),
    OptDef::long_only(
        "log_file",
        "log-file",
        Arity::Required,
        "file",
        "Append log lines to this file (default: stderr, or nothing when detached)",
    ),
    OptDef::long_only(
        "max_file_size",
        "max-file-size",
        Arity::Required,
        "bytes",
        "Most bytes --log-file and --record each hold; further lines are dropped and counted until SIGHUP opens a new file (default 1G)",
    ),
    OptDef::long_only(
        "log_format",
        "log-format",
        Arity::Required,
        "text|json",
        "Log lines as text (default) or as one JSON object each",
    ),
    OptDef::long_only(
        "pid_file",
        "pid-file",
        Arity::Required,
        "file",
        "Write the daemon's process id to this file (after detaching; removed at exit)",
    ),
    OptDef::long_only(
        "record",
        "record",
        Arity::Required,
        "file",
        "Append a JSON line to this file after each completed test, with both ends' figures",
    ),
    OptDef::long_only(
        "policy",
        "policy",
        Arity::Required,
        "file",
        "Budgets per client address, per prefix and for the daemon, and what one test may ask (TOML; read again on SIGHUP; see doc/service.md)",
    ),
    OptDef::long_only(
        "iperf3",
        "iperf3",
        Arity::Required,
        "[addr:]port",
        "Also serve iperf3 3.x clients on this port (iperf3's own is 5201), many at once; with no address, on -L's address or every address",
    ),
    OptDef::long_only(
        "stamp",
        "stamp",
        Arity::OptionalWord,
        "[addr:]port",
        "Also reflect STAMP test packets (RFC 8762/8972) on this UDP port; with no port (--stamp alone, or an address alone), on STAMP's own, 862; with no address, on -L's address or every address",
    ),
    OptDef::long_only(
        "stamp_key",
        "stamp-key",
        Arity::Required,
        "file",
        "--stamp in authenticated mode: HMAC-SHA-256 under the key in this file (its bytes, a trailing newline left out); a packet whose HMAC does not verify gets no reflection",
    ),
    OptDef::long_only(
        "stamp_stateless",
        "stamp-stateless",
        Arity::None,
        "",
        "--stamp numbers its reflections as the sender did (stateless); by default it counts each session's own (stateful: the sender tells loss each way)",
    ),
    OptDef::long_only(
        "stamp_rate",
        "stamp-rate",
        Arity::Required,
        "n",
        "--stamp reflects at most n packets a second to one address (default 100000); the rest are dropped and counted",
    ),
    OptDef::long_only(
        "metrics",
        "metrics",
        Arity::Required,
        "addr:port",
        "Serve OpenMetrics text at http://addr:port/metrics (off by default; unauthenticated)",
    ),
    OptDef::long_only(
        "handshake_timeout",
        "handshake-timeout",
        Arity::Required,
        "secs",
        "Hello and authentication must be done within this (default 10; first bytes within half of it)",
    ),
    OptDef::long_only(
        "idle_timeout",
        "idle-timeout",
        Arity::Required,
        "secs",
        "Longest silence of a control connection between tests (default 60)",
    ),
    OptDef::long_only(
        "data_timeout",
        "data-timeout",
        Arity::Required,
        "secs",
        "Data connections must arrive within this of the setup reply (default 10)",
    ),
    OptDef::long_only(
        "key_file",
        "key-file",
        Arity::Required,
        "file",
        "Require clients to prove they know the key in this file (mode 600)",
    ),
    OptDef::value(
        "passphrase",
        'Z',
        "passphrase",
        "Require clients to prove they know this passphrase (never sent by ours; netperf 2.7 clients send it in the clear)",
    ),
    OptDef::long_only(
        "install_service",
        "install-service",
        Arity::None,
        "",
        "Windows: register netserver as a service that starts at boot with the other options given",
    ),
    OptDef::long_only(
        "uninstall_service",
        "uninstall-service",
        Arity::None,
        "",
        "Windows: remove the service (stopped first)",
    ),
    OptDef::long_only(
        "service",
        "service",
        Arity::None,
        "",
        "Windows: run under the service manager (as --install-service registers it)",
    ),
    OptDef::long_only(
        "allow_netperf2",
        "allow-netperf2",
        Arity::None,
        "",
        "With --key-file, serve netperf 2.7 clients too, which cannot prove the key",
    ),
    OptDef::long_only(
        "rsa_private_key_path",
        "rsa-private-key-path",
        Arity::Required,
        "file",
        "iperf3 clients must authenticate as iperf3 -s requires: the RSA private key (PEM, unencrypted) their tokens are decrypted with; with --authorized-users-path",
    ),
    OptDef::long_only(
        "authorized_users_path",
        "authorized-users-path",
        Arity::Required,
        "file",
        "The iperf3 users file (lines user,sha256 of {user}password, as iperf3's); read again at each test",
    ),
    OptDef::long_only(
        "time_skew_threshold",
        "time-skew-threshold",
        Arity::Required,
        "secs",
        "How far an iperf3 client's clock may be from ours when it authenticates (default 10)",
    ),
    OptDef::long_only(
        "allow_iperf3_unauthenticated",
        "allow-iperf3-unauthenticated",
        Arity::None,
        "",
        "With --key-file, serve iperf3 clients without credentials too (they cannot prove the key)",
    ),
    OptDef::long_only(
        "fleet",
        "fleet",
        Arity::None,
        "",
        "Run third-party tests (netperf mesh) for clients that prove the key: needs --key-file",
    ),
    OptDef::long_only(
        "no_netperf2",
        "no-netperf2",
        Arity::None,
        "",
        "Do not serve netperf 2.7 clients (they are told so)",
    ),
];

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    Help,
    Version,
    /// `--version`.
    OurVersion,
    Run(Box<ServerOptions>),
    /// `--install-service`: the service runs with these arguments.
    InstallService(Vec<String>),
    /// `--uninstall-service`.
    UninstallService,
    /// `netserver token ...`: the token to print, and what it allows.
    Token(String, engine::token::Token),
}

#[derive(Debug)]
pub struct ServerOptions {
    pub port: u16,
    /// `-L` address, as given (name or literal).
    pub bind: Option<String>,
    pub family: AddrFamily,
    pub foreground: bool,
    /// `--service`: run under the Windows service manager.
    pub service: bool,
    pub verbosity: u8,
    pub log_file: Option<PathBuf>,
    pub log_format: crate::log::Format,
    /// `--record`.
    pub record_file: Option<PathBuf>,
    /// `--pid-file`.
    pub pid_file: Option<PathBuf>,
    /// `--metrics`.
    pub metrics: Option<std::net::SocketAddr>,
    /// `--iperf3`: the address (`None`: -L's, or every address) and port.
    pub iperf3: Option<(Option<std::net::IpAddr>, u16)>,
    /// `--stamp`: the reflector's address (as `--iperf3`'s) and port.
    pub stamp: Option<(Option<std::net::IpAddr>, u16)>,
    /// What `--log-file` and `--record` may hold, each (`--max-file-size`).
    pub max_file_size: u64,
    pub config: Config,
}

/// A command-line error: one line that names the option.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

pub fn usage() -> String {
    format!(
        "Usage: netserver [options]\n\nOptions:\n{}",
        optparse::help(OPTIONS)
    )
}

/// `-V`: netperf 2.7's line (its netserver prints the same as netperf).
pub fn version() -> String {
    "Netperf version 2.7.1".to_string()
}

/// `--version`: ours, and the control protocol's.
pub fn our_version() -> String {
    format!(
        "netserver (rsnetperf) {}, control protocol version {}",
        env!("CARGO_PKG_VERSION"),
        proto::PROTOCOL_VERSION
    )
}

pub fn parse(args: &[String]) -> Result<Invocation, CliError> {
    if args.first().is_some_and(|a| a == "token") {
        return token(args.get(1..).unwrap_or_default(), crate::policy::unix_now());
    }
    let parsed = optparse::parse(OPTIONS, args).map_err(|e| CliError(e.to_string()))?;
    let mut o = ServerOptions {
        port: 12865,
        bind: None,
        family: AddrFamily::Unspec,
        foreground: false,
        service: false,
        verbosity: 1,
        log_file: None,
        log_format: crate::log::Format::Text,
        record_file: None,
        pid_file: None,
        metrics: None,
        iperf3: None,
        stamp: None,
        max_file_size: crate::log::Limits::default().file_size,
        config: Config::default(),
    };
    let bad = |opt: &str, e: value::ValueError| CliError(format!("{opt}: {e}"));
    let (mut key_file, mut allow_netperf2, mut no_netperf2) = (false, false, false);
    let mut iperf3_auth = Iperf3AuthArgs::default();
    for occ in &parsed.options {
        let v = occ.value.as_deref().unwrap_or("");
        let spelled = occ.spelled.as_str();
        match occ.id {
            "help" => return Ok(Invocation::Help),
            "version" => return Ok(Invocation::Version),
            "our_version" => return Ok(Invocation::OurVersion),
            "foreground" => o.foreground = true,
            "debug" => o.verbosity = o.verbosity.saturating_add(1),
            "no_fork" | "no_debug" => {}
            "key_file" => {
                key_file = true;
                o.config.key = Some(
                    engine::auth::Key::from_file(std::path::Path::new(v))
                        .map_err(|e| CliError(e.to_string()))?,
                );
            }
            "passphrase" => {
                o.config.key = Some(
                    engine::auth::Key::from_passphrase(v).map_err(|e| CliError(e.to_string()))?,
                );
                o.config.netperf2_passphrase = Some(v.to_string());
            }
            "install_service" => {
                let rest: Vec<String> = args
                    .iter()
                    .filter(|a| a.as_str() != spelled)
                    .cloned()
                    .collect();
                // what the service will run with must parse now
                parse(&rest)?;
                return Ok(Invocation::InstallService(rest));
            }
            "uninstall_service" => return Ok(Invocation::UninstallService),
            "service" => o.service = true,
            "allow_netperf2" => allow_netperf2 = true,
            "no_netperf2" => no_netperf2 = true,
            "fleet" => o.config.fleet = true,
            "rsa_private_key_path" => iperf3_auth.key = Some(PathBuf::from(v)),
            "authorized_users_path" => iperf3_auth.users = Some(PathBuf::from(v)),
            "time_skew_threshold" => {
                iperf3_auth.skew = Some(value::u32_size(v).map_err(|e| bad(spelled, e))?);
            }
            "allow_iperf3_unauthenticated" => iperf3_auth.allow = true,
            // the daemon's limits and deadlines; an option in the table
            // that no arm takes is a bug, caught by the test below
            other => {
                if !daemon_option(other, spelled, v, &mut o)?
                    && !limit(other, spelled, v, &mut o.config)?
                {
                    return Err(CliError(format!(
                        "internal error: option '{other}' has no handler"
                    )));
                }
            }
        }
    }
    o.config.idle_timeout = o.config.idle_timeout.max(Duration::from_secs(1));
    if o.config.fleet && !key_file {
        return Err(CliError(
            "--fleet: third-party tests need the fleet's key: --key-file FILE (the same file on every netserver of the mesh)".into(),
        ));
    }
    o.config.iperf3_gate = iperf3_auth.gate(key_file)?.map(std::sync::Arc::new);
    // netperf 2.7's protocol can carry a passphrase (in the clear), never
    // a proof of a key file's key
    o.config.netperf2_refused = if no_netperf2 {
        Some(proto::dialect::Netperf2Refused::Disabled)
    } else if key_file && !allow_netperf2 {
        Some(proto::dialect::Netperf2Refused::KeyRequired)
    } else {
        None
    };
    Ok(Invocation::Run(Box::new(o)))
}

/// Where the daemon listens, what it says and where (`-L`, `-p`, `-v`,
/// `--log-file`, `--metrics`, ...): whether `id` was one of those.
fn daemon_option(
    id: &str,
    spelled: &str,
    v: &str,
    o: &mut ServerOptions,
) -> Result<bool, CliError> {
    let bad = |opt: &str, e: value::ValueError| CliError(format!("{opt}: {e}"));
    match id {
        "listen" => {
            let (host, fam) = value::pair_explicit(v);
            if let Some(h) = host {
                o.bind = Some(h.to_string());
            }
            if let Some(f) = fam {
                o.family = value::address_family(f).map_err(|e| bad(spelled, e))?;
            }
        }
        "port" => o.port = value::port(v).map_err(|e| bad(spelled, e))?,
        "ipv4" => o.family = AddrFamily::V4,
        "ipv6" => o.family = AddrFamily::V6,
        "verbosity" => {
            let n = value::int(v).map_err(|e| bad(spelled, e))?;
            o.verbosity = n.clamp(0, 9) as u8;
        }
        "num_cpus" => o.config.num_cpus = value::u32_size(v).map_err(|e| bad(spelled, e))?,
        "log_file" => o.log_file = Some(PathBuf::from(v)),
        "log_format" => {
            o.log_format = match v {
                "text" => crate::log::Format::Text,
                "json" => crate::log::Format::Json,
                _ => {
                    return Err(CliError(format!(
                        "{spelled}: '{v}' is not a log format: text or json"
                    )));
                }
            }
        }
        "record" => o.record_file = Some(PathBuf::from(v)),
        // absolute: the daemon detaches to /
        "pid_file" => {
            o.pid_file = Some(std::path::absolute(v).unwrap_or_else(|_| PathBuf::from(v)));
        }
        "policy" => {
            // absolute, so that SIGHUP reads the same file after detaching
            let p = std::path::absolute(v).unwrap_or_else(|_| PathBuf::from(v));
            o.config.policy = std::sync::Arc::new(
                crate::policy::Policy::load(&p).map_err(|e| CliError(e.to_string()))?,
            );
        }
        "max_file_size" => {
            let n = value::byte_size(v).map_err(|e| bad(spelled, e))?;
            if n < 1 << 16 {
                return Err(CliError(format!("{spelled}: '{v}' is less than 64K")));
            }
            o.max_file_size = n as u64;
        }
        "metrics" => o.metrics = Some(metrics_addr(spelled, v)?),
        "iperf3" => o.iperf3 = Some(iperf3_addr(spelled, v)?),
        "stamp" => o.stamp = Some(stamp_addr(spelled, v)?),
        "stamp_key" => {
            let bytes = std::fs::read(v).map_err(|e| CliError(format!("{spelled} {v}: {e}")))?;
            let key = bytes.trim_ascii_end().to_vec();
            if key.is_empty() {
                return Err(CliError(format!("{spelled} {v}: the file holds no key")));
            }
            o.config.stamp.key = Some(key);
        }
        "stamp_stateless" => o.config.stamp.numbering = proto::rfc_stamp::Numbering::Stateless,
        "stamp_rate" => {
            let n = value::int(v).map_err(|e| CliError(format!("{spelled}: {e}")))?;
            o.config.stamp.per_source =
                u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
                    CliError(format!(
                        "{spelled}: '{v}' is not a rate of 1 or more packets a second"
                    ))
                })?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The options of the iperf3 port's authentication.
#[derive(Default)]
struct Iperf3AuthArgs {
    key: Option<PathBuf>,
    users: Option<PathBuf>,
    skew: Option<u32>,
    allow: bool,
}

impl Iperf3AuthArgs {
    /// Who may test on the iperf3 port: with credentials, those who
    /// authenticate as iperf3 does; under `--key-file` without them,
    /// nobody unless `--allow-iperf3-unauthenticated`; else anyone.
    fn gate(self, key_file: bool) -> Result<Option<crate::iperf3_auth::Iperf3Gate>, CliError> {
        use crate::iperf3_auth::Iperf3Gate;
        match (self.key, self.users) {
            (Some(key), Some(users)) => {
                if self.allow {
                    return Err(CliError(
                        "--allow-iperf3-unauthenticated: iperf3 clients must authenticate where --authorized-users-path is given".into(),
                    ));
                }
                let skew = u64::from(self.skew.unwrap_or(10));
                Iperf3Gate::credentials(&key, &users, skew)
                    .map(Some)
                    .map_err(CliError)
            }
            (Some(_), None) | (None, Some(_)) => Err(CliError(
                "--rsa-private-key-path and --authorized-users-path: iperf3's authentication needs both".into(),
            )),
            (None, None) if self.skew.is_some() => Err(CliError(
                "--time-skew-threshold: only with --rsa-private-key-path and --authorized-users-path".into(),
            )),
            (None, None) if key_file && !self.allow => Ok(Some(Iperf3Gate::KeyRequired)),
            (None, None) => Ok(None),
        }
    }
}

/// How `netserver token` is used.
pub const TOKEN_USAGE: &str = "Usage: netserver token (--key-file FILE | -Z PASSPHRASE) --valid DURATION [--tests N] [--prefix ADDR/LEN]\n\nPrints a token signed with the netserver's key: netperf --token TOKEN (or -Z TOKEN, netperf 2.7's too) runs tests with it until DURATION (30m, 12h, 7d; seconds alone) has passed, at most N tests, from addresses in the prefix.\n";

/// `netserver token ...` at the wall clock's second `now`.
fn token(args: &[String], now: u64) -> Result<Invocation, CliError> {
    let (mut key, mut valid, mut tests, mut prefix) = (None, None, 0u64, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        if matches!(name, "-h" | "--help") {
            return Err(CliError(TOKEN_USAGE.trim_end().to_string()));
        }
        let v = match inline.or_else(|| it.next().cloned()) {
            Some(v) => v,
            None => return Err(CliError(format!("token {name}: needs a value"))),
        };
        match name {
            "--key-file" => {
                key = Some(
                    engine::auth::Key::from_file(std::path::Path::new(&v))
                        .map_err(|e| CliError(format!("token {e}")))?,
                );
            }
            "-Z" | "--passphrase" => {
                key = Some(
                    engine::auth::Key::from_passphrase(&v)
                        .map_err(|e| CliError(format!("token {e}")))?,
                );
            }
            "--valid" => valid = Some(duration(&v)?),
            "--tests" => tests = count("token --tests", &v)? as u64,
            "--prefix" => {
                prefix = Some(
                    engine::token::parse_prefix(&v)
                        .map_err(|e| CliError(format!("token --prefix: {e}")))?,
                );
            }
            other => {
                return Err(CliError(format!(
                    "token: '{other}' is not an option of netserver token (--key-file, -Z, --valid, --tests, --prefix)"
                )));
            }
        }
    }
    let key = key.ok_or_else(|| {
        CliError("token: needs the netserver's key: --key-file FILE or -Z PASSPHRASE".into())
    })?;
    let valid = valid.ok_or_else(|| {
        CliError("token: needs --valid DURATION (for example 12h): tokens expire".into())
    })?;
    let mut id = [0u8; 8];
    getrandom::fill(&mut id).map_err(|e| CliError(format!("token: no random numbers: {e}")))?;
    let t = engine::token::Token {
        expires: now.saturating_add(valid),
        tests,
        prefix,
        id: u64::from_le_bytes(id),
    };
    Ok(Invocation::Token(key.sign_token(&t.payload()), t))
}

/// `--valid`'s DURATION: seconds, or a number with s, m, h or d.
fn duration(v: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError(format!(
            "token --valid: '{v}' is not a duration (30m, 12h, 7d; seconds alone)"
        ))
    };
    let (n, unit) = match v.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => v.split_at(i),
        None => (v, "s"),
    };
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(bad()),
    };
    if secs == 0 {
        return Err(bad());
    }
    Ok(secs)
}

/// `--iperf3`'s `[ADDR:]PORT`: a port alone (0 for any free one), or an
/// address and a port as `--metrics` takes them.
fn iperf3_addr(opt: &str, v: &str) -> Result<(Option<std::net::IpAddr>, u16), CliError> {
    if !v.contains(':') {
        let port = value::port(v).map_err(|e| CliError(format!("{opt}: {e}")))?;
        return Ok((None, port));
    }
    let with_port = match v.strip_suffix(":0") {
        Some(host) => format!("{host}:1"),
        None => v.to_string(),
    };
    let a = metrics_addr(opt, &with_port)?;
    let port = if v.ends_with(":0") { 0 } else { a.port() };
    Ok((Some(a.ip()), port))
}

/// `--stamp`'s address and port: as `--iperf3`'s, and where no port is
/// given (nothing, `ADDR`, `[V6]`), STAMP's own (RFC 8762: 862).
fn stamp_addr(opt: &str, v: &str) -> Result<(Option<std::net::IpAddr>, u16), CliError> {
    if v.is_empty() {
        return Ok((None, proto::rfc_stamp::PORT));
    }
    // an address alone (an IPv6 one without brackets can hold no port)
    let alone = v
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(v);
    match alone.parse::<std::net::IpAddr>() {
        Ok(ip) => Ok((Some(ip), proto::rfc_stamp::PORT)),
        Err(_) => iperf3_addr(opt, v),
    }
}

/// `--metrics`'s address: `ADDR:PORT`, `[V6]:PORT`, or `:PORT` for every
/// address.
fn metrics_addr(opt: &str, v: &str) -> Result<std::net::SocketAddr, CliError> {
    let bad = |why: &str| CliError(format!("{opt}: '{v}' {why}"));
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| bad("is not ADDR:PORT (for example 127.0.0.1:9865)"))?;
    let port = value::port(port).map_err(|e| CliError(format!("{opt}: {e}")))?;
    if port == 0 {
        return Err(bad("needs a port other than 0"));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = if host.is_empty() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        host.parse()
            .map_err(|_| bad("does not start with an IP address (ADDR:PORT)"))?
    };
    Ok(std::net::SocketAddr::new(ip, port))
}

/// An option of the daemon's limits and deadlines, into `c`: whether
/// `id` is one.
fn limit(id: &str, spelled: &str, v: &str, c: &mut Config) -> Result<bool, CliError> {
    let bad = |opt: &str, e: value::ValueError| CliError(format!("{opt}: {e}"));
    let bytes = |least: u64, words: &str| -> Result<u64, CliError> {
        let n = value::byte_size(v).map_err(|e| bad(spelled, e))? as u64;
        if n < least {
            return Err(CliError(format!("{spelled}: '{v}' is less than {words}")));
        }
        Ok(n)
    };
    match id {
        "data_ports" => {
            let (lo, hi) = v
                .split_once('-')
                .ok_or_else(|| CliError(format!("{spelled}: '{v}' is not a range MIN-MAX")))?;
            let lo = value::port(lo).map_err(|e| bad(spelled, e))?;
            let hi = value::port(hi).map_err(|e| bad(spelled, e))?;
            if lo == 0 || hi < lo {
                return Err(CliError(format!(
                    "{spelled}: '{v}' is not a range of ports MIN-MAX with 0 < MIN <= MAX"
                )));
            }
            c.data_ports = Some((lo, hi));
        }
        "max_sessions" => c.max_sessions = count(spelled, v)?,
        "max_flows" => c.limits.max_flows = u32::try_from(count(spelled, v)?).unwrap_or(u32::MAX),
        "max_per_client" => c.max_per_client = count(spelled, v)?,
        "max_pending" => c.max_pending = count(spelled, v)?,
        "max_test_fds" => c.max_test_fds = Some(count(spelled, v)? as u64),
        "schedule" => {
            c.schedule = match v {
                "shared" => crate::admission::Schedule::Shared,
                "exclusive" => crate::admission::Schedule::Exclusive,
                _ => {
                    return Err(CliError(format!(
                        "{spelled}: '{v}' is not a schedule: shared or exclusive"
                    )));
                }
            }
        }
        "max_wait" => c.max_wait = Duration::from_secs(count(spelled, v)? as u64),
        "max_tests_per_client" => {
            c.max_tests_per_client = u32::try_from(count(spelled, v)?).unwrap_or(u32::MAX)
        }
        "max_test_length" => {
            let secs = count(spelled, v)?;
            c.limits.max_duration_ms = secs as u64 * 1000;
        }
        "memory_cap" => {
            let n = value::int(v).map_err(|e| bad(spelled, e))?;
            if n < 1 << 20 {
                return Err(CliError(format!("{spelled}: '{v}' is less than 1M")));
            }
            c.limits.memory_per_session = n as u64;
        }
        "memory_budget" => {
            c.memory_budget = std::sync::Arc::new(MemoryBudget::new(bytes(1 << 20, "1M")?));
        }
        "socket_budget" => {
            c.socket_budget = std::sync::Arc::new(MemoryBudget::new(bytes(1 << 20, "1M")?));
        }
        "handshake_timeout" => {
            let secs = count(spelled, v)? as u64;
            c.handshake_timeout = Duration::from_secs(secs);
            c.first_byte_timeout = Duration::from_millis(secs * 500);
        }
        "idle_timeout" => c.idle_timeout = Duration::from_secs(count(spelled, v)? as u64),
        "data_timeout" => {
            c.data_connect_timeout = Duration::from_secs(count(spelled, v)? as u64);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn count(opt: &str, v: &str) -> Result<usize, CliError> {
    match value::int(v) {
        Ok(n) if n >= 1 => Ok(n as usize),
        Ok(_) => Err(CliError(format!("{opt}: '{v}' must be at least 1"))),
        Err(e) => Err(CliError(format!("{opt}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of the table reaches a handler.
    #[test]
    fn every_option_in_the_table_has_a_handler() {
        for d in OPTIONS {
            let w = match (d.short, d.long) {
                (Some(c), _) => format!("-{c}"),
                (None, Some(l)) => format!("--{l}"),
                (None, None) => panic!("option {} has no spelling", d.id),
            };
            let values: &[&str] = match d.arity {
                Arity::None => &[],
                _ => &["1", "1-2", "x"],
            };
            let mut lines = vec![vec![w.clone()]];
            lines.extend(values.iter().map(|v| vec![w.clone(), v.to_string()]));
            for words in lines {
                if let Err(e) = parse(&words) {
                    assert!(!e.0.contains("has no handler"), "{words:?}: {e}");
                }
            }
        }
    }

    fn run(words: &[&str]) -> ServerOptions {
        let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        match parse(&v).unwrap() {
            Invocation::Run(o) => *o,
            other => panic!("{other:?}"),
        }
    }

    fn err(words: &[&str]) -> String {
        let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        parse(&v).unwrap_err().to_string()
    }

    #[test]
    fn netperf_spellings() {
        let o = run(&["-D", "-p", "12866", "-L", "127.0.0.1,4", "-v", "2"]);
        assert!(o.foreground);
        assert_eq!(o.port, 12866);
        assert_eq!(o.bind.as_deref(), Some("127.0.0.1"));
        assert_eq!(o.family, AddrFamily::V4);
        assert_eq!(o.verbosity, 2);
        let o = run(&["-Dp12867", "-6"]);
        assert_eq!(o.port, 12867);
        assert_eq!(o.family, AddrFamily::V6);
        let o = run(&["-p", "1", "-p", "2"]);
        assert_eq!(o.port, 2);
        assert!(!run(&[]).foreground);
        assert_eq!(run(&[]).port, 12865);
    }

    #[test]
    fn stamp_takes_a_port_an_address_or_neither() {
        let lo4 = Some("127.0.0.1".parse().unwrap());
        let lo6 = Some("::1".parse().unwrap());
        assert_eq!(run(&["--stamp"]).stamp, Some((None, 862)));
        assert_eq!(run(&["--stamp", "-D"]).stamp, Some((None, 862)));
        assert!(run(&["--stamp", "-D"]).foreground);
        assert_eq!(run(&["--stamp", "8620"]).stamp, Some((None, 8620)));
        assert_eq!(run(&["--stamp", "127.0.0.1"]).stamp, Some((lo4, 862)));
        assert_eq!(run(&["--stamp", "127.0.0.1:0"]).stamp, Some((lo4, 0)));
        assert_eq!(run(&["--stamp", "[::1]"]).stamp, Some((lo6, 862)));
        assert_eq!(run(&["--stamp", "::1"]).stamp, Some((lo6, 862)));
        assert_eq!(run(&["--stamp", "[::1]:8620"]).stamp, Some((lo6, 8620)));
        let v6 = |a: &str| Some(a.parse().unwrap());
        assert_eq!(
            run(&["--stamp", "2001:db8::1:80"]).stamp,
            Some((v6("2001:db8::1:80"), 862)),
            "a bare IPv6 address is an address"
        );
        assert_eq!(
            run(&["--stamp", "[2001:0db8::1]:0"]).stamp,
            Some((v6("2001:db8::1"), 0))
        );
        assert!(err(&["--stamp", "nowhere"]).contains("--stamp"));
        assert!(err(&["--stamp", "127.0.0.1:99999"]).contains("--stamp"));
    }

    #[test]
    fn metrics_log_format_and_record() {
        let o = run(&["--metrics", "127.0.0.1:9865", "--log-format", "json"]);
        assert_eq!(o.metrics, Some("127.0.0.1:9865".parse().unwrap()));
        assert_eq!(o.log_format, crate::log::Format::Json);
        assert_eq!(
            run(&["--metrics", "[::1]:9865"]).metrics,
            Some("[::1]:9865".parse().unwrap())
        );
        assert_eq!(
            run(&["--metrics", ":9865"]).metrics,
            Some("[::]:9865".parse().unwrap())
        );
        let o = run(&["--record", "/var/log/netserver.jsonl"]);
        assert_eq!(
            o.record_file.as_deref(),
            Some(std::path::Path::new("/var/log/netserver.jsonl"))
        );
        assert!(err(&["--metrics", "9865"]).starts_with("--metrics: '9865' is not ADDR:PORT"));
        assert!(err(&["--metrics", "host:9865"]).contains("IP address"));
        assert!(err(&["--metrics", "127.0.0.1:0"]).contains("other than 0"));
        assert!(err(&["--log-format", "xml"]).starts_with("--log-format: 'xml'"));
    }

    #[test]
    fn our_long_options() {
        let o = run(&[
            "--data-ports",
            "50000-50100",
            "--max-sessions=3",
            "--max-test-length",
            "60",
        ]);
        assert_eq!(o.config.data_ports, Some((50000, 50100)));
        assert_eq!(o.config.max_sessions, 3);
        assert_eq!(o.config.limits.max_duration_ms, 60_000);
        let o = run(&["--memory-budget", "2G"]);
        assert_eq!(o.config.memory_budget.limit(), 2 << 30);
        // a lab's defaults
        let d = run(&[]).config;
        assert_eq!((d.max_sessions, d.max_per_client), (256, 128));
        assert_eq!(d.limits.max_duration_ms, 86_400_000);
    }

    #[test]
    fn errors_name_the_option() {
        assert!(err(&["-p", "http"]).starts_with("-p:"));
        assert!(err(&["-p", "99999"]).contains("port"));
        assert!(err(&["--data-ports", "9-1"]).starts_with("--data-ports"));
        assert!(err(&["-x"]).contains("-x"));
        assert!(err(&["-L", "::1,ipx"]).starts_with("-L"));
        assert!(err(&["--memory-budget", "1K"]).starts_with("--memory-budget"));
    }
}
