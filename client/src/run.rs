//! One netperf invocation: connect, run the test (once, or until
//! confident), and report it through the outputs asked for (the JSON
//! document, the JSON stream; netperf 2.7's tables and the picture, where
//! the program handed them in: [`set_tables`], [`set_plotter`]). The
//! measurements come from a [`Source`]: the netserver over the control
//! connection, or a test's fake.

use std::{fs::File, io::Read, sync::Arc};

use anyhow::{Context as _, Result, anyhow};
use proto::TestSpec;

/// (where a run's measurements come from: here, so that `run::Source`
/// names it where callers look)
pub use crate::source::Source;
use crate::{
    confidence::{self, Sample, Verdict},
    control, debug,
    events::{self, Events},
    family::{self, Context},
    interim,
    output::{
        Out, Reporter, Results, Server, Test, json,
        run_info::{Ours, RunInfo},
        units,
    },
    plan::{Plan, TestName},
    progress,
    report::{Figures, Measurement, Observer},
};

/// Most bytes read from a `-F` fill file.
const MAX_FILL: u64 = 16 * 1024 * 1024;

/// Whether each transaction of a request/response test is timed: when an
/// output shows its latency (`stats`: `-j` or a latency selector; JSON;
/// `extras`: our latency lines), unless `--no-latency`.
fn times_transactions(plan: &Plan, stats: bool, extras: bool) -> bool {
    plan.latency && (stats || plan.json || extras || plan.under_load.is_some())
}

/// How a run ended that printed its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The figures are the test's own.
    Clean,
    /// Traffic that was not the test's reached its data sockets during the
    /// measurement (connections at TCP_CRR's listener, datagrams at a UDP
    /// receiver): it was not counted, but it may have cost the test time
    /// or buffer room. Said on stderr; netperf exits with status 3.
    ForeignTraffic,
}

/// The netserver at the other end of the control connection.
#[derive(Debug)]
struct Netserver(control::Connection);

impl Source for Netserver {
    fn server(&self) -> Server {
        let d = &self.0.control;
        Server {
            local: d.local(),
            remote: d.peer(),
            software: d.caps().software.clone(),
            embedded: self.0.embedded.is_some(),
        }
    }

    fn preflight(&mut self, plan: &Plan) -> Result<TestSpec> {
        family::preflight(plan, &self.0.control)
    }

    fn details(&self) -> bool {
        self.0.control.caps().details
    }

    /// The plan's test, alone, under load, or as the responsiveness test's
    /// phases.
    fn measure(&mut self, plan: &Plan, ctx: &Context) -> Result<Measurement> {
        let d = &mut self.0.control;
        d.ready(plan)?;
        match (plan.under_load, plan.rpm) {
            (Some(load), _) => crate::under_load::run(plan, load, d, ctx),
            (None, Some(load)) => crate::rpm::run(plan, load, d, ctx),
            (None, None) if crate::one_way::wanted(plan, d.caps())? => {
                crate::one_way::alone(plan, d, ctx)
            }
            (None, None) => family::run_once(plan, d, ctx),
        }
    }

    fn bye(&mut self) {
        debug::hp(|| "shutdown_control: shutdown of control connection requested.".into());
        self.0.control.bye();
    }
}

pub fn run(plan: &Plan) -> Result<Outcome> {
    run_to(plan, &Out::stdout())
}

/// [`run`], its output into `out`.
pub fn run_to(plan: &Plan, out: &Out) -> Result<Outcome> {
    // netperf 2.7 prints these as it reads its options.
    for n in &plan.notices {
        out.emit(format!("{n}\n").as_bytes())?;
    }
    for w in &plan.warnings {
        eprintln!("netperf: {w}");
    }
    let fill = read_fill(plan)?;
    // STAMP's reflectors speak no control protocol: its own source
    if plan.name == TestName::Stamp {
        let mut sender = crate::rfc_stamp::Sender::new(plan)?;
        return drive(plan, &mut sender, fill, out);
    }
    if let Some(caps) = plan.dialect.known_capabilities() {
        family::refuse_before_connecting(plan, &caps)?;
    }
    let mut conn = control::connect(plan)?;
    debug::control(plan, &conn.control.peer());
    // what the netserver's policy allows a test, before the first request
    let (fitted, changed) = crate::limits::fit(plan, conn.control.caps().limits)?;
    let plan = &fitted;
    for c in changed {
        eprintln!("netperf: {c}");
    }
    if plan.name.is_info() {
        let text = info(plan, &mut conn.control)?;
        out.emit(text.as_bytes())?;
        conn.control.bye();
        return Ok(Outcome::Clean);
    }
    drive(plan, &mut Netserver(conn), fill, out)
}

