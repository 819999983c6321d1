//! TCP_RR, UDP_RR and TCP_CRR on loopback.

use std::{process::Command, time::Duration};

use harness::{Netserver, bin, fields, netperf, netperf_at, num, run_with_deadline};

const TITLE: [&str; 5] = [
    "Local /Remote",
    "Socket Size   Request  Resp.   Elapsed  Trans.",
    "Send   Recv   Size     Size    Time     Rate         ",
    "bytes  Bytes  bytes    bytes   secs.    per sec   ",
    "",
];

struct Rr {
    req: u64,
    resp: u64,
    rate: f64,
    /// min, mean, p50, p90, p99, p99.9, max, stddev (usec), from -v 2
    latency: Option<Vec<f64>>,
}

fn parse(stdout: &str, test_title: &str) -> Rr {
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with(test_title), "{stdout}");
    assert_eq!(&lines[1..6], &TITLE, "{stdout}");
    let row = fields(lines[6]);
    assert_eq!(row.len(), 6, "{stdout}");
    assert_eq!(fields(lines[7]).len(), 2, "{stdout}");
    let latency = lines
        .iter()
        .position(|l| l.starts_with("Latency (usec)"))
        .map(|i| {
            fields(lines[i + 1])
                .iter()
                .map(|f| num(f))
                .collect::<Vec<_>>()
        });
    Rr {
        req: num(row[2]) as u64,
        resp: num(row[3]) as u64,
        rate: num(row[5]),
        latency,
    }
}

const TESTS: [(&str, &str); 3] = [
    ("TCP_RR", "MIGRATED TCP REQUEST/RESPONSE TEST"),
    ("UDP_RR", "MIGRATED UDP REQUEST/RESPONSE TEST"),
    ("TCP_CRR", "MIGRATED TCP Connect/Request/Response TEST"),
];

/// `-l -5000` runs exactly 5000 transactions, and both ends count 5000;
/// `-r 64,1024` moves 64 bytes out and 1024 back per transaction.
fn exact_count(ns: &Netserver, host: &str) {
    let port = ns.port().to_string();
    for (test, title) in TESTS {
        let out = netperf(&[
            "-H", host, "-p", &port, "-t", test, "-l", "-5000", "-v", "3", "--", "-r", "64,1024",
        ])
        .ok();
        let r = parse(&out.stdout, title);
        assert_eq!((r.req, r.resp), (64, 1024));
        assert!(r.rate > 0.0);
        let line = format!("{test} 5120000 bytes sent, 320000 received, 5000 transactions");
        assert!(
            ns.wait_for_log(&line, Duration::from_secs(5)),
            "netserver did not count 5000 {test} transactions: {}",
            ns.log()
        );
        if test == "UDP_RR" {
            assert!(out.stdout.contains("Lost 0 of 5000 transactions"), "{out}");
        }
    }
}

#[test]
fn exact_transactions_ipv4() {
    exact_count(&Netserver::start(&[]), "127.0.0.1");
}

#[test]
fn exact_transactions_ipv6() {
    exact_count(&Netserver::start_v6(&[]), "::1");
}

/// At -v 3: netperf's -v 2 block (TCP_RR's round trip) and our
/// percentiles, ordered, and consistent with the transaction rate (one
/// transaction at a time: mean latency x rate = 1 second). Piped at -v 2,
/// netperf 2.7's lines alone.
#[test]
fn latency_percentiles_are_ordered_and_consistent() {
    let ns = Netserver::start(&[]);
    for (test, title) in TESTS {
        let out = ns.netperf(&["-t", test, "-l", "1", "-v", "2"]).ok();
        assert!(!out.stdout.contains("Latency (usec)"), "{out}");
        let out = ns.netperf(&["-t", test, "-l", "1", "-v", "3"]).ok();
        assert_eq!(
            out.stdout.contains("RoundTrip  Trans    Throughput"),
            test == "TCP_RR",
            "{out}"
        );
        let r = parse(&out.stdout, title);
        let l = r
            .latency
            .unwrap_or_else(|| panic!("no latency line: {out}"));
        let (min, mean, p50, p90, p99, p999, max) = (l[0], l[1], l[2], l[3], l[4], l[5], l[6]);
        assert!(
            min <= p50 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
            "{out}"
        );
        assert!(min <= mean && mean <= max, "{out}");
        let busy = mean * 1e-6 * r.rate;
        assert!(
            (0.85..=1.02).contains(&busy),
            "mean {mean} us x rate {} = {busy}: {out}",
            r.rate
        );
    }
}

