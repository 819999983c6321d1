//! The netserver binary's own command-line behaviour.

use std::process::Command;

#[test]
fn version_names_the_protocol() {
    let out = Command::new(env!("CARGO_BIN_EXE_netserver"))
        .arg("-V")
        .output()
        .expect("run netserver");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Netperf version 2.7.1\n"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_netserver"))
        .arg("--version")
        .output()
        .expect("run netserver");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("netserver (rsnetperf) "), "{s}");
    assert!(
        s.contains(&format!(
            "control protocol version {}",
            proto::PROTOCOL_VERSION
        )),
        "{s}"
    );
}

#[test]
fn help_lists_the_options() {
    let out = Command::new(env!("CARGO_BIN_EXE_netserver"))
        .arg("-h")
        .output()
        .expect("run netserver");
    let s = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "-D",
        "-L name,family",
        "-p port",
        "-4",
        "-6",
        "-v level",
        "--data-ports MIN-MAX",
    ] {
        assert!(s.contains(opt), "{opt} missing from:\n{s}");
    }
}