/// One run from a source of measurements: preflight, choose the outputs,
/// iterate, finish.
pub fn drive(plan: &Plan, source: &mut dyn Source, fill: Vec<u8>, out: &Out) -> Result<Outcome> {
    let t = test_of(plan, source.preflight(plan)?, out);
    let server = source.server();
    let (mut reporters, observers, latency_shown) = outputs(plan, &t, out)?;
    let mut ctx = Context::new(plan, fill, observers);
    // netperf 2.7 times each call of a stream test when a latency selector
    // is asked for, and each transaction only when its statistics are
    // wanted (`-j`, a latency selector); so do we: for those, JSON, and
    // our latency lines (`-v 3`, a terminal).
    ctx.stats |= latency_shown;
    ctx.timing = times_transactions(plan, ctx.stats, t.extras);
    if !source.details() {
        for note in reports_less(plan, t.extras, &server.software) {
            eprintln!("netperf: {note}");
        }
    }
    debug::data_endpoints(plan, &server.remote, plan.test.protocol());
    for r in &mut reporters {
        r.begin(&t, &server)?;
    }
    let (runs, verdict) = iterations(plan, &t, source, &ctx, &mut reporters)?;
    let figures = match runs.as_slice() {
        [(_, f)] => f.clone(),
        _ => Figures::mean(&runs.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>()),
    };
    let Some((last, _)) = runs.last() else {
        anyhow::bail!("no iteration ran");
    };
    let results = Results {
        test: &t,
        server: &server,
        runs: &runs,
        last,
        figures: &figures,
        verdict: verdict.as_ref(),
    };
    for r in &mut reporters {
        r.finish(&results)?;
    }
    source.bye();
    let (lines, affected) = foreign_traffic(&runs);
    for l in lines {
        eprintln!("netperf: warning: {l}");
    }
    for l in path_notes(&t, &runs) {
        eprintln!("netperf: {l}");
    }
    if let Some(tcp) = last.ecn(&t.spec).and_then(|e| e.tcp)
        && !tcp.negotiated
    {
        eprintln!(
            "netperf: warning: --ecn: TCP did not negotiate ECN: {}",
            crate::report::ecn::not_negotiated(&tcp)
        );
    }
    for l in refused_options(&t, &runs) {
        eprintln!("netperf: warning: {l}");
    }
    Ok(if affected {
        Outcome::ForeignTraffic
    } else {
        Outcome::Clean
    })
}

/// Makes `--plot`'s reporter, drawing to the path given. The client
/// library draws nothing itself (it links no plotting library): the
/// program that draws, netperf, hands one to [`set_plotter`].
pub type Plotter = fn(&std::path::Path) -> Box<dyn Reporter>;

static PLOTTER: std::sync::OnceLock<Plotter> = std::sync::OnceLock::new();

/// Let a run draw its picture (`--plot`) with `make` (the first given
/// stays). A program that sets none refuses `--plot` by name.
pub fn set_plotter(make: Plotter) {
    let _ = PLOTTER.set(make);
}

/// A run's reporters, its observers, and whether a latency selector is
/// asked for.
type Outputs = (Vec<Box<dyn Reporter>>, Vec<Arc<dyn Observer>>, bool);

/// netperf 2.7's tables for a run: the reporter that prints them (the
/// classic tables, or the selectors), and whether a latency selector is
/// among what it prints.
pub struct Tables {
    pub reporter: Box<dyn Reporter>,
    pub latency_shown: bool,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("latency_shown", &self.latency_shown)
            .finish_non_exhaustive()
    }
}

/// Makes a run's tables. The client library prints none itself: the
/// program that does, netperf, hands one to [`set_tables`].
pub type Tabler = fn(&Plan, &Test, &Out) -> Result<Tables>;

static TABLER: std::sync::OnceLock<Tabler> = std::sync::OnceLock::new();

/// Let a run print netperf 2.7's tables with `make` (the first given
/// stays). A program that sets none runs only plans whose output is a
/// document (`--json`, `--json-stream`), as a netserver's third-party
/// tests are.
pub fn set_tables(make: Tabler) {
    let _ = TABLER.set(make);
}

