//! Queueing delay each way (`--one-way`, and by default under load),
//! held against a queue of known size on one direction only: a 100 Mbit/s
//! token bucket on the router's egress toward the netserver (up) or
//! toward the client (down), its queue 1,250,000 bytes, which the load's
//! Reno keeps near full (loss-based, as cubic, and in the kernel's
//! default list of algorithms an unprivileged process may choose, which
//! the netserver keeps to): a packet crossing it waits about 100 ms. The
//! direction with the queue must read within 20% of 100 ms, the other
//! under 5 ms, with no common clock: also when the netserver's monotonic
//! clock is a day ahead (a time namespace), and when it runs 100 ppm fast
//! (a test's hook), whose drift over 30 s (3 ms) must be removed to
//! within 1 ms. Each load flow's bloat (bytes in flight over the idle
//! round trip's bandwidth-delay product) must agree with the probes: about
//! (queue + idle round trip) / idle round trip.

use std::{path::Path, time::Duration};

use harness::{
    attempts::{Miss, attempts},
    netns::{OBSERVER, ROUTED_SERVER, Routed, TO_CLIENT, TO_SERVER},
    run_with_deadline,
};
use serde_json::Value;

const QUEUE_BYTES: u64 = 1_250_000;
const QUEUE_US: f64 = 100_000.0;

