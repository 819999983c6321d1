//! One netperf invocation: connect, run the test (once, or until confident),
//! print it as asked (classic tables, selectors, or JSON).

use std::{
    fs::File,
    io::{self, IsTerminal, Read, Write},
    sync::Arc,
};

use anyhow::{Context as _, Result, anyhow};

use crate::{
    cli::{Plan, SelectorStyle, TestName},
    confidence::{self, Sample, Verdict},
    control, debug,
    events::Events,
    family::{self, Context},
    interim,
    output::{Endpoints, StdoutClosed, asked::Asked, classic, json, selectors, units},
    plot, progress,
    report::{Figures, Measurement, Observer},
};

/// Write to stdout; a closed stdout is [`StdoutClosed`], not an I/O error
/// of the test.
fn emit(out: &mut impl Write, bytes: &[u8]) -> Result<()> {
    out.write_all(bytes).map_err(|e| match e.kind() {
        io::ErrorKind::BrokenPipe => anyhow::Error::new(StdoutClosed),
        _ => anyhow::Error::new(e),
    })
}

/// Most bytes read from a `-F` fill file.
const MAX_FILL: u64 = 16 * 1024 * 1024;

/// Whether our own lines (UDP loss, latency percentiles, the confidence
/// summary, each iteration) are printed: on a terminal, or at `-v 3` and
/// above. Piped output at `-v 0/1/2` has netperf 2.7's lines exactly.
pub fn extras(plan: &Plan) -> bool {
    plan.verbosity >= 3 || io::stdout().is_terminal()
}

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

