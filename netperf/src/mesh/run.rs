//! Running a mesh's rounds: each test is asked of its sending netserver
//! (a third-party test: that netserver runs netperf's test against the
//! receiving one, with the client library, and answers with the JSON
//! document); a round's tests run at once, each on a thread of its own
//! holding one control connection, and the next round starts when the
//! last of them ended. A host that does not answer is reported and its
//! tests wait: it is asked again before each round, and when it answers
//! its tests run at the end; Ctrl-C ends the mesh, and with it every test
//! (a netserver stops its third-party test when its client goes away).

use std::{
    net::{SocketAddr, TcpStream, ToSocketAddrs},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};
use client::output::json_types::Document;
use engine::timer::StopFlag;
use serde::Deserialize as _;
use serde_json::Value;

use super::{
    options::{Host, MeshOptions},
    schedule::{Pair, Round},
};

/// What one test of the mesh gave.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub pair: Pair,
    pub round: usize,
    /// Seconds since the mesh began.
    pub start: f64,
    pub end: f64,
    /// The test's headline (`result.value` of its JSON document).
    pub throughput: Option<f64>,
    pub units: String,
    pub error: Option<String>,
    /// The test's whole JSON document.
    pub result: Option<Value>,
}

/// How the mesh ended.
#[derive(Debug, Default)]
pub struct Ended {
    /// Hosts that stopped answering, in the order found.
    pub down: Vec<usize>,
    /// Ctrl-C ended it before its last round.
    pub interrupted: bool,
}

/// Whether a test's data runs from the netserver asked to the other one
/// (false: the other way, TCP_MAERTS).
fn asked_sends(test: &str) -> bool {
    !test.eq_ignore_ascii_case("TCP_MAERTS")
}

/// The typed test a pair's request carries, or why the mesh's options
/// cannot be one (named, before any netserver is asked).
pub fn request(o: &MeshOptions) -> Result<proto::ThirdPartyTest> {
    crate::cli::third_party::request(
        &o.test,
        i64::from(o.length),
        &o.global_options,
        &o.test_options,
    )
}

/// How often a pair is tried before it is given up (its hosts kept
/// failing it).
const ATTEMPTS: u32 = 3;

/// A pair waiting for its hosts: its round (as the progress lines count)
/// and the attempts it has had.
#[derive(Debug, Clone)]
struct Pending {
    pair: Pair,
    round: usize,
    attempts: u32,
    /// How its last attempt failed, if it had one.
    failed: Option<Box<Outcome>>,
}

/// What a round's tests share: the mesh's options and request, its clock,
/// and how long a test may take.
struct Ctx<'a> {
    o: &'a MeshOptions,
    test: proto::ThirdPartyTest,
    began: Instant,
    wait: Duration,
    stop: &'a StopFlag,
}

/// Run `rounds`, telling `sink` each test's outcome as it comes. A host
/// that stops answering is asked again before each round; its pairs wait,
/// and run in rounds of their own at the end once it answers (no host in
/// two tests at once), for as long as `--timeout` while none can run.
pub fn run(
    o: &MeshOptions,
    rounds: &[Round],
    stop: &StopFlag,
    sink: &mut dyn FnMut(&Outcome) -> Result<()>,
) -> Result<Ended> {
    let mut ended = Ended::default();
    // a confidence run takes up to 30 iterations of its length
    let runs = if o.global_options.is_empty() { 3 } else { 30 };
    let c = Ctx {
        o,
        test: request(o)?,
        began: Instant::now(),
        wait: Duration::from_secs(u64::from(o.length) * runs + u64::from(o.timeout)),
        stop,
    };
    let mut pending: Vec<Pending> = Vec::new();
    for (i, round) in rounds.iter().enumerate() {
        if stop.is_set() {
            ended.interrupted = true;
            break;
        }
        revive(o, &mut ended.down);
        let (runnable, waiting): (Vec<Pair>, Vec<Pair>) = round
            .tests
            .iter()
            .partition(|p| !ended.down.contains(&p.from) && !ended.down.contains(&p.to));
        pending.extend(waiting.into_iter().map(|pair| Pending {
            pair,
            round: round.index + 1,
            attempts: 0,
            failed: None,
        }));
        let label = format!("round {}/{}", i + 1, rounds.len());
        let tried: Vec<Pending> = runnable
            .into_iter()
            .map(|pair| Pending {
                pair,
                round: round.index + 1,
                attempts: 0,
                failed: None,
            })
            .collect();
        if run_round(&c, &label, &tried, &mut ended, &mut pending, sink)? {
            return Ok(ended);
        }
    }
    if !ended.interrupted {
        again(&c, rounds.len(), &mut ended, &mut pending, sink)?;
    }
    // what never ran: how it last failed, or skipped, each its host
    let t = c.began.elapsed().as_secs_f64();
    for p in pending {
        let h = [p.pair.from, p.pair.to]
            .into_iter()
            .find(|h| ended.down.contains(h))
            .unwrap_or(p.pair.from);
        match p.failed {
            Some(out) => sink(&out)?,
            None => sink(&skipped(p.pair, p.round, t, &o.hosts[h]))?,
        }
    }
    Ok(ended)
}

