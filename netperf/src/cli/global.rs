//! netperf's global options: everything before `--`.

use std::path::PathBuf;

use optparse::{
    Arity, Occurrence, OptDef, Parsed,
    value::{self, AddrFamily},
};

use super::{
    Invocation,
    plan::{self, AuthSource, Confidence, DialectChoice, Length, Plan, Units},
    test_name::TestName,
    values::*,
};

/// Every global option netperf 2.7 takes, with its meaning here. Options
/// netperf only honours in special builds are accepted and have no effect,
/// as in a default netperf build.
pub const OPTIONS: &[OptDef] = &[
    OptDef::value(
        "local_align",
        'a',
        "send,recv",
        "Local send,recv buffer alignment (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_align",
        'A',
        "send,recv",
        "Remote send,recv buffer alignment (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "interval_burst",
        'b',
        "burst",
        "Packets per interval (needs netperf's --enable-intervals; no effect)",
    )
    .hidden(),
    OptDef::value(
        "brand",
        'B',
        "brandstr",
        "Emit this string at the end of brief (-P 0) output",
    ),
    OptDef::flag(
        "local_cpu",
        'c',
        "Report local CPU usage (an optional rate argument is accepted)",
    )
    .with_arity(Arity::OptionalNumeric)
    .with_value_name("rate"),
    OptDef::flag(
        "remote_cpu",
        'C',
        "Report remote CPU usage (an optional rate argument is accepted)",
    )
    .with_arity(Arity::OptionalNumeric)
    .with_value_name("rate"),
    OptDef::flag("debug", 'd', "Increase debugging output"),
    OptDef::value(
        "demo",
        'D',
        "secs[,units]",
        "Display interim results every secs seconds (negative: precise timing)",
    ),
    OptDef::value(
        "format",
        'f',
        "G|M|K|g|m|k|B|b",
        "Output units: bytes (powers of 1024) or bits (powers of 1000)",
    ),
    OptDef::value(
        "fill",
        'F',
        "lfill[,rfill]",
        "Fill send buffers with data from this file",
    ),
    OptDef::flag("help", 'h', "Display this text").with_long("help"),
    OptDef::value(
        "host",
        'H',
        "name|ip[,fam]",
        "The netserver's host, and optionally its address family (4 or 6)",
    ),
    OptDef::value(
        "iterations",
        'i',
        "max,min",
        "Most and fewest iterations for a confidence interval (3 to 30)",
    ),
    OptDef::value(
        "confidence",
        'I',
        "lvl[,width]",
        "Confidence level (50 to 99.9) and interval width in percent",
    ),
    OptDef::flag(
        "histogram",
        'j',
        "Time each send and receive of stream tests too (the _RR tests are always timed)",
    ),
    OptDef::value(
        "local_dirty",
        'k',
        "dirty,clean",
        "Dirty-buffer counts (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_dirty",
        'K',
        "dirty,clean",
        "Dirty-buffer counts (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "length",
        'l',
        "testlen",
        "Test length: seconds (>0), or bytes/transactions/datagrams (<0)",
    ),
    OptDef::value(
        "local_host",
        'L',
        "name|ip[,fam]",
        "Local address and family of the control connection",
    ),
    OptDef::value(
        "num_cpus",
        'n',
        "numcpu",
        "Number of CPUs for CPU utilisation",
    ),
    OptDef::flag("no_control", 'N', "No control connection (not supported)"),
    OptDef::value(
        "local_offset",
        'o',
        "send,recv",
        "Local buffer offsets (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_offset",
        'O',
        "send,recv",
        "Remote buffer offsets (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "port",
        'p',
        "port[,lport]",
        "netserver's control port (12865), and our local control port",
    ),
    OptDef::value("headers", 'P', "0|1", "Don't/do display test headers"),
    OptDef::flag(
        "result_confidence_only",
        'r',
        "Declare confidence on the result alone, ignoring CPU",
    ),
    OptDef::value(
        "wait",
        's',
        "seconds",
        "Wait this long between test setup and test start",
    ),
    OptDef::flag("keepalive", 'S', "Set SO_KEEPALIVE on the data connections"),
    OptDef::value(
        "test",
        't',
        "testname",
        "Test to run: TCP_STREAM (default), TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR",
    ),
    OptDef::value(
        "cpu_bind",
        'T',
        "lcpu,rcpu",
        "Bind netperf and netserver to these CPUs",
    ),
    OptDef::value(
        "verbosity",
        'v',
        "level",
        "Verbosity: 0 result only, 1 table (default), 2 more detail",
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
        "Display this netperf's version and its control protocol's, and exit",
    ),
    OptDef::value(
        "width",
        'W',
        "send,recv",
        "Number of send,recv buffers in the ring",
    ),
    OptDef::value(
        "interval_wait",
        'w',
        "time",
        "Interval between bursts (needs netperf's --enable-intervals; no effect)",
    )
    .hidden(),
    OptDef::value(
        "priority",
        'y',
        "local,remote",
        "SO_PRIORITY of the data sockets",
    ),
    OptDef::value(
        "tos",
        'Y',
        "local,remote",
        "IP TOS (DSCP<<2) of the data sockets, in hex or decimal",
    ),
    OptDef::value(
        "passphrase",
        'Z',
        "passphrase",
        "Prove to netserver that we know this passphrase (never sent)",
    ),
    OptDef::long_only(
        "token",
        "token",
        Arity::Required,
        "token",
        "Run with a token `netserver token` printed (proved, never sent; netperf 2.7 takes it as -Z)",
    ),
    OptDef::flag("ipv4", '4', "Use IPv4 for control and data"),
    OptDef::flag("ipv6", '6', "Use IPv6 for control and data"),
    OptDef::long_only(
        "json",
        "json",
        Arity::None,
        "",
        "Print one JSON document with every option, result, interim sample and iteration",
    ),
    OptDef::long_only(
        "json_stream",
        "json-stream",
        Arity::None,
        "",
        "Print one JSON object a line as the run goes (start, interim, iteration, end with the --json document)",
    ),
    OptDef::long_only(
        "plot",
        "plot",
        Arity::Required,
        "file.svg",
        "Draw the run into an SVG file: throughput over time, iterations, latency percentiles",
    ),
    OptDef::long_only(
        "dialect",
        "dialect",
        Arity::Required,
        "auto|native|netperf2|iperf3",
        "Control protocol: this suite's, netperf 2.7's (for its netserver), iperf3's (as --iperf3), or found out (default)",
    ),
    OptDef::long_only(
        "iperf3",
        "iperf3",
        Arity::None,
        "",
        "Run the test against an iperf3 server (iperf3 -s; port 5201 unless -p says): TCP_STREAM, TCP_MAERTS (its -R), UDP_STREAM (its -u)",
    ),
    OptDef::long_only(
        "key_file",
        "key-file",
        Arity::Required,
        "file",
        "Authenticate to netserver with the key in this file",
    ),
];

