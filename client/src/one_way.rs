//! One-way delay probes beside a test: `--under-load`, `-t RPM`, and
//! TCP_RR/UDP_RR with `--one-way`. A `UDP_STAMP` test runs on a control
//! connection of its own to the same netserver, a probe every
//! [`EVERY`], from before the test's first phase until its last ends;
//! `report::one_way` turns the probes' times into queueing delay each
//! way. Taken by default (for `--under-load`, `-t RPM`, and a timed
//! TCP_RR or UDP_RR with `-D`) where the netserver answers probes;
//! `--one-way` asks for it, and a netserver that cannot (netperf 2.7's)
//! is then refused by name.

use std::{
    net::SocketAddr,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow};
use proto::{Capabilities, Feature, TestKind, stamp::Stamps};

use crate::{
    control::{self, Control},
    family::{
        self, Context, lifecycle,
        stamp::{Stamp, Stamped},
    },
    output::json_types::Document,
    plan::{Length, OneWayAsk, Plan, TestName},
    report::{
        Measurement,
        one_way::{self, Observed, OneWay, Spans},
    },
};
use engine::clock;

/// A probe every this: 100 a second, 6.4 kB/s each way.
pub const EVERY: Duration = Duration::from_millis(10);
/// Seconds the probes may run past the phases' own (their setup and
/// results): they are halted when the phases end.
pub const PROBE_SLACK: u64 = 30;
/// How long the first answer may take before the test starts anyway.
const FIRST_ANSWER: Duration = Duration::from_secs(2);

/// Whether the plan's test runs with probes beside it against a
/// netserver of `caps`: an error when asked for and it cannot.
pub fn wanted(plan: &Plan, caps: &Capabilities) -> Result<bool> {
    let lacks = caps.lacks(Feature::Stamps);
    match plan.one_way {
        OneWayAsk::Asked => match lacks {
            Some(why) => Err(anyhow!("{why}")),
            None => Ok(true),
        },
        OneWayAsk::Default => Ok(lacks.is_none()
            && (plan.under_load.is_some()
                || plan.name == TestName::Rpm
                || (plan.interim.is_some()
                    && matches!(plan.name, TestName::TcpRr | TestName::UdpRr)
                    && matches!(plan.length, Length::Seconds(_))
                    && plan.confidence.is_none()))),
    }
}

/// The probes' own test: UDP_STAMP to the netserver at `d`'s address, with
/// the plan's key and address family, for at most `secs`.
fn probe_plan(plan: &Plan, peer: SocketAddr, secs: u64) -> Plan {
    let mut p = Plan::new(format!("netperf -t {} (one-way probes)", plan.name.name()));
    p.name = TestName::UdpRr;
    p.test = TestKind::UdpStamp;
    p.host = Some(peer.ip().to_string());
    p.port = peer.port();
    p.length = Length::Seconds(secs);
    p.headers = false;
    p.request_size = proto::stamp::LEN as u32;
    p.response_size = proto::stamp::LEN as u32;
    p.auth.clone_from(&plan.auth);
    p.dialect = plan.dialect;
    p
}

/// What the probes brought back.
#[derive(Debug, Default)]
pub struct Probed {
    pub stamps: Vec<Stamps>,
    pub sent: u64,
    /// One reading of both our clocks, (Unix seconds, monotonic ns), to
    /// line probes up with wall-clock times.
    pub anchor: (f64, u64),
    /// `--observer`: its host, and what its probes saw, each
    /// `(Unix seconds, up us, down us)`.
    pub observer: Option<Seen>,
}

/// An observer, and what its probes saw: `(Unix seconds, up us, down
/// us)` each.
pub type Seen = (String, Vec<(f64, f64, f64)>);

impl Probed {
    /// Queueing delay each way over `spans`.
    pub fn analyse(&self, spans: Spans) -> Option<OneWay> {
        let mut w = one_way::analyse(&self.stamps, spans, self.sent)?;
        let first = self
            .stamps
            .iter()
            .map(|s| s.t1)
            .min()
            .unwrap_or(self.anchor.1);
        w.started_unix = self.anchor.0 - (self.anchor.1 as f64 - first as f64) / 1e9;
        w.observer = self
            .observer
            .as_ref()
            .map(|(host, seen)| Observed::by_our_phases(host, seen, spans, self.anchor));
        Some(w)
    }
}

/// Where probes go: the test's netserver (its address as connected, and
/// what it can do).
pub fn at(d: &Control) -> (SocketAddr, Capabilities) {
    (d.peer(), d.caps().clone())
}

