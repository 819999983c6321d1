//! iperf3's clients against our netserver (`--iperf3`): the real iperf3
//! binary (Debian's 3.12 in CI; the newest, 3.21, checked by hand), many
//! at once, every direction, UDP loss against the kernel's counters, the
//! turns of `--schedule exclusive`, and hostile bytes on its port.

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, netns::Hosts, run_with_deadline};
use serde_json::Value;

/// Whether iperf3 is installed; if not, say so loudly (and fail where
/// `NETPERF_REQUIRE_IPERF3=1`, as in CI).
fn have_iperf3() -> bool {
    if Command::new("iperf3").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("NETPERF_REQUIRE_IPERF3").as_deref() != Ok("1"),
        "iperf3 is not installed (apt-get install iperf3) and NETPERF_REQUIRE_IPERF3=1"
    );
    eprintln!("!!! SKIPPED: iperf3 is not installed (apt-get install iperf3)");
    false
}

/// Our netserver serving iperf3 too, on a port of its own; and that port.
fn netserver(extra: &[&str]) -> (Netserver, u16) {
    let mut args = vec!["--iperf3", "0"];
    args.extend_from_slice(extra);
    let ns = Netserver::start(&args);
    assert!(ns.wait_for_log("iperf3 listening on", Duration::from_secs(5)));
    let port = ns
        .log()
        .lines()
        .find_map(|l| l.strip_prefix("iperf3 listening on "))
        .and_then(|a| a.rsplit(':').next()?.parse().ok())
        .expect("iperf3's port");
    (ns, port)
}

/// An iperf3 client's run (`-J`): its JSON, or its error text.
fn client(port: u16, args: &[&str]) -> Result<Value, String> {
    let mut c = Command::new("iperf3");
    c.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(args);
    let out = run_with_deadline(c, Duration::from_secs(60));
    let v: Value = serde_json::from_str(&out.stdout).map_err(|e| format!("{e}: {out}"))?;
    match v.get("error") {
        Some(e) => Err(e.as_str().unwrap_or_default().to_string()),
        None => Ok(v),
    }
}

fn bytes(v: &Value, at: &str) -> f64 {
    v["end"][at]["bytes"].as_f64().unwrap_or(f64::NAN)
}

/// Eight iperf3 clients at once: every one completes against our
/// netserver, where `iperf3 -s` (one test at a time) refuses the others.
#[test]
fn eight_clients_at_once_where_iperf3_s_refuses_seven() {
    if !have_iperf3() {
        return;
    }
    let (ns, port) = netserver(&[]);
    let eight = |port: u16| -> Vec<Result<Value, String>> {
        let runs: Vec<_> = (0..8)
            .map(|_| thread::spawn(move || client(port, &["-t", "2"])))
            .collect();
        runs.into_iter().map(|t| t.join().unwrap()).collect()
    };
    let ours = eight(port);
    for r in &ours {
        let v = r.as_ref().unwrap_or_else(|e| panic!("{e}\n{}", ns.log()));
        assert!(bytes(v, "sum_received") > 1e6, "{v}");
    }
    // iperf3's own server, beside it
    let theirs_port = harness::free_port();
    let mut s = Command::new("iperf3")
        .args(["-s", "-p", &theirs_port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    let theirs = eight(theirs_port);
    let _ = s.kill();
    let _ = s.wait();
    let busy = theirs
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.contains("busy")))
        .count();
    eprintln!("our netserver: 8 of 8 completed; iperf3 -s refused {busy} of 8");
    assert!(busy >= 6, "iperf3 -s refused only {busy}: {theirs:?}");
}