/// What `-i`, `-I` and `-r` said, read once every option is.
#[derive(Default)]
struct Asked {
    iterations: Option<(Option<i64>, Option<i64>)>,
    level_width: Option<(Option<f64>, Option<f64>)>,
    result_only: bool,
}

/// What the global options say, into the plan.
pub(crate) fn apply(p: &Parsed, plan: &mut Plan) -> Result<Option<Invocation>, CliError> {
    let mut st = Asked::default();
    for occ in &p.options {
        if let Some(inv) = option(occ, plan, &mut st)? {
            return Ok(Some(inv));
        }
    }
    if st.iterations.is_some() || st.level_width.is_some() {
        plan.confidence = Some(Confidence::asked(
            st.iterations,
            st.level_width,
            st.result_only,
        )?);
    }
    // the dialect's own port, where -p does not name one
    let port_named = p.options.iter().any(|o| {
        o.id == "port"
            && value::pair_explicit(o.value.as_deref().unwrap_or(""))
                .0
                .is_some()
    });
    if !port_named {
        plan.port = plan.dialect.default_port();
    }
    plan::label_socket_type(plan);
    Ok(None)
}

/// netperf 2.7's own global options: help, versions, alignment, CPU, output.
fn option(
    occ: &Occurrence,
    plan: &mut Plan,
    st: &mut Asked,
) -> Result<Option<Invocation>, CliError> {
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
        _ => return run_option(occ, plan, st),
    }
    Ok(None)
}

