//! `netperf compare`: the verdicts and exit statuses CI reads, from
//! documents and from two command lines run here.

use std::{process::Command, time::Duration};

use harness::{Netserver, bin, run_with_deadline};

fn compare(args: &[&str]) -> harness::Output {
    let mut c = Command::new(bin("netperf"));
    c.arg("compare").args(args);
    run_with_deadline(c, Duration::from_secs(120))
}

/// A document of `values` (its iterations) for `test`.
fn doc(test: &str, values: &[f64]) -> String {
    serde_json::json!({
        "schema": "rsnetperf-result/1",
        "test": test,
        "result": { "value": values.iter().sum::<f64>() / values.len() as f64, "units": "10^6bits/s" },
        "iterations": values.iter().map(|v| serde_json::json!({ "value": v })).collect::<Vec<_>>(),
        "environment": { "local": { "kernel": "6.1" }, "remote": {} },
    })
    .to_string()
}

#[test]
fn documents_are_judged_with_the_exit_status_ci_reads() {
    let dir = std::env::temp_dir().join(format!("np-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let base: Vec<f64> = (0..10).map(|i| 9400.0 + f64::from(i) * 7.0).collect();
    let slower: Vec<f64> = base.iter().map(|v| v * 0.94).collect();
    let (b, s) = (
        write("base.json", &doc("TCP_STREAM", &base)),
        write("slow.json", &doc("TCP_STREAM", &slower)),
    );
    let json = dir.join("verdict.json");
    let out = compare(&[&b, &s, "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(
        out.stdout.contains("SLOWER") && out.stdout.contains("verdict: SLOWER"),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["figures"][0]["verdict"], "SLOWER");
    assert_eq!(v["figures"][0]["base"]["n"], 10);
    assert!(v["figures"][0]["change"].as_f64().unwrap() < -0.05);
    assert_eq!(compare(&[&s, &b]).status.code(), Some(2));
    assert_eq!(compare(&[&b, &b]).status.code(), Some(0));
    // bad input: said, exit 4
    let junk = write("junk.txt", "not json\n");
    let out = compare(&[&b, &junk]);
    assert_eq!(out.status.code(), Some(4), "{out}");
    assert!(
        out.stderr.contains("not a netperf --json document"),
        "{out}"
    );
    let rr = write("rr.json", &doc("TCP_RR", &base));
    let out = compare(&[&b, &rr]);
    assert_eq!(out.status.code(), Some(4), "{out}");
    assert!(
        out.stderr.contains("TCP_STREAM") && out.stderr.contains("TCP_RR"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_command_lines_run_here_interleaved() {
    let ns = Netserver::start(&[]);
    let a = format!("-H 127.0.0.1 -p {} -l 1 -P 0", ns.port());
    let out = compare(&["--a", &a, "--b", &a, "--max-time", "8"]);
    // A/A: SAME, or UNKNOWN at the limit; never a change
    assert!(matches!(out.status.code(), Some(0 | 3)), "{out}");
    assert!(out.stdout.contains("throughput"), "{out}");
    let n: usize = out
        .stdout
        .split(" n ")
        .nth(1)
        .and_then(|r| r.split('/').next()?.trim().parse().ok())
        .unwrap_or(0);
    assert!(n >= 2, "{out}");
    // a line netperf refuses: its error, exit 4
    let out = compare(&["--a", "-t NO_SUCH_TEST", "--b", &a]);
    assert_eq!(out.status.code(), Some(4), "{out}");
    assert!(out.stderr.contains("NO_SUCH_TEST"), "{out}");
}
