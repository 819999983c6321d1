//! flent, the main client of public netservers, against `--schedule
//! exclusive`: its rrul (eight netperfs and three UDP_RRs at once from one
//! host, and ping) is one measurement, so its tests run together in their
//! host's turn, and a second host's test waits for that turn to end.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, bin};

/// Whether flent (PyPI) and ping are here; CI requires them
/// (`NETPERF_REQUIRE_FLENT=1`).
fn have_flent() -> bool {
    let ok = |c: &str, a: &str| {
        Command::new(c)
            .arg(a)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok("flent", "--version") && ok("ping", "-V") {
        return true;
    }
    assert!(
        std::env::var("NETPERF_REQUIRE_FLENT").as_deref() != Ok("1"),
        "flent or ping is not installed (pip install flent; apt-get install iputils-ping) and NETPERF_REQUIRE_FLENT=1"
    );
    eprintln!(
        "!!! SKIPPED: flent or ping is not installed (pip install flent; apt-get install iputils-ping)"
    );
    false
}

/// The record's lines: (peer address, test, start, end).
fn records(path: &std::path::Path) -> Vec<(String, String, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let peer = v["peer"].as_str().unwrap_or_default();
            let ip = peer.rsplit_once(':').map_or(peer, |(ip, _)| ip).to_string();
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (ip, s("test"), s("start"), s("time"))
        })
        .collect()
}

/// flent 2.3's rrul against a netserver that runs one client host's tests
/// at a time: every series complete (before, each of its netperfs waited
/// its own turn and the test came back with 2 of 18 series); a netperf
/// from a second address started during it waits until the rrul host's
/// turn ends, and the two hosts' tests never overlap (the record).
#[test]
fn flents_rrul_runs_whole_in_its_hosts_turn() {
    if !have_flent() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("np-flent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("record.jsonl");
    let ns = Netserver::start(&[
        "--schedule",
        "exclusive",
        "--max-wait",
        "120",
        "--record",
        record.to_str().unwrap(),
    ]);
    // our netperf first on flent's PATH
    let netperf_dir: PathBuf = bin("netperf").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        netperf_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let flent = Command::new("flent")
        .args([
            "rrul",
            "-H",
            "127.0.0.1",
            "-l",
            "6",
            "--local-bind",
            "127.0.0.1",
        ])
        .args(["--netperf-control-port", &ns.port().to_string()])
        .arg("-D")
        .arg(&dir)
        .args(["-f", "summary"])
        .env("PATH", &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flent");
    // a second host's test, started while the rrul runs
    thread::sleep(Duration::from_secs(4));
    let t0 = Instant::now();
    let other = harness::netperf_at(
        &ns.port().to_string(),
        &["-L", "127.0.0.2", "-t", "TCP_STREAM", "-l", "1", "-P", "0"],
    );
    let waited = t0.elapsed();
    let out = flent.wait_with_output().expect("flent ran");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "flent: {stdout}\n{stderr}\n{}",
        ns.log()
    );
    assert!(other.success(), "the second host's test: {other}");
    assert!(
        other.stderr.contains("one client host's tests at a time"),
        "the second host was not told to wait: {other}"
    );
    // every series: each of flent's netperfs ran (8 streams, 3 UDP_RRs)
    let recs = records(&record);
    let rrul: Vec<_> = recs.iter().filter(|r| r.0 == "127.0.0.1").collect();
    let count = |t: &str| rrul.iter().filter(|r| r.1 == t).count();
    assert_eq!(
        (count("TCP_STREAM"), count("TCP_MAERTS"), count("UDP_RR")),
        (4, 4, 3),
        "{recs:?}\nflent: {stdout}\n{stderr}"
    );
    for series in ["TCP upload", "TCP download", "Ping (ms) UDP"] {
        assert!(
            stdout.contains(series),
            "no {series} in flent's summary: {stdout}"
        );
    }
    assert!(
        !stdout.contains(" nan "),
        "a series came back empty: {stdout}"
    );
    // the second host ran after the rrul host's last test, never beside it
    let last_rrul_end = rrul.iter().map(|r| r.3.clone()).max().unwrap();
    let second: Vec<_> = recs.iter().filter(|r| r.0 == "127.0.0.2").collect();
    assert_eq!(second.len(), 1, "{recs:?}");
    assert!(
        second[0].2 >= last_rrul_end,
        "overlap: {second:?} started before {last_rrul_end}"
    );
    assert!(
        waited > Duration::from_secs(3),
        "it did not wait: {waited:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