/// The pairs that waited for their hosts, in rounds of their own once the
/// hosts answer again.
fn again(
    c: &Ctx<'_>,
    scheduled: usize,
    ended: &mut Ended,
    pending: &mut Vec<Pending>,
    sink: &mut dyn FnMut(&Outcome) -> Result<()>,
) -> Result<()> {
    let o = c.o;
    let mut idle_since: Option<Instant> = None;
    let mut extra = 0;
    while !pending.is_empty() {
        if c.stop.is_set() {
            ended.interrupted = true;
            return Ok(());
        }
        revive(o, &mut ended.down);
        // a round: pairs whose hosts answer, no host twice
        let mut busy: Vec<usize> = Vec::new();
        let mut round = Vec::new();
        pending.retain(|p| {
            let hosts = [p.pair.from, p.pair.to];
            let free = hosts
                .iter()
                .all(|h| !ended.down.contains(h) && !busy.contains(h));
            if free {
                busy.extend(hosts);
                round.push(p.clone());
            }
            !free
        });
        if round.is_empty() {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(u64::from(o.timeout)) {
                return Ok(());
            }
            thread::sleep(Duration::from_secs(1));
            continue;
        }
        idle_since = None;
        extra += 1;
        let label = format!("round {}+{extra} (hosts that answer again)", scheduled);
        if run_round(c, &label, &round, ended, pending, sink)? {
            return Ok(());
        }
    }
    Ok(())
}

/// The hosts among `down` that answer again, taken off it.
fn revive(o: &MeshOptions, down: &mut Vec<usize>) {
    down.retain(|&h| {
        let back = answers(&o.hosts[h]);
        if back {
            eprintln!(
                "netperf mesh: {} answers again: its tests run",
                o.hosts[h].name
            );
        }
        !back
    });
}