fn netperf(r: &Routed, port: u16, args: &[&str]) -> Value {
    let mut c = r.command(&r.client, &harness::bin("netperf"));
    c.args(["-H", ROUTED_SERVER, "-p", &port.to_string()])
        .args(args);
    let out = run_with_deadline(c, Duration::from_secs(120)).ok();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The loaded phase's percentile `p` one way, microseconds.
fn loaded(doc: &Value, way: &str, p: &str) -> f64 {
    doc["one_way"][way]["loaded"][p]
        .as_f64()
        .unwrap_or_else(|| panic!("no {way} {p}: {}", doc["one_way"]))
}

/// A TCP_RR under `load` flows loading the queued direction for `secs`:
/// the queued way within 20% of the queue's delay and the other under
/// `quiet_us` at its 90th percentile; the document.
fn queued_way(r: &Routed, port: u16, up: bool, secs: u32, quiet_us: f64) -> Value {
    let (queued, other, dir) = if up {
        ("up", "down", "4,up")
    } else {
        ("down", "up", "4,down")
    };
    attempts(&format!("{queued} queue"), |attempt| {
        let doc = netperf(
            r,
            port,
            &[
                "-t",
                "TCP_RR",
                "-l",
                &secs.to_string(),
                "--json",
                "--",
                "-K",
                "reno",
                "--under-load",
                dir,
            ],
        );
        let (q50, o50, o90) = (
            loaded(&doc, queued, "p50"),
            loaded(&doc, other, "p50"),
            loaded(&doc, other, "p90"),
        );
        let w = &doc["one_way"];
        let seen = format!(
            "attempt {attempt}: {queued} p50 {q50:.0} us (queue {QUEUE_US:.0}), {other} p50 {o50:.0} p90 {o90:.0} us; drift {} ppm, bound {} us, {} of {} probes",
            w["drift_ppm"], w["error_bound_usec"], w["probes_answered"], w["probes_sent"]
        );
        eprintln!("{seen}");
        // no queue while idle either way
        for way in ["up", "down"] {
            let idle = w[way]["idle"]["p50"].as_f64().unwrap();
            assert!(idle < 5_000.0, "{way} idle p50 {idle} us: {seen}");
        }
        // each load flow's bloat against the same queue: bytes in flight
        // over a BDP of the idle round trip reads (queue + idle) / idle
        let idle_us = doc["under_load"]["idle_latency_usec"]["p50"]
            .as_f64()
            .unwrap();
        let want = (q50 + idle_us) / idle_us;
        let bloat: Vec<f64> = doc["under_load"]["bloat"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["way"] == queued)
            .map(|b| b["median"].as_f64().unwrap())
            .collect();
        eprintln!("attempt {attempt}: {queued} flows' bloat {bloat:?}, expected about {want:.0}");
        assert_eq!(bloat.len(), 4, "{}", doc["under_load"]);
        let bloat_ok = bloat.iter().all(|b| (b - want).abs() <= 0.35 * want);
        if (q50 - QUEUE_US).abs() <= 0.2 * QUEUE_US && o90 < quiet_us && bloat_ok {
            Ok(doc)
        } else {
            Err(Miss::starved(seen))
        }
    })
}

#[test]
fn queueing_delay_is_seen_the_way_the_queue_is() {
    let Some(r) = Routed::new("queueing_delay_is_seen_the_way_the_queue_is") else {
        return;
    };
    let ns = r.netserver();
    r.bottleneck(TO_SERVER, 100, QUEUE_BYTES);
    let doc = queued_way(&r, ns.port(), true, 6, 5_000.0);
    // the series: every probe, each way, its phase named
    let series = doc["one_way"]["series"].as_array().unwrap();
    assert!(series.len() > 500, "{} probes", series.len());
    assert!(series.iter().any(|s| s["phase"] == "idle"));
    assert!(series.iter().any(|s| s["phase"] == "loaded"));
    // the queue and the load the other way
    harness::netns::sh(&[
        "ip", "netns", "exec", &r.router, "tc", "qdisc", "del", "dev", TO_SERVER, "root",
    ]);
    r.bottleneck(TO_CLIENT, 100, QUEUE_BYTES);
    queued_way(&r, ns.port(), false, 6, 5_000.0);
    drop(ns);
    // the netserver's monotonic clock a day ahead of ours
    let mut cmd = r.command(&r.server, Path::new("unshare"));
    cmd.args(["-T", "--fork", "--kill-child", "--monotonic", "86400"])
        .arg(harness::bin("netserver"))
        .args(["-D", "-p", "0", "-L", ROUTED_SERVER]);
    let ns = harness::Netserver::spawn(cmd);
    let child = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", ns.pid()))
        .unwrap_or_default();
    let child = child.split_whitespace().next().expect("unshare's child");
    let offsets = std::fs::read_to_string(format!("/proc/{child}/timens_offsets")).unwrap();
    assert!(offsets.contains("86400"), "{offsets}");
    queued_way(&r, ns.port(), false, 6, 5_000.0);
}

/// The netserver's clock 100 ppm fast: 3 ms over 30 s, found and removed
/// (the quiet way stays within 1 ms of its floor throughout).
#[test]
fn a_drift_between_the_clocks_is_removed() {
    let Some(r) = Routed::new("a_drift_between_the_clocks_is_removed") else {
        return;
    };
    let mut cmd = r.command(&r.server, &harness::bin("netserver"));
    cmd.args(["-D", "-p", "0", "-L", ROUTED_SERVER])
        .env("RSNETPERF_TEST_SKEW_PPM", "100");
    let ns = harness::Netserver::spawn(cmd);
    r.bottleneck(TO_SERVER, 100, QUEUE_BYTES);
    let doc = queued_way(&r, ns.port(), true, 30, 1_000.0);
    let drift = doc["one_way"]["drift_ppm"].as_f64().unwrap();
    assert!((drift - 100.0).abs() < 10.0, "drift {drift} ppm");
    let series = doc["one_way"]["series"].as_array().unwrap();
    let span = series.last().unwrap()["at_seconds"].as_f64().unwrap();
    assert!(span > 30.0, "{span} s of probes");
}

/// On loopback: `--one-way` gives TCP_RR and UDP_RR the queueing delay
/// each way (lines, selectors, the plot's panel); `-t RPM` has it by
/// default.
#[test]
fn one_way_figures_where_asked() {
    let ns = harness::Netserver::start(&[]);
    let port = ns.port().to_string();
    let sel = "UP_QUEUE_DELAY_P50,UP_QUEUE_DELAY_P99,DOWN_QUEUE_DELAY_P50,DOWN_QUEUE_DELAY_P99";
    let out = harness::netperf_at(
        &port,
        &["-t", "UDP_RR", "-l", "2", "--", "--one-way", "-k", sel],
    );
    assert!(out.success(), "{out}");
    for k in sel.split(',') {
        let v = harness::keyval(&out.stdout, k);
        assert!((0.0..100_000.0).contains(&v), "{k} {v}: {out}");
    }
    assert!(
        harness::keyval(&out.stdout, "UP_QUEUE_DELAY_P99")
            >= harness::keyval(&out.stdout, "UP_QUEUE_DELAY_P50")
    );
    // unasked, a plain TCP_RR has none: -1
    let out = harness::netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "--", "-k", sel]);
    assert_eq!(
        harness::keyval(&out.stdout, "UP_QUEUE_DELAY_P50"),
        -1.0,
        "{out}"
    );
    // TCP_RR with -D: probes by default, in the JSON; piped at -v 1 the
    // lines are netperf 2.7's alone
    let out = harness::netperf_at(&port, &["-t", "TCP_RR", "-l", "2", "-D", "0.5", "--json"]);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        doc["one_way"]["up"]["loaded"]["p50"].as_f64().is_some(),
        "{}",
        out.stdout
    );
    let out = harness::netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "-D", "0.5"]);
    assert!(!out.stdout.contains("Queueing delay"), "{out}");
    // the lines, after netperf 2.7's table
    let out = harness::netperf_at(&port, &["-t", "TCP_RR", "-l", "2", "--", "--one-way"]);
    let text = &out.stdout;
    assert!(
        text.contains("Queueing delay each way (up: toward the netserver):"),
        "{text}"
    );
    assert!(
        text.contains("\n  up:   p50 ") && text.contains("\n  down: p50 "),
        "{text}"
    );
    let answered = text
        .lines()
        .find(|l| l.contains("probes answered"))
        .unwrap_or_else(|| panic!("{text}"));
    let n: u64 = answered.split_whitespace().next().unwrap().parse().unwrap();
    // a probe every 10 ms for about 2 s
    assert!((150..=260).contains(&n), "{answered}");
    // the plot's panel
    let svg = std::env::temp_dir().join(format!("rsnetperf-one-way-{}.svg", std::process::id()));
    let out = harness::netperf_at(
        &port,
        &[
            "-t",
            "UDP_RR",
            "-l",
            "1",
            "--plot",
            svg.to_str().unwrap(),
            "--",
            "--one-way",
        ],
    );
    assert!(out.success(), "{out}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(drawn.contains("Queueing delay each way") && drawn.contains("toward the netserver"));
    // the netserver served the probes as a test of their own
    assert!(ns.log().contains("UDP_STAMP"), "{}", ns.log());
    // -t RPM: by default
    let out = harness::netperf_at(
        &port,
        &["-t", "RPM", "-l", "2", "--json", "--", "--flows", "1"],
    );
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        doc["one_way"]["up"]["idle"]["p50"].as_f64().is_some(),
        "{}",
        doc["one_way"]
    );
    assert!(doc["one_way"]["down"]["loaded"]["p99"].as_f64().is_some());
}