/// The outputs the plan asks for, chosen once: the picture (drawn before
/// anything is printed), then the stream, the document, or the tables;
/// and the observers that show the run as it goes. A selection that
/// cannot be read fails here, before the test.
fn outputs(plan: &Plan, t: &Test, out: &Out) -> Result<Outputs> {
    let document = plan.json || plan.json_stream;
    // the tables are chosen when printed, and when a selection is asked
    // beside a document (its latency selectors still time the test)
    let tables = if !document || plan.selector_output() {
        let make = TABLER.get().ok_or_else(|| {
            anyhow!("this program prints no tables (netperf does): a run here answers with its JSON document")
        })?;
        Some(make(plan, t, out)?)
    } else {
        None
    };
    let latency_shown = tables.as_ref().is_some_and(|t| t.latency_shown);
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if let Some(path) = &plan.plot {
        let plotter = PLOTTER
            .get()
            .ok_or_else(|| anyhow!("--plot: this program draws no pictures (netperf does)"))?;
        reporters.push(plotter(path));
    }
    reporters.push(match (plan.json_stream, plan.json, tables) {
        (true, ..) => {
            let e = Arc::new(Events::new(out.clone(), format!("{}/s", t.units.label())));
            observers.push(e.clone());
            Box::new(events::Stream(e))
        }
        (false, true, _) => Box::new(json::Json { out: out.clone() }),
        (false, false, Some(tables)) => tables.reporter,
        (false, false, None) => anyhow::bail!("no output was chosen"),
    });
    if let Some(l) = interim::Lines::of(plan, out) {
        observers.push(Arc::new(l));
    }
    if let Some(p) = progress::Spec::of(plan) {
        observers.push(Arc::new(progress::Progress::new(p)));
    }
    Ok((reporters, observers, latency_shown))
}

/// What the outputs know of a run: what only the command line knows, and
/// the request each iteration sends.
pub fn test_of(plan: &Plan, spec: TestSpec, out: &Out) -> Test {
    let info = RunInfo {
        command_line: plan.command_line.clone(),
        name: plan.name,
        protocol_label: plan.protocol_label,
        host_name: plan.host_name().to_string(),
        port: plan.port,
        units: plan.units(),
        verbosity: plan.verbosity,
        headers: plan.headers,
        brand: plan.brand.clone(),
        local_cpu: plan.local_cpu,
        confidence: plan.confidence,
        interim: plan.interim,
        // Piped output at `-v 0/1/2` has netperf 2.7's lines exactly.
        extras: plan.verbosity >= 3 || out.is_terminal(),
        one_way_asked: plan.one_way == crate::plan::OneWayAsk::Asked,
        ours: Ours {
            family: plan.family,
            local_host: plan.local_host.clone(),
            data_local: plan.data_local.clone(),
            data_family: plan.data_family,
            data_host: plan.data_host.clone(),
            data_port: plan.local_data_port,
            fill_file: plan.fill_file.clone(),
            cork: plan.local_only.cork,
            copy_avoidance: plan.copy_avoidance,
            burst: plan.burst,
            recv_timeout: plan.recv_timeout,
            latency: plan.latency,
            rx: plan.rx,
            zerocopy: plan.zerocopy,
            port_range: plan.port_range,
        },
    };
    Test {
        info,
        spec,
        local: plan.local.clone(),
    }
}

/// What the receive path did that a reader of the figures must know, on
/// stderr whatever the output (scripts read stdout): a discarding receiver
/// delivered nothing; a mapping receiver that could map little copied,
/// and why.
fn path_notes(t: &Test, runs: &Runs) -> Vec<String> {
    let (mut who, mut mapped, mut received) = ("", 0u64, 0u64);
    for (m, _) in runs {
        let side;
        (who, side) = crate::output::receiver(t, m);
        mapped += side.rx.mapped_bytes;
        received += side.bytes_received;
    }
    let (sends, copied) = runs.iter().fold((0u64, 0u64), |(a, c), (m, _)| {
        let tx = m.local.counts.tx;
        (a + tx.zerocopy_sends, c + tx.copied_sends)
    });
    let mut notes = Vec::new();
    if copied > 0 {
        notes.push(format!(
            "--zerocopy: {copied} of the {sends} sends ({:.1}%) were copied, not sent from pinned pages: the kernel charges pinned pages to the locked-memory limit (RLIMIT_MEMLOCK; raise `ulimit -l`, systemd's LimitMEMLOCK=, or the container's); the figure counts every byte sent either way",
            crate::output::share(copied, sends)
        ));
    }
    notes.extend(match t.ours.rx {
        proto::RxPath::Discard => vec![format!(
            "--rx-discard: {who}'s kernel dropped the data uncopied (MSG_TRUNC); nothing reached user space: the figure is the stack's ceiling, not a delivery rate"
        )],
        proto::RxPath::ZeroCopy if received > 0 && mapped * 2 < received => vec![format!(
            "--rx-zerocopy: {who} could map only {:.1}% of the {received} bytes it received and copied the rest: the kernel maps whole pages only, so each segment must carry whole pages (an MSS that is a multiple of {}: on loopback an MTU of 61512 with IPv6 or 61492 with IPv4, or -- -G {}), arriving in pages of their own (on loopback, send with --zerocopy: a plain send's pages are shared and cannot be mapped)",
            crate::output::share(mapped, received),
            engine::sys::page_size(),
            engine::sys::page_size() + 12,
        )],
        _ => Vec::new(),
    });
    notes
}

