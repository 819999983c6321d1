//! The netperf binary's own command-line behaviour (and the reason cargo
//! builds the binary for the workspace's end-to-end tests).

use std::process::Command;

fn netperf(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netperf"))
        .args(args)
        .output()
        .expect("run netperf")
}

/// Scripts test `netperf -V` for netperf 2.7's one line; ours is
/// `--version`.
#[test]
fn version_is_netperf_2_7s_line_and_ours_is_asked_for() {
    let out = netperf(&["-V"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Netperf version 2.7.1\n"
    );
    let out = netperf(&["--version"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("rsnetperf "), "{s}");
    assert!(
        s.contains(&format!(
            "control protocol version {}",
            proto::PROTOCOL_VERSION
        )),
        "{s}"
    );
}

/// A value netperf 2.7 would wrap into nonsense (past 32 bits), or an
/// option it does not know: one line naming it, the usage hint, status 2.
#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let out = netperf(&["-l", "4G"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.starts_with("netperf: -l: '4G' is more than"), "{e}");
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(out.stdout.is_empty());
}
