//! Against real netperf 2.7.1 binaries, which CI cannot build (no package;
//! its repository is out of CI's reach): set `NETPERF27_DIR` to a
//! directory holding its `netperf` and `netserver` (built under /tmp; never
//! committed) and these run; without it they say so and pass.
//!
//! Each case runs three ways: netperf 2.7 against its own netserver (the
//! reference), netperf 2.7 against ours, ours against netserver 2.7; the
//! output of each must have the reference's lines, words and fields,
//! numbers aside.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use harness::{Netserver, bin, free_port, run_with_deadline};

fn reference() -> Option<PathBuf> {
    let d = std::env::var_os("NETPERF27_DIR").map(PathBuf::from);
    if d.is_none() {
        eprintln!("NETPERF27_DIR is not set: the tests against netperf 2.7.1 are skipped");
    }
    d
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// netserver 2.7 in the foreground on a free port.
fn hp_netserver(dir: &std::path::Path, extra: &[&str]) -> (Kill, u16) {
    let port = free_port();
    let child = Command::new(dir.join("netserver"))
        .args(["-D", "-p", &port.to_string(), "-L", "127.0.0.1"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("netserver 2.7");
    std::thread::sleep(Duration::from_millis(400));
    (Kill(child), port)
}

/// Numbers (and the address netperf 2.7 leaves out of its banner's
/// parentheses) aside, and runs of spaces as one.
fn shape(s: &str) -> Vec<String> {
    s.lines()
        .map(|l| {
            let mut out = String::new();
            let mut in_num = false;
            for c in l.chars() {
                if c.is_ascii_digit() || (in_num && c == '.') {
                    if !in_num {
                        out.push('N');
                    }
                    in_num = true;
                } else {
                    in_num = false;
                    out.push(c);
                }
            }
            out.replace("(N.N.N.N)", "()")
                .replace("(N)", "()")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn run(netperf: PathBuf, port: u16, args: &[&str]) -> String {
    let mut c = Command::new(netperf);
    c.args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(args);
    let out = run_with_deadline(c, Duration::from_secs(60));
    assert!(out.success(), "{args:?}: {out}");
    out.stdout
}

const CASES: &[&[&str]] = &[
    &["-t", "TCP_STREAM", "-l", "1"],
    &["-t", "TCP_MAERTS", "-l", "1"],
    &["-t", "TCP_RR", "-l", "1"],
    &["-t", "TCP_CRR", "-l", "1"],
    &["-t", "UDP_STREAM", "-l", "1"],
    &["-t", "UDP_RR", "-l", "1"],
    &["-t", "TCP_CC", "-l", "1"],
    &["-t", "TCP_SENDFILE", "-l", "1"],
    &["-t", "TCP_MSS", "-l", "1"],
    &["-t", "OMNI", "-l", "1"],
    &["-t", "OMNI", "-l", "1", "--", "-d", "recv", "-T", "udp"],
    &["-t", "TCP_STREAM", "-l", "1", "-c", "-C"],
    &["-t", "TCP_RR", "-l", "1", "-c", "-C", "-v", "2"],
    &["-t", "TCP_STREAM", "-l", "1", "-P", "0", "-v", "0"],
    &["-t", "UDP_RR", "-l", "-2000"],
    &["-t", "REM_CPU"],
];

#[test]
fn both_ways_against_netperf_2_7_1() {
    let Some(dir) = reference() else { return };
    let (_hp, hp_port) = hp_netserver(&dir, &[]);
    let ours = Netserver::start(&[]);
    for args in CASES {
        let want = shape(&run(dir.join("netperf"), hp_port, args));
        let hp_to_ours = shape(&run(dir.join("netperf"), ours.port(), args));
        let ours_to_hp = shape(&run(bin("netperf"), hp_port, args));
        assert_eq!(hp_to_ours, want, "netperf 2.7 -> our netserver {args:?}");
        assert_eq!(ours_to_hp, want, "our netperf -> netserver 2.7 {args:?}");
    }
}

/// `-i 3,3 -I 99,10`: three iterations each way; whether the confidence
/// was reached depends on the machine, so only the table is compared.
#[test]
fn confidence_iterations_both_ways() {
    let Some(dir) = reference() else { return };
    let (_hp, hp_port) = hp_netserver(&dir, &[]);
    let ours = Netserver::start(&[]);
    let args = ["-t", "TCP_RR", "-l", "1", "-i", "3,3", "-I", "99,10"];
    let table = |s: String| -> Vec<String> {
        shape(&s)
            .into_iter()
            .filter(|l| !l.starts_with("!!!"))
            .collect()
    };
    let table =
        |s: String| -> Vec<String> { table(s).into_iter().filter(|l| !l.is_empty()).collect() };
    let want = table(run(dir.join("netperf"), hp_port, &args));
    assert_eq!(table(run(dir.join("netperf"), ours.port(), &args)), want);
    assert_eq!(table(run(bin("netperf"), hp_port, &args)), want);
}

/// `-Z`: netserver 2.7's passphrase, ours in both roles.
#[test]
fn passphrases_both_ways() {
    let Some(dir) = reference() else { return };
    let (_hp, hp_port) = hp_netserver(&dir, &["-Z", "sesame"]);
    let ours = Netserver::start(&["-Z", "sesame"]);
    let args = ["-t", "TCP_RR", "-l", "1", "-P", "0", "-Z", "sesame"];
    let want = shape(&run(dir.join("netperf"), hp_port, &args));
    assert_eq!(shape(&run(dir.join("netperf"), ours.port(), &args)), want);
    assert_eq!(shape(&run(bin("netperf"), hp_port, &args)), want);
    // a wrong one fails both ways
    for (np, port) in [
        (dir.join("netperf"), ours.port()),
        (bin("netperf"), hp_port),
    ] {
        let mut c = Command::new(np);
        c.args([
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-l",
            "1",
            "-Z",
            "wrong",
        ]);
        assert!(!run_with_deadline(c, Duration::from_secs(30)).success());
    }
}

/// `-d`: from the control connection on, ours prints netperf 2.7's lines
/// that describe the run, in its order, on stdout, and 2.7 prints them so
/// against our netserver too. netperf 2.7's own internals are left out of
/// the comparison (its argument vector, struct sizes, globals, signal
/// catchers, getaddrinfo dumps, its frames' sizes, TCP_CRR's lines per
/// connection).
#[test]
fn debug_lines_as_netperf_2_7_1() {
    let Some(dir) = reference() else { return };
    let (_hp, hp_port) = hp_netserver(&dir, &[]);
    let ours = Netserver::start(&[]);
    let describing = |s: String| -> Vec<String> {
        let s = s
            .split_once("remotehost is")
            .map(|(_, rest)| format!("remotehost is{rest}"))
            .unwrap_or_default();
        shape(&s)
            .into_iter()
            .filter(|l| {
                !l.starts_with("recv_response:")
                    && !l.starts_with("Adjusting elapsed_time")
                    && !l.starts_with('\t')
                    && !l.starts_with("resolve_host")
                    && !l.starts_with("getaddrinfo")
                    && !l.starts_with("cannonical")
                    && !l.starts_with("flags:")
                    && !l.starts_with("sa_family")
            })
            .collect()
    };
    for test in ["TCP_STREAM", "TCP_MAERTS", "TCP_RR", "UDP_STREAM", "UDP_RR"] {
        for extra in [
            &[][..],
            &["--", "-s", "65536", "-m", "1000", "-P", "0,0"][..],
        ] {
            let mut args = vec!["-t", test, "-l", "1", "-d"];
            args.extend_from_slice(extra);
            let want = describing(run(dir.join("netperf"), hp_port, &args));
            assert!(want.iter().any(|l| l.starts_with("remote port is")));
            let ours_to_hp = describing(run(bin("netperf"), hp_port, &args));
            assert_eq!(ours_to_hp, want, "our netperf -> netserver 2.7 {args:?}");
            let hp_to_ours = describing(run(dir.join("netperf"), ours.port(), &args));
            assert_eq!(hp_to_ours, want, "netperf 2.7 -> our netserver {args:?}");
        }
    }
}