/// Congestion controls asked for (`-K local,remote`) that an end's kernel
/// did not run: what each end's socket held, read back (its TCP_INFO's
/// algorithm), against what was asked; a line each, naming the end.
fn refused_options(t: &Test, runs: &Runs) -> Vec<String> {
    let Some((m, _)) = runs.last() else {
        return Vec::new();
    };
    let ends = [
        ("-K ", "our", &t.local.cong_control, &m.local.counts),
        (
            "-K ,",
            "the netserver's",
            &t.spec.server.cong_control,
            &m.remote.counts,
        ),
    ];
    ends.into_iter()
        .filter_map(|(option, whose, asked, counts)| {
            let asked = asked.as_ref()?;
            let held = &counts.tcp.as_ref()?.cong_control;
            (!held.is_empty() && held != asked).then(|| {
                let why = if whose == "our" {
                    engine::sockopt::cc_not_applied_here(asked, engine::sys::privileged())
                } else {
                    cc_not_applied_at_netserver(asked)
                };
                format!("{option}{asked}: {whose} end ran {held} (the figures are {held}'s): {why}")
            })
        })
        .collect()
}

/// Why the netserver ran another congestion control than `asked`: it
/// applies only those its host's net.ipv4.tcp_allowed_congestion_control
/// lists, even as root (so that a remote client cannot make it load a
/// kernel module); netperf 2.7's, unprivileged, is held to the same list.
fn cc_not_applied_at_netserver(asked: &str) -> String {
    format!(
        "a netserver applies only the algorithms its host's net.ipv4.tcp_allowed_congestion_control lists (ours even as root, so that a client cannot make it load a kernel module): to test {asked}, add it to that list on the netserver's host (sysctl -w net.ipv4.tcp_allowed_congestion_control=\"$(sysctl -n net.ipv4.tcp_allowed_congestion_control) {asked}\", with its module loaded)"
    )
}

