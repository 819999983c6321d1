//! The receive paths beyond netperf's copy: `--rx-discard` (the kernel
//! drops the bytes uncopied) and `--rx-zerocopy` (whole pages mapped, the
//! rest copied), at whichever end receives; and `--zerocopy` on many
//! flows. Every byte is counted at both ends as on the copy path, the
//! calls are seen in strace, the pages are let go, and what cannot work
//! says so.

use std::time::Duration;

use harness::{Netserver, bin, have_strace, netns::PageLoop, netperf, run_with_deadline};
use serde_json::Value;

use super::options::{calls, traced_netperf, traced_server};

fn json(out: &harness::Output) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `--rx-discard`: the netserver (TCP_STREAM) and netperf (TCP_MAERTS)
/// receive with MSG_TRUNC, count every byte the other end sent, and say
/// on stderr (and at `-v 3`) that nothing reached user space.
#[test]
fn discard_counts_every_byte_at_either_end() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("recvfrom", "", "rxd");
    let port = srv.port();
    let out = netperf(&[
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "TCP_STREAM",
        "-l",
        "-30000000",
        "--json",
        "--",
        "-m",
        "64K",
        "--rx-discard",
    ])
    .ok();
    let d = json(&out);
    assert_eq!(u(&d["local"]["bytes_sent"]), 30_000_000, "{out}");
    assert_eq!(u(&d["remote"]["bytes_received"]), 30_000_000, "{out}");
    assert_eq!(d["options"]["rx_path"], "discard");
    assert!(out.stderr.contains("--rx-discard"), "{out}");
    assert!(out.stderr.contains("nothing reached user space"), "{out}");
    let t = srv.trace();
    assert!(
        !calls(&t, "MSG_TRUNC").is_empty(),
        "no MSG_TRUNC receive: {t}"
    );

    // TCP_MAERTS: we receive, and discard
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "TCP_MAERTS",
            "-l",
            "1",
            "-v",
            "3",
            "--",
            "--rx-discard",
        ],
        "recvfrom",
        "",
    );
    let out = out.ok();
    assert!(
        !calls(&t, "MSG_TRUNC").is_empty(),
        "netperf did not discard: {t}"
    );
    assert!(
        out.stdout
            .contains("Receive path: netperf's kernel dropped"),
        "{out}"
    );
}

/// `--rx-zerocopy` where segments are whole pages (a namespace whose
/// loopback MTU makes an IPv6 segment 15 pages) and the sender's pages are
/// its own (`--zerocopy`): the netserver maps nearly every byte, one flow
/// or two, counts them exactly, and holds no mapping once the test is over.
#[test]
fn zero_copy_maps_whole_pages_and_counts_every_byte() {
    if !have_strace() {
        return;
    }
    let Some(l) = PageLoop::new("zero_copy_maps_whole_pages_and_counts_every_byte") else {
        return;
    };
    let ns = l.netserver(&[]);
    let port = ns.port().to_string();
    for flows in ["1", "2"] {
        let total = 200 * 1024 * 1024u64;
        let mut cmd = l.command(&bin("netperf"));
        cmd.args(["-H", "::1", "-p", &port, "-t", "TCP_STREAM", "--json"])
            .args(["-l", &format!("-{total}")])
            .args([
                "--",
                "-m",
                "64K",
                "--zerocopy",
                "--rx-zerocopy",
                "--flows",
                flows,
            ]);
        let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
        let d = json(&out);
        let got = u(&d["remote"]["bytes_received"]);
        assert_eq!(u(&d["local"]["bytes_sent"]), total, "{out}");
        assert_eq!(got, total, "{out}");
        let mapped = u(&d["remote"]["rx_mapped_bytes"]);
        assert!(
            mapped <= got && mapped as f64 >= 0.9 * got as f64,
            "{flows} flows: {mapped} of {got} bytes mapped\n{out}"
        );
        assert!(!out.stderr.contains("could map only"), "{out}");
        // the window is unmapped with its flow: no mapping of a socket is left
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", ns.pid())).unwrap();
        assert!(
            !maps.contains("socket:"),
            "a socket is still mapped:\n{maps}"
        );
    }
    // the calls themselves: TCP_ZEROCOPY_RECEIVE on the receiver
    drop(ns);
    let mut cmd = l.command(std::path::Path::new("strace"));
    let file = std::env::temp_dir().join(format!("rsnetperf-zc-{}", std::process::id()));
    cmd.args(["-f", "-qq", "-e", "trace=getsockopt,setsockopt", "-o"])
        .arg(&file)
        .arg(bin("netserver"))
        .args(["-D", "-p", "0", "-L", "::1"]);
    // (strace killed would leave its netserver running: TracedServer ends it)
    let ns = harness::TracedServer::spawn(cmd, file);
    let port = ns.port();
    let mut cmd = l.command(&bin("netperf"));
    cmd.args([
        "-H",
        "::1",
        "-p",
        &port,
        "-t",
        "TCP_STREAM",
        "-l",
        "-20000000",
        "-P",
        "0",
    ])
    .args(["--", "-m", "64K", "--zerocopy", "--rx-zerocopy"]);
    run_with_deadline(cmd, Duration::from_secs(60)).ok();
    let t = ns.trace();
    assert!(!calls(&t, "TCP_ZEROCOPY_RECEIVE").is_empty(), "{t}");
    assert!(!calls(&t, "SO_RCVLOWAT").is_empty(), "{t}");
}

