//! netperf 2.7's OMNI test and its classic tests (TCP_SENDFILE, TCP_CC,
//! TCP_MSS, LOC_CPU, REM_CPU, UUID): each runs on our data paths and both
//! ends count the same. (Their output's shape: `shape.rs`.)

use std::{process::Command, time::Duration};

use harness::{Netserver, bin, fields, netperf_at, num, run_with_deadline};

fn keys(stdout: &str) -> std::collections::HashMap<&str, &str> {
    stdout.lines().filter_map(|l| l.split_once('=')).collect()
}

/// Every direction and protocol of OMNI runs the data path it names, and
/// both ends agree to the byte (the netserver logs what it counted).
#[test]
fn omni_directions_run_their_data_paths() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (d, proto, len, server_log) in [
        (
            "stream",
            "tcp",
            "-1000000",
            "TCP_STREAM 0 bytes sent, 1000000 received",
        ),
        (
            "send",
            "TCP",
            "-1000001",
            "TCP_STREAM 0 bytes sent, 1000001 received",
        ),
        (
            "maerts",
            "tcp",
            "-1000002",
            "TCP_MAERTS 1000002 bytes sent, 0 received",
        ),
        (
            "rr",
            "tcp",
            "-1000",
            "TCP_RR 1000 bytes sent, 1000 received, 1000 transactions",
        ),
        (
            "send|recv",
            "udp",
            "-1001",
            "UDP_RR 1001 bytes sent, 1001 received, 1001 transactions",
        ),
        (
            "xmit",
            "udp",
            "-10000",
            "UDP_STREAM 0 bytes sent, 10240 received",
        ),
        // the netserver sends its own size (-m ,size sets it): one datagram
        (
            "recv",
            "UDP",
            "-10000",
            "UDP_MAERTS 65507 bytes sent, 0 received",
        ),
        ("4", "tcp", "-1000003", "TCP_MAERTS 1000003 bytes sent"),
        ("0x6", "tcp", "-1002", "TCP_RR 1002 bytes sent"),
    ] {
        let out = netperf_at(
            &port,
            &[
                "-t", "OMNI", "-l", len, "--", "-d", d, "-T", proto, "-m", "1024", "-k",
                "DIRECTION,PROTOCOL,LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD,REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD",
            ],
        )
        .ok();
        assert!(
            ns.wait_for_log(server_log, Duration::from_secs(5)),
            "-d {d} -T {proto}: the netserver did not log '{server_log}':\n{}\n{out}",
            ns.log()
        );
        let k = keys(&out.stdout);
        // what one end sent, the other received (UDP: what was not lost)
        let (ls, lr, rs, rr) = (
            num(k["LOCAL_BYTES_SENT"]),
            num(k["LOCAL_BYTES_RECVD"]),
            num(k["REMOTE_BYTES_SENT"]),
            num(k["REMOTE_BYTES_RECVD"]),
        );
        if proto.eq_ignore_ascii_case("tcp") {
            assert_eq!((ls, lr), (rr, rs), "-d {d}: {out}");
        } else {
            assert!(rr <= ls && lr <= rs, "-d {d}: {out}");
        }
    }
}

/// `-d stream -T tcp` is TCP_STREAM: the same bytes, the same table names.
#[test]
fn omni_stream_is_tcp_stream() {
    let ns = Netserver::start(&[]);
    for t in [["-t", "TCP_STREAM", "--"], ["-t", "OMNI", "--"]] {
        let mut args = vec!["-l", "-4000000"];
        args.extend(t);
        args.extend([
            "-d",
            "stream",
            "-T",
            "tcp",
            "-k",
            "THROUGHPUT,LOCAL_BYTES_SENT,REMOTE_BYTES_RECVD",
        ]);
        let out = ns.netperf(&args).ok();
        let k = keys(&out.stdout);
        assert_eq!(k["LOCAL_BYTES_SENT"], "4000000", "{out}");
        assert_eq!(k["REMOTE_BYTES_RECVD"], "4000000", "{out}");
        assert!(num(k["THROUGHPUT"]) > 0.0, "{out}");
    }
}