/// What to run where: hosts, ports, length, iterations, the test.
fn run_option(
    occ: &Occurrence,
    plan: &mut Plan,
    st: &mut Asked,
) -> Result<Option<Invocation>, CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    match occ.id {
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
            let prev = st.iterations.unwrap_or((None, None));
            st.iterations = Some((max.or(prev.0), min.or(prev.1)));
        }
        "confidence" => confidence_option(o, v, plan, st)?,
        "length" => plan.length = length(o, v, &mut plan.warnings)?,
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
        "result_confidence_only" => st.result_only = true,
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
        _ => return output_option(occ, plan, st),
    }
    Ok(None)
}

/// `-I LEVEL,WIDTH`. netperf 2.7 takes a width that is 0 or not a number
/// as 5%.
fn confidence_option(o: &str, v: &str, plan: &mut Plan, st: &mut Asked) -> Result<(), CliError> {
    let (level, width) = value::pair(v);
    let level = level.map(value::float).transpose().map_err(|e| bad(o, e))?;
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
    let prev = st.level_width.unwrap_or((None, None));
    st.level_width = Some((level.or(prev.0), width.or(prev.1)));
    Ok(())
}

/// `-l`: seconds, or a count when negative (`30s`, `30secs` are seconds,
/// as netperf 2.7's manual says).
fn length(o: &str, v: &str, warnings: &mut Vec<String>) -> Result<Length, CliError> {
    let r = value::convert(v).map_err(|e| bad(o, e))?;
    let n = r.value;
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
        warnings,
    );
    Ok(if n < 0 {
        Length::Count(n.unsigned_abs())
    } else {
        Length::Seconds(n as u64)
    })
}

/// CPU binding, verbosity, priorities, and this netperf's own options.
fn output_option(
    occ: &Occurrence,
    plan: &mut Plan,
    _: &mut Asked,
) -> Result<Option<Invocation>, CliError> {
    let v = occ.value.as_deref().unwrap_or("");
    let o = occ.spelled.as_str();
    match occ.id {
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
        // a token is a passphrase of a known shape: named in our hello,
        // sent whole to netperf 2.7's netserver as -Z would be
        "token" => {
            let (payload, _) = engine::token::split(v).ok_or_else(|| {
                CliError(format!(
                    "{o}: '{v}' is not a token (netserver token prints one: rsnp1_..._<32 hex digits>)"
                ))
            })?;
            engine::token::Token::parse(payload).map_err(|e| CliError(format!("{o}: {e}")))?;
            plan.auth = Some(AuthSource::Passphrase(v.to_string()));
        }
        "ipv4" => plan.family = AddrFamily::V4,
        "ipv6" => plan.family = AddrFamily::V6,
        "json" => plan.json = true,
        "json_stream" => plan.json_stream = true,
        "plot" => {
            if v.is_empty() {
                return Err(CliError(format!("{o}: name the SVG file to draw into")));
            }
            plan.plot = Some(PathBuf::from(v));
        }
        "dialect" => {
            plan.dialect = match v.to_ascii_lowercase().as_str() {
                "auto" => DialectChoice::Auto,
                "native" => DialectChoice::Native,
                "netperf2" | "netperf" | "2.7" => DialectChoice::Netperf2,
                "iperf3" => DialectChoice::Iperf3,
                _ => {
                    return Err(CliError(format!(
                        "{o}: '{v}' is not a dialect: auto, native, netperf2 or iperf3"
                    )));
                }
            }
        }
        "iperf3" => plan.dialect = DialectChoice::Iperf3,
        "key_file" => plan.auth = Some(AuthSource::File(PathBuf::from(v))),
        "histogram" => plan.histogram = true,
        other => return Err(unhandled(other)),
    }
    Ok(None)
}
