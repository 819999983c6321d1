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

use proto::TestKind;

use crate::{
    control::{self, Control},
    family::{self, Context},
    one_way,
    plan::{Length, Plan, TestName, UnderLoad},
    report::{
        Figures, LoadFigures, Measurement, Scenario,
        bloat::{self, FlowBloat},
        one_way::Spans,
    },
};
use engine::clock;

/// How often the load flows' sending ends read their TCP_INFO (their
/// bloat), seconds.
const BLOAT_EVERY: f64 = 0.1;

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
pub struct Span {
    pub before: u64,
    pub during: u64,
    pub after: u64,
}

/// One direction's load: TCP_STREAM or TCP_MAERTS flows against the
/// netserver at `peer`, as its own netperf would run them, for `span`:
/// measured over its middle (`--warmup`, `--cooldown`) by a netserver that
/// can (`window`), else over all of it. With `interim` (seconds), TCP_INFO of its
/// sending end is kept that often (unprinted). The test's congestion
/// control (`-K`), key and dialect are its load's too.
pub fn load_plan(
    plan: &Plan,
    (peer, window): (std::net::SocketAddr, bool),
    test: TestName,
    flows: u32,
    span: Span,
    interim: Option<f64>,
) -> Plan {
    let windowed = window && (span.before > 0 || span.after > 0);
    let ms = |s: u64| u32::try_from(s * 1000).unwrap_or(u32::MAX);
    let mut p = Plan::new(format!("netperf -t {} (a load)", test.name()));
    (p.name, p.test) = match test {
        TestName::TcpMaerts => (test, TestKind::TcpMaerts),
        _ => (TestName::TcpStream, TestKind::TcpStream),
    };
    p.host = Some(peer.ip().to_string());
    p.port = peer.port();
    p.length = Length::Seconds(if windowed {
        span.during
    } else {
        span.before + span.during + span.after
    });
    p.headers = false;
    p.interim = interim.map(|every| (every, false));
    p.flows = flows;
    p.window = windowed.then(|| proto::Window {
        warmup_ms: ms(span.before),
        cooldown_ms: ms(span.after),
    });
    p.local.cong_control.clone_from(&plan.local.cong_control);
    p.remote.cong_control.clone_from(&plan.remote.cong_control);
    p.auth.clone_from(&plan.auth);
    p.dialect = plan.dialect;
    // --ecn: the load's TCP flows' ECN too (classic: ECT(0))
    p.ecn = plan.ecn.map(|_| proto::ecn::Codepoint::Ect0);
    p
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
    /// Each flow's TCP_INFO readings (when, what), for its bloat.
    pub readings: Vec<Readings>,
    /// Its flows' ECN (`--ecn`).
    pub ecn: Option<crate::report::ecn::TcpWay>,
}

/// One load flow's TCP_INFO readings at its sending end: up (we send),
/// its number, and (Unix seconds, TCP_INFO) each time.
#[derive(Debug)]
pub(crate) struct Readings {
    pub up: bool,
    pub flow: usize,
    pub at: Vec<(f64, proto::TcpSample)>,
}

impl Readings {
    /// The flows' bloat, against the path's idle round trip.
    pub fn bloat(all: &[Readings], idle_rtt_us: Option<u32>) -> Vec<FlowBloat> {
        all.iter()
            .filter_map(|r| bloat::of_flow(r.up, r.flow, &r.at, idle_rtt_us))
            .collect()
    }
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
    let up = lp.test != proto::TestKind::TcpMaerts;
    let readings: Vec<(f64, &[proto::TcpSample])> = if up {
        m.interim
            .iter()
            .map(|s| (s.ending, s.tcp.as_slice()))
            .collect()
    } else {
        m.remote_interim
            .iter()
            .map(|r| (began + r.elapsed_ns as f64 / 1e9, r.tcp.as_slice()))
            .collect()
    };
    let rtt_at = readings
        .iter()
        .flat_map(|(at, tcp)| tcp.iter().map(move |t| (*at, t.rtt_us)))
        .collect();
    let flows = readings.iter().map(|(_, t)| t.len()).max().unwrap_or(0);
    let each = (0..flows)
        .map(|i| Readings {
            up,
            flow: i,
            at: readings
                .iter()
                .filter_map(|(at, tcp)| Some((*at, *tcp.get(i)?)))
                .collect(),
        })
        .collect();
    let ecn = lp
        .ecn
        .and_then(|mark| crate::report::ecn::EcnFigures::of(lp.test, mark, &m).tcp);
    Ok(Load {
        mbps: Figures::of(lp.units(), lp.test, &m).result,
        rtt_at,
        readings: each,
        ecn,
    })
}

