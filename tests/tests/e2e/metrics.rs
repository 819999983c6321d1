//! A netserver a lab can watch: `--metrics` scraped by a real Prometheus
//! and read back through its HTTP API against the figures netperf printed,
//! `promtool check metrics` on the endpoint's text, the JSON log and the
//! `--record` lines read back, and scrapers that misbehave holding up
//! nothing.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, free_port, keyval, run_with_deadline};
use serde_json::Value;

fn temp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rsnetperf-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether `name` runs here; in CI (NETPERF_REQUIRE_FLEET=1) it must.
pub(crate) fn tool(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("NETPERF_REQUIRE_FLEET").as_deref() != Ok("1"),
            "{name} is not installed (NETPERF_REQUIRE_FLEET=1 requires it)"
        );
        eprintln!("!!! SKIPPED: {name} is not installed");
    }
    found
}

/// One HTTP/1.0 GET: the status line's code, the headers and the body.
pub(crate) fn get(addr: SocketAddr, target: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(s, "GET {target} HTTP/1.0\r\nHost: x\r\n{accept}\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_string(), body.to_string())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus server scraping one target every second, killed on drop.
pub(crate) struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Prometheus {
    fn start(dir: &std::path::Path, target: SocketAddr) -> Prometheus {
        Prometheus::scraping(dir, target, false)
    }

    /// One scraping `target`; with `honor_labels`, the scraped labels
    /// kept as they are (a Pushgateway's).
    pub(crate) fn scraping(
        dir: &std::path::Path,
        target: SocketAddr,
        honor_labels: bool,
    ) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: netserver\n    honor_labels: {honor_labels}\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus");
        Prometheus { child, addr }
    }

    /// An instant query's single value, if it has one.
    pub(crate) fn value(&self, query: &str) -> Option<f64> {
        let (code, _, body) = get(
            self.addr,
            &format!("/api/v1/query?query={}", urlencode(query)),
            None,
        );
        if code != 200 {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        let r = v["data"]["result"].as_array()?;
        if r.len() != 1 {
            return None;
        }
        r[0]["value"][1].as_str()?.parse().ok()
    }

    /// Wait (at most `limit`) until `query` is `want`; what it last was.
    pub(crate) fn wait_for(&self, query: &str, want: f64, limit: Duration) -> Option<f64> {
        let deadline = Instant::now() + limit;
        let mut last = None;
        while Instant::now() < deadline {
            last = self.value(query);
            if last == Some(want) {
                break;
            }
            thread::sleep(Duration::from_millis(250));
        }
        last
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
// one scenario read top to bottom: a real Prometheus scraping a run
#[allow(clippy::too_many_lines)]
fn prometheus_scrapes_counters_that_match_what_netperf_printed() {
    if !tool("prometheus") || !tool("promtool") {
        return;
    }
    let dir = temp("metrics");
    let maddr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let record = dir.join("record.jsonl");
    let log = dir.join("netserver.log");
    let ns = Netserver::start(&[
        "--metrics",
        &maddr.to_string(),
        "--record",
        record.to_str().unwrap(),
        "--log-format",
        "json",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    let prom = Prometheus::start(&dir, maddr);
    // scraped while the tests run
    let stream = ns
        .netperf(&[
            "-l",
            "2",
            "-t",
            "TCP_STREAM",
            "--",
            "-k",
            "REMOTE_BYTES_RECVD,LOCAL_BYTES_SENT",
        ])
        .ok();
    let udp = ns
        .netperf(&[
            "-l",
            "1",
            "-t",
            "UDP_STREAM",
            "--",
            "-m",
            "1024",
            "-k",
            "REMOTE_RECV_CALLS,REMOTE_BYTES_RECVD",
        ])
        .ok();
    let rr = ns
        .netperf(&[
            "-l",
            "1",
            "-t",
            "TCP_RR",
            "--",
            "-k",
            "THROUGHPUT,REMOTE_BYTES_SENT,P50_LATENCY",
        ])
        .ok();
    let tcp_bytes = keyval(&stream.stdout, "REMOTE_BYTES_RECVD");
    assert_eq!(tcp_bytes, keyval(&stream.stdout, "LOCAL_BYTES_SENT"));
    let datagrams = keyval(&udp.stdout, "REMOTE_RECV_CALLS");
    let rr_bytes = keyval(&rr.stdout, "REMOTE_BYTES_SENT");
    assert!(tcp_bytes > 0.0 && datagrams > 0.0 && rr_bytes > 0.0);

    // Prometheus's view, once it has scraped after the last test
    let limit = Duration::from_secs(60);
    let completed = prom.wait_for("sum(netserver_tests_completed_total)", 3.0, limit);
    assert_eq!(completed, Some(3.0), "Prometheus never saw 3 tests");
    let q = |query: &str| prom.value(query);
    assert_eq!(q("sum(netserver_tests_started_total)"), Some(3.0));
    assert_eq!(
        q(r#"netserver_tests_completed_total{test="TCP_STREAM",dialect="native"}"#),
        Some(1.0)
    );
    assert_eq!(
        q(r#"netserver_received_bytes_total{test="TCP_STREAM"}"#),
        Some(tcp_bytes),
        "the bytes netperf printed"
    );
    assert_eq!(
        q(r#"netserver_received_datagrams_total{test="UDP_STREAM"}"#),
        Some(datagrams)
    );
    assert_eq!(
        q(r#"netserver_sent_bytes_total{test="TCP_RR"}"#),
        Some(rr_bytes)
    );
    assert_eq!(q("netserver_sessions_accepted_total"), Some(3.0));
    assert_eq!(q("netserver_tests_active"), Some(0.0));
    assert_eq!(
        q(r#"netserver_test_duration_seconds_count{test="TCP_STREAM"}"#),
        Some(1.0)
    );
    assert!(q("netserver_memory_budget_limit_bytes").is_some_and(|b| b >= (1 << 20) as f64));
    assert!(q("process_open_fds").is_some_and(|n| n > 0.0));
    assert_eq!(
        q("sum(netserver_sessions_refused_total)").unwrap_or(0.0),
        0.0
    );
    // scraped as OpenMetrics: Prometheus asked for it
    assert_eq!(q(r#"up{job="netserver"}"#), Some(1.0));

    // the endpoint's text passes promtool's checks, in both formats
    let (code, head, plain) = get(maddr, "/metrics", None);
    assert_eq!(code, 200, "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let mut check = Command::new("promtool");
    check
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = check.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plain.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}\n{plain}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, head, om) = get(maddr, "/metrics", Some("application/openmetrics-text"));
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.ends_with("# EOF\n"));
    assert_eq!(get(maddr, "/", None).0, 404);

    // the record: a line a test, both ends' figures as netperf had them
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let tests: Vec<&str> = lines.iter().map(|l| l["test"].as_str().unwrap()).collect();
    assert_eq!(tests, ["TCP_STREAM", "UDP_STREAM", "TCP_RR"]);
    assert_eq!(
        lines[0]["remote"]["bytes_received"].as_f64(),
        Some(tcp_bytes)
    );
    assert_eq!(lines[0]["local"]["bytes_sent"].as_f64(), Some(tcp_bytes));
    assert_eq!(lines[0]["throughput"]["units"], "bits/s");
    let udp_lost = &lines[1]["loss"];
    assert_eq!(udp_lost["datagrams_received"].as_f64(), Some(datagrams));
    assert_eq!(
        udp_lost["datagrams_sent"].as_f64().unwrap() - datagrams,
        udp_lost["datagrams_lost"].as_f64().unwrap()
    );
    // netperf's rate, as it printed it (two decimals), marked as the
    // client's; the headline is the netserver's own count over its own
    // interval
    let rr_rate = keyval(&rr.stdout, "THROUGHPUT");
    let recorded = lines[2]["client"]["throughput"]["value"].as_f64().unwrap();
    assert!(
        (recorded - rr_rate).abs() <= 0.006,
        "{recorded} vs {rr_rate}"
    );
    let own = lines[2]["remote"]["transactions"].as_f64().unwrap()
        / lines[2]["elapsed_s"].as_f64().unwrap();
    let headline = lines[2]["throughput"]["value"].as_f64().unwrap();
    assert!((headline - own).abs() <= own * 1e-9, "{headline} vs {own}");
    assert!(
        (headline - rr_rate).abs() <= rr_rate * 0.02,
        "{headline} vs {rr_rate}"
    );
    assert_eq!(lines[2]["throughput"]["units"], "transactions/s");
    let p50 = keyval(&rr.stdout, "P50_LATENCY");
    let recorded = lines[2]["client"]["latency"]["p50_us"].as_f64().unwrap();
    assert!((recorded - p50).abs() < 1.0, "{recorded} vs {p50}");
    for l in &lines {
        assert_eq!(l["dialect"], "native");
        assert!(l["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert!(l["options"]["server"].is_object());
    }

    // the JSON log: one object a line, the tests among them with figures
    let log = std::fs::read_to_string(&log).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "test-completed")
        .collect();
    assert_eq!(done.len(), 3, "{log}");
    assert_eq!(done[0]["test"], "TCP_STREAM");
    assert_eq!(
        done[0]["figures"]["bytes_received"].as_f64(),
        Some(tcp_bytes)
    );
    for e in &events {
        assert!(e["ts"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(e["msg"].is_string() && e["level"].is_string(), "{e}");
    }
    assert!(
        done.iter()
            .all(|e| e["session"].is_u64() && e["outcome"] == "completed")
    );
    drop(prom);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scrapers that never read, send garbage or never finish their request,
/// a thousand at once: the running test's control messages and the next
/// session go on, the endpoint holds at most its 64 connections, and a
/// proper scrape is answered after them.
#[test]
fn hostile_scrapers_hold_up_no_test() {
    let maddr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let ns = Netserver::start(&["--metrics", &maddr.to_string()]);
    let port = ns.port();
    // a test runs (its control connection's messages come at its end)
    let running = thread::spawn(move || {
        harness::netperf_at(
            &port.to_string(),
            &[
                "-l",
                "3",
                "-t",
                "TCP_RR",
                "-D",
                "0.5",
                "--",
                "-k",
                "THROUGHPUT",
            ],
        )
    });
    let mut held = Vec::new();
    for i in 0..1000 {
        let Ok(mut s) = TcpStream::connect_timeout(&maddr, Duration::from_secs(2)) else {
            break;
        };
        let _ = match i % 3 {
            0 => s.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n"),
            1 => s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"),
            _ => s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n"),
        };
        held.push(s);
    }
    assert!(held.len() >= 900, "only {} connections", held.len());
    let out = running.join().unwrap().ok();
    assert!(keyval(&out.stdout, "THROUGHPUT") > 100.0, "{}", out.stdout);
    // the next session, while they are all still open
    let next = ns.netperf(&["-l", "1", "-t", "TCP_RR"]).ok();
    assert!(next.stdout.contains("Trans."), "{}", next.stdout);
    // a proper scrape is answered; the endpoint kept at most 64
    let (code, _, body) = get(maddr, "/metrics", None);
    assert_eq!(code, 200);
    let fds: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("process_open_fds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(fds < 64.0 + 40.0, "netserver holds {fds} descriptors");
    assert!(body.contains("netserver_tests_completed_total{test=\"TCP_RR\",dialect=\"native\"} 2"));
    drop(held);
}

/// Finding 7 of round 4: a flood of connections at the metrics port
/// dropped scrapes (2 of 12). A scraper asks at once, and a newcomer only
/// takes the place of a connection that has asked nothing for 100 ms:
/// every scrape during the flood is answered.
#[test]
fn a_connection_flood_drops_no_scrape() {
    let maddr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let _ns = Netserver::start(&["--metrics", &maddr.to_string()]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            let mut n = 0u32;
            // bounded: 20,000 connections or 5 s
            let t0 = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && n < 20_000
                && t0.elapsed() < Duration::from_secs(5)
            {
                if let Ok(s) = TcpStream::connect_timeout(&maddr, Duration::from_secs(1)) {
                    held.push_back(s);
                    n += 1;
                }
                if held.len() > 500 {
                    held.pop_front();
                }
            }
            n
        })
    };
    thread::sleep(Duration::from_millis(200));
    let mut answered = 0;
    for _ in 0..12 {
        if let Ok((200, _, _)) = std::panic::catch_unwind(|| get(maddr, "/metrics", None)) {
            answered += 1;
        }
        thread::sleep(Duration::from_millis(150));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = flood.join().unwrap();
    eprintln!("{answered} of 12 scrapes answered during a flood of {n} connections");
    assert!(n > 100, "the flood made {n} connections");
    assert_eq!(answered, 12);
}

#[test]
fn bad_metrics_and_log_options_are_named() {
    for (args, needle) in [
        (&["--metrics", "nonsense"][..], "--metrics: 'nonsense'"),
        (&["--metrics", "127.0.0.1:0"][..], "--metrics"),
        (
            &["--log-format", "xml"][..],
            "--log-format: 'xml' is not a log format",
        ),
    ] {
        let mut c = Command::new(harness::bin("netserver"));
        c.arg("-D").args(["-p", "0", "-L", "127.0.0.1"]).args(args);
        let out = run_with_deadline(c, Duration::from_secs(10));
        assert!(!out.success(), "{args:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    // a port already taken: the command fails, naming it
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = taken.local_addr().unwrap().to_string();
    let mut c = Command::new(harness::bin("netserver"));
    c.args(["-D", "-p", "0", "-L", "127.0.0.1", "--metrics", &a]);
    let out = run_with_deadline(c, Duration::from_secs(10));
    assert!(!out.success());
    assert!(
        out.stderr.contains(&format!("--metrics {a}")),
        "{}",
        out.stderr
    );
}

/// SIGHUP reopens the record (logrotate moved it), as it does the log.
#[test]
fn sighup_reopens_the_record() {
    let dir = temp("record-hup");
    let record = dir.join("record.jsonl");
    let mut ns = Netserver::start(&["--record", record.to_str().unwrap()]);
    ns.netperf(&["-l", "1", "-t", "TCP_RR"]).ok();
    let moved = dir.join("record.jsonl.1");
    std::fs::rename(&record, &moved).unwrap();
    let _ = Command::new("kill")
        .args(["-HUP", &ns.pid().to_string()])
        .status();
    assert!(
        ns.wait_for_log("reopened", Duration::from_secs(10)),
        "{}",
        ns.log()
    );
    ns.netperf(&["-l", "1", "-t", "UDP_RR"]).ok();
    let _ = ns.signal_and_wait("TERM", Duration::from_secs(10));
    let old = std::fs::read_to_string(&moved).unwrap();
    let new = std::fs::read_to_string(&record).unwrap();
    assert_eq!(old.lines().count(), 1, "{old}");
    assert!(old.contains("\"TCP_RR\""));
    assert_eq!(new.lines().count(), 1, "{new}");
    assert!(new.contains("\"UDP_RR\""));
    let _ = std::fs::remove_dir_all(&dir);
}
