//! How well `netperf compare` tells a change from noise: trials of
//! `netperf compare --a ... --b ...` on a path shaped to 100 Mbit/s (token
//! buckets, in network namespaces) where B is the same path (A/A: any
//! SLOWER or FASTER is wrong) or a path 5% slower (95 Mbit/s: SLOWER is
//! right), and on loopback (A/A, the noisier case). Prints each
//! condition's verdict counts and the time to a decision (min, median,
//! max); asserts nothing. bench/compare builds and runs it (root).
//!
//! compare_bench [--trials N] [--secs S] [--max-time S] [--loopback-only | --namespaces-only]

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use harness::netns::Mesh;

fn ours(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().expect("dir").join(name)
}

struct Opts {
    trials: usize,
    secs: u32,
    max_time: u32,
    loopback_only: bool,
    namespaces_only: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        trials: 100,
        secs: 1,
        max_time: 120,
        loopback_only: false,
        namespaces_only: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || {
            it.next()
                .and_then(|v| v.parse::<usize>().ok())
                .expect("a number")
        };
        match a.as_str() {
            "--trials" => o.trials = num(),
            "--secs" => o.secs = num() as u32,
            "--max-time" => o.max_time = num() as u32,
            "--loopback-only" => o.loopback_only = true,
            "--namespaces-only" => o.namespaces_only = true,
            other => panic!("unknown option {other}"),
        }
    }
    o
}

/// One trial's verdict and its time to a decision.
fn trial(mut cmd: Command, a: &str, b: &str, o: &Opts) -> (String, Duration, usize) {
    let json = std::env::temp_dir().join(format!("compare-bench-{}.json", std::process::id()));
    cmd.args(["compare", "--a", a, "--b", b])
        .args(["--max-time", &o.max_time.to_string()])
        .arg("--json")
        .arg(&json);
    let t0 = Instant::now();
    let out = cmd.output().expect("netperf compare");
    let took = t0.elapsed();
    let v: serde_json::Value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no verdict: {}", String::from_utf8_lossy(&out.stderr)));
    let n = v["figures"][0]["base"]["n"].as_u64().unwrap_or(0) as usize;
    (v["verdict"].as_str().unwrap_or("?").to_string(), took, n)
}

/// Run `trials` and print the verdicts and decision times.
fn condition(name: &str, o: &Opts, make: &dyn Fn() -> Command, a: &str, b: &str) {
    let mut verdicts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut times = Vec::new();
    let mut samples = Vec::new();
    for i in 0..o.trials {
        let (v, took, n) = trial(make(), a, b, o);
        eprintln!(
            "{name}: trial {}: {v} after {:.1} s, {n} samples a side",
            i + 1,
            took.as_secs_f64()
        );
        *verdicts.entry(v).or_default() += 1;
        times.push(took.as_secs_f64());
        samples.push(n);
    }
    times.sort_by(f64::total_cmp);
    samples.sort_unstable();
    let med = |v: &[f64]| v[v.len() / 2];
    println!(
        "{name}: {} trials: {} | time to a verdict {:.1}..{:.1} s, median {:.1} s | samples a side {}..{}, median {}",
        o.trials,
        verdicts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        times[0],
        times[times.len() - 1],
        med(&times),
        samples[0],
        samples[samples.len() - 1],
        samples[samples.len() / 2]
    );
}

fn main() {
    let o = opts();
    let netperf = ours("netperf");
    let netserver = ours("netserver");
    assert!(
        netperf.exists() && netserver.exists(),
        "run bench/compare, which builds them"
    );
    let l = o.secs.to_string();
    // loopback: one netserver, the same test twice
    if !o.namespaces_only {
        let mut ns = Command::new(&netserver);
        ns.args(["-D", "-p", "0", "-L", "127.0.0.1", "-v", "0"]);
        let ns = harness::Netserver::spawn(ns);
        let a = format!("-H 127.0.0.1 -p {} -l {l} -P 0", ns.port());
        condition("loopback A/A", &o, &|| Command::new(&netperf), &a, &a);
    }
    if o.loopback_only {
        return;
    }
    // a switch: the client, a netserver behind 100 Mbit/s, one behind 95
    let Some(m) = Mesh::new("compare_bench", 3) else {
        println!("namespaces: not run (needs root and iproute2)");
        return;
    };
    m.shape(0, 1000, 1000);
    m.shape(1, 1000, 100);
    m.shape(2, 1000, 95);
    let servers: Vec<harness::Netserver> = (1..3)
        .map(|i| {
            let mut c = m.command(i, &netserver);
            c.args(["-D", "-p", "12865", "-L", &m.addrs[i], "-v", "0"]);
            harness::Netserver::spawn(c)
        })
        .collect();
    let path = |i: usize| format!("-H {} -l {l} -P 0", m.addrs[i]);
    let client = || m.command(0, &netperf);
    condition("100 Mbit/s A/A", &o, &client, &path(1), &path(1));
    condition("100 vs 95 Mbit/s", &o, &client, &path(1), &path(2));
    drop(servers);
}
