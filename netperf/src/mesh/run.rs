//! Running a mesh's rounds: each test is asked of its sending netserver
//! (a third-party test: that netserver runs netperf's test against the
//! receiving one, with the client library, and answers with the JSON
//! document); a round's tests run at once, each on a thread of its own
//! holding one control connection, and the next round starts when the
//! last of them ended. A host that does not answer is reported and its
//! later tests are skipped; Ctrl-C ends the mesh, and with it every test
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
    client::third_party::request(
        &o.test,
        i64::from(o.length),
        &o.global_options,
        &o.test_options,
    )
}

/// Run `rounds`, telling `sink` each test's outcome as it comes.
pub fn run(
    o: &MeshOptions,
    rounds: &[Round],
    stop: &StopFlag,
    sink: &mut dyn FnMut(&Outcome) -> Result<()>,
) -> Result<Ended> {
    let began = Instant::now();
    let mut ended = Ended::default();
    let test = request(o)?;
    // a confidence run takes up to 30 iterations of its length
    let runs = if o.global_options.is_empty() { 3 } else { 30 };
    let wait = Duration::from_secs(u64::from(o.length) * runs + u64::from(o.timeout));
    for (i, round) in rounds.iter().enumerate() {
        if stop.is_set() {
            ended.interrupted = true;
            break;
        }
        eprintln!(
            "netperf mesh: round {}/{}: {}",
            i + 1,
            rounds.len(),
            round
                .tests
                .iter()
                .map(|p| format!("{} -> {}", o.hosts[p.from].name, o.hosts[p.to].name))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (tx, rx) = mpsc::channel();
        let mut running = 0;
        for &pair in &round.tests {
            if let Some(h) = [pair.from, pair.to]
                .into_iter()
                .find(|h| ended.down.contains(h))
            {
                let t = began.elapsed().as_secs_f64();
                sink(&skipped(pair, round.index + 1, t, &o.hosts[h]))?;
                continue;
            }
            let (tx, request) = (tx.clone(), test.clone());
            let (from, to) = (o.hosts[pair.from].clone(), o.hosts[pair.to].clone());
            let (key, test) = (o.key_file.clone(), o.test.clone());
            // (1 for the first round, as the progress lines count)
            let index = round.index + 1;
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
                    let _ = tx.send(outcome(pair, index, start, began, r));
                })
                .context("mesh: no thread for a test")?;
        }
        drop(tx);
        while running > 0 {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(out) => {
                    running -= 1;
                    if out.error.is_some() {
                        note_down(o, &out, &mut ended.down);
                    }
                    sink(&out)?;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if stop.is_set() => {
                    // the tests' connections close with this process:
                    // their netservers stop them
                    ended.interrupted = true;
                    return Ok(ended);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }
    Ok(ended)
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
            "skipped: {} did not answer earlier in the mesh",
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
                "netperf mesh: {} does not answer at port {}: its later tests are skipped",
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
    let plan = match client::cli::parse(&words) {
        Ok(client::cli::Invocation::Run(p)) => p,
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