/// The named tests take `-T` and `-c` as netperf 2.7 does: TCP_STREAM over
/// UDP runs UDP under TCP_STREAM's banner; TCP_RR with a connection per
/// transaction runs TCP_CRR's path.
#[test]
fn named_tests_take_protocol_and_connection_options() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_STREAM",
            "-l",
            "-20000",
            "--",
            "-T",
            "udp",
            "-m",
            "1000",
        ],
    )
    .ok();
    assert!(out.stdout.starts_with("MIGRATED TCP STREAM TEST"), "{out}");
    assert!(
        ns.wait_for_log(
            "UDP_STREAM 0 bytes sent, 20000 received",
            Duration::from_secs(5)
        ),
        "{}",
        ns.log()
    );
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "-300", "--", "-c"]).ok();
    assert!(
        out.stdout.starts_with("MIGRATED TCP REQUEST/RESPONSE TEST"),
        "{out}"
    );
    assert!(
        ns.wait_for_log(
            "TCP_CRR 300 bytes sent, 300 received, 300 transactions",
            Duration::from_secs(5)
        ),
        "{}",
        ns.log()
    );
    // -d means nothing to a named test, as in netperf 2.7
    netperf_at(
        &port,
        &["-t", "TCP_STREAM", "-l", "-30000", "--", "-d", "recv"],
    )
    .ok();
    assert!(
        ns.wait_for_log(
            "TCP_STREAM 0 bytes sent, 30000 received",
            Duration::from_secs(5)
        ),
        "{}",
        ns.log()
    );
}

/// What netperf 2.7 refuses, or cannot run here, is refused naming the
/// option; what it accepts with a word (an unknown -d or -T), we accept.
#[test]
fn refused_and_tolerated_combinations() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (args, needle) in [
        (vec!["-t", "OMNI", "--", "-T", "sctp"], "-T sctp"),
        (vec!["-t", "OMNI", "--", "-c", "-T", "udp"], "-- -c"),
        (vec!["-t", "TCP_CRR", "--", "-T", "udp"], "-- -c"),
        (vec!["-t", "OMNI", "--", "-d", "1"], "-- -d 1"),
        (
            vec!["-t", "OMNI", "--", "-T", "udp", "-t", "stream"],
            "-- -t stream",
        ),
    ] {
        let out = netperf_at(&port, &args);
        assert!(!out.success(), "{args:?}: {out}");
        assert!(out.stderr.contains(needle), "{args:?}: {out}");
        assert_eq!(out.stdout, "", "{args:?}: {out}");
    }
    let out = netperf_at(
        &port,
        &[
            "-t",
            "OMNI",
            "-l",
            "-10000",
            "--",
            "-d",
            "sideways",
            "-k",
            "DIRECTION",
        ],
    )
    .ok();
    assert!(out.stdout.contains("DIRECTION=Send"), "{out}");
    assert!(
        out.stderr.contains("'sideways' is not a direction"),
        "{out}"
    );
    let out = netperf_at(
        &port,
        &[
            "-t", "OMNI", "-l", "-10000", "--", "-T", "ip", "-k", "PROTOCOL",
        ],
    )
    .ok();
    assert!(out.stdout.contains("PROTOCOL=IP Default"), "{out}");
}

