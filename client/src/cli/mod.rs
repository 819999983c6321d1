//! netperf's grammar in two stages: global options, then, after `--`, the
//! test-specific options. Raw words become one validated [`Plan`]; nothing
//! downstream looks at the command line again.

pub mod global;
pub mod plan;
pub mod test_name;
pub mod test_opts;
pub mod values;

use proto::TestKind;

pub use plan::{
    AuthSource, Confidence, DEFAULT_PORT, DialectChoice, Invocation, Length, LocalOnly, MAX_FLOWS,
    OneWayAsk, Plan, Selection, SelectorStyle, UnderLoad, Units,
};
pub use test_name::TestName;
pub use values::CliError;

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
         Test options: netperf -t TEST -- -h\n\n\
         Also: netperf plot RUN.json [FILE.svg] draws a saved --json run;\n\
         netperf mesh --hosts H1,H2,... tests every pair of netservers (netperf mesh --help).\n",
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
    if let Some(inv) = global::apply(&global, &mut plan)? {
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
        if let Some(inv) = test_opts::apply(&test, &mut plan)? {
            return Ok(inv);
        }
    }
    finish(&mut plan)?;
    Ok(Invocation::Run(Box::new(plan)))
}

/// Load flows a direction of `-t RPM` at most (the draft's limit).
pub const RPM_MAX_FLOWS: u32 = 16;

/// `-t RPM`'s load when the options do not say: both ways, ramped up to
/// the draft's limit.
pub const RPM_LOAD: UnderLoad = UnderLoad {
    flows: RPM_MAX_FLOWS,
    ramp: true,
    up: true,
    down: true,
};

/// `-t RPM`: its load, from `-- -d` and `--flows` (which counts load
/// flows a direction; the probes are one connection at a time).
fn finish_rpm(plan: &mut Plan) -> Result<(), CliError> {
    if plan.name != TestName::Rpm {
        return Ok(());
    }
    if plan.under_load.is_some() {
        return Err(CliError(
            "--under-load: RPM loads the path itself (-- -d up|down|both, --flows N)".into(),
        ));
    }
    if !matches!(plan.length, Length::Seconds(s) if s >= 2) {
        return Err(CliError(
            "-t RPM: a timed test of 2 s or more (-l), as its load is".into(),
        ));
    }
    let load = plan.rpm.unwrap_or(RPM_LOAD);
    if load.flows > RPM_MAX_FLOWS {
        return Err(CliError(format!(
            "--flows {}: RPM loads at most {RPM_MAX_FLOWS} flows a direction, as the draft does",
            load.flows
        )));
    }
    plan.rpm = Some(load);
    plan.flows = 1;
    Ok(())
}

