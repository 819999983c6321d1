//! `-- --under-load N[,up|down|both]`: latency under load in one run, as
//! flent's RRUL takes it with several processes. The request/response
//! test runs first alone for a short idle phase, then again while N bulk
//! TCP flows (TCP_STREAM up, TCP_MAERTS down, or both) load the same path
//! to the same netserver on a control connection of their own; the load
//! starts 2 s before the loaded phase (by then a loss-based TCP has filled
//! the bottleneck's queue after its slow start's losses) and ends 2 s after
//! it, so that every loaded transaction crosses a loaded path.

use std::{thread, time::Duration};

use anyhow::{Context as _, Result, anyhow};

use crate::{
    cli::{self, Invocation, Length, Plan, UnderLoad},
    control::{self, Control},
    family::{self, Context},
    report::{Figures, LoadFigures, Measurement, Scenario},
};

/// How long the load runs before the loaded phase, and after it.
const RAMP: Duration = Duration::from_secs(2);

/// The idle phase's length: a fifth of the test, 1 to 5 s.
fn idle_secs(plan: &Plan) -> u64 {
    match plan.length {
        Length::Seconds(s) => (s / 5).clamp(1, 5),
        Length::Count(_) => 1,
    }
}

/// How long a load runs: seconds before the interval it is measured over,
/// the interval, and after it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub before: u64,
    pub during: u64,
    pub after: u64,
}

