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

/// Whether ethtool is here (else the test says so and skips, or fails
/// where the namespace tests must run).
fn have_ethtool() -> bool {
    if Command::new("ethtool").arg("--version").output().is_ok() {
        return true;
    }
    assert_ne!(
        std::env::var("NETPERF_REQUIRE_NETNS").as_deref(),
        Ok("1"),
        "ethtool is not installed (apt-get install ethtool)"
    );
    eprintln!("!!! SKIPPED: ethtool is not installed");
    false
}

/// What ethtool says of an offload at an interface in namespace `ns`.
fn offload_on(h: &harness::netns::Hosts, ns: &str, dev: &str, feature: &str) -> bool {
    let out = h.exec(ns, &["ethtool", "-k", dev]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{feature}:")))
        .unwrap_or_else(|| panic!("{feature} in {text}"));
    line.split_whitespace().nth(1) == Some("on")
}

/// Each end's host in the document, the netserver's as it told it: what
/// `ethtool -k` reads of each end's interface (a second instrument), and a
/// change at the netserver's end between two runs (its GRO turned off, its
/// tcp_rmem changed) named by `compare` before its verdict.
#[test]
fn the_netservers_host_is_in_the_fingerprint_and_its_changes_are_named() {
    let Some(h) = harness::netns::Hosts::new("netservers_host_in_the_fingerprint") else {
        return;
    };
    if !have_ethtool() {
        return;
    }
    let ns = h.netserver(harness::netns::A4, &[]);
    let dir = std::env::temp_dir().join(format!("np-compare-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str| {
        let mut c = h.command(&h.b, &bin("netperf"));
        c.args(["-H", harness::netns::A4, "-p", &ns.port().to_string()])
            .args(["-l", "1", "-i", "3,3", "--json"]);
        let out = run_with_deadline(c, Duration::from_secs(60));
        assert!(out.success(), "{out}");
        let path = dir.join(name);
        std::fs::write(&path, &out.stdout).unwrap();
        let d: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        (path, d)
    };
    let ethtool = |ns: &str, dev: &str, feature: &str| offload_on(&h, ns, dev, feature);
    let (before, d) = run("before.json");
    let (local, remote) = (
        &d["environment"]["local"],
        &d["environment"]["remote"]["host"],
    );
    assert_eq!(local["interface"], h.dev_b.as_str(), "{d}");
    assert_eq!(remote["interface"], h.dev_a.as_str(), "{d}");
    for (end, ns_, dev) in [(local, &h.b, &h.dev_b), (remote, &h.a, &h.dev_a)] {
        for (key, feature) in [
            ("tso", "tcp-segmentation-offload"),
            ("gso", "generic-segmentation-offload"),
            ("gro", "generic-receive-offload"),
        ] {
            assert_eq!(
                end[key].as_bool(),
                Some(ethtool(ns_, dev, feature)),
                "{key} at {dev}: {end}"
            );
        }
        assert_eq!(end["mtu"], 1500, "{end}");
    }
    assert_eq!(remote["platform"], "Linux", "{d}");
    assert!(
        remote["kernel"].as_str().is_some_and(|k| !k.is_empty()),
        "{d}"
    );
    // the netserver's host changes: GRO off, another tcp_rmem
    let was_gro = ethtool(&h.a, &h.dev_a, "generic-receive-offload");
    h.exec(
        &h.a,
        &[
            "ethtool",
            "-K",
            &h.dev_a,
            "gro",
            if was_gro { "off" } else { "on" },
        ],
    );
    h.exec(
        &h.a,
        &["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 65536 1048576"],
    );
    let (after, d2) = run("after.json");
    assert_eq!(
        d2["environment"]["remote"]["host"]["gro"].as_bool(),
        Some(!was_gro),
        "{d2}"
    );
    let out = compare(&[before.to_str().unwrap(), after.to_str().unwrap()]);
    assert!(out.status.code().is_some_and(|c| c < 4), "{out}");
    let said: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("environment:"))
        .collect();
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("remote.host.gro: {was_gro} -> {}", !was_gro))),
        "{out}"
    );
    assert!(
        said.iter()
            .any(|l| l.contains("remote.host.tcp_rmem:") && l.contains("-> 4096 65536 1048576")),
        "{out}"
    );
    // nothing of our own end changed
    assert!(!said.iter().any(|l| l.contains(" local.")), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
