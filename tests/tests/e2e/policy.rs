//! A netserver shared by people who do not coordinate (`--policy`,
//! `netserver token`, `--schedule exclusive`): budgets per address and
//! per prefix, limits told before a test, tokens, turns. Clients come
//! from other loopback addresses (127.0.1.x, 127.0.2.x, ...): other
//! prefixes to the policy.

use std::{
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, Output, RawClient, bin, footprint, netperf_at, run_with_deadline};
use proto::{ClientMsg, ErrorCode, Family, ServerMsg, TestEnd, TestKind, TestSpec};

/// A private directory for one test's files.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("np-policy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Our netperf from `from` against `ns`, bounded in time.
fn netperf_from(ns: &Netserver, from: &str, args: &[&str]) -> Output {
    let mut c = Command::new(bin("netperf"));
    c.args(["-H", "127.0.0.1", "-p", &ns.port().to_string(), "-L", from])
        .args(args);
    run_with_deadline(c, Duration::from_secs(60))
}

fn stderr(o: &Output) -> String {
    o.stderr.clone()
}

/// A raw client from `from` asks for a one-second TCP_RR: granted (then
/// dropped, which aborts it) or refused with the server's error.
fn ask_once(addr: SocketAddr, from: IpAddr) -> Result<(), proto::ErrorMsg> {
    let mut c = RawClient::connect_from(addr, from);
    c.send(&ClientMsg::Hello(proto::Hello::new("policy test client")));
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMsg::Hello(_)) => {}
        Some(ServerMsg::Error(e)) => return Err(e),
        other => panic!("expected the server's hello, got {other:?}"),
    }
    let mut spec = TestSpec::new(TestKind::TcpRr, Family::V4);
    spec.end = TestEnd::Time { millis: 1000 };
    c.send(&ClientMsg::Setup(Box::new(spec)));
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMsg::Error(e)) => Err(e),
        Some(_) => Ok(()),
        None => panic!("no answer to a test request"),
    }
}

