//! `--under-load`: a request/response test idle, then while bulk TCP flows
//! load the path to the same netserver; both phases' latency and the
//! load's goodput, in our lines, selectors and JSON.

use harness::Netserver;
use serde_json::Value;

#[test]
fn idle_and_loaded_phases_and_the_load_are_reported() {
    let ns = Netserver::start(&[]);
    // piped classic output: netperf 2.7's table, then our lines
    let out = ns
        .netperf(&["-t", "TCP_RR", "-l", "3", "--", "--under-load", "2,both"])
        .ok();
    let text = &out.stdout;
    assert!(text.contains("Trans.\nSend   Recv"), "{text}");
    let under = text
        .lines()
        .find(|l| l.starts_with("Under load ("))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        under.contains("2 flows up ") && under.contains("2 flows down "),
        "{under}"
    );
    assert!(
        text.contains("\n  idle:   ") && text.contains("\n  loaded: "),
        "{text}"
    );
    // JSON: the loaded phase is the result; the idle phase and the load
    let out = ns
        .netperf(&[
            "-t",
            "UDP_RR",
            "-l",
            "3",
            "--json",
            "--",
            "--under-load",
            "1",
        ])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let u = &doc["under_load"];
    assert_eq!(u["load_flows"], 1);
    assert!(u["load_up_mbps"].as_f64().unwrap() > 0.0, "{u}");
    assert!(u["load_down_mbps"].is_null(), "{u}");
    assert!(u["idle_transaction_rate"].as_f64().unwrap() > 0.0, "{u}");
    assert!(u["idle_latency_usec"]["count"].as_u64().unwrap() > 0, "{u}");
    assert!(doc["latency_usec"]["count"].as_u64().unwrap() > 0);
    // selectors
    let out = ns
        .netperf(&[
            "-t",
            "TCP_CRR",
            "-l",
            "3",
            "-P",
            "0",
            "--",
            "--under-load",
            "1,down",
            "-k",
            "IDLE_P50_LATENCY,LOADED_P50_LATENCY,LOADED_P99_LATENCY,LOAD_THROUGHPUT",
        ])
        .ok();
    let get = |k: &str| harness::keyval(&out.stdout, k);
    assert!(get("IDLE_P50_LATENCY") > 0.0);
    assert!(get("LOADED_P50_LATENCY") > 0.0);
    assert!(get("LOADED_P99_LATENCY") >= get("LOADED_P50_LATENCY"));
    assert!(get("LOAD_THROUGHPUT") > 0.0);
    // without --under-load they are -1
    let out = ns
        .netperf(&[
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "-P",
            "0",
            "--",
            "-k",
            "LOAD_THROUGHPUT,IDLE_P50_LATENCY",
        ])
        .ok();
    assert_eq!(out.stdout, "LOAD_THROUGHPUT=-1.00\nIDLE_P50_LATENCY=-1\n");
}

#[test]
fn under_load_is_refused_where_it_does_not_apply() {
    for (args, words) in [
        (
            &["-t", "TCP_STREAM", "--", "--under-load", "2"][..],
            "TCP_RR, UDP_RR and TCP_CRR",
        ),
        (
            &["-t", "TCP_RR", "-l", "1", "--", "--under-load", "2"][..],
            "2 s or more",
        ),
        (&["-t", "TCP_RR", "--", "--under-load", "0"][..], "1 to 64"),
        (
            &["-t", "TCP_RR", "--", "--under-load", "2,sideways"][..],
            "up, down or both",
        ),
        (
            &["-t", "TCP_RR", "-i", "3,3", "--", "--under-load", "2"][..],
            "one run",
        ),
    ] {
        let out = harness::netperf(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out}");
        assert!(out.stderr.contains(words), "{args:?}: {out}");
    }
}

/// IPv6 as IPv4: the load and the test on ::1.
#[test]
fn under_load_runs_over_ipv6() {
    let ns = Netserver::start_v6(&[]);
    let out = ns
        .netperf(&[
            "-H",
            "::1",
            "-t",
            "TCP_RR",
            "-l",
            "2",
            "--json",
            "--",
            "--under-load",
            "1,both",
        ])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let u = &doc["under_load"];
    assert!(u["load_up_mbps"].as_f64().unwrap() > 0.0, "{u}");
    assert!(u["load_down_mbps"].as_f64().unwrap() > 0.0, "{u}");
    assert!(
        doc["control"]["remote"]
            .as_str()
            .unwrap()
            .starts_with("[::1]")
    );
}