/// One direction's load: TCP_STREAM or TCP_MAERTS flows against the
/// netserver at `d`'s peer, as its own netperf would run them, for `span`:
/// measured over its middle (`--warmup`, `--cooldown`) by a netserver that
/// can, else over all of it. With `interim` (seconds), TCP_INFO of its
/// sending end is kept that often (unprinted).
pub(crate) fn load_plan(
    plan: &Plan,
    d: &Control,
    test: &str,
    flows: u32,
    span: Span,
    interim: Option<f64>,
) -> Result<Plan> {
    let windowed = d.caps().window && (span.before > 0 || span.after > 0);
    let secs = if windowed {
        span.during
    } else {
        span.before + span.during + span.after
    };
    let peer = d.peer();
    let mut words: Vec<String> = [
        "-H",
        &peer.ip().to_string(),
        "-p",
        &peer.port().to_string(),
        "-t",
        test,
        "-l",
        &secs.to_string(),
        "-P",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(every) = interim {
        words.push("-D".into());
        words.push(format!("{every}"));
    }
    words.extend(["--".to_string(), "--flows".into(), flows.to_string()]);
    if windowed {
        words.extend([
            "--warmup".to_string(),
            span.before.to_string(),
            "--cooldown".into(),
            span.after.to_string(),
        ]);
    }
    // the test's congestion control (-K) is its load's too
    if plan.local.cong_control.is_some() || plan.remote.cong_control.is_some() {
        words.push("-K".into());
        words.push(format!(
            "{},{}",
            plan.local.cong_control.as_deref().unwrap_or(""),
            plan.remote.cong_control.as_deref().unwrap_or("")
        ));
    }
    let Invocation::Run(mut p) = cli::parse(&words).map_err(|e| anyhow!("--under-load: {e}"))?
    else {
        return Err(anyhow!("--under-load: the load's plan did not parse"));
    };
    p.auth = plan.auth.clone();
    p.dialect = plan.dialect;
    Ok(*p)
}

/// What one direction's load did.
#[derive(Debug)]
pub(crate) struct Load {
    /// Its goodput, 10^6 bits a second.
    pub mbps: f64,
    /// Its sending end's round-trip times (TCP_INFO, microseconds) at
    /// every interim sample of every flow, when its plan keeps them, with
    /// when each was read (Unix seconds).
    pub rtt_at: Vec<(f64, u32)>,
}

/// Run the load of one plan on a control connection of its own.
pub(crate) fn run_load(lp: &Plan) -> Result<Load> {
    run_load_in(lp, Context::new(lp, Vec::new(), Vec::new()))
}

/// [`run_load`] in a context made for it (one its runner stops, or whose
/// counters it reads as it runs).
pub(crate) fn run_load_in(lp: &Plan, ctx: Context) -> Result<Load> {
    let began = unix_now();
    let mut conn = control::connect(lp).context("the load's control connection")?;
    let m = family::run_once(lp, &mut conn.control, &ctx).context("the load")?;
    conn.control.bye();
    // the sending end's view: ours up, the netserver's down (its clock
    // counted from its side's start, a moment after ours)
    let rtt_at = if lp.test == proto::TestKind::TcpMaerts {
        m.remote_interim
            .iter()
            .flat_map(|r| {
                let at = began + r.elapsed_ns as f64 / 1e9;
                r.tcp.iter().map(move |t| (at, t.rtt_us))
            })
            .collect()
    } else {
        m.interim
            .iter()
            .flat_map(|s| s.tcp.iter().map(|t| (s.ending, t.rtt_us)))
            .collect()
    };
    Ok(Load {
        mbps: Figures::of(lp.units(), lp.test, &m).result,
        rtt_at,
    })
}

/// The test idle, then under load: the loaded measurement, carrying the
/// idle phase's and the load's figures.
pub fn run(plan: &Plan, load: UnderLoad, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let Length::Seconds(secs) = plan.length else {
        return Err(anyhow!("--under-load: a timed test (-l seconds)"));
    };
    let mut idle_plan = plan.clone();
    idle_plan.length = Length::Seconds(idle_secs(plan));
    let idle = family::run_once(&idle_plan, d, ctx)?;
    // measured while the test is, where the netserver can
    let span = Span {
        before: RAMP.as_secs(),
        during: secs,
        after: RAMP.as_secs(),
    };
    let plans = load_plans(plan, d, load, span, None)?;
    let (m, loads) = beside(&plans, RAMP, || family::run_once(plan, d, ctx));
    let mut m = m?;
    let done = gather(loads).map_err(|e| anyhow!("--under-load: {e:#}"))?;
    // the idle phase's interim samples first, as they were taken
    m.interim.splice(0..0, idle.interim);
    m.scenario = Some(Scenario::UnderLoad(LoadFigures {
        idle: idle.latency,
        idle_rate: idle.local.transactions as f64 / idle.elapsed.max(1e-9),
        flows: load.flows,
        up_mbps: done.up_mbps,
        down_mbps: done.down_mbps,
    }));
    Ok(m)
}

/// The directions a load runs: (up, the test that loads it).
pub(crate) fn directions(load: UnderLoad) -> Vec<(bool, &'static str)> {
    [(true, "TCP_STREAM"), (false, "TCP_MAERTS")]
        .into_iter()
        .filter(|(up, _)| if *up { load.up } else { load.down })
        .collect()
}

/// A plan a direction the load runs, `load.flows` flows each.
pub(crate) fn load_plans(
    plan: &Plan,
    d: &Control,
    load: UnderLoad,
    span: Span,
    interim: Option<f64>,
) -> Result<Vec<(bool, Plan)>> {
    directions(load)
        .into_iter()
        .map(|(up, test)| Ok((up, load_plan(plan, d, test, load.flows, span, interim)?)))
        .collect()
}

/// Run `during` while the loads of `plans` run, starting it `ahead` after
/// them: what it returned, and each load's outcome once it ended.
pub(crate) fn beside<T>(
    plans: &[(bool, Plan)],
    ahead: Duration,
    during: impl FnOnce() -> T,
) -> (T, Vec<(bool, Result<Load>)>) {
    thread::scope(|sc| {
        let handles: Vec<_> = plans
            .iter()
            .map(|(up, lp)| (*up, sc.spawn(move || run_load(lp))))
            .collect();
        thread::sleep(ahead);
        let t = during();
        let loads = handles
            .into_iter()
            .map(|(up, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("the load's thread failed")));
                (up, r)
            })
            .collect();
        (t, loads)
    })
}

/// What the loads did, each way: their goodput and their sending ends'
/// round trips (the first failure, if one failed).
pub(crate) struct Gathered {
    pub up_mbps: Option<f64>,
    pub down_mbps: Option<f64>,
    pub rtt_at: Vec<(f64, u32)>,
}

pub(crate) fn gather(loads: Vec<(bool, Result<Load>)>) -> Result<Gathered> {
    let mut g = Gathered {
        up_mbps: None,
        down_mbps: None,
        rtt_at: Vec::new(),
    };
    for (up, r) in loads {
        let l = r?;
        g.rtt_at.extend(l.rtt_at);
        if up {
            g.up_mbps = Some(l.mbps);
        } else {
            g.down_mbps = Some(l.mbps);
        }
    }
    Ok(g)
}

/// Now, in seconds since the Unix epoch (when samples were read).
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
