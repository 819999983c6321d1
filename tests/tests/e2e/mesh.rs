//! `netperf mesh` and `netserver --fleet`: every ordered pair measured by
//! the netservers themselves, no host in two tests at once, the planted
//! slow host found and nothing else; a host that dies mid-mesh reported
//! while the rest completes; third-party requests without the key, or
//! aimed where no netserver answers, refused.

use std::{
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use harness::{Netserver, bin, free_port, netns::Mesh, run_with_deadline};
use serde_json::Value;

/// A fleet key in a fresh directory (mode 600, as netserver wants it).
pub(crate) fn key_in(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let key = dir.join("fleet.key");
    let mut f = std::fs::File::create(&key).unwrap();
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).unwrap();
    f.write_all(&bytes).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    key
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rsnetperf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `n` fleet netservers on loopback, and their `ADDR:PORT`s.
fn loopback_fleet(n: usize, key: &Path) -> (Vec<Netserver>, Vec<String>) {
    let servers: Vec<Netserver> = (0..n)
        .map(|_| {
            let mut c = Command::new(bin("netserver"));
            c.args(["-D", "-p", "0", "-L", "127.0.0.1", "--fleet", "--key-file"])
                .arg(key);
            Netserver::spawn(c)
        })
        .collect();
    let hosts = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    (servers, hosts)
}

/// Each netserver's test intervals, from its `--record` lines (tests it
/// served, and third-party tests it ran), checked for overlap.
fn assert_one_test_at_a_time(records: &[PathBuf]) {
    for path in records {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut spans: Vec<(String, String)> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| {
                (
                    v["start"].as_str().unwrap().to_string(),
                    v["time"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(!spans.is_empty(), "{} recorded nothing", path.display());
        // RFC 3339 to the millisecond, in UTC: as strings, in time order
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "{}: a test began at {} before the one of {}..{} ended",
                path.display(),
                w[1].0,
                w[0].0,
                w[0].1
            );
        }
    }
}

/// Six hosts on a switch, each port shaped to 100 Mbit/s each way, the
/// port into one host to a third of that; the mesh, run from a seventh,
/// measures all 30 ordered pairs, the healthy ones near 100 Mbit/s, and
/// flags that host's receiving and nothing else; no netserver was in two
/// tests at once.
#[test]
fn a_mesh_of_six_measures_every_pair_and_flags_the_planted_slow_host() {
    const N: usize = 6;
    const SLOW: usize = 3;
    let Some(m) = Mesh::new(
        "a_mesh_of_six_measures_every_pair_and_flags_the_planted_slow_host",
        N + 1,
    ) else {
        return;
    };
    for i in 0..N {
        m.shape(i, 100, if i == SLOW { 33 } else { 100 });
    }
    let dir = scratch("mesh6");
    let key = key_in(&dir);
    let records: Vec<PathBuf> = (0..N)
        .map(|i| dir.join(format!("record{i}.jsonl")))
        .collect();
    let servers: Vec<Netserver> = (0..N)
        .map(|i| {
            let mut c = m.command(i, &bin("netserver"));
            c.args([
                "-D",
                "-p",
                "12865",
                "-L",
                &m.addrs[i],
                "--fleet",
                "--key-file",
            ])
            .arg(&key)
            .arg("--record")
            .arg(&records[i]);
            Netserver::spawn(c)
        })
        .collect();
    let (json, csv, svg) = (dir.join("m.json"), dir.join("m.csv"), dir.join("m.svg"));
    let mut c = mesh_of(&m, N, &key, &json);
    c.arg("--csv").arg(&csv).arg("--plot").arg(&svg);
    let out = run_with_deadline(c, Duration::from_secs(240));
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains("rows send, columns receive"), "{out}");
    // (the matrix, for a reader of the test's output)
    eprintln!("{}", out.stdout);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pairs = doc["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), N * (N - 1), "{doc}");
    let mut seen = std::collections::BTreeSet::new();
    for p in pairs {
        let (from, to) = (p["from"].as_str().unwrap(), p["to"].as_str().unwrap());
        assert!(
            seen.insert((from.to_string(), to.to_string())),
            "{from}->{to} twice"
        );
        let t = p["throughput"].as_f64().unwrap_or_else(|| panic!("{p}"));
        assert_eq!(p["result"]["test"], "TCP_STREAM", "{p}");
        assert!(p["end"].as_f64().unwrap() > p["start"].as_f64().unwrap());
        if to == m.addrs[SLOW] {
            assert!(
                (24.0..36.0).contains(&t),
                "{from}->{to}: {t} (into the slow host)"
            );
        } else {
            assert!((80.0..101.0).contains(&t), "{from}->{to}: {t} (healthy)");
        }
    }
    let outliers = doc["outliers"].as_array().unwrap();
    assert_eq!(outliers.len(), 1, "{outliers:?}");
    assert_eq!(outliers[0]["kind"], "host");
    assert_eq!(outliers[0]["host"], m.addrs[SLOW].as_str());
    assert_eq!(outliers[0]["direction"], "receiving");
    assert_eq!(
        doc["rounds"],
        2 * (N - 1),
        "round-robin: N-1 rounds, each way in turn"
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + N * (N - 1), "{csv}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains(&m.addrs[SLOW]),
        "{svg}"
    );
    drop(servers);
    assert_one_test_at_a_time(&records);
}

/// `netperf mesh` of 2 s tests over the first `n` hosts of `m`, run from
/// host `n`, its JSON to `json`.
fn mesh_of(m: &Mesh, n: usize, key: &Path, json: &Path) -> Command {
    let mut c = m.command(n, &bin("netperf"));
    c.args([
        "mesh",
        "--hosts",
        &m.addrs[..n].join(","),
        "-l",
        "2",
        "--key-file",
    ])
    .arg(key)
    .arg("--json")
    .arg(json);
    c
}

/// Wait until a mesh's CSV has its first round's two results.
fn first_round_in(csv: &Path) {
    let begun = std::time::Instant::now();
    while std::fs::read_to_string(csv)
        .unwrap_or_default()
        .lines()
        .count()
        < 3
    {
        assert!(begun.elapsed() < Duration::from_secs(30), "no result came");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Four netservers on loopback; one is killed once the mesh has begun:
/// its pairs are reported as failed or skipped, every other pair
/// measured, and the mesh ends (status 1, the dead host named).
#[test]
fn a_host_killed_mid_mesh_is_reported_while_the_rest_completes() {
    let dir = scratch("meshkill");
    let key = key_in(&dir);
    let (servers, hosts) = loopback_fleet(4, &key);
    let csv = dir.join("m.csv");
    let mut c = Command::new(bin("netperf"));
    // (--timeout 3: the dead host is waited for that long at the end)
    c.args(["mesh", "--hosts", &hosts.join(","), "-l", "1", "--key-file"])
        .arg(&key)
        .args(["--timeout", "3"])
        .arg("--csv")
        .arg(&csv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    // the first round's results are in: kill the last host
    first_round_in(&csv);
    let mut servers = servers;
    let mut dead = servers.pop().unwrap();
    let _ = dead.signal_and_wait("KILL", Duration::from_secs(5));
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("host {} did not answer", hosts[3])),
        "{stdout}\n{stderr}"
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 12, "every ordered pair reported: {csv}");
    for r in &rows {
        let involves_dead = r.contains(&hosts[3]);
        let measured = r.split(',').nth(3).is_some_and(|t| !t.is_empty());
        // pairs among the living were all measured
        assert!(involves_dead || measured, "{r}\n{stderr}");
    }
    assert!(
        rows.iter()
            .any(|r| r.contains(&hosts[3]) && r.contains("skipped")),
        "{csv}"
    );
}

/// A third-party request from a client without the key is refused; one
/// aimed at a port where no netserver answers fails, saying so; a
/// netserver without --fleet refuses them; --fleet needs --key-file.
#[test]
fn third_party_requests_without_the_key_or_to_nowhere_are_refused() {
    let dir = scratch("meshrefuse");
    let key = key_in(&dir);
    let start = |fleet: bool| {
        let mut c = Command::new(bin("netserver"));
        c.args(["-D", "-p", "0", "-L", "127.0.0.1", "--key-file"])
            .arg(&key);
        if fleet {
            c.arg("--fleet");
        }
        Netserver::spawn(c)
    };
    let (a, plain) = (start(true), start(false));
    let mesh = |hosts: &[String], keyed: bool| {
        let mut c = Command::new(bin("netperf"));
        // the first host sends to the others
        let fanout = format!("fanout:{}", hosts[0]);
        c.args([
            "mesh",
            "--hosts",
            &hosts.join(","),
            "-l",
            "1",
            "--pattern",
            &fanout,
            // (a host that does not answer is waited for this long)
            "--timeout",
            "3",
        ]);
        if keyed {
            c.arg("--key-file").arg(&key);
        }
        run_with_deadline(c, Duration::from_secs(60))
    };
    let at = |port: u16| format!("127.0.0.1:{port}");
    // no key
    let out = mesh(&[at(a.port()), at(plain.port())], false);
    assert!(!out.success());
    assert!(out.stderr.contains("requires a key"), "{out}");
    // a target where nothing listens: the fleet netserver's test fails,
    // and says where
    let nowhere = free_port();
    let out = mesh(&[at(a.port()), at(nowhere)], true);
    assert!(!out.success());
    assert!(
        out.stderr.contains(&format!(
            "third-party test against 127.0.0.1:{nowhere} failed"
        )),
        "{out}"
    );
    // a netserver without --fleet runs none
    let out = mesh(&[at(plain.port()), at(a.port())], true);
    assert!(
        out.stderr.contains("does not run third-party tests"),
        "{out}"
    );
    // but a fleet netserver tests against it (it proves the same key)
    let out = mesh(&[at(a.port()), at(plain.port())], true);
    assert!(out.success(), "{out}");
    // --fleet needs --key-file
    let out = run_with_deadline(
        {
            let mut c = Command::new(bin("netserver"));
            c.args(["-D", "-p", "0", "--fleet"]);
            c
        },
        Duration::from_secs(10),
    );
    assert!(!out.success());
    assert!(
        out.stderr.contains("--fleet") && out.stderr.contains("--key-file"),
        "{out}"
    );
    // a data address of its own is refused by name: the typed request
    // has nowhere to carry one, so the mesh says so before asking
    let out = {
        let mut c = Command::new(bin("netperf"));
        c.args([
            "mesh",
            "--hosts",
            &[at(a.port()), at(plain.port())].join(","),
            "-l",
            "1",
        ])
        .arg("--key-file")
        .arg(&key)
        .args(["--", "-H", "198.18.0.99"]);
        run_with_deadline(c, Duration::from_secs(60))
    };
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("-- -H") && out.stderr.contains("no other address"),
        "{out}"
    );
    assert!(!a.log().contains("198.18.0.99"), "{}", a.log());
}

/// A request/response mesh, each pair's two directions at once: three
/// loopback netservers, three rounds (--both), every pair in Trans/s from
/// its own TCP_RR document; an incast's one round puts every other host
/// into one.
#[test]
fn request_response_meshes_both_ways_and_incast() {
    let dir = scratch("meshrr");
    let key = key_in(&dir);
    let (_servers, hosts) = loopback_fleet(3, &key);
    let json = dir.join("rr.json");
    let run = |extra: &[&str]| {
        let mut c = Command::new(bin("netperf"));
        c.args(["mesh", "--hosts", &hosts.join(","), "-l", "1", "--key-file"])
            .arg(&key)
            .arg("--json")
            .arg(&json)
            .args(extra);
        let out = run_with_deadline(c, Duration::from_secs(60));
        assert!(out.success(), "{out}");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out, doc)
    };
    let (out, doc) = run(&["-t", "TCP_RR", "--both", "--", "-r", "32,32"]);
    assert!(out.stdout.contains("(Trans/s)"), "{out}");
    assert_eq!(doc["rounds"], 3, "{doc}");
    let pairs = doc["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6);
    for p in pairs {
        assert_eq!(p["units"], "Trans/s", "{p}");
        assert_eq!(p["result"]["test"], "TCP_RR", "{p}");
        assert!(p["throughput"].as_f64().unwrap() > 100.0, "{p}");
        assert_eq!(p["result"]["options"]["request_size"], 32, "{p}");
    }
    let (_, doc) = run(&["--pattern", &format!("incast:{}", hosts[0])]);
    assert_eq!(doc["rounds"], 1, "{doc}");
    let pairs = doc["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2);
    assert!(
        pairs
            .iter()
            .all(|p| p["to"] == hosts[0].as_str() && p["round"] == 1)
    );
}

/// Ctrl-C ends the mesh at once, its figures so far printed and the
/// mesh said interrupted; the netserver running the pair's test stops it
/// when its client goes away (a 20 s test ends within seconds).
#[test]
fn ctrl_c_ends_the_mesh_and_every_test() {
    let dir = scratch("meshint");
    let key = key_in(&dir);
    let (servers, hosts) = loopback_fleet(2, &key);
    let mut c = Command::new(bin("netperf"));
    c.args([
        "mesh",
        "--hosts",
        &hosts.join(","),
        "-l",
        "20",
        "--key-file",
    ])
    .arg(&key)
    .args(["--pattern", &format!("fanout:{}", hosts[0])])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    assert!(
        servers[0].wait_for_log("started", Duration::from_secs(10)),
        "{}",
        servers[0].log()
    );
    std::thread::sleep(Duration::from_millis(500));
    let began = std::time::Instant::now();
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("interrupted"), "{stdout}");
    assert_eq!(out.status.code(), Some(1));
    // the netserver's test ended well before its 20 s: the other one
    // saw its data stop
    assert!(
        servers[0].wait_for_log("stopped: its client went away", Duration::from_secs(5)),
        "{}",
        servers[0].log()
    );
    assert!(
        servers[1].wait_for_log("TCP_STREAM", Duration::from_secs(5)),
        "{}",
        servers[1].log()
    );
    let served = servers[1].log();
    let secs: f64 = served
        .lines()
        .find(|l| l.contains("TCP_STREAM") && l.ends_with(" s"))
        .and_then(|l| l.split_whitespace().rev().nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("{served}"));
    assert!(
        secs < 10.0,
        "the served test ran {secs} s of its 20: {served}"
    );
    assert!(began.elapsed() < Duration::from_secs(12));
}

/// Host `from`'s egress at `mbit` to every host but `to`, and at
/// `to_mbit` to `to` (an htb class a destination): one link slowed alone.
fn shape_link(m: &Mesh, from: usize, to: usize, mbit: u32, to_mbit: u32) {
    let dev = format!("h{from}");
    let tc = |words: &str| {
        let mut args = vec!["ip", "netns", "exec", m.hosts[from].as_str(), "tc"];
        args.extend(words.split_whitespace());
        harness::netns::sh(&args);
    };
    let _ = Command::new("ip")
        .args([
            "netns",
            "exec",
            &m.hosts[from],
            "tc",
            "qdisc",
            "del",
            "dev",
            &dev,
            "root",
        ])
        .status();
    tc(&format!(
        "qdisc add dev {dev} root handle 1: htb default 10"
    ));
    tc(&format!(
        "class add dev {dev} parent 1: classid 1:10 htb rate {mbit}mbit burst 64kb"
    ));
    tc(&format!(
        "class add dev {dev} parent 1: classid 1:20 htb rate {to_mbit}mbit burst 64kb"
    ));
    tc(&format!(
        "filter add dev {dev} parent 1: protocol ip u32 match ip dst {}/32 flowid 1:20",
        m.addrs[to]
    ));
}

/// Six hosts behind 100 Mbit/s ports: a mesh, a second of the unchanged
/// lab judged against it (no pair named), then one link slowed by 40%:
/// that link alone is named, SLOWER, in the lines and in `changes`, and
/// the exit status is compare's (1).
#[test]
fn a_mesh_against_its_baseline_names_the_one_link_that_changed() {
    const N: usize = 6;
    let Some(m) = Mesh::new(
        "a_mesh_against_its_baseline_names_the_one_link_that_changed",
        N + 1,
    ) else {
        return;
    };
    for i in 0..N {
        m.shape(i, 100, 100);
    }
    let dir = scratch("meshbase");
    let key = key_in(&dir);
    let _servers: Vec<Netserver> = (0..N).map(|i| m.fleet_netserver(i, &key, &[])).collect();
    let mesh = |json: &Path, baseline: Option<&Path>| {
        let mut c = mesh_of(&m, N, &key, json);
        if let Some(b) = baseline {
            c.arg("--baseline").arg(b);
        }
        let out = run_with_deadline(c, Duration::from_secs(240));
        eprintln!("{}", out.stdout);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {out}"));
        (out, doc)
    };
    let base = dir.join("base.json");
    let (out, doc) = mesh(&base, None);
    assert!(out.success(), "{out}");
    // each pair's samples: its interim rates, ten of them
    let first = &doc["pairs"][0]["result"];
    assert!(first["interim"].as_array().unwrap().len() >= 8, "{first}");
    let (out, doc) = mesh(&dir.join("same.json"), Some(&base));
    assert_eq!(doc["changes"], serde_json::json!([]), "{out}");
    assert_eq!(
        doc["baseline"]["compared"],
        N * (N - 1),
        "{}",
        doc["baseline"]
    );
    assert!(
        out.stdout.contains("no pair changed beyond the noise"),
        "{out}"
    );
    assert!(matches!(out.status.code(), Some(0 | 3)), "{out}");
    // one link slowed by 40%
    let (from, to) = (1, 4);
    shape_link(&m, from, to, 100, 60);
    let (out, doc) = mesh(&dir.join("slow.json"), Some(&base));
    assert_eq!(out.status.code(), Some(1), "{out}");
    let changes = doc["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{out}\n{changes:?}");
    let c = &changes[0];
    assert_eq!(c["from"], m.addrs[from].as_str(), "{c}");
    assert_eq!(c["to"], m.addrs[to].as_str(), "{c}");
    assert_eq!(c["verdict"], "SLOWER", "{c}");
    let change = c["change"].as_f64().unwrap();
    // (htb's 60 Mbit/s carries about 55 of goodput; tbf's 100, 98)
    assert!((-0.5..-0.3).contains(&change), "{c}");
    assert!(c["p"].as_f64().unwrap() <= 0.01, "{c}");
    assert!(
        out.stdout
            .contains(&format!("changed: {} -> {}: ", m.addrs[from], m.addrs[to])),
        "{out}"
    );
}

/// Four loopback netservers; one is killed once the first round's results
/// are in and started again on its port three seconds later: it is asked
/// again before each round, its pairs run at the end, every pair is
/// measured, no host is left down, and the mesh succeeds.
#[test]
fn a_host_back_after_a_few_seconds_has_every_pair_measured() {
    let dir = scratch("meshback");
    let key = key_in(&dir);
    let (mut servers, hosts) = loopback_fleet(4, &key);
    let json = dir.join("m.json");
    let csv = dir.join("m.csv");
    let mut c = Command::new(bin("netperf"));
    c.args(["mesh", "--hosts", &hosts.join(","), "-l", "1", "--key-file"])
        .arg(&key)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    first_round_in(&csv);
    let port = servers[3].port();
    let mut dead = servers.pop().unwrap();
    let _ = dead.signal_and_wait("KILL", Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(3));
    let mut again = Command::new(bin("netserver"));
    again
        .args([
            "-D",
            "-p",
            &port.to_string(),
            "-L",
            "127.0.0.1",
            "--fleet",
            "--key-file",
        ])
        .arg(&key);
    servers.push(Netserver::spawn(again));
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("answers again"), "{stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["hosts_down"], serde_json::json!([]), "{doc}");
    let pairs = doc["pairs"].as_array().unwrap();
    let measured: std::collections::BTreeSet<(String, String)> = pairs
        .iter()
        .filter(|p| p["throughput"].as_f64().is_some())
        .map(|p| (p["from"].to_string(), p["to"].to_string()))
        .collect();
    assert_eq!(
        measured.len(),
        12,
        "every ordered pair measured: {stdout}\n{stderr}"
    );
    assert_eq!(pairs.len(), 12, "each pair once: {doc}");
}

/// `--push`: the mesh's figures in a real Pushgateway (Debian's), scraped
/// by a real Prometheus: a gauge a pair, equal to the pair's figure in
/// the JSON, the duration and the hosts down.
#[test]
fn the_mesh_pushes_to_a_pushgateway_that_prometheus_scrapes() {
    if !crate::metrics::tool("prometheus") || !crate::metrics::tool("prometheus-pushgateway") {
        return;
    }
    let dir = scratch("meshpush");
    let key = key_in(&dir);
    let (_servers, hosts) = loopback_fleet(3, &key);
    let gw: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _gateway = Killed(
        Command::new("prometheus-pushgateway")
            .arg(format!("--web.listen-address={gw}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("pushgateway.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let begun = std::time::Instant::now();
    while std::net::TcpStream::connect(gw).is_err() {
        assert!(begun.elapsed() < Duration::from_secs(20), "no pushgateway");
        std::thread::sleep(Duration::from_millis(100));
    }
    let prom = crate::metrics::Prometheus::scraping(&dir, gw, true);
    let json = dir.join("m.json");
    let mut c = Command::new(bin("netperf"));
    c.args(["mesh", "--hosts", &hosts.join(","), "-l", "1", "--key-file"])
        .arg(&key)
        .arg("--json")
        .arg(&json)
        .args(["--push", &format!("http://{gw}")]);
    let out = run_with_deadline(c, Duration::from_secs(60));
    assert!(out.success(), "{out}");
    assert!(out.stderr.contains("pushed to"), "{out}");
    // the gateway holds every pair
    let (code, _, text) = crate::metrics::get(gw, "/metrics", None);
    assert_eq!(code, 200);
    let pairs: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("netperf_mesh_pair_value{"))
        .collect();
    assert_eq!(pairs.len(), 6, "{text}");
    // and Prometheus scraped them, each equal to the JSON's figure
    let got = prom.wait_for(
        "count(netperf_mesh_pair_value)",
        6.0,
        Duration::from_secs(30),
    );
    assert_eq!(
        got,
        Some(6.0),
        "{}",
        std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for p in doc["pairs"].as_array().unwrap() {
        let q = format!(
            "netperf_mesh_pair_value{{from=\"{}\",to=\"{}\",test=\"TCP_STREAM\"}}",
            p["from"].as_str().unwrap(),
            p["to"].as_str().unwrap()
        );
        let v = prom.value(&q).unwrap_or_else(|| panic!("{q}: no value"));
        let want = p["throughput"].as_f64().unwrap();
        assert!((v - want).abs() <= want * 1e-9, "{q}: {v} against {want}");
    }
    assert_eq!(prom.value("netperf_mesh_hosts_down"), Some(0.0));
    assert!(prom.value("netperf_mesh_duration_seconds").unwrap() > 1.0);
}