/// `-R`, `--bidir` and `-P 4`: the client's figures and the server's, as
/// iperf3's results exchange carries them, are the netserver's own counts
/// (its record's), to the byte.
#[test]
fn reverse_bidir_and_parallel_carry_the_servers_figures() {
    if !have_iperf3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("np-iperf3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("record.jsonl");
    let (ns, port) = netserver(&["--record", record.to_str().unwrap()]);
    let rev = client(port, &["-t", "1", "-R"]).unwrap();
    let bidir = client(port, &["-t", "1", "--bidir"]).unwrap();
    let par = client(port, &["-t", "1", "-P", "4"]).unwrap();
    let out = client(port, &["-t", "1", "--get-server-output"]).unwrap();
    thread::sleep(Duration::from_millis(300));
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{}", ns.log());
    for l in &lines {
        assert_eq!(l["dialect"], "iperf3", "{l}");
    }
    // -R: what the server sent, as the client shows it
    assert_eq!(lines[0]["test"], "TCP_MAERTS");
    assert_eq!(
        bytes(&rev, "sum_sent"),
        lines[0]["remote"]["bytes_sent"].as_f64().unwrap()
    );
    assert!(bytes(&rev, "sum_received") > 1e6);
    // --bidir: both ways, each counted by its receiver
    assert!(
        bytes(&bidir, "sum_sent_bidir_reverse") > 1e6,
        "{}",
        bidir["end"]
    );
    assert!(bytes(&bidir, "sum_received") > 1e6);
    assert_eq!(
        bytes(&bidir, "sum_received") + bytes(&bidir, "sum_sent_bidir_reverse"),
        lines[1]["remote"]["bytes_received"].as_f64().unwrap()
            + lines[1]["remote"]["bytes_sent"].as_f64().unwrap()
    );
    // -P 4: four streams, the server's count the received sum
    assert_eq!(par["end"]["streams"].as_array().unwrap().len(), 4);
    assert_eq!(
        bytes(&par, "sum_received"),
        lines[2]["remote"]["bytes_received"].as_f64().unwrap()
    );
    // --get-server-output: the netserver's own lines
    let text = out["server_output_text"].as_str().unwrap_or_default();
    assert!(text.contains("rsnetperf netserver"), "{}", out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-b` and `--fq-rate` on a test the netserver sends (`-R`): each stream
/// paced at the rate asked, by the kernel (SO_MAX_PACING_RATE on the
/// netserver's sockets), as `iperf3 -s` paces its own. An upper bound only:
/// a paced sender cannot go faster, a busy host may make it slower.
#[test]
fn a_sending_netserver_keeps_to_the_rate_asked() {
    if !have_iperf3() {
        return;
    }
    let (_ns, port) = netserver(&[]);
    for (args, asked) in [
        (&["-t", "2", "-R", "-b", "100M", "-P", "2"][..], 200e6),
        (&["-t", "2", "-R", "--fq-rate", "50M"][..], 50e6),
    ] {
        let v = client(port, args).unwrap();
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(f64::NAN);
        eprintln!("iperf3 {args:?}: {:.1} Mbit/s", bps / 1e6);
        assert!(bps > 0.0 && bps < asked * 1.1, "{args:?}: {bps} bits/s");
    }
}

/// UDP at a set rate between two namespaces, 1% of the datagrams dropped
/// at the netserver's input: the loss iperf3 prints (the netserver's
/// count, against what the client said it sent) equals what the kernel
/// dropped (the nftables rule's counter and the UDP receive errors), to
/// the datagram.
#[test]
fn udp_loss_is_exact_against_the_kernels_counters() {
    if !have_iperf3() {
        return;
    }
    let Some(h) = Hosts::new("iperf3_udp_loss") else {
        return;
    };
    let mut cmd = h.command(&h.a, &harness::bin("netserver"));
    cmd.args(["-D", "-p", "0", "-L", harness::netns::A4, "--iperf3", "0"]);
    let ns = Netserver::spawn(cmd);
    assert!(ns.wait_for_log("iperf3 listening on", Duration::from_secs(5)));
    let port: u16 = ns
        .log()
        .lines()
        .find_map(|l| l.strip_prefix("iperf3 listening on "))
        .and_then(|a| a.rsplit(':').next()?.parse().ok())
        .unwrap();
    h.nft(
        &h.a,
        &format!(
            "table inet nploss {{
               counter dropped {{ }}
               chain input {{
                 type filter hook input priority 0; policy accept;
                 udp dport {port} udp length 1008 numgen random mod 100 0 counter name \"dropped\" drop
               }}
             }}"
        ),
    );
    let errors_before = h.udp_counter(&h.a, "InErrors", false);
    let mut c = h.command(&h.b, std::path::Path::new("iperf3"));
    c.args(["-c", harness::netns::A4, "-p", &port.to_string()])
        .args(["-u", "-b", "50M", "-l", "1000", "-t", "3", "-J"]);
    let out = run_with_deadline(c, Duration::from_secs(60));
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    let dropped = h.nft_counter(&h.a, "nploss", "dropped");
    let overflow = h.udp_counter(&h.a, "InErrors", false) - errors_before;
    let lost = v["end"]["sum"]["lost_packets"].as_u64().unwrap();
    let packets = v["end"]["sum"]["packets"].as_u64().unwrap();
    eprintln!(
        "iperf3 client: {lost} of {packets} lost; the kernel dropped {dropped} (nft) + {overflow} (UDP InErrors)"
    );
    assert!(dropped > 50, "the rule dropped {dropped}");
    assert_eq!(lost, dropped + overflow, "{}", v["end"]);
}

/// `--schedule exclusive`: three iperf3 clients at once take turns: every
/// one completes, and the record's intervals do not overlap.
#[test]
fn exclusive_tests_take_turns() {
    if !have_iperf3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("np-iperf3-turns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("record.jsonl");
    let (ns, port) = netserver(&[
        "--schedule",
        "exclusive",
        "--record",
        record.to_str().unwrap(),
    ]);
    let runs: Vec<_> = (0..3)
        .map(|_| thread::spawn(move || client(port, &["-t", "1"])))
        .collect();
    for r in runs {
        r.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{e}\n{}", ns.log()));
    }
    thread::sleep(Duration::from_millis(300));
    harness::record_spans_apart(&record, 3);
    assert!(ns.log().contains("waits its turn"), "{}", ns.log());
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the netserver answered a hostile connection to iperf3's port.
fn answer(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

const COOKIE: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";

/// Hostile bytes at iperf3's port: a JSON length beyond the bound, JSON
/// that is not, a cookie that is not one, a state byte out of turn. Each
/// is answered with iperf3's error state (or closed) at once, nothing is
/// held, and a real client is served after.
#[test]
fn hostile_bytes_at_iperf3s_port_are_refused_and_nothing_is_held() {
    if !have_iperf3() {
        return;
    }
    let (ns, port) = netserver(&[]);
    let idle = std::fs::read_dir(format!("/proc/{}/fd", ns.pid()))
        .unwrap()
        .count();
    let t0 = Instant::now();
    // a length of 2 GiB: refused before a byte of it is read
    let mut m = COOKIE.to_vec();
    m.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
    let a = answer(port, &m);
    assert_eq!(a.first(), Some(&9), "PARAM_EXCHANGE first: {a:?}");
    assert_eq!(a.get(1), Some(&0xfe), "then SERVER_ERROR: {a:?}");
    assert_eq!(a.get(2..6), Some(&114i32.to_be_bytes()[..]), "{a:?}");
    // not JSON
    let mut m = COOKIE.to_vec();
    m.extend_from_slice(&proto::iperf3::framed(b"{not json"));
    let a = answer(port, &m);
    assert_eq!(a.get(1), Some(&0xfe), "{a:?}");
    // a cookie that is not one (upper case): closed without a word
    let a = answer(port, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCD\0");
    assert!(a.is_empty(), "{a:?}");
    // a state byte out of turn (IPERF_DONE before anything)
    let mut m = COOKIE.to_vec();
    m.push(16);
    let a = answer(port, &m);
    assert_eq!(a.get(1), Some(&0xfe), "{a:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    thread::sleep(Duration::from_millis(300));
    let after = std::fs::read_dir(format!("/proc/{}/fd", ns.pid()))
        .unwrap()
        .count();
    assert_eq!(after, idle, "descriptors held: {}", ns.log());
    let v = client(port, &["-t", "1"]).unwrap();
    assert!(bytes(&v, "sum_received") > 1e6);
}