/// The test idle, then under load: the loaded measurement, carrying the
/// idle phase's and the load's figures, and the queueing delay each way
/// where probes ran beside it.
pub fn run(plan: &Plan, load: UnderLoad, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let Length::Seconds(secs) = plan.length else {
        return Err(anyhow!("--under-load: a timed test (-l seconds)"));
    };
    let mut idle_plan = plan.clone();
    idle_plan.length = Length::Seconds(idle_secs(plan));
    // measured while the test is, where the netserver can
    let span = Span {
        before: RAMP.as_secs(),
        during: secs,
        after: RAMP.as_secs(),
    };
    let plans = load_plans(plan, d, load, span, Some(BLOAT_EVERY));
    let phases_secs = idle_secs(plan) + span.before + secs + span.after;
    let (phases, probed) = one_way::beside(plan, one_way::at(d), phases_secs, || -> Result<_> {
        let idle_from = clock::now_ns();
        let idle = family::run_once(&idle_plan, d, ctx)?;
        let idle_span = (idle_from, clock::now_ns());
        let (m, loads) = beside(&plans, RAMP, || {
            let from = clock::now_ns();
            family::run_once(plan, d, ctx).map(|m| (m, (from, clock::now_ns())))
        });
        Ok((idle, idle_span, m, loads))
    })?;
    let (idle, idle_span, m, loads) = phases?;
    let (mut m, loaded_span) = m?;
    let done = gather(loads).map_err(|e| anyhow!("--under-load: {e:#}"))?;
    // the idle phase's interim samples first, as they were taken
    m.interim.splice(0..0, idle.interim);
    m.one_way = probed.and_then(|p| {
        p.analyse(Spans {
            idle: Some(idle_span),
            loaded: Some(loaded_span),
        })
    });
    m.scenario = Some(Scenario::UnderLoad(LoadFigures {
        idle: idle.latency,
        idle_rate: idle.local.transactions as f64 / idle.elapsed.max(1e-9),
        flows: load.flows,
        up_mbps: done.up_mbps,
        down_mbps: done.down_mbps,
        ecn: done.ecn,
        bloat: Readings::bloat(
            &done.readings,
            idle.latency
                .as_ref()
                .map(|l| u32::try_from(l.p50 / 1000).unwrap_or(u32::MAX)),
        ),
    }));
    Ok(m)
}

/// The directions a load runs: (up, the test that loads it).
pub(crate) fn directions(load: UnderLoad) -> Vec<(bool, TestName)> {
    [(true, TestName::TcpStream), (false, TestName::TcpMaerts)]
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
) -> Vec<(bool, Plan)> {
    directions(load)
        .into_iter()
        .map(|(up, test)| (up, load_plan(plan, at(d), test, load.flows, span, interim)))
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
    pub readings: Vec<Readings>,
    /// Each direction's load flows' ECN (`--ecn`): up, down.
    pub ecn: (
        Option<crate::report::ecn::TcpWay>,
        Option<crate::report::ecn::TcpWay>,
    ),
}

pub(crate) fn gather(loads: Vec<(bool, Result<Load>)>) -> Result<Gathered> {
    let mut g = Gathered {
        up_mbps: None,
        down_mbps: None,
        rtt_at: Vec::new(),
        readings: Vec::new(),
        ecn: (None, None),
    };
    for (up, r) in loads {
        let l = r?;
        g.rtt_at.extend(l.rtt_at);
        g.readings.extend(l.readings);
        if up {
            g.up_mbps = Some(l.mbps);
            g.ecn.0 = l.ecn;
        } else {
            g.down_mbps = Some(l.mbps);
            g.ecn.1 = l.ecn;
        }
    }
    Ok(g)
}

/// Where a load goes, and whether its netserver keeps a window.
pub(crate) fn at(d: &Control) -> (std::net::SocketAddr, bool) {
    (d.peer(), d.caps().window)
}

/// Now, in seconds since the Unix epoch (when samples were read).
pub(crate) fn unix_now() -> f64 {
    clock::unix_secs()
}