/// Run `during` with probes beside it (when [`wanted`]) to the netserver
/// `at`, whose phases last `secs` (the probes are halted when `during`
/// returns): what it returned, and the probes (`None` when none ran). A
/// probe test that fails is an error when `--one-way` asked for it, else
/// a warning and no figures. With `--observer`, the observer probes the
/// same netserver for `secs` beside it.
pub fn beside<T>(
    plan: &Plan,
    (peer, caps): (SocketAddr, Capabilities),
    secs: u64,
    during: impl FnOnce() -> T,
) -> Result<(T, Option<Probed>)> {
    if !wanted(plan, &caps)? {
        return Ok((during(), None));
    }
    let pp = probe_plan(plan, peer, secs + PROBE_SLACK);
    let stamped = Stamped::new(EVERY);
    thread::scope(|sc| {
        let st = stamped.clone();
        let pp = &pp;
        let h = sc.spawn(move || -> Result<u64> {
            let mut conn =
                control::connect(pp).context("the one-way probes' control connection")?;
            let ctx = Context::new(pp, Vec::new(), Vec::new());
            let fam = Box::new(Stamp::probing(st));
            let m = lifecycle::run_once(pp, &mut conn.control, &ctx, fam)
                .context("the one-way probes")?;
            conn.control.bye();
            Ok(m.local.send_calls)
        });
        let t0 = Instant::now();
        while stamped.answered() == 0 && !h.is_finished() && t0.elapsed() < FIRST_ANSWER {
            thread::sleep(Duration::from_millis(5));
        }
        let observer = plan
            .observer
            .as_ref()
            .map(|o| sc.spawn(move || observe(plan, o, peer, secs)));
        let t = during();
        stamped.halt();
        let anchor = (clock::unix_secs(), clock::now_ns());
        let r = h
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the one-way probes' thread failed")));
        let observed = observer
            .map(|o| {
                o.join()
                    .unwrap_or_else(|_| Err(anyhow!("the observer's thread failed")))
            })
            .transpose()
            .map_err(|e| e.context("--observer"))?;
        match r {
            Ok(sent) => Ok((
                t,
                Some(Probed {
                    stamps: stamped.take(),
                    sent,
                    anchor,
                    observer: observed,
                }),
            )),
            Err(e) if plan.one_way == OneWayAsk::Asked => Err(e.context("--one-way")),
            Err(e) => {
                // under load, where the lines would have been; TCP_RR -D
                // (netperf 2.7's command line) says nothing more
                if plan.under_load.is_some() || plan.name == TestName::Rpm {
                    eprintln!("netperf: warning: no queueing delay each way: {e:#}");
                }
                Ok((t, None))
            }
        }
    })
}

/// `--observer`: ask the netserver at `observer` (`--fleet`) to probe
/// `target` for `secs` as a third-party test (UDP_RR with `--one-way`),
/// and read what its probes saw from its JSON document.
fn observe(
    plan: &Plan,
    (host, port): &(String, u16),
    target: SocketAddr,
    secs: u64,
) -> Result<Seen> {
    let mut op = Plan::new(format!("netperf --observer {host}"));
    op.host = Some(host.clone());
    op.port = *port;
    op.auth.clone_from(&plan.auth);
    op.dialect = plan.dialect;
    let mut conn =
        control::connect(&op).with_context(|| format!("the observer {host} port {port}"))?;
    let req = proto::ThirdParty {
        host: target.ip().to_string(),
        port: target.port(),
        test: proto::ThirdPartyTest {
            test: proto::ThirdPartyKind::UdpRr,
            length: proto::ThirdPartyLength::Seconds(
                u32::try_from(secs.max(1)).unwrap_or(u32::MAX),
            ),
            one_way: true,
            ..proto::ThirdPartyTest::default()
        },
    };
    let json = conn
        .control
        .third_party(req, Duration::from_secs(secs + PROBE_SLACK + 30))
        .with_context(|| format!("the observer {host} probing {target}"))?;
    conn.control.bye();
    let doc: Document = serde_json::from_str(&json)
        .map_err(|e| anyhow!("the observer {host}'s JSON document: {e}"))?;
    let w = doc
        .one_way
        .ok_or_else(|| anyhow!("the observer {host} measured no queueing delay"))?;
    let seen = w
        .series
        .iter()
        .map(|s| (w.started_unix + s.at_seconds, s.up_usec, s.down_usec))
        .collect();
    Ok((host.clone(), seen))
}

/// TCP_RR or UDP_RR with probes beside it (`--one-way`): the queueing
/// delay each way while it ran, floors from the whole run (no idle
/// phase).
pub fn alone(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let Length::Seconds(secs) = plan.length else {
        return Err(anyhow!("--one-way: a timed test (-l seconds)"));
    };
    let (m, probed) = beside(plan, at(d), secs, || {
        let from = clock::now_ns();
        family::run_once(plan, d, ctx).map(|m| (m, (from, clock::now_ns())))
    })?;
    let (mut m, span) = m?;
    m.one_way = probed.and_then(|p| {
        p.analyse(Spans {
            idle: None,
            loaded: Some(span),
        })
    });
    Ok(m)
}
