//! The checks of a whole plan, once everything is read: what runs beside
//! the test, the fast paths, `--ecn`, `-t RPM`'s load. Every speaker's
//! plan passes them (netperf's command line, a typed third-party request).

use proto::{Protocol, TestKind};

use super::{
    Confidence, Length, OneWayAsk, Plan, PlanError as CliError, TestName, UnderLoad, test_name,
};

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
pub fn finish(plan: &mut Plan) -> Result<(), CliError> {
    finish_rpm(plan)?;
    if plan.stamp_key.is_some() && plan.name != TestName::Stamp {
        return Err(CliError(format!(
            "--stamp-key: -t STAMP's key ({} was asked for)",
            plan.name.name()
        )));
    }
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

/// What `--` options said about the direction and protocol, resolved once
/// every option is read.
#[derive(Debug, Default)]
pub struct Shape {
    /// `-d`'s bits (OMNI): they replace what `-m`, `-M`, `-r` implied.
    pub explicit: Option<u32>,
    /// The bits `-m`, `-M`, `-r` imply (OMNI only).
    pub implied: u32,
    pub protocol: Option<Protocol>,
    /// `-T` named a protocol netperf 2.7 does not know: it runs TCP.
    pub default_protocol: bool,
    pub connection: bool,
    pub socket_type: Option<String>,
    /// `-R`.
    pub routing: Option<bool>,
}

/// Turn the name's defaults and what `--` said into the data path.
pub fn resolve_shape(plan: &mut Plan, shape: Shape) -> Result<(), CliError> {
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
        return Ok(());
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
    Ok(())
}

/// The socket type netperf 2.7's banner names, from the test's protocol.
pub fn label_socket_type(plan: &mut Plan) {
    let (protocol, _, _) = plan.name.defaults();
    plan.socket_type_label = match protocol {
        Protocol::Tcp => "Stream",
        Protocol::Udp => "Datagram",
    };
}

impl Confidence {
    /// netperf's `-I`/`-i` rules: `-I` alone means 3 to 10 iterations; `-i`
    /// alone means 99% and 5%; iteration counts are kept between 3 and 30, and
    /// max is raised to min.
    pub fn asked(
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
}