/// TCP_SENDFILE sends with sendfile(2), from a temporary file or from -F;
/// the netserver receives every byte.
#[test]
fn tcp_sendfile_sends_with_sendfile() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let have_strace = harness::have_strace();
    let file = std::env::temp_dir().join(format!("rsnetperf-sendfile-{}", std::process::id()));
    std::fs::write(&file, vec![b'x'; 1 << 20]).unwrap();
    for fill in [None, Some(file.to_str().unwrap())] {
        let mut args: Vec<&str> = vec![
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "TCP_SENDFILE",
            "-l",
            "-2000000",
            "-P",
            "0",
        ];
        if let Some(f) = fill {
            args.extend(["-F", f]);
        }
        args.extend(["--", "-m", "10000"]);
        let out = if have_strace {
            let trace = std::env::temp_dir().join(format!("rsnetperf-sf-{}", std::process::id()));
            let mut cmd = Command::new("strace");
            cmd.args(["-f", "-qq", "-e", "trace=sendfile", "-o"])
                .arg(&trace)
                .arg(bin("netperf"))
                .args(&args);
            let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
            let t = std::fs::read_to_string(&trace).unwrap();
            let _ = std::fs::remove_file(&trace);
            let n = t
                .lines()
                .filter(|l| l.contains("sendfile(") && l.contains(", 10000) = "))
                .count();
            assert_eq!(n, 200, "200 sendfile calls of 10000 bytes:\n{t}");
            out
        } else {
            assert!(
                std::env::var("NETPERF_REQUIRE_NETNS").as_deref() != Ok("1"),
                "strace is not installed"
            );
            harness::netperf(&args).ok()
        };
        assert_eq!(fields(&out.stdout)[2], "10000", "{out}");
        assert!(
            ns.wait_for_log(
                "TCP_STREAM 0 bytes sent, 2000000 received",
                Duration::from_secs(5)
            ),
            "{}",
            ns.log()
        );
    }
    // a fill file smaller than the ring is refused, as netperf 2.7 does
    std::fs::write(&file, b"tiny").unwrap();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_SENDFILE",
            "-F",
            file.to_str().unwrap(),
            "-l",
            "-1000",
        ],
    );
    assert!(
        !out.success()
            && out
                .stderr
                .contains("TCP_SENDFILE sends from the file itself"),
        "{out}"
    );
    let _ = std::fs::remove_file(&file);
}

/// TCP_CC: a connection per transaction and nothing else; netperf 2.7
/// shows -I in its banner but runs it once.
#[test]
fn tcp_cc_connects_and_closes() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &["-t", "TCP_CC", "-l", "-500", "-i", "3,3", "-P", "1"],
    )
    .ok();
    assert!(
        out.stdout.starts_with("TCP Connect/Close TEST from "),
        "{out}"
    );
    assert!(
        out.stdout.lines().next().unwrap().contains(" conf. "),
        "{out}"
    );
    assert!(
        ns.wait_for_log(
            "TCP_CC 0 bytes sent, 0 received, 500 transactions",
            Duration::from_secs(5)
        ),
        "{}",
        ns.log()
    );
    assert_eq!(
        ns.log().matches("TCP_CC ").count(),
        1,
        "one iteration: {}",
        ns.log()
    );
    let row = fields(out.stdout.lines().nth(6).unwrap());
    assert!(num(row[5]) > 0.0, "{out}");
}

/// TCP_MSS prints the maximum segment size of a data connection.
#[test]
fn tcp_mss_prints_the_segment_size() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-t", "TCP_MSS", "-P", "0"]).ok();
    let mss = num(out.stdout.trim());
    assert!((536.0..=65535.0).contains(&mss), "{out}");
    // TCP_MSS has netperf 2.7's classic options: -G is not one of them
    let out = ns
        .netperf(&["-t", "TCP_MSS", "-P", "0", "--", "-G", "1000"])
        .ok();
    assert_eq!(num(out.stdout.trim()), mss, "{out}");
    assert!(
        out.stderr.contains("-G is not an option of TCP_MSS"),
        "{out}"
    );
}

/// LOC_CPU and REM_CPU print the CPU meter's rate (the clock tick rate of
/// /proc/stat) and, at -v 2, the CPUs; UUID a fresh UUID, or -u's.
#[test]
fn one_figure_tests() {
    let ns = Netserver::start(&[]);
    let cpus = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    for (test, side) in [("LOC_CPU", "local"), ("REM_CPU", "remote")] {
        let out = ns.netperf(&["-t", test]).ok();
        assert!(
            !out.stdout.ends_with('\n') && num(&out.stdout) > 0.0,
            "{out}"
        );
        let out = ns.netperf(&["-t", test, "-v", "2"]).ok();
        let want = if cpus == 1 {
            format!("There is 1 {side} cpu\n")
        } else {
            format!("There are {cpus} {side} cpus\n")
        };
        assert!(out.stdout.ends_with(&want), "{out}");
    }
    let a = ns.netperf(&["-t", "UUID"]).ok().stdout;
    let b = ns.netperf(&["-t", "UUID"]).ok().stdout;
    assert_eq!(a.len(), 36, "{a}");
    assert_ne!(a, b);
    let out = ns.netperf(&["-t", "UUID", "--", "-u", "my-test-id"]).ok();
    assert_eq!(out.stdout, "my-test-id");
}