/// One round's tests at once, each told to `sink` as it ends; one that
/// failed because a host stopped answering waits in `pending` (until it
/// has had [`ATTEMPTS`]). Whether the mesh was interrupted.
fn run_round(
    c: &Ctx<'_>,
    label: &str,
    tests: &[Pending],
    ended: &mut Ended,
    pending: &mut Vec<Pending>,
    sink: &mut dyn FnMut(&Outcome) -> Result<()>,
) -> Result<bool> {
    let o = c.o;
    eprintln!(
        "netperf mesh: {label}: {}",
        tests
            .iter()
            .map(|p| format!(
                "{} -> {}",
                o.hosts[p.pair.from].name, o.hosts[p.pair.to].name
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (tx, rx) = mpsc::channel();
    let mut running = 0;
    for p in tests {
        let p = p.clone();
        let (tx, request, began, wait) = (tx.clone(), c.test.clone(), c.began, c.wait);
        let (from, to) = (o.hosts[p.pair.from].clone(), o.hosts[p.pair.to].clone());
        let (key, test) = (o.key_file.clone(), o.test.clone());
        running += 1;
        thread::Builder::new()
            .name("mesh-pair".into())
            .spawn(move || {
                let start = began.elapsed().as_secs_f64();
                let (asked, other) = if asked_sends(&test) {
                    (&from, &to)
                } else {
                    (&to, &from)
                };
                let r = one(asked, other, key.as_deref(), request, wait);
                let out = outcome(p.pair, p.round, start, began, r);
                let _ = tx.send((p, out));
            })
            .context("mesh: no thread for a test")?;
    }
    drop(tx);
    while running > 0 {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((p, out)) => {
                running -= 1;
                if out.error.is_some() {
                    note_down(o, &out, &mut ended.down);
                    let host_down = [p.pair.from, p.pair.to]
                        .iter()
                        .any(|h| ended.down.contains(h));
                    if host_down && p.attempts + 1 < ATTEMPTS {
                        pending.push(Pending {
                            attempts: p.attempts + 1,
                            failed: Some(Box::new(out)),
                            ..p
                        });
                        continue;
                    }
                }
                sink(&out)?;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if c.stop.is_set() => {
                // the tests' connections close with this process:
                // their netservers stop them
                ended.interrupted = true;
                return Ok(true);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok(false)
}

fn skipped(pair: Pair, round: usize, t: f64, down: &Host) -> Outcome {
    Outcome {
        pair,
        round,
        start: t,
        end: t,
        throughput: None,
        units: String::new(),
        error: Some(format!(
            "skipped: {} did not answer by the mesh's end",
            down.name
        )),
        result: None,
    }
}

fn outcome(pair: Pair, round: usize, start: f64, began: Instant, r: Result<Answer>) -> Outcome {
    let end = began.elapsed().as_secs_f64();
    match r {
        Ok(a) => Outcome {
            pair,
            round,
            start,
            end,
            throughput: Some(a.value),
            units: a.units,
            error: None,
            result: Some(a.whole),
        },
        Err(e) => Outcome {
            pair,
            round,
            start,
            end,
            throughput: None,
            units: String::new(),
            // one line (a CSV row, a line of the log)
            error: Some(format!("{e:#}").replace('\n', "; ")),
            result: None,
        },
    }
}

/// After a failed test: which of its two hosts no longer answers at its
/// control port (each is tried, briefly).
fn note_down(o: &MeshOptions, out: &Outcome, down: &mut Vec<usize>) {
    for h in [out.pair.from, out.pair.to] {
        if !down.contains(&h) && !answers(&o.hosts[h]) {
            eprintln!(
                "netperf mesh: {} does not answer at port {}: its tests wait until it answers again",
                o.hosts[h].name, o.hosts[h].port
            );
            down.push(h);
        }
    }
}

fn answers(h: &Host) -> bool {
    let Ok(addrs) = (h.addr.as_str(), h.port).to_socket_addrs() else {
        return false;
    };
    let addrs: Vec<SocketAddr> = addrs.collect();
    addrs
        .iter()
        .any(|a| TcpStream::connect_timeout(a, Duration::from_secs(3)).is_ok())
}

/// One test: `asked`'s netserver runs it against `other`'s.
fn one(
    asked: &Host,
    other: &Host,
    key: Option<&std::path::Path>,
    test: proto::ThirdPartyTest,
    wait: Duration,
) -> Result<Answer> {
    let mut words = vec![
        "-H".to_string(),
        asked.addr.clone(),
        "-p".to_string(),
        asked.port.to_string(),
    ];
    if let Some(k) = key {
        words.push("--key-file".into());
        words.push(k.display().to_string());
    }
    let plan = match crate::cli::parse(&words) {
        Ok(crate::cli::Invocation::Run(p)) => p,
        Ok(_) => bail!("{}: not a host to test", asked.name),
        Err(e) => bail!("{}: {e}", asked.name),
    };
    let mut conn = client::control::connect(&plan)
        .with_context(|| format!("{} (the netserver asked to run the test)", asked.name))?;
    let req = proto::ThirdParty {
        host: other.addr.clone(),
        port: other.port,
        test,
    };
    let json = conn
        .control
        .third_party(req, wait)
        .with_context(|| format!("{} asked to test against {}", asked.name, other.name))?;
    conn.control.bye();
    let bad = |e: serde_json::Error| anyhow!("{}: its JSON document: {e}", asked.name);
    // read as the document it is (a schema of ours, typed), and kept
    // whole for the mesh's own document
    let whole: Value = serde_json::from_str(&json).map_err(bad)?;
    let typed = Document::deserialize(&whole).map_err(bad)?;
    if typed.schema != client::output::json::SCHEMA {
        bail!(
            "{}: its JSON document is not a netperf result ({:?})",
            asked.name,
            typed.schema
        );
    }
    Ok(Answer {
        value: typed.result.value,
        units: typed.result.units,
        whole,
    })
}

/// A third-party test's answer: its headline, and its whole document.
struct Answer {
    value: f64,
    units: String,
    whole: Value,
}
