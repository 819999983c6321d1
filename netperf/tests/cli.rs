//! The netperf binary's own command-line behaviour (and the reason cargo
//! builds the binary for the workspace's end-to-end tests).

use std::process::Command;

fn netperf(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netperf"))
        .args(args)
        .output()
        .expect("run netperf")
}

/// Scripts test `netperf -V` for netperf 2.7's line: it comes first.
#[test]
fn version_says_netperf_2_7_first_then_ours() {
    let out = netperf(&["-V"]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    let mut lines = s.lines();
    assert_eq!(lines.next(), Some("Netperf version 2.7.1"), "{s}");
    let ours = lines.next().unwrap_or_default();
    assert!(ours.starts_with("rsnetperf "), "{s}");
    assert!(
        ours.contains(&format!(
            "control protocol version {}",
            proto::PROTOCOL_VERSION
        )),
        "{s}"
    );
}

#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let out = netperf(&["-l", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.starts_with("netperf: -l: 'x' is not a number"), "{e}");
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(out.stdout.is_empty());
}
