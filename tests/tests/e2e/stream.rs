//! TCP_STREAM and TCP_MAERTS.

use harness::{Netserver, fields, netperf, netperf_vs_netserver, num};

/// netperf 2.7's title lines for the stream tests, verbatim.
const STREAM_TITLE: [&str; 5] = [
    "Recv   Send    Send                          ",
    "Socket Socket  Message  Elapsed              ",
    "Size   Size    Size     Time     Throughput  ",
    "bytes  bytes   bytes    secs.    10^6bits/sec  ",
    "",
];

fn check_table(stdout: &str, test: &str, family: &str) -> f64 {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{stdout}");
    let banner = format!("MIGRATED TCP {test} TEST from ");
    assert!(lines[0].starts_with(&banner), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("port 0 {family} to ")),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" : demo"), "{}", lines[0]);
    assert_eq!(&lines[1..6], &STREAM_TITLE, "{stdout}");
    let row = fields(lines[6]);
    assert_eq!(row.len(), 5, "{}", lines[6]);
    for f in &row[..3] {
        assert!(num(f) > 0.0, "{}", lines[6]);
    }
    let elapsed = num(row[3]);
    assert!((0.5..5.0).contains(&elapsed), "elapsed {elapsed}");
    let tput = num(row[4]);
    assert!(tput > 0.0, "throughput {tput}");
    tput
}

#[test]
fn tcp_stream_ipv4() {
    let (out, _ns) = netperf_vs_netserver(&["-l", "1"]);
    let out = out.ok();
    check_table(&out.stdout, "STREAM", "AF_INET");
    assert_eq!(out.stderr, "", "nothing on stderr in a successful run");
}

#[test]
fn tcp_stream_ipv6() {
    let ns = Netserver::start_v6(&[]);
    let port = ns.port().to_string();
    let out = netperf(&["-H", "::1", "-p", &port, "-l", "1"]).ok();
    check_table(&out.stdout, "STREAM", "AF_INET6");
}

#[test]
fn tcp_maerts_ipv4() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-l", "1", "-t", "TCP_MAERTS"]).ok();
    check_table(&out.stdout, "MAERTS", "AF_INET");
}

#[test]
fn tcp_maerts_ipv6() {
    let ns = Netserver::start_v6(&[]);
    let port = ns.port().to_string();
    let out = netperf(&["-H", "::1,6", "-p", &port, "-l", "1", "-t", "tcp_maerts"]).ok();
    check_table(&out.stdout, "MAERTS", "AF_INET6");
}

/// `-P 0`: the data row alone.
#[test]
fn no_headers_prints_one_row() {
    let ns = Netserver::start(&[]);
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let out = ns.netperf(&["-l", "1", "-P", "0", "-t", test]).ok();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        assert_eq!(fields(lines[0]).len(), 5, "{out}");
    }
}

/// The byte count of the `-v 2` block for a count-limited test.
fn xfered(stdout: &str) -> u64 {
    let lines: Vec<&str> = stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with("Alignment"))
        .expect("no -v 2 block");
    num(fields(lines[i + 3])[4]) as u64
}

/// `-l -N` moves exactly N bytes, and both ends count exactly N.
#[test]
fn byte_count_is_exact_both_ways() {
    let ns = Netserver::start(&[]);
    for (test, n) in [("TCP_STREAM", 10_000_000u64), ("TCP_MAERTS", 7_777_777)] {
        let len = format!("-{n}");
        let out = ns.netperf(&["-t", test, "-l", &len, "-v", "2"]).ok();
        assert_eq!(xfered(&out.stdout), n, "{out}");
        let (sent, received) = if test == "TCP_STREAM" { (0, n) } else { (n, 0) };
        let line = format!("{test} {sent} bytes sent, {received} received");
        assert!(
            ns.wait_for_log(&line, std::time::Duration::from_secs(5)),
            "netserver did not count {n}: {}",
            ns.log()
        );
    }
}

/// Spellings netperf 2.7 accepts, which scripts use.
#[test]
fn netperf_tolerated_spellings() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let p = format!("-p{port}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["-H127.0.0.1", &p, "-l1", "-P0"],
        vec!["-H", "127.0.0.1,4", &p, "-l", "5", "-l", "1", "-P", "0"],
        vec![
            "-4",
            "-H",
            "127.0.0.1",
            &p,
            "-tTCP_STREAM",
            "-l1",
            "-P0",
            "words",
            "netperf",
            "ignores",
        ],
        vec![
            "-H",
            "127.0.0.1",
            &p,
            "-l",
            "1",
            "-P",
            "0",
            "--",
            "-m",
            "64K",
            "-s",
            "128K,",
            "-S",
            ",256K",
        ],
        vec![
            "-H",
            "127.0.0.1",
            &p,
            "-l",
            "1",
            "-P",
            "0",
            "-f",
            "K",
            "--",
            "-m1K",
            "-D",
        ],
        vec!["-H", "127.0.0.1", &p, "-l", "1", "-P", "0", "-cC"],
        vec![
            "-H",
            "127.0.0.1",
            &p,
            "-l",
            "1",
            "-P",
            "0",
            "-c",
            "100",
            "-C",
            "200",
        ],
    ];
    for args in cases {
        let out = netperf(&args);
        assert!(out.success(), "{args:?}: {out}");
        let rows: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(rows.len(), 1, "{args:?}: {out}");
    }
}

/// `-m` sets the send size, shown in the table.
#[test]
fn send_size_is_honoured() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-l", "1", "-P", "0", "--", "-m", "1024"]).ok();
    assert_eq!(fields(&out.stdout)[2], "1024", "{out}");
}