/// Where pages cannot be mapped (plain loopback: its segments are not
/// whole pages, a plain send's pages are shared), `--rx-zerocopy` still
/// counts every byte, by copy, and says on stderr why and what to change;
/// the same at our end in TCP_MAERTS.
#[test]
fn zero_copy_that_cannot_map_copies_and_says_why() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let out = netperf(&[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            test,
            "-l",
            "1",
            "--json",
            "--",
            "--rx-zerocopy",
        ])
        .ok();
        let d = json(&out);
        let side = if test == "TCP_STREAM" {
            "remote"
        } else {
            "local"
        };
        assert!(u(&d[side]["bytes_received"]) > 0, "{out}");
        assert_eq!(
            u(&d["local"]["bytes_sent"]) + u(&d["remote"]["bytes_sent"]),
            u(&d[side]["bytes_received"]),
            "{test}: {out}"
        );
        assert!(out.stderr.contains("--rx-zerocopy"), "{out}");
        assert!(out.stderr.contains("could map only"), "{out}");
        assert!(out.stderr.contains("61512"), "{out}");
    }
}

/// What the receive paths and `--io-uring` do not apply to is refused
/// before anything runs, naming the option.
#[test]
fn paths_refused_where_they_do_not_apply() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (bad, named) in [
        (
            &["-t", "TCP_RR", "--", "--rx-zerocopy"][..],
            "--rx-zerocopy",
        ),
        (
            &["-t", "UDP_STREAM", "--", "--rx-discard"][..],
            "--rx-discard",
        ),
        (
            &["-t", "TCP_STREAM", "--", "--rx-discard", "--rx-zerocopy"][..],
            "--rx-zerocopy, --rx-discard",
        ),
        (&["-t", "TCP_CRR", "--", "--io-uring"][..], "--io-uring"),
        (
            &["-t", "TCP_STREAM", "--", "--io-uring", "--zerocopy"][..],
            "--io-uring",
        ),
        (&["-t", "TCP_MAERTS", "--", "--zerocopy"][..], "--zerocopy"),
    ] {
        let mut args = vec!["-H", "127.0.0.1", "-p", &port];
        args.extend(bad);
        let out = netperf(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out}");
        assert!(out.stdout.is_empty(), "{bad:?} printed: {out}");
        assert!(out.stderr.contains(named), "{bad:?}: {out}");
    }
}

/// `--io-uring`: TCP_STREAM and TCP_MAERTS, one flow and four, move an
/// exact count (a multiple of four: the netserver shares a count out
/// evenly, rounding up) through io_uring at both ends (strace sees io_uring_enter
/// and no plain data call on the sending side); UDP_STREAM's loss through
/// it is held against the kernel's counters in accuracy.rs.
#[test]
fn io_uring_moves_every_byte_at_both_ends() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("io_uring_setup,io_uring_enter,sendto,recvfrom", "", "uring");
    let port = srv.port();
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        for flows in ["1", "4"] {
            let (out, t) = traced_netperf(
                &[
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-t",
                    test,
                    "-l",
                    "-20000004",
                    "--json",
                    "--",
                    "-m",
                    "32K",
                    "-M",
                    "32K",
                    "--io-uring",
                    "--flows",
                    flows,
                ],
                "io_uring_setup,io_uring_enter,sendto,recvfrom,write",
                "",
            );
            let out = out.ok();
            let d = json(&out);
            let (tx, rx) = if test == "TCP_STREAM" {
                ("local", "remote")
            } else {
                ("remote", "local")
            };
            assert_eq!(u(&d[tx]["bytes_sent"]), 20_000_004, "{test} {flows}: {out}");
            assert_eq!(
                u(&d[rx]["bytes_received"]),
                20_000_004,
                "{test} {flows}: {out}"
            );
            assert_eq!(d["options"]["io_uring"], true);
            assert!(!calls(&t, "io_uring_setup").is_empty(), "{t}");
            assert!(!calls(&t, "io_uring_enter").is_empty(), "{t}");
            if test == "TCP_STREAM" {
                // 20 MB in 32K sends would be 611 send calls
                let plain = calls(&t, "sendto(").len();
                assert!(plain < 20, "{plain} plain sends beside io_uring: {t}");
            }
        }
    }
    let t = srv.trace();
    assert!(
        !calls(&t, "io_uring_enter").is_empty(),
        "the netserver: {t}"
    );
}