/// Where the queueing delay cannot be measured: a netserver that cannot
/// answer probes (ours speaking netperf 2.7's protocol, as netperf 2.7's)
/// is refused by name when asked, and left out unasked; so is a test with
/// no transactions.
#[test]
fn one_way_refusals_where_not_possible() {
    let ns = harness::Netserver::start(&[]);
    let port = ns.port().to_string();
    // netperf 2.7's protocol: refused by name when asked ...
    let out = harness::netperf_at(
        &port,
        &[
            "--dialect",
            "netperf2",
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "--",
            "--one-way",
        ],
    );
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("--one-way") && out.stderr.contains("netperf 2.7's netserver"),
        "{out}"
    );
    // ... and left out unasked: the test under load runs as before
    let out = harness::netperf_at(
        &port,
        &[
            "--dialect",
            "netperf2",
            "-t",
            "TCP_RR",
            "-l",
            "2",
            "--json",
            "--",
            "--under-load",
            "1",
        ],
    );
    assert!(out.success(), "{out}");
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        doc["one_way"].is_null() && !doc["under_load"].is_null(),
        "{}",
        out.stdout
    );
    // and for a test with no such figures, refused by name
    let out = harness::netperf_at(&port, &["-t", "TCP_STREAM", "-l", "1", "--", "--one-way"]);
    assert!(!out.success() && out.stderr.contains("--one-way"), "{out}");
}

/// `--observer`: a second netserver probes the same netserver while the
/// test runs. Behind the router, its probes cross the queue toward the
/// netserver as ours do, and it sees about 100 ms up; over a link of its
/// own to the netserver it sees no queue, while ours still does: the
/// queue is the router's, not the netserver's.
#[test]
fn the_observer_sees_the_queue_only_where_it_shares_the_bottleneck() {
    for shares in [true, false] {
        let Some(mut r) = Routed::new("the_observer_sees_the_queue_only_where_it_shares") else {
            return;
        };
        let o = r.observer(shares);
        let key = super::mesh::key_in(&super::mesh::scratch(&format!("observer-{shares}")));
        let mut cmd = r.command(&r.server, &harness::bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", ROUTED_SERVER, "--key-file"])
            .arg(&key);
        let target = harness::Netserver::spawn(cmd);
        let mut cmd = r.command(&o, &harness::bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", OBSERVER, "--fleet", "--key-file"])
            .arg(&key);
        let observer = harness::Netserver::spawn(cmd);
        r.bottleneck(TO_SERVER, 100, QUEUE_BYTES);
        let at = format!("{OBSERVER}:{}", observer.port());
        let key = key.to_str().unwrap().to_string();
        attempts(&format!("observer sharing: {shares}"), |attempt| {
            let doc = netperf(
                &r,
                target.port(),
                &[
                    "--key-file",
                    &key,
                    "-t",
                    "TCP_RR",
                    "-l",
                    "6",
                    "--json",
                    "--",
                    "-K",
                    "reno",
                    "--under-load",
                    "4,up",
                    "--observer",
                    &at,
                ],
            );
            let w = &doc["one_way"];
            let seen_up = |v: &Value, phase: &str| v["up"][phase]["p50"].as_f64().unwrap();
            let (ours, theirs, theirs_idle) = (
                seen_up(w, "loaded"),
                seen_up(&w["observer"], "loaded"),
                seen_up(&w["observer"], "idle"),
            );
            let seen = format!(
                "attempt {attempt}: sharing {shares}: our up p50 {ours:.0} us, the observer's {theirs:.0} (idle {theirs_idle:.0}); observer {}",
                w["observer"]
            );
            eprintln!("{seen}");
            assert_eq!(w["observer"]["host"], OBSERVER);
            assert!(theirs_idle < 5_000.0, "{seen}");
            let ours_ok = (ours - QUEUE_US).abs() <= 0.2 * QUEUE_US;
            let theirs_ok = if shares {
                (theirs - QUEUE_US).abs() <= 0.25 * QUEUE_US
            } else {
                theirs < 5_000.0
            };
            if ours_ok && theirs_ok {
                Ok(())
            } else {
                Err(Miss::starved(seen))
            }
        });
        // the observer served it as a third-party test
        assert!(observer.log().contains("third-party"), "{}", observer.log());
    }
}
