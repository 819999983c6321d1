//! The findings of the adversarial check after round four (issue 51), each
//! tried as the attacker sent it: SIGHUP to a daemon whatever threads its
//! options start, the key guarding the iperf3 port, third-party requests
//! that name files, stolen iperf3 cookies, limits every dialect obeys,
//! forged rates in the record, and the descriptor pool's shares.

use std::{
    path::PathBuf,
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, RawClient, have_iperf3};

/// A folder of this test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("np-hard-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// A key file, readable by its owner alone (as the daemon requires).
    fn key(&self, name: &str, contents: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.file(name, contents);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the netserver's process is still running.
fn alive(ns: &Netserver) -> bool {
    std::path::Path::new(&format!("/proc/{}", ns.pid())).exists()
        && !std::fs::read_to_string(format!("/proc/{}/stat", ns.pid()))
            .unwrap_or_default()
            .contains(") Z ")
}

/// SIGHUP is what logrotate's postrotate sends: whatever option started a
/// thread of its own (metrics, iperf3, fleet, the log's and the record's
/// writers, the policy's state), the daemon takes it, says so, and goes
/// on serving. A thread started before the signals were blocked took
/// SIGHUP's default action and ended the process (exit status 129).
#[test]
fn sighup_leaves_the_daemon_serving_whatever_threads_its_options_start() {
    let dir = Dir::new("hup");
    let key = dir.key("key", "a fleet key for the hardening tests\n");
    let policy = dir.file(
        "policy.toml",
        &format!("[daemon]\nstate_file = \"{}\"\n", dir.path("state.json")),
    );
    let log = dir.path("log");
    let metrics = format!("127.0.0.1:{}", harness::free_port());
    let record = dir.path("record");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("--metrics", vec!["--metrics", &metrics]),
        ("--iperf3", vec!["--iperf3", "0"]),
        ("--fleet", vec!["--fleet", "--key-file", &key]),
        ("--log-file", vec!["--log-file", &log]),
        ("--record", vec!["--record", &record]),
        ("--policy", vec!["--policy", &policy]),
        (
            "all of them",
            vec![
                "--metrics",
                &metrics,
                "--iperf3",
                "0",
                "--fleet",
                "--key-file",
                &key,
                "--policy",
                &policy,
                "-v",
                "2",
            ],
        ),
    ];
    for (what, args) in cases {
        let ns = Netserver::start(&args);
        // its threads are up: one served session first
        drop(RawClient::hello(ns.addr()));
        for _ in 0..3 {
            let _ = std::process::Command::new("kill")
                .args(["-HUP", &ns.pid().to_string()])
                .status();
            thread::sleep(Duration::from_millis(150));
        }
        assert!(alive(&ns), "{what}: SIGHUP ended the daemon\n{}", ns.log());
        // still serving: a whole test runs
        let mut np = vec!["-t", "TCP_RR", "-l", "1", "-P", "0"];
        if args.contains(&"--key-file") {
            np.extend(["--key-file", &key]);
        }
        let out = ns.netperf(&np);
        assert!(
            out.status.success(),
            "{what}: no test after SIGHUP: {}\n{}",
            out.stderr,
            ns.log()
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !ns.log().contains("SIGHUP") {
            thread::sleep(Duration::from_millis(20));
        }
        if args.contains(&"--log-file") {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                text.contains("SIGHUP"),
                "{what}: the log names no SIGHUP: {text}"
            );
        } else {
            assert!(
                ns.log().contains("SIGHUP"),
                "{what}: no SIGHUP line:\n{}",
                ns.log()
            );
        }
    }
}

/// An iperf3 client's run against `port`: its JSON, or its error.
fn iperf3_client(port: u16, extra: &[&str], password: Option<&str>) -> (bool, String) {
    let mut cmd = std::process::Command::new("iperf3");
    cmd.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
        .args(extra);
    if let Some(p) = password {
        cmd.env("IPERF3_PASSWORD", p);
    }
    let out = harness::run_with_deadline(cmd, Duration::from_secs(20));
    // (3.12 with -J exits 0 on an error: its JSON has "error")
    let text = format!("{}{}", out.stdout, out.stderr);
    (out.status.success() && !text.contains("\"error\""), text)
}