/// What reached the test's data sockets without being the test's, over
/// every iteration: a line each for stderr, and whether the figures may be
/// affected by it (it came during the measurement).
fn foreign_traffic(runs: &Runs) -> (Vec<String>, bool) {
    let (mut closed, mut measured, mut datagrams) = (0u64, 0u64, 0u64);
    for (m, _) in runs {
        for side in [&m.local, &m.remote] {
            closed += side.foreign_connections.closed;
            measured += side.foreign_connections.measured;
            datagrams += side.udp.as_ref().map_or(0, |u| u.foreign);
        }
    }
    let mut lines = Vec::new();
    if closed > 0 {
        lines.push(match measured {
            0 => format!(
                "the netserver closed {closed} data connection{} that {} not this test's, before the measurement began: the figures are unaffected",
                plural(closed),
                if closed == 1 { "was" } else { "were" }
            ),
            m => format!(
                "the netserver closed {closed} data connection{} that {} not this test's, {m} during the measurement: they took the netserver's time, so the figures may be low",
                plural(closed),
                if closed == 1 { "was" } else { "were" }
            ),
        });
    }
    if datagrams > 0 {
        lines.push(format!(
            "{datagrams} datagram{} from elsewhere reached the test's data socket during the test: not counted, but they took room in its receive buffer, so the loss may be higher than the test alone would see",
            plural(datagrams)
        ));
    }
    (lines, measured > 0 || datagrams > 0)
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Each iteration's measurement and figures.
type Runs = Vec<(Measurement, Figures)>;

/// Run the test once, or, with `-I`/`-i`, until confident. netperf 2.7's
/// TCP_CC shows `-I` in its banner but always runs once.
fn iterations(
    plan: &Plan,
    t: &Test,
    source: &mut dyn Source,
    ctx: &Context,
    reporters: &mut [Box<dyn Reporter>],
) -> Result<(Runs, Option<Verdict>)> {
    let mut one = |i: u32| -> Result<(Measurement, Figures)> {
        for o in &ctx.observers {
            o.iteration_begins(i);
        }
        let m = source.measure(plan, ctx)?;
        let f = Figures::of(t.units, t.kind(), &m);
        trace_iteration(i as usize, &f);
        for o in &ctx.observers {
            o.iteration_ends(i, &f);
        }
        Ok((m, f))
    };
    let confidence = plan
        .confidence
        .as_ref()
        .filter(|_| plan.name != TestName::TcpCc);
    let Some(c) = confidence else {
        return Ok((vec![one(1)?], None));
    };
    let (runs, verdict) = confidence::iterate(
        c,
        |i| {
            let (m, f) = one(i)?;
            let sample = Sample {
                result: f.result,
                local_cpu: f.local_cpu,
                remote_cpu: f.remote_cpu,
            };
            Ok((sample, (m, f)))
        },
        |i, _, (_, f)| {
            for r in reporters.iter_mut() {
                r.iteration(t, i, f);
            }
        },
    )?;
    Ok((runs.into_iter().map(|(_, r)| r).collect(), Some(verdict)))
}

/// netperf 2.7's `-d` line of an iteration's figures.
fn trace_iteration(itr: usize, f: &Figures) {
    debug::iteration(
        itr,
        f.elapsed,
        f.result,
        [f.local_cpu, f.remote_cpu],
        [f.local_sd, f.remote_sd],
    );
}

/// LOC_CPU, REM_CPU and UUID: one figure, with no newline, as netperf 2.7.
fn info(plan: &Plan, d: &mut control::Control) -> Result<String> {
    let (cpus, rate, side) = match plan.name {
        TestName::LocCpu => (engine::cpu::count(), engine::cpu::meter_rate(), "local"),
        TestName::RemCpu => {
            d.calibrate()?;
            let (n, r) = d.server_cpu();
            if n == 0 {
                anyhow::bail!(
                    "-t REM_CPU: the {} does not tell its CPUs or its CPU meter's rate",
                    d.caps().software
                );
            }
            (n, r, "remote")
        }
        _ => return Ok(plan.uuid.clone().unwrap_or_else(new_uuid)),
    };
    let mut s = units::c_g(f64::from(rate), 0, 6);
    if plan.verbosity > 1 {
        if cpus == 1 {
            s.push_str(&format!("\nThere is 1 {side} cpu\n"));
        } else {
            s.push_str(&format!("\nThere are {cpus} {side} cpus\n"));
        }
    }
    Ok(s)
}

/// What a server that reports counters only (netperf 2.7's netserver, an
/// iperf3 server: `who`) cannot tell us, for what this run would show: one
/// line each, so that nothing reads as a figure it is not.
fn reports_less(plan: &Plan, extras: bool, who: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let udp_receiver = matches!(plan.test, proto::TestKind::UdpStream);
    if udp_receiver && (extras || plan.json) {
        notes.push(format!(
            "the {who} does not say where UDP datagrams were lost (socket drops, reordering, duplicates): the loss line says what it can"
        ));
    }
    if plan.json {
        notes.push(format!(
            "the {who} reports counters, CPU and retransmissions only: the JSON's remote TCP_INFO and UDP receive details are empty or partial"
        ));
    }
    notes
}

/// A random (version 4) UUID for the UUID selector.
pub fn new_uuid() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..].concat()
    )
}

fn read_fill(plan: &Plan) -> Result<Vec<u8>> {
    let Some(path) = &plan.fill_file else {
        return Ok(Vec::new());
    };
    let mut data = Vec::new();
    File::open(path)
        .and_then(|f| f.take(MAX_FILL).read_to_end(&mut data))
        .with_context(|| format!("-F {}", path.display()))?;
    if data.is_empty() {
        anyhow::bail!("-F {}: the file is empty", path.display());
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::TestKind;

    use crate::plan::TestName;

    fn tcp_rr() -> Plan {
        let mut p = Plan::new("netperf -t TCP_RR".into());
        (p.name, p.test) = (TestName::TcpRr, TestKind::TcpRr);
        p
    }

    #[test]
    fn transactions_are_timed_only_for_an_output_that_shows_latency() {
        let p = tcp_rr();
        assert!(!times_transactions(&p, false, false));
        assert!(times_transactions(&p, true, false));
        assert!(times_transactions(&p, false, true));
        let json = Plan {
            json: true,
            ..tcp_rr()
        };
        assert!(times_transactions(&json, false, false));
        let quiet = Plan {
            latency: false,
            ..tcp_rr()
        };
        assert!(!times_transactions(&quiet, true, true));
    }
}