pub fn run(plan: &Plan) -> Result<Outcome> {
    // netperf 2.7 prints these as it reads its options.
    let mut out = io::stdout();
    for n in &plan.notices {
        emit(&mut out, format!("{n}\n").as_bytes())?;
    }
    for w in &plan.warnings {
        eprintln!("netperf: {w}");
    }
    let stream = plan.json_stream.then(|| {
        Arc::new(Events::new(
            crate::output::Out::stdout(),
            format!("{}/s", plan.units().label()),
        ))
    });
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    if let Some(e) = &stream {
        observers.push(e.clone());
    }
    if let Some(l) = interim::Lines::of(plan, &crate::output::Out::stdout()) {
        observers.push(Arc::new(l));
    }
    if let Some(p) = progress::Spec::of(plan) {
        observers.push(Arc::new(progress::Progress::new(p)));
    }
    let mut ctx = Context::new(plan, read_fill(plan)?, observers);
    let mut conn = control::connect(plan)?;
    let embedded = conn.embedded.is_some();
    let d = &mut conn.control;
    debug::control(plan, &d.peer());
    if plan.name.is_info() {
        let text = info(plan, d)?;
        emit(&mut out, text.as_bytes())?;
        out.flush().map_err(|_| StdoutClosed)?;
        d.bye();
        return Ok(Outcome::Clean);
    }
    // What the output is told of the request, taken once.
    let asked = Asked::of(plan);
    let endpoints = Endpoints::new(&asked, d.peer());
    family::preflight(plan, d)?;
    // A selection file that cannot be read fails before the test, not after.
    // OMNI without -o/-O/-k prints its default selection in columns.
    let selection = match (&plan.selection, plan.selector_output()) {
        (Some(s), _) => Some((
            s.style,
            selectors::resolve(&asked, s.spec.as_deref())
                .map_err(|e| anyhow!("-- -o/-O/-k: {e}"))?,
        )),
        (None, true) => Some((SelectorStyle::Columns, selectors::default_for(&asked))),
        (None, false) => None,
    };
    // netperf 2.7 times each call of a stream test when a latency selector
    // is asked for.
    if let Some((_, sel)) = &selection {
        ctx.stats |= sel.wants_latency();
    }
    // netperf 2.7 times each transaction only when its statistics are
    // wanted (`-j`, a latency selector); so do we: for those, JSON, and
    // our latency lines (`-v 3`, a terminal).
    ctx.timing = times_transactions(plan, ctx.stats, extras(plan));
    if plan.verbosity > 1
        && let Some((_, sel)) = &selection
    {
        for name in sel.unknown() {
            eprintln!("netperf: warning: unknown output selector '{name}' ignored");
        }
    }
    // stdout is not held locked: interim results print from their own
    // thread while the test runs.
    let extras = extras(plan);
    if !d.caps().details {
        for note in reports_less(plan, extras) {
            eprintln!("netperf: {note}");
        }
    }
    debug::data_endpoints(plan, &d.peer(), plan.test.protocol());
    if let Some(events) = &stream {
        events.start(
            plan.name.name(),
            &plan.command_line,
            plan.host_name(),
            &d.caps().software,
        );
    }
    if plan.headers && !plan.json {
        emit(&mut out, classic::banner(&asked, &endpoints).as_bytes())?;
        out.flush().map_err(|_| StdoutClosed)?;
    }

    let (runs, verdict) = iterations(plan, &asked, d, &ctx, &mut out, extras)?;
    let figures = match runs.as_slice() {
        [(_, f)] => f.clone(),
        _ => Figures::mean(&runs.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>()),
    };
    let Some((last, _)) = runs.last() else {
        anyhow::bail!("no iteration ran");
    };

    // the --json document: printed, streamed, or drawn
    let document = (plan.json || plan.plot.is_some())
        .then(|| {
            json::render(&json::Report {
                asked: &asked,
                control_local: d.local(),
                control_remote: d.peer(),
                server_software: &d.caps().software,
                embedded,
                runs: &runs,
                figures: &figures,
                verdict: verdict.as_ref(),
            })
        })
        .transpose()?;
    if let (Some(path), Some(doc)) = (&plan.plot, &document) {
        plot::draw_document(doc, path)?;
    }
    if let (Some(events), Some(doc)) = (&stream, &document) {
        events.end(serde_json::from_str(doc)?);
    } else if let (true, Some(doc)) = (plan.json, &document) {
        emit(&mut out, doc.as_bytes())?;
    } else if let Some((style, sel)) = &selection {
        let uuid = plan.uuid.clone().unwrap_or_else(new_uuid);
        let c = selectors::Ctx {
            asked: &asked,
            m: last,
            f: &figures,
            confidence: verdict.as_ref().map(|v| (v, runs.len())),
            uuid: &uuid,
        };
        emit(&mut out, selectors::print(*style, sel, &c).as_bytes())?;
        if let (Some(v), true) = (&verdict, extras) {
            emit(
                &mut out,
                classic::confidence_line(&asked, runs.len(), v).as_bytes(),
            )?;
        }
    } else {
        if let Some(v) = &verdict
            && !v.confident
        {
            emit(&mut out, classic::confidence_warning(v).as_bytes())?;
        }
        emit(
            &mut out,
            classic::table(&asked, last, &figures, extras).as_bytes(),
        )?;
        // ours, asked for by an option of ours
        emit(
            &mut out,
            classic::under_load_lines(last, &figures).as_bytes(),
        )?;
        if let (Some(v), true) = (&verdict, extras) {
            emit(
                &mut out,
                classic::confidence_line(&asked, runs.len(), v).as_bytes(),
            )?;
        }
    }
    out.flush().map_err(|_| StdoutClosed)?;
    debug::hp(|| "shutdown_control: shutdown of control connection requested.".into());
    d.bye();
    let (lines, affected) = foreign_traffic(&runs);
    for l in lines {
        eprintln!("netperf: warning: {l}");
    }
    for l in path_notes(&asked, &runs) {
        eprintln!("netperf: {l}");
    }
    Ok(if affected {
        Outcome::ForeignTraffic
    } else {
        Outcome::Clean
    })
}

