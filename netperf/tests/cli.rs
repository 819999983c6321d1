//! The netperf binary's own command-line behaviour (and the reason cargo
//! builds the binary for the workspace's end-to-end tests).

use std::process::Command;

fn netperf(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netperf"))
        .args(args)
        .output()
        .expect("run netperf")
}

#[test]
fn version_names_the_protocol() {
    let out = netperf(&["-V"]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("netperf (rsnetperf) "), "{s}");
    assert!(s.contains("control protocol version 1"), "{s}");
}

#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let out = netperf(&["-l", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.starts_with("netperf: -l: 'x' is not a number\n"), "{e}");
    assert!(out.stdout.is_empty());
}
