//! The findings of the adversarial check after round four (issue 51), each
//! tried as the attacker sent it: SIGHUP to a daemon whatever threads its
//! options start, the key guarding the iperf3 port, third-party requests
//! that name files, stolen iperf3 cookies, limits every dialect obeys,
//! forged rates in the record, and the descriptor pool's shares.

use std::{
    path::PathBuf,
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, RawClient};

/// A folder of this test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("np-hard-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn file(&self, name: &str, contents: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// A key file, readable by its owner alone (as the daemon requires).
    fn key(&self, name: &str, contents: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.file(name, contents);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the netserver's process is still running.
fn alive(ns: &Netserver) -> bool {
    std::path::Path::new(&format!("/proc/{}", ns.pid())).exists()
        && !std::fs::read_to_string(format!("/proc/{}/stat", ns.pid()))
            .unwrap_or_default()
            .contains(") Z ")
}

/// SIGHUP is what logrotate's postrotate sends: whatever option started a
/// thread of its own (metrics, iperf3, fleet, the log's and the record's
/// writers, the policy's state), the daemon takes it, says so, and goes
/// on serving. A thread started before the signals were blocked took
/// SIGHUP's default action and ended the process (exit status 129).
#[test]
fn sighup_leaves_the_daemon_serving_whatever_threads_its_options_start() {
    let dir = Dir::new("hup");
    let key = dir.key("key", "a fleet key for the hardening tests\n");
    let policy = dir.file(
        "policy.toml",
        &format!("[daemon]\nstate_file = \"{}\"\n", dir.path("state.json")),
    );
    let log = dir.path("log");
    let metrics = format!("127.0.0.1:{}", harness::free_port());
    let record = dir.path("record");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("--metrics", vec!["--metrics", &metrics]),
        ("--iperf3", vec!["--iperf3", "0"]),
        ("--fleet", vec!["--fleet", "--key-file", &key]),
        ("--log-file", vec!["--log-file", &log]),
        ("--record", vec!["--record", &record]),
        ("--policy", vec!["--policy", &policy]),
        (
            "all of them",
            vec![
                "--metrics",
                &metrics,
                "--iperf3",
                "0",
                "--fleet",
                "--key-file",
                &key,
                "--policy",
                &policy,
                "-v",
                "2",
            ],
        ),
    ];
    for (what, args) in cases {
        let ns = Netserver::start(&args);
        // its threads are up: one served session first
        drop(RawClient::hello(ns.addr()));
        for _ in 0..3 {
            let _ = std::process::Command::new("kill")
                .args(["-HUP", &ns.pid().to_string()])
                .status();
            thread::sleep(Duration::from_millis(150));
        }
        assert!(alive(&ns), "{what}: SIGHUP ended the daemon\n{}", ns.log());
        // still serving: a whole test runs
        let mut np = vec!["-t", "TCP_RR", "-l", "1", "-P", "0"];
        if args.contains(&"--key-file") {
            np.extend(["--key-file", &key]);
        }
        let out = ns.netperf(&np);
        assert!(
            out.status.success(),
            "{what}: no test after SIGHUP: {}\n{}",
            out.stderr,
            ns.log()
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !ns.log().contains("SIGHUP") {
            thread::sleep(Duration::from_millis(20));
        }
        if args.contains(&"--log-file") {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                text.contains("SIGHUP"),
                "{what}: the log names no SIGHUP: {text}"
            );
        } else {
            assert!(
                ns.log().contains("SIGHUP"),
                "{what}: no SIGHUP line:\n{}",
                ns.log()
            );
        }
    }
}