/// What the receive path did that a reader of the figures must know, on
/// stderr whatever the output (scripts read stdout): a discarding receiver
/// delivered nothing; a mapping receiver that could map little copied,
/// and why.
fn path_notes(asked: &Asked, runs: &Runs) -> Vec<String> {
    let (mut who, mut mapped, mut received) = ("", 0u64, 0u64);
    for (m, _) in runs {
        let side;
        (who, side) = classic::receiver(asked, m);
        mapped += side.rx.mapped_bytes;
        received += side.bytes_received;
    }
    match asked.rx {
        proto::RxPath::Discard => vec![format!(
            "--rx-discard: {who}'s kernel dropped the data uncopied (MSG_TRUNC); nothing reached user space: the figure is the stack's ceiling, not a delivery rate"
        )],
        proto::RxPath::ZeroCopy if received > 0 && mapped * 2 < received => vec![format!(
            "--rx-zerocopy: {who} could map only {:.1}% of the {received} bytes it received and copied the rest: the kernel maps whole pages only, so each segment must carry whole pages (an MSS that is a multiple of {}: on loopback an MTU of 61512 with IPv6 or 61492 with IPv4, or -- -G {}), arriving in pages of their own (on loopback, send with --zerocopy: a plain send's pages are shared and cannot be mapped)",
            classic::share(mapped, received),
            engine::sys::page_size(),
            engine::sys::page_size() + 12,
        )],
        _ => Vec::new(),
    }
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
    asked: &Asked,
    d: &mut control::Control,
    ctx: &Context,
    out: &mut impl Write,
    extras: bool,
) -> Result<(Runs, Option<Verdict>)> {
    let confidence = plan
        .confidence
        .as_ref()
        .filter(|_| plan.name != TestName::TcpCc);
    let Some(c) = confidence else {
        begin_iteration(ctx, 1);
        let m = measure(plan, d, ctx)?;
        let f = Figures::of(asked.units(), asked.test, &m);
        trace_iteration(1, &f);
        end_iteration(ctx, asked, 1, &f);
        return Ok((vec![(m, f)], None));
    };
    let (runs, verdict) = confidence::iterate(
        c,
        |i| {
            begin_iteration(ctx, i);
            let m = measure(plan, d, ctx)?;
            let f = Figures::of(asked.units(), asked.test, &m);
            trace_iteration(i as usize, &f);
            end_iteration(ctx, asked, i, &f);
            let sample = Sample {
                result: f.result,
                local_cpu: f.local_cpu,
                remote_cpu: f.remote_cpu,
            };
            Ok((sample, (m, f)))
        },
        |i, _, (_, f)| {
            // netperf 2.7 prints nothing per iteration: ours go to stdout
            // with our other lines (a terminal, -v 3), else to stderr when
            // that is a terminal; --json keeps them.
            if plan.json {
                return;
            }
            let line = classic::iteration_line(asked, i, f);
            if extras {
                let _ = emit(out, line.as_bytes());
                let _ = out.flush();
            } else if io::stderr().is_terminal() {
                eprint!("{line}");
            }
        },
    )?;
    Ok((runs.into_iter().map(|(_, r)| r).collect(), Some(verdict)))
}

/// One iteration: the plan's test, alone, under load, or as the
/// responsiveness test's phases.
fn measure(plan: &Plan, d: &mut control::Control, ctx: &Context) -> Result<Measurement> {
    match (plan.under_load, plan.rpm) {
        (Some(load), _) => crate::under_load::run(plan, load, d, ctx),
        (None, Some(load)) => crate::rpm::run(plan, load, d, ctx),
        (None, None) => family::run_once(plan, d, ctx),
    }
}

/// Iteration `i` (from 1) begins: the observers are told.
fn begin_iteration(ctx: &Context, i: u32) {
    for o in &ctx.observers {
        o.iteration_begins(i);
    }
}

/// Iteration `i` is over: its figures to the observers.
fn end_iteration(ctx: &Context, _asked: &Asked, i: u32, f: &Figures) {
    for o in &ctx.observers {
        o.iteration_ends(i, f);
    }
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

/// What a netserver that reports counters only (netperf 2.7's) cannot tell
/// us, for what this run would show: one line each, so that nothing reads
/// as a figure it is not.
fn reports_less(plan: &Plan, extras: bool) -> Vec<&'static str> {
    let mut notes = Vec::new();
    let udp_receiver = matches!(plan.test, proto::TestKind::UdpStream);
    if udp_receiver && (extras || plan.json) {
        notes.push(
            "netperf 2.7's netserver does not say where UDP datagrams were lost (socket drops, reordering, duplicates): that line is left out",
        );
    }
    if plan.json {
        notes.push(
            "netperf 2.7's netserver reports counters, buffer sizes, CPU and retransmissions only: the JSON's remote TCP_INFO and UDP receive details are empty",
        );
    }
    notes
}

/// A random (version 4) UUID for the UUID selector.
fn new_uuid() -> String {
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
    use crate::cli::test_plan;

    #[test]
    fn transactions_are_timed_only_for_an_output_that_shows_latency() {
        let p = test_plan(&["-t", "TCP_RR"]);
        assert!(!times_transactions(&p, false, false));
        assert!(times_transactions(&p, true, false));
        assert!(times_transactions(&p, false, true));
        assert!(times_transactions(
            &test_plan(&["-t", "TCP_RR", "--json"]),
            false,
            false
        ));
        let quiet = test_plan(&["-t", "TCP_RR", "--", "--no-latency"]);
        assert!(!times_transactions(&quiet, true, true));
    }
}