/// Bytes the iperf3 client's JSON says the receiver got.
fn received(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    v["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0)
}

/// An RSA key pair as iperf3's documentation makes it (openssl), and a
/// users file with alice's password "wonder".
fn iperf3_credentials(dir: &Dir) -> (String, String, String) {
    let private = dir.path("private.pem");
    let public = dir.path("public.pem");
    let ok = |args: &[&str]| {
        let s = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            s.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&s.stderr)
        );
    };
    ok(&["genrsa", "-out", &private, "2048"]);
    ok(&["rsa", "-in", &private, "-pubout", "-out", &public]);
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(b"{alice}wonder")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let users = dir.file("users.csv", &format!("# iperf3's users\nalice,{hash}\n"));
    (private, public, users)
}

/// `--key-file` guards the iperf3 port too: an iperf3 client without
/// credentials is refused in iperf3's words; with the credentials the
/// server was given (iperf3's own RSA scheme and users file) it is served;
/// a wrong password is refused; `--allow-iperf3-unauthenticated` lets any
/// in, as it says at start. (Before: a keyless iperf3 3.12 client ran a
/// full test while netperf without the key was refused.)
#[test]
fn the_key_guards_the_iperf3_port() {
    if !have_iperf3() {
        return;
    }
    let dir = Dir::new("iperf3-key");
    let key = dir.key("key", "the lab's key for iperf3 tests\n");
    let (private, public, users) = iperf3_credentials(&dir);

    // --key-file alone: nobody on the iperf3 port, said at start
    let ns = Netserver::start(&["--iperf3", "0", "--key-file", &key]);
    let port = ns.iperf3_port();
    assert!(
        ns.wait_for_log("iperf3 clients are refused", Duration::from_secs(5)),
        "{}",
        ns.log()
    );
    let (ok, said) = iperf3_client(port, &[], None);
    assert!(!ok && said.contains("test authorization failed"), "{said}");
    assert_eq!(received(&said), 0.0);
    let (ok, said) = iperf3_client(
        port,
        &["--username", "alice", "--rsa-public-key-path", &public],
        Some("wonder"),
    );
    assert!(!ok && said.contains("test authorization failed"), "{said}");
    drop(ns);

    // with iperf3's credentials: alice in, the rest out
    let ns = Netserver::start(&[
        "--iperf3",
        "0",
        "--key-file",
        &key,
        "--rsa-private-key-path",
        &private,
        "--authorized-users-path",
        &users,
    ]);
    let port = ns.iperf3_port();
    let auth = [
        "--username",
        "alice",
        "--rsa-public-key-path",
        public.as_str(),
    ];
    let (ok, said) = iperf3_client(port, &auth, Some("wonder"));
    assert!(ok && received(&said) > 0.0, "{said}\n{}", ns.log());
    let (ok, said) = iperf3_client(port, &auth, Some("wrong"));
    assert!(!ok && said.contains("test authorization failed"), "{said}");
    let (ok, said) = iperf3_client(port, &[], None);
    assert!(!ok && said.contains("test authorization failed"), "{said}");
    drop(ns);

    // said loudly: unauthenticated iperf3 clients are let in
    let ns = Netserver::start(&[
        "--iperf3",
        "0",
        "--key-file",
        &key,
        "--allow-iperf3-unauthenticated",
    ]);
    let (ok, said) = iperf3_client(ns.iperf3_port(), &[], None);
    assert!(ok && received(&said) > 0.0, "{said}");
}

/// The resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A third-party request names no file of the daemon's host: `-- -k
/// /dev/zero` took the daemon to 969 MB (the memory cgroup killed it),
/// and `-- -k /nonexistent/x` told the requester whether a path exists.
/// Both are refused, in the same words, before anything is read; so is
/// every option that names a path, an address or a port of the host: the
/// request is typed and has nowhere to carry one, so the mesh names the
/// option before it asks any netserver.
#[test]
fn a_fleet_request_naming_a_file_is_refused() {
    let dir = Dir::new("fleet-file");
    let key = dir.key("fleet.key", "a fleet key for the hardening tests\n");
    let fleet = || Netserver::start(&["--fleet", "--key-file", &key]);
    let (a, b) = (fleet(), fleet());
    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", a.port(), b.port());
    let mesh = |test: &[&str]| {
        let mut c = std::process::Command::new(harness::bin("netperf"));
        c.args([
            "mesh",
            "--hosts",
            &hosts,
            "-l",
            "1",
            "--key-file",
            &key,
            "--",
        ])
        .args(test);
        harness::run_with_deadline(c, Duration::from_secs(60))
    };
    let before = rss_kib(a.pid()).max(rss_kib(b.pid()));
    let mut said = Vec::new();
    for test in [
        &["-k", "/dev/zero"][..],
        &["-k", "/nonexistent/x"],
        &["-o", "/etc/hostname"],
        &["-O", "/dev/zero"],
    ] {
        let out = mesh(test);
        assert!(!out.success(), "{test:?}: {}", out.stdout);
        assert!(out.stderr.contains("-o/-O/-k"), "{test:?}: {}", out.stderr);
        // what it says of the path: nothing (the same words for each)
        let words: Vec<String> = out
            .stderr
            .lines()
            .filter(|l| l.contains("-o/-O/-k"))
            .map(|l| l.replace(test[1], "PATH"))
            .collect();
        said.push(words);
    }
    assert!(said.windows(2).all(|w| w[0] == w[1]), "{said:?}");
    for ns in [&a, &b] {
        assert!(alive(ns), "a netserver died:\n{}", ns.log());
        let rss = rss_kib(ns.pid());
        assert!(
            rss < before + 64 * 1024,
            "{rss} KiB resident after the requests (before {before})"
        );
    }
    // and a request of what a third-party test may do still runs
    let out = mesh(&["-m", "16K"]);
    assert!(out.success(), "{}{}", out.stdout, out.stderr);
}