/// One /24 uses up its tests an hour while another /24 goes on testing;
/// the refusal names the prefix, the budget and when it comes back.
#[test]
fn a_prefix_runs_out_of_tests_while_another_runs() {
    let d = dir("prefix");
    let policy = d.join("policy.toml");
    write(&policy, "[prefix]\nipv4 = 24\ntests_per_hour = 3\n");
    let ns = Netserver::start_with(&["-L", "0.0.0.0"], &["--policy", policy.to_str().unwrap()]);
    for from in ["127.0.1.10", "127.0.1.11", "127.0.1.12"] {
        let o = netperf_from(&ns, from, &["-t", "TCP_RR", "-l", "1", "-P", "0"]);
        assert!(o.status.success(), "{from}: {}", stderr(&o));
    }
    let o = netperf_from(&ns, "127.0.1.13", &["-t", "TCP_RR", "-l", "1", "-P", "0"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("prefix 127.0.1.0/24 has used its 3 tests an hour (tests_per_hour); again in"),
        "{e}"
    );
    // the log has the same words
    assert!(
        ns.log()
            .contains("prefix 127.0.1.0/24 has used its 3 tests an hour")
    );
    // another prefix is not touched
    for _ in 0..2 {
        let o = netperf_from(&ns, "127.0.2.10", &["-t", "TCP_RR", "-l", "1", "-P", "0"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A burst of thousands of connections and test requests from one /24
/// (bounded: 3,000 connections, 30 s at most): its tests past the budget
/// and its sessions past the cap are refused at once, the daemon's memory
/// stays bounded, and a flent-style set from another prefix (eight streams
/// and three UDP_RR at once) runs untouched.
#[test]
fn a_burst_from_one_prefix_is_refused_and_another_prefix_is_unaffected() {
    let d = dir("burst");
    let policy = d.join("policy.toml");
    write(
        &policy,
        "[prefix]\nsessions = 16\ntests_per_hour = 40\n[daemon]\nmax_entries = 1000\n",
    );
    let ns = Netserver::start_with(&["-L", "0.0.0.0"], &["--policy", policy.to_str().unwrap()]);
    let addr: SocketAddr = ([127, 0, 0, 1], ns.port()).into();
    let before = footprint(ns.pid()).rss_kib;
    let deadline = Instant::now() + Duration::from_secs(30);
    // the abuse: 8 threads, 375 attempts each, from 127.0.3.x
    let burst: Vec<_> = (0..8u8)
        .map(|t| {
            thread::spawn(move || {
                let (mut granted, mut refused, mut slowest) = (0u32, 0u32, Duration::ZERO);
                for i in 0..375u32 {
                    if Instant::now() > deadline {
                        break;
                    }
                    let from = IpAddr::from([127, 0, 3, (t * 30 + (i % 30) as u8) + 1]);
                    let asked = Instant::now();
                    match ask_once(addr, from) {
                        Ok(()) => granted += 1,
                        Err(e) => {
                            assert_eq!(e.code, ErrorCode::Busy, "{}", e.message);
                            assert!(e.message.contains("prefix 127.0.3.0/24"), "{}", e.message);
                            refused += 1;
                            slowest = slowest.max(asked.elapsed());
                        }
                    }
                }
                (granted, refused, slowest)
            })
        })
        .collect();
    // meanwhile, from 127.0.4.x: eight streams and three UDP_RR at once
    thread::sleep(Duration::from_millis(300));
    let port = ns.port().to_string();
    let set: Vec<_> = (0..11u8)
        .map(|i| {
            let port = port.clone();
            thread::spawn(move || {
                let from = format!("127.0.4.{}", i + 1);
                let test = if i < 8 { "TCP_STREAM" } else { "UDP_RR" };
                let mut c = Command::new(bin("netperf"));
                c.args(["-H", "127.0.0.1", "-p", &port, "-L", &from])
                    .args(["-t", test, "-l", "2", "-P", "0"]);
                run_with_deadline(c, Duration::from_secs(60))
            })
        })
        .collect();
    let (mut granted, mut refused, mut slowest) = (0, 0, Duration::ZERO);
    for b in burst {
        let (g, r, s) = b.join().unwrap();
        granted += g;
        refused += r;
        slowest = slowest.max(s);
    }
    for s in set {
        let o = s.join().unwrap();
        assert!(
            o.status.success(),
            "the other prefix's test failed: {}",
            stderr(&o)
        );
        let line = o.stdout.clone();
        let figure: f64 = line
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().last())
            .and_then(|f| f.parse().ok())
            .unwrap_or(0.0);
        assert!(figure > 0.0, "{line}");
    }
    let after = footprint(ns.pid()).rss_kib;
    eprintln!(
        "burst: {granted} granted, {refused} refused (slowest refusal {slowest:?}); RSS {before} -> {after} KiB"
    );
    assert_eq!(granted, 40, "exactly the prefix's budget is granted");
    assert!(refused > 1000, "{refused}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    assert!(after < before + 20 * 1024, "RSS {before} -> {after} KiB");
    let _ = std::fs::remove_dir_all(&d);
}

/// The limits of one test are told in the hello: our netperf shortens a
/// long test and paces a stream, saying so; it refuses too many flows
/// before asking. netperf 2.7's protocol gets its own refusal, and the log
/// says why in the same words.
#[test]
fn limits_are_told_before_the_test_and_fitted_to() {
    let d = dir("limits");
    let policy = d.join("policy.toml");
    write(
        &policy,
        "[test]\nmax_seconds = 1\nmax_flows = 2\nmax_rate = \"20m\"\n",
    );
    let ns = Netserver::start(&["--policy", policy.to_str().unwrap()]);
    let port = ns.port().to_string();
    let t0 = Instant::now();
    let o = netperf_at(&port, &["-t", "TCP_STREAM", "-l", "30", "-P", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let e = stderr(&o);
    assert!(
        e.contains("the netserver limits tests to 1 s: this one runs 1 s (30 s asked)"),
        "{e}"
    );
    assert!(
        e.contains("the netserver limits a test to 20000000 bits/s: this one is paced at it"),
        "{e}"
    );
    let out = o.stdout.clone();
    let mbps: f64 = out.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(mbps < 25.0, "paced at 20 Mbit/s, got {mbps}: {out}");
    let o = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "--", "--flows", "4"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the netserver allows at most 2 flows a test: --flows 4 asked"),
        "{}",
        stderr(&o)
    );
    // netperf 2.7's protocol: refused in its dialect, named in the log
    let o = netperf_at(
        &port,
        &[
            "--dialect",
            "netperf2",
            "-t",
            "TCP_RR",
            "-l",
            "5",
            "-P",
            "0",
        ],
    );
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(
        ns.log()
            .contains("this netserver's policy limits tests to 1 s (5 s asked)"),
        "{}",
        ns.log()
    );
    let _ = std::fs::remove_dir_all(&d);
}

fn token(key: &Path, args: &[&str]) -> String {
    let o = Command::new(bin("netserver"))
        .args(["token", "--key-file", key.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// Tokens: a token runs as many tests as it allows, from its prefix,
/// until it expires; an altered one is refused; the static key still
/// works; netperf 2.7's `-Z` can carry one.
#[test]
fn tokens_keep_to_their_count_prefix_and_expiry() {
    let d = dir("tokens");
    let key = d.join("key");
    write(&key, "0123456789abcdef0123456789abcdef");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ns = Netserver::start_with(
        &["-L", "0.0.0.0"],
        &["--key-file", key.to_str().unwrap(), "--allow-netperf2"],
    );
    let two = token(
        &key,
        &["--valid", "1h", "--tests", "2", "--prefix", "127.0.5.0/24"],
    );
    let rr = ["-t", "TCP_RR", "-l", "1", "-P", "0"];
    for from in ["127.0.5.1", "127.0.5.2"] {
        let o = netperf_from(
            &ns,
            from,
            &[&["--token", two.as_str()][..], &rr[..]].concat(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = netperf_from(
        &ns,
        "127.0.5.3",
        &[&["--token", two.as_str()][..], &rr[..]].concat(),
    );
    assert!(
        stderr(&o).contains("has used the 2 tests it allows"),
        "{}",
        stderr(&o)
    );
    // its prefix
    let other = token(&key, &["--valid", "1h", "--prefix", "127.0.5.0/24"]);
    let o = netperf_from(
        &ns,
        "127.0.6.1",
        &[&["--token", other.as_str()][..], &rr[..]].concat(),
    );
    assert!(
        stderr(&o).contains("is for clients in 127.0.5.0/24, not 127.0.6.1"),
        "{}",
        stderr(&o)
    );
    // its expiry
    let short = token(&key, &["--valid", "1s"]);
    thread::sleep(Duration::from_millis(2100));
    let o = netperf_from(
        &ns,
        "127.0.5.9",
        &[&["--token", short.as_str()][..], &rr[..]].concat(),
    );
    assert!(stderr(&o).contains("expired"), "{}", stderr(&o));
    // altered: refused at the handshake
    let mut bad = other.clone();
    let last = if bad.ends_with('0') { '1' } else { '0' };
    bad.pop();
    bad.push(last);
    let o = netperf_from(
        &ns,
        "127.0.5.9",
        &[&["--token", bad.as_str()][..], &rr[..]].concat(),
    );
    assert!(
        stderr(&o).contains("the token was not signed with this netserver's key, or was altered"),
        "{}",
        stderr(&o)
    );
    // -Z given a token does the same, in both protocols
    let o = netperf_from(
        &ns,
        "127.0.5.9",
        &[&["-Z", other.as_str()][..], &rr[..]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = netperf_at(
        &ns.port().to_string(),
        &[
            &["--dialect", "netperf2", "-Z", other.as_str()][..],
            &rr[..],
        ]
        .concat(),
    );
    assert!(!o.status.success());
    assert!(
        ns.log()
            .contains("is for clients in 127.0.5.0/24, not 127.0.0.1"),
        "{}",
        ns.log()
    );
    // the static key still works
    let o = netperf_from(
        &ns,
        "127.0.7.1",
        &[&["--key-file", key.to_str().unwrap()][..], &rr[..]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// Where netperf 2.7's clients are refused for want of the key, one whose
/// `-Z` is a token is served (our netperf speaking netperf 2.7's protocol
/// stands in for it), and one without is told why.
#[test]
fn a_token_as_netperf2s_passphrase_opens_a_keyed_netserver() {
    let d = dir("token2");
    let key = d.join("key");
    write(&key, "fedcba9876543210fedcba9876543210");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ns = Netserver::start(&["--key-file", key.to_str().unwrap()]);
    let port = ns.port().to_string();
    let t = token(&key, &["--valid", "1h"]);
    let o = netperf_at(
        &port,
        &[
            "--dialect",
            "netperf2",
            "-Z",
            &t,
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "-P",
            "0",
        ],
    );
    assert!(o.status.success(), "{}\n{}", stderr(&o), ns.log());
    let o = netperf_at(&port, &["--dialect", "netperf2", "-t", "TCP_RR", "-l", "1"]);
    assert!(!o.status.success());
    assert!(ns.log().contains("requires a key"), "{}", ns.log());
    let _ = std::fs::remove_dir_all(&d);
}

/// SIGHUP reads the policy again; a file with an error keeps the policy in
/// force, and the log names the line.
#[test]
fn sighup_reloads_the_policy_and_a_bad_file_keeps_the_old() {
    let d = dir("reload");
    let policy = d.join("policy.toml");
    write(&policy, "[test]\nmax_seconds = 3\n");
    let ns = Netserver::start(&["--policy", policy.to_str().unwrap()]);
    let port = ns.port().to_string();
    let o = netperf_at(&port, &["-t", "TCP_RR", "-l", "20", "-P", "0"]);
    assert!(
        stderr(&o).contains("runs 3 s (20 s asked)"),
        "{}",
        stderr(&o)
    );
    write(&policy, "[test]\nmax_seconds = 1\n");
    let hup = || {
        Command::new("kill")
            .args(["-HUP", &ns.pid().to_string()])
            .status()
            .unwrap();
    };
    hup();
    assert!(
        ns.wait_for_log("reloaded", Duration::from_secs(5)),
        "{}",
        ns.log()
    );
    let o = netperf_at(&port, &["-t", "TCP_RR", "-l", "20", "-P", "0"]);
    assert!(
        stderr(&o).contains("runs 1 s (20 s asked)"),
        "{}",
        stderr(&o)
    );
    write(&policy, "[test]\nmax_seconds = 1\nmax_flws = 3\n");
    hup();
    assert!(
        ns.wait_for_log("the policy in force stays", Duration::from_secs(5)),
        "{}",
        ns.log()
    );
    assert!(ns.log().contains("line 3"), "{}", ns.log());
    let o = netperf_at(&port, &["-t", "TCP_RR", "-l", "20", "-P", "0"]);
    assert!(
        stderr(&o).contains("runs 1 s (20 s asked)"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Budgets survive a restart: the counts are in the state file, written
/// at a clean stop (and each minute).
#[test]
fn budgets_survive_a_restart() {
    let d = dir("restart");
    let policy = d.join("policy.toml");
    write(
        &policy,
        "[daemon]\nstate_file = \"state.json\"\n[address]\ntests_per_day = 2\n",
    );
    let args = ["--policy", policy.to_str().unwrap()];
    let mut ns = Netserver::start(&args);
    for _ in 0..2 {
        let o = ns.netperf(&["-t", "TCP_RR", "-l", "1", "-P", "0"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(
        ns.signal_and_wait("TERM", Duration::from_secs(10))
            .is_some()
    );
    let state = std::fs::read_to_string(d.join("state.json")).unwrap();
    assert!(state.contains("127.0.0.1"), "{state}");
    let ns = Netserver::start(&args);
    let o = ns.netperf(&["-t", "TCP_RR", "-l", "1", "-P", "0"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("address 127.0.0.1 has used its 2 tests a day"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `--schedule exclusive` with three of our netperf clients at once, from
/// three hosts (addresses): each runs, one after another (the record's
/// spans do not overlap), and those that waited were told their place.
#[test]
fn exclusive_turns_with_three_netperf_clients() {
    let d = dir("turns");
    let record = d.join("record.jsonl");
    let ns = Netserver::start(&[
        "--schedule",
        "exclusive",
        "--record",
        record.to_str().unwrap(),
    ]);
    let port = ns.port().to_string();
    let runs: Vec<_> = (2..5)
        .map(|i| {
            let port = port.clone();
            let from = format!("127.0.0.{i}");
            thread::spawn(move || {
                netperf_at(
                    &port,
                    &["-L", &from, "-t", "TCP_STREAM", "-l", "1", "-P", "0"],
                )
            })
        })
        .collect();
    let outs: Vec<Output> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    for o in &outs {
        assert!(o.status.success(), "{}", stderr(o));
    }
    let told = outs
        .iter()
        .filter(|o| {
            stderr(o).contains(
                "the netserver runs one client host's tests at a time (--schedule exclusive):",
            )
        })
        .count();
    assert!(told >= 1, "nobody was told to wait");
    thread::sleep(Duration::from_millis(300));
    harness::record_spans_apart(&record, 3);
    let _ = std::fs::remove_dir_all(&d);
}