/// `-b 8` keeps 9 transactions in flight, in TCP_RR and UDP_RR alike: the
/// counts stay exact, and by Little's law mean latency x rate = 9.
#[test]
fn burst_keeps_transactions_in_flight() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (test, title) in &TESTS[..2] {
        let out = netperf_at(
            &port,
            &["-t", test, "-l", "-20000", "-v", "3", "--", "-b", "8", "-D"],
        )
        .ok();
        assert!(
            out.stdout
                .lines()
                .next()
                .unwrap()
                .ends_with(": nodelay : demo : first burst 8"),
            "{out}"
        );
        let r = parse(&out.stdout, title);
        let mean = r.latency.as_ref().expect("latency at -v 3")[1];
        let in_flight = mean * 1e-6 * r.rate;
        assert!(
            (7.5..=9.1).contains(&in_flight),
            "{test}: mean {mean} us x rate {} = {in_flight} in flight: {out}",
            r.rate
        );
        if *test == "UDP_RR" {
            // 9 small datagrams in flight fit any socket buffer: no loss.
            assert!(out.stdout.contains("Lost 0 of 20000 transactions"), "{out}");
        }
        let line = format!("{test} 20000 bytes sent, 20000 received, 20000 transactions");
        assert!(
            ns.wait_for_log(&line, Duration::from_secs(5)),
            "{}",
            ns.log()
        );
    }
}

/// What netperf 2.7 accepts with -b, we accept with its meaning: ignored
/// outside the RR tests, and a negative burst is no burst. A UDP_RR burst
/// larger than its 1-byte tags can tell apart is refused, naming -b.
#[test]
fn burst_spellings_netperf_accepts() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    netperf_at(
        &port,
        &["-t", "TCP_STREAM", "-l", "-100000", "--", "-b", "4"],
    )
    .ok();
    assert!(ns.wait_for_log(
        "TCP_STREAM 0 bytes sent, 100000 received",
        Duration::from_secs(5)
    ));
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "-1000", "--", "-b", "-4"]).ok();
    assert!(
        out.stdout
            .lines()
            .next()
            .unwrap()
            .ends_with(": first burst 0"),
        "{out}"
    );
    let out = netperf_at(&port, &["-t", "UDP_RR", "-l", "-1000", "--", "-b", "300"]);
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr
            .contains("-b (burst): 301 transactions in flight"),
        "{out}"
    );
    assert!(out.stderr.contains("at most 256"), "{out}");
    // Two-byte tags tell 301 apart.
    let out = netperf_at(
        &port,
        &[
            "-t", "UDP_RR", "-l", "-1000", "-v", "3", "--", "-b", "300", "-r", "2,2",
        ],
    )
    .ok();
    assert!(out.stdout.contains(" of 1000 transactions"), "{out}");
}

#[test]
fn spin_mode_runs() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for test in ["TCP_RR", "UDP_RR"] {
        let out = netperf_at(
            &port,
            &["-t", test, "-l", "-2000", "-P", "0", "--", "--spin"],
        )
        .ok();
        assert!(num(fields(&out.stdout)[5]) > 0.0, "{out}");
    }
}

/// One send and one receive per transaction on the client, as netperf:
/// at most 2.05 system calls per transaction over 10,000, start-up included.
#[test]
fn tcp_rr_makes_two_system_calls_per_transaction() {
    if !harness::have_strace() {
        return;
    }
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let dir = std::env::temp_dir().join(format!("rsnetperf-strace-{}", std::process::id()));
    let mut cmd = Command::new("strace");
    cmd.args(["-c", "-f", "-o"]).arg(&dir).arg(bin("netperf"));
    cmd.args([
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "TCP_RR",
        "-l",
        "-10000",
        "-P",
        "0",
    ]);
    run_with_deadline(cmd, Duration::from_secs(120)).ok();
    let report = std::fs::read_to_string(&dir).unwrap();
    let _ = std::fs::remove_file(&dir);
    let total: f64 = report
        .lines()
        .find(|l| l.trim_end().ends_with(" total"))
        .map(|l| num(fields(l)[3]))
        .unwrap_or_else(|| panic!("no total in:\n{report}"));
    let per = total / 10_000.0;
    eprintln!("TCP_RR: {total} system calls for 10000 transactions: {per:.4} per transaction");
    assert!(per <= 2.05, "{per} system calls per transaction:\n{report}");
}

/// A 30-second TCP_CRR at full speed does not run out of ports.
#[test]
fn tcp_crr_thirty_seconds() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let mut cmd = Command::new(bin("netperf"));
    cmd.args([
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "TCP_CRR",
        "-l",
        "30",
        "-P",
        "0",
    ]);
    let out = run_with_deadline(cmd, Duration::from_secs(90)).ok();
    let row = fields(&out.stdout);
    let rate = num(row[5]);
    eprintln!("TCP_CRR for 30 s: {rate} transactions/s");
    assert!(rate > 0.0, "{out}");
    assert!(num(row[4]) >= 29.9, "{out}");
}

/// A narrow port range runs out, and says what to change.
#[test]
fn tcp_crr_out_of_ports_says_what_to_change() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    // Two ports cannot carry 1000 connections while the first ones wait in
    // TIME_WAIT... unless the kernel reuses them, which is allowed: either
    // the test completes, or it fails with the advice.
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_CRR",
            "-l",
            "-1000",
            "-P",
            "0",
            "--",
            "-p",
            "61000,61001",
        ],
    );
    if !out.success() {
        assert!(
            out.stderr.contains("ran out of local ports") && out.stderr.contains("-p min,max"),
            "{out}"
        );
    }
}