/// iperf3's state bytes this test speaks.
mod iperf3_state {
    pub const TEST_START: u8 = 1;
    pub const TEST_RUNNING: u8 = 2;
    pub const TEST_END: u8 = 4;
    pub const PARAM_EXCHANGE: u8 = 9;
    pub const CREATE_STREAMS: u8 = 10;
    pub const EXCHANGE_RESULTS: u8 = 13;
    pub const DISPLAY_RESULTS: u8 = 14;
    pub const IPERF_DONE: u8 = 16;
}

fn read_state(s: &mut std::net::TcpStream) -> u8 {
    let mut b = [0u8; 1];
    std::io::Read::read_exact(s, &mut b).expect("a state byte");
    b[0]
}

fn write_json(s: &mut std::net::TcpStream, v: &serde_json::Value) {
    let text = v.to_string();
    let mut frame = (text.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(text.as_bytes());
    std::io::Write::write_all(s, &frame).unwrap();
}

fn read_json(s: &mut std::net::TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    std::io::Read::read_exact(s, &mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    std::io::Read::read_exact(s, &mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// A TCP connection to `port` from `local`.
fn connect_from(local: &str, port: u16) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let at: std::net::SocketAddr = format!("{local}:0").parse().unwrap();
    s.bind(&at.into()).unwrap();
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// An iperf3 stream is taken only from its control connection's address:
/// a stream from 127.0.0.7 presenting the cookie of a client at 127.0.0.1
/// (it crosses the control connection in the clear) is closed, and the
/// client's own stream is its test's, its bytes exactly the server's
/// figure. Before, the thief's stream was counted as the victim's.
#[test]
fn a_stream_with_a_stolen_cookie_from_another_address_is_refused() {
    use iperf3_state::*;
    use std::io::{Read, Write};
    let ns = Netserver::start(&["--iperf3", "0"]);
    let port = ns.iperf3_port();
    let mut cookie = b"hardeningtestcookieabcdefghijklmnopq".to_vec();
    cookie.push(0);
    assert_eq!(cookie.len(), 37);

    let mut ctl = connect_from("127.0.0.1", port);
    ctl.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    ctl.write_all(&cookie).unwrap();
    assert_eq!(read_state(&mut ctl), PARAM_EXCHANGE);
    write_json(
        &mut ctl,
        &serde_json::json!({"tcp": true, "time": 2, "parallel": 1, "len": 131072, "client_version": "3.12"}),
    );
    assert_eq!(read_state(&mut ctl), CREATE_STREAMS);

    // the thief, first, from another address of the host
    let mut thief = connect_from("127.0.0.7", port);
    thief.write_all(&cookie).unwrap();
    let _ = thief.write_all(&[0x55; 65536]);
    thief
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut b = [0u8; 16];
    match thief.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the thief's stream was kept: {other:?}\n{}", ns.log()),
    }

    // the client's own stream
    let mut stream = connect_from("127.0.0.1", port);
    stream.write_all(&cookie).unwrap();
    assert_eq!(read_state(&mut ctl), TEST_START);
    assert_eq!(read_state(&mut ctl), TEST_RUNNING);
    let sent: u64 = 8 << 20;
    let block = vec![0xaa_u8; 1 << 16];
    for _ in 0..(sent / block.len() as u64) {
        stream.write_all(&block).unwrap();
    }
    thread::sleep(Duration::from_millis(500));
    ctl.write_all(&[TEST_END]).unwrap();
    assert_eq!(read_state(&mut ctl), EXCHANGE_RESULTS);
    write_json(
        &mut ctl,
        &serde_json::json!({"cpu_util_total": 0, "cpu_util_user": 0, "cpu_util_system": 0,
            "sender_has_retransmits": 0, "streams": [{"id": 1, "bytes": sent, "retransmits": 0,
            "jitter": 0, "errors": 0, "packets": 0, "start_time": 0, "end_time": 1}]}),
    );
    let server = read_json(&mut ctl);
    let got = server["streams"][0]["bytes"].as_u64().unwrap_or(0);
    assert_eq!(
        got, sent,
        "the server's figure is the client's stream alone: {server}"
    );
    assert_eq!(
        server["streams"].as_array().map_or(0, Vec::len),
        1,
        "{server}"
    );
    assert_eq!(read_state(&mut ctl), DISPLAY_RESULTS);
    ctl.write_all(&[IPERF_DONE]).unwrap();
    assert!(
        ns.wait_for_log("cookie of another address", Duration::from_secs(5)),
        "{}",
        ns.log()
    );
}

/// `--max-test-length` holds for iperf3's clients as for netperf's: `-t
/// 10` under a 4 s limit is refused with the limit named (it ran 10 s);
/// `-t 3` runs. A client that never says TEST_END is ended a few seconds
/// after the length it said (it was cut at the limit plus 20 s).
#[test]
fn the_test_length_limit_holds_for_iperf3_clients() {
    if !have_iperf3() {
        return;
    }
    use iperf3_state::*;
    use std::io::Write;
    let ns = Netserver::start(&["--iperf3", "0", "--max-test-length", "4"]);
    let port = ns.iperf3_port();
    let start = Instant::now();
    let (ok, said) = iperf3_client(port, &["-t", "10"], None);
    // in the client's own words (3.12: IEDURATION; 3.20 and later have
    // one for a server's limit), and the limit named in the daemon's log
    assert!(!ok && said.contains("test duration too long"), "{said}");
    assert!(
        ns.wait_for_log("--max-test-length", Duration::from_secs(5)),
        "{}",
        ns.log()
    );
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    let (ok, said) = iperf3_client(port, &["-t", "3"], None);
    assert!(ok && received(&said) > 0.0, "{said}");

    // a raw client of -t 1 that never ends its test
    let mut cookie = b"lengthlimittestcookieabcdefghijklmno".to_vec();
    cookie.push(0);
    let mut ctl = connect_from("127.0.0.1", port);
    ctl.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    ctl.write_all(&cookie).unwrap();
    assert_eq!(read_state(&mut ctl), PARAM_EXCHANGE);
    write_json(
        &mut ctl,
        &serde_json::json!({"tcp": true, "time": 1, "parallel": 1}),
    );
    assert_eq!(read_state(&mut ctl), CREATE_STREAMS);
    let mut stream = connect_from("127.0.0.1", port);
    stream.write_all(&cookie).unwrap();
    assert_eq!(read_state(&mut ctl), TEST_START);
    assert_eq!(read_state(&mut ctl), TEST_RUNNING);
    let began = Instant::now();
    // SERVER_ERROR (-2) comes at its length and the grace, not the limit
    assert_eq!(read_state(&mut ctl), 0xfe);
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(6),
        "{took:?}"
    );
}

/// The record's client block keeps no forged rate: a summary whose names
/// are all well formed but whose figures the netserver's own contradict
/// (1.48e29 bit/s: u64::MAX/2 bytes in a nanosecond) is left out, and the
/// line says which field; an honest client's summary is kept.
#[test]
fn forged_rates_are_not_recorded() {
    let dir = Dir::new("forged");
    let record = dir.path("record.jsonl");
    let ns = Netserver::start(&["--record", &record]);
    let (mut c, _) = RawClient::after_one_byte(ns.addr());
    let mut forged = proto::ClientSummary::default();
    forged.local.elapsed_ns = 1;
    forged.local.bytes_sent = u64::MAX / 2;
    c.send(&proto::ClientMsg::Summary(Box::new(forged)));
    c.send(&proto::ClientMsg::Bye);
    let (mut c, server) = RawClient::after_one_byte(ns.addr());
    // an honest client's clock runs from its first send: shorter, on a
    // 1-byte test, than the netserver's
    let mut honest = proto::ClientSummary::default();
    honest.local.elapsed_ns = server.elapsed_ns * 2 / 5;
    honest.local.bytes_sent = 1;
    c.send(&proto::ClientMsg::Summary(Box::new(honest)));
    c.send(&proto::ClientMsg::Bye);
    let deadline = Instant::now() + Duration::from_secs(5);
    let lines = loop {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.len() >= 2 || Instant::now() > deadline {
            break lines;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    let forged = &lines[0];
    assert!(forged["local"].is_null(), "{forged}");
    assert!(forged["client"]["throughput"].is_null(), "{forged}");
    let why = forged["client"]["invalid"].as_str().unwrap_or_default();
    assert!(why.starts_with("local.elapsed_ns"), "{forged}");
    assert!(!forged.to_string().contains("e29"), "{forged}");
    let honest = &lines[1];
    assert_eq!(honest["local"]["bytes_sent"], 1, "{honest}");
    assert!(
        honest["client"]["throughput"]["value"].as_f64().is_some(),
        "{honest}"
    );
}

/// Two addresses that each take the largest test the netserver allows
/// (as an attacker would: asked for 10,000 flows, told the share, then
/// asked for all of it) leave a third address its share: each address
/// holds at most a third of the descriptors for tests. Before, two such
/// addresses left "2 of the 1398 for tests free".
#[test]
fn a_third_address_is_served_while_two_hold_their_share() {
    let Some(ns) = Netserver::start_with_nofile(1000, &["-L", "0.0.0.0"]) else {
        return;
    };
    let port = ns.port().to_string();
    let netperf_from = |local: &str, flows: u32, secs: &str| {
        let mut c = std::process::Command::new(harness::bin("netperf"));
        c.args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-L",
            local,
            "-l",
            secs,
            "-P",
            "0",
            "--",
        ])
        .args(["-m", "1K", "--flows", &flows.to_string()]);
        c
    };
    // the share, as the refusal of a huge test tells it
    let probe = harness::run_with_deadline(
        netperf_from("127.0.0.2", 10_000, "1"),
        Duration::from_secs(20),
    );
    let share: u64 = probe
        .stderr
        .split("more than one test may (")
        .nth(1)
        .and_then(|r| r.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no share in: {}", probe.stderr));
    // 70 descriptors and two a flow, at most the share
    let flows = u32::try_from((share - 70) / 2).unwrap();
    let hogs: Vec<std::process::Child> = ["127.0.0.2", "127.0.0.3"]
        .iter()
        .map(|a| {
            netperf_from(a, flows, "5")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    let third = harness::run_with_deadline(
        netperf_from("127.0.0.4", flows, "1"),
        Duration::from_secs(30),
    );
    let hogs: Vec<std::process::Output> = hogs
        .into_iter()
        .map(|h| h.wait_with_output().unwrap())
        .collect();
    for h in &hogs {
        assert!(
            h.status.success(),
            "a share's test: {}",
            String::from_utf8_lossy(&h.stderr)
        );
    }
    assert!(
        third.success(),
        "the third address ({flows} flows, a share of {share}): {}",
        third.stderr
    );
    assert!(
        harness::num(harness::fields(&third.stdout)[4]) > 0.0,
        "{}",
        third.stdout
    );
}

/// An address whose `--max-per-client` sessions are all wrong attempts
/// held for their refusals' turns does not keep the right key out: a
/// newcomer takes a held attempt's place (the key file's 16 bytes and
/// more cannot be guessed at any rate of verdicts).
#[test]
fn held_wrong_attempts_make_room_for_the_right_key() {
    let dir = Dir::new("held-room");
    let right = dir.key("right", "the right key, 32 bytes long....");
    let wrong = dir.key("wrong", "a wrong key, also long enough...");
    let ns = Netserver::start(&["--key-file", &right, "--max-per-client", "4"]);
    let port = ns.port().to_string();
    // five wrong keys told at once, then four held: the address's cap
    let mut held = Vec::new();
    for _ in 0..9 {
        let mut c = std::process::Command::new(harness::bin("netperf"));
        c.args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "--key-file",
            &wrong,
            "-l",
            "1",
            "-P",
            "0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        held.push(c.spawn().unwrap());
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let out = harness::netperf_at(
        &port,
        &["--key-file", &right, "-t", "TCP_RR", "-l", "1", "-P", "0"],
    );
    assert!(
        out.success(),
        "the right key kept out: {}\n{}",
        out.stderr,
        ns.log()
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(ns.log().contains("wait their turn"), "{}", ns.log());
    for mut h in held {
        let _ = h.kill();
        let _ = h.wait();
    }
}
