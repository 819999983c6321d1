//! UDP_STREAM on loopback.

use harness::{Netserver, fields, netperf, netperf_at, num};

const TITLE: [&str; 4] = [
    "Socket  Message  Elapsed      Messages                ",
    "Size    Size     Time         Okay Errors   Throughput",
    "bytes   bytes    secs            #      #   10^6bits/sec",
    "",
];

/// (sent ok, errors, send rate, received, receive rate)
fn rows(lines: &[&str]) -> (u64, u64, f64, u64, f64) {
    let a = fields(lines[0]);
    let b = fields(lines[1]);
    assert_eq!(a.len(), 6, "{lines:?}");
    assert_eq!(b.len(), 4, "{lines:?}");
    (
        num(a[3]) as u64,
        num(a[4]) as u64,
        num(a[5]),
        num(b[2]) as u64,
        num(b[3]),
    )
}

fn check(stdout: &str, family: &str, msg: &str) -> (u64, u64) {
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("MIGRATED UDP STREAM TEST from "),
        "{stdout}"
    );
    assert!(lines[0].contains(family), "{stdout}");
    assert_eq!(&lines[1..5], &TITLE, "{stdout}");
    assert_eq!(fields(lines[5])[1], msg, "{stdout}");
    let (sent, errors, send_rate, received, recv_rate) = rows(&lines[5..7]);
    assert_eq!(lines[7], "", "{stdout}");
    assert!(lines[8].starts_with("Lost "), "{stdout}");
    assert!(sent > 0 && received > 0, "{stdout}");
    assert!(received <= sent, "{stdout}");
    assert!(
        send_rate > 0.0 && recv_rate > 0.0 && recv_rate <= send_rate,
        "{stdout}"
    );
    let lost: u64 = num(fields(lines[8])[1]) as u64;
    assert_eq!(
        lost,
        sent - received,
        "loss is sent minus received\n{stdout}"
    );
    let _ = errors;
    (sent, received)
}

#[test]
fn udp_stream_ipv4() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &["-t", "UDP_STREAM", "-l", "1", "-v", "3", "--", "-m", "1024"],
    )
    .ok();
    check(&out.stdout, "AF_INET ", "1024");
}

#[test]
fn udp_stream_ipv6_default_size() {
    let ns = Netserver::start_v6(&[]);
    let port = ns.port().to_string();
    let out = netperf(&[
        "-H",
        "::1",
        "-p",
        &port,
        "-t",
        "UDP_STREAM",
        "-l",
        "1",
        "-v",
        "3",
    ])
    .ok();
    check(&out.stdout, "AF_INET6", "65507");
}

/// netperf 2.7 counts bytes in a UDP stream test's negative -l: whole
/// datagrams until the count is reached.
#[test]
fn byte_count_sends_whole_datagrams() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "-25600000",
            "-v",
            "3",
            "--",
            "-m",
            "256",
            "--rate",
            "200m",
        ],
    )
    .ok();
    let (sent, _) = check(&out.stdout, "AF_INET ", "256");
    assert_eq!(sent, 100_000, "{out}");
    // 1000 bytes in 256-byte datagrams: 4 of them
    let out = netperf_at(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "-1000",
            "-v",
            "3",
            "--",
            "-m",
            "256",
        ],
    )
    .ok();
    let (sent, _) = check(&out.stdout, "AF_INET ", "256");
    assert_eq!(sent, 4, "{out}");
}

/// Piped, UDP_STREAM prints netperf 2.7's rows and nothing more.
#[test]
fn piped_output_has_no_loss_line() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-t", "UDP_STREAM", "-l", "1", "--", "-m", "1024"])
        .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{out}");
    assert_eq!(lines[7], "", "{out}");
    assert!(!out.stdout.contains("Lost "), "{out}");
}

#[test]
fn no_headers_prints_two_rows() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &["-t", "UDP_STREAM", "-l", "1", "-P", "0", "--", "-m", "512"],
    )
    .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "two rows and netperf's blank line: {out}");
    rows(&lines[..2]);
    assert_eq!(lines[2], "");
}

#[test]
fn sizes_that_do_not_fit_a_datagram_are_refused() {
    let ns4 = Netserver::start(&[]);
    let ns6 = Netserver::start_v6(&[]);
    let p4 = ns4.port().to_string();
    let p6 = ns6.port().to_string();
    for (host, port, size, limit) in [
        ("127.0.0.1", &p4, "65508", "65507"),
        ("::1", &p6, "65528", "65527"),
    ] {
        let out = netperf(&[
            "-H",
            host,
            "-p",
            port,
            "-t",
            "UDP_STREAM",
            "-l",
            "1",
            "--",
            "-m",
            size,
        ]);
        assert!(!out.success(), "{out}");
        assert_eq!(out.stdout, "", "refused before the test starts: {out}");
        assert!(
            out.stderr.starts_with("netperf: -m:") && out.stderr.contains(limit),
            "{out}"
        );
    }
    // the largest IPv6 payload does fit
    let out = netperf(&[
        "-H",
        "::1",
        "-p",
        &p6,
        "-t",
        "UDP_STREAM",
        "-l",
        "-10",
        "-P",
        "0",
        "--",
        "-m",
        "65527",
    ])
    .ok();
    assert_eq!(fields(&out.stdout)[1], "65527", "{out}");
    // -m 0 is the default size, the most that fits, as netperf 2.7 runs it
    let out = netperf(&[
        "-H",
        "127.0.0.1",
        "-p",
        &p4,
        "-t",
        "UDP_STREAM",
        "-l",
        "-10",
        "-P",
        "0",
        "--",
        "-m",
        "0",
    ])
    .ok();
    assert_eq!(fields(&out.stdout)[1], "65507", "{out}");
}