/// Checks of the whole plan, once everything is read.
fn finish(plan: &mut Plan) -> Result<(), CliError> {
    finish_rpm(plan)?;
    check_scenarios(plan)?;
    // --json-stream's last line holds the --json document
    if plan.json_stream {
        plan.json = true;
    }
    // netperf 2.7: a send-only test with -r sends requests of that size.
    if plan.request_size_given
        && plan.test.direction() == proto::Direction::Send
        && plan.local.send_size.is_none()
    {
        plan.local.send_size = Some(plan.request_size);
    }
    check_paths(plan)?;
    finish_ecn(plan)?;
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

/// What runs beside or around the test (`--under-load`, `--one-way`,
/// `--observer`) and the key, against the test asked.
fn check_scenarios(plan: &Plan) -> Result<(), CliError> {
    if plan.under_load.is_some() {
        if !plan.test.is_rr() {
            return Err(CliError(format!(
                "--under-load: TCP_RR, UDP_RR and TCP_CRR run under load ({} was asked for)",
                plan.name.name()
            )));
        }
        if !matches!(plan.length, Length::Seconds(s) if s >= 2) {
            return Err(CliError(
                "--under-load: a timed test of 2 s or more (-l), as the load is".into(),
            ));
        }
        if plan.confidence.is_some() {
            return Err(CliError(
                "--under-load: one run, not a confidence run (-I/-i)".into(),
            ));
        }
    }
    if plan.one_way == OneWayAsk::Asked {
        let loaded = plan.under_load.is_some() || plan.name == TestName::Rpm;
        if !loaded && !matches!(plan.name, TestName::TcpRr | TestName::UdpRr) {
            return Err(CliError(format!(
                "--one-way: for --under-load, -t RPM, TCP_RR and UDP_RR ({} was asked for)",
                plan.name.name()
            )));
        }
        if !matches!(plan.length, Length::Seconds(_)) || plan.confidence.is_some() {
            return Err(CliError(
                "--one-way: a timed test (-l seconds), one run (not -I/-i)".into(),
            ));
        }
    }
    if plan.observer.is_some() && plan.auth.is_none() {
        return Err(CliError(
            "--observer: the observer runs a third-party test, for a client that proves the key: give --key-file or -Z (the same key as both netservers)".into(),
        ));
    }
    if let (Some(_), Some(why)) = (&plan.auth, plan.dialect.refuses_key()) {
        return Err(CliError(format!("-Z, --key-file: {why}")));
    }
    Ok(())
}

/// `--ecn`: the tests that measure it, and our UDP sends' codepoint
/// beside `-Y`'s DSCP (the netserver marks its own from the request).
fn finish_ecn(plan: &mut Plan) -> Result<(), CliError> {
    let Some(mark) = plan.ecn else {
        return Ok(());
    };
    if !matches!(
        plan.name,
        TestName::UdpStream | TestName::UdpRr | TestName::TcpStream | TestName::TcpMaerts
    ) {
        return Err(CliError(format!(
            "--ecn: UDP_STREAM, UDP_RR, TCP_STREAM and TCP_MAERTS measure it ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.flows > 1 && plan.test == TestKind::UdpRr {
        return Err(CliError(
            "--ecn: UDP_RR's codepoints are counted on one flow (UDP_STREAM, TCP_STREAM and TCP_MAERTS count them on many): leave out --flows".into(),
        ));
    }
    if plan.uring {
        return Err(CliError(
            "--ecn: io_uring's calls do not read a datagram's codepoint or a flow's ECN here: leave out --io-uring".into(),
        ));
    }
    if plan.test.protocol() == proto::Protocol::Udp {
        plan.local.tos = Some((plan.local.tos.unwrap_or(0) & !0x03) | mark.bits());
    } else if mark == proto::ecn::Codepoint::Ect1 {
        return Err(CliError(
            "--ecn ect1: TCP marks ECT(1) only with AccECN and L4S congestion control (Prague), which this netperf does not set; give ect0 (classic ECN, net.ipv4.tcp_ecn)".into(),
        ));
    }
    if let Some(why) = engine::sys::lacks("--ecn") {
        return Err(CliError(why));
    }
    Ok(())
}

/// Our fast paths, refused before anything is printed where they do not
/// apply (another test, each other, this platform).
fn check_paths(plan: &Plan) -> Result<(), CliError> {
    if (plan.udp_batch > 1 || plan.udp_gso.is_some()) && plan.test != TestKind::UdpStream {
        return Err(CliError(format!(
            "--batch, --gso: only UDP_STREAM has them ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.zerocopy && plan.name != TestName::TcpStream {
        return Err(CliError(format!(
            "--zerocopy: TCP_STREAM has it ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.rx != proto::RxPath::Copy
        && !matches!(plan.test, TestKind::TcpStream | TestKind::TcpMaerts)
    {
        return Err(CliError(format!(
            "{}: a TCP stream's receiver has it: TCP_STREAM (the netserver receives) or TCP_MAERTS (we do) ({} was asked for)",
            plan.rx.option(),
            plan.name.name()
        )));
    }
    if plan.uring
        && !matches!(
            plan.test,
            TestKind::TcpStream | TestKind::TcpMaerts | TestKind::UdpStream
        )
    {
        return Err(CliError(format!(
            "--io-uring: the stream tests have it: TCP_STREAM, TCP_MAERTS, UDP_STREAM ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.uring
        && (plan.udp_batch > 1
            || plan.udp_gso.is_some()
            || plan.zerocopy
            || plan.sendfile()
            || plan.rx != proto::RxPath::Copy)
    {
        return Err(CliError(format!(
            "--io-uring: it makes its own calls; not with --batch, --gso, --zerocopy, --rx-zerocopy, --rx-discard or TCP_SENDFILE ({} was asked for)",
            plan.name.name()
        )));
    }
    if plan.uring && plan.window.is_some() {
        return Err(CliError(
            "--io-uring: not with --warmup/--cooldown (the event loops keep the window)".into(),
        ));
    }
    if plan.uring && plan.test == TestKind::UdpStream && plan.flows > 1 {
        return Err(CliError(
            "--io-uring: UDP_STREAM runs it on one flow; TCP_STREAM and TCP_MAERTS on many".into(),
        ));
    }
    // Linux's own calls, asked for where this netperf is not on Linux
    if let Some(why) = [
        (plan.zerocopy, "--zerocopy"),
        (plan.rx == proto::RxPath::ZeroCopy, "--rx-zerocopy"),
        (plan.rx == proto::RxPath::Discard, "--rx-discard"),
        (plan.uring, "--io-uring"),
        (plan.udp_batch > 1, "--batch"),
        (plan.udp_gso.is_some(), "--gso"),
        (plan.sendfile(), "TCP_SENDFILE"),
    ]
    .into_iter()
    .find_map(|(asked, option)| {
        if asked {
            engine::sys::lacks(option)
        } else {
            None
        }
    }) {
        return Err(CliError(why));
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
