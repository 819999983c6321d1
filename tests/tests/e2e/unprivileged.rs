//! Where users really run it: the binaries as a normal user (the test
//! runs them as `nobody` with setpriv), under a locked-memory limit of 64
//! KiB as many containers set. Every option gives its right figure or one
//! line naming what it needs; none prints a silently wrong figure.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use harness::{Netserver, Output, attempts, bin, fields, num, run_with_deadline};

/// A command that runs `program` as `nobody` (uid 65534, no capabilities
/// once the user id changes) with 64 KiB of locked memory, or `None`,
/// loudly, where this machine cannot (not root, or no setpriv).
fn as_nobody(program: PathBuf) -> Option<Command> {
    let ok = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        harness::skip_unless_required("cannot run a command as nobody (setpriv, as root)");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "prlimit",
        "--memlock=65536",
        "--",
    ])
    .arg(program);
    Some(c)
}

fn netperf_as_nobody(port: u16, args: &[&str]) -> Option<Output> {
    let mut c = as_nobody(bin("netperf"))?;
    c.args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(args);
    Some(run_with_deadline(c, Duration::from_secs(60)))
}

/// MSG_ZEROCOPY's pinned pages are charged to the locked-memory limit:
/// past 64 KiB every zero-copy send failed with ENOBUFS and netperf printed
/// 0.00 with status 0. A send the kernel will not pin is now copied and
/// counted: the figure is within 10% of a plain send's (the median of
/// alternating pairs), and netperf says how many sends were copied.
#[test]
fn zerocopy_under_a_small_locked_memory_limit_gives_the_right_figure() {
    let ns = Netserver::start(&[]);
    let port = ns.port();
    let run = |extra: &[&str]| -> Option<(f64, Output)> {
        let mut args = vec!["-t", "TCP_STREAM", "-l", "2", "-P", "0", "--", "-m", "128K"];
        args.extend_from_slice(extra);
        let out = netperf_as_nobody(port, &args)?.ok();
        Some((num(fields(&out.stdout)[4]), out))
    };
    let Some((_, first)) = run(&["--zerocopy"]) else {
        return;
    };
    assert!(
        first.stderr.contains("--zerocopy") && first.stderr.contains("copied"),
        "netperf says the sends were copied:\n{first}"
    );
    attempts::attempts("zerocopy under 64 KiB of locked memory", |_| {
        let mut ratios = Vec::new();
        for _ in 0..3 {
            let (plain, _) = run(&[]).expect("as nobody");
            let (zc, out) = run(&["--zerocopy"]).expect("as nobody");
            assert!(zc > 0.0, "{out}");
            ratios.push(zc / plain.max(1e-9));
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios[1];
        eprintln!("--zerocopy / plain, three pairs: {ratios:?}");
        if median >= 0.9 {
            Ok(())
        } else {
            Err(attempts::Miss::starved(format!(
                "median {median:.3} of {ratios:?}"
            )))
        }
    });
}

/// Restores a sysctl's value when dropped. Tests that set the same one
/// (each in its own process under nextest) take turns on a lock file, so
/// that one's restore never undoes another's setting while it runs, nor
/// leaves the host changed.
struct Sysctl {
    path: &'static str,
    was: String,
    _turn: nix::fcntl::Flock<std::fs::File>,
}

impl Sysctl {
    fn set(path: &'static str, value: &str) -> Option<Sysctl> {
        let lock = std::env::temp_dir().join(format!(
            "rsnetperf-sysctl-{}.lock",
            path.rsplit('/').next().unwrap_or("x")
        ));
        let file = std::fs::File::create(lock).ok()?;
        let turn = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()?;
        let was = std::fs::read_to_string(path).ok()?;
        std::fs::write(path, value).ok()?;
        Some(Sysctl {
            path,
            was,
            _turn: turn,
        })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, self.was.trim());
    }
}

/// A netserver that may not set up an io_uring ring (here: io_uring
/// disabled for processes without CAP_SYS_ADMIN; in containers, the
/// locked-memory limit or the memory cgroup) refuses an `--io-uring` test
/// at setup, in one line naming why and what to change, and serves the
/// next test: TCP_MAERTS once ended in a broken pipe mid-test.
#[test]
fn io_uring_a_netserver_may_not_use_is_refused_at_setup() {
    let Some(cmd) = as_nobody(bin("netserver")) else {
        return;
    };
    let Some(_sysctl) = Sysctl::set("/proc/sys/kernel/io_uring_disabled", "1") else {
        harness::skip_unless_required("kernel.io_uring_disabled cannot be set here");
        return;
    };
    let mut cmd = cmd;
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1"]);
    let ns = Netserver::spawn(cmd);
    let port = ns.port().to_string();
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let t0 = Instant::now();
        let out = harness::netperf_at(&port, &["-t", test, "-l", "3", "--", "--io-uring"]);
        assert!(!out.success(), "{out}");
        assert!(
            out.stderr
                .contains("netserver: --io-uring: setting up a ring")
                && out.stderr.contains("io_uring_disabled"),
            "{out}"
        );
        assert!(!out.stderr.contains("roken pipe"), "{out}");
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "refused at setup: {:?}",
            t0.elapsed()
        );
    }
    let out = harness::netperf_at(&port, &["-t", "TCP_STREAM", "-l", "1", "-P", "0"]).ok();
    assert!(num(fields(&out.stdout)[4]) > 0.0, "{out}");
}

/// A normal user's netserver on a port below 1024 says what it needs.
#[test]
fn a_privileged_port_names_what_it_needs() {
    let Some(mut cmd) = as_nobody(bin("netserver")) else {
        return;
    };
    cmd.args(["-D", "-p", "999", "-L", "127.0.0.1"]);
    let out = run_with_deadline(cmd, Duration::from_secs(10));
    assert!(!out.success(), "{out}");
    assert!(out.stderr.contains("CAP_NET_BIND_SERVICE"), "{out}");
}

/// Our own end under kernel.io_uring_disabled (a normal user's): refused
/// before the test is asked for, in one line naming the setting, with no
/// test started at the netserver.
#[test]
fn io_uring_our_end_may_not_use_is_refused_before_the_test() {
    let ns = Netserver::start(&[]);
    let Some(_sysctl) = Sysctl::set("/proc/sys/kernel/io_uring_disabled", "1") else {
        harness::skip_unless_required("kernel.io_uring_disabled cannot be set here");
        return;
    };
    let t0 = Instant::now();
    let Some(out) = netperf_as_nobody(
        ns.port(),
        &["-t", "TCP_STREAM", "-l", "3", "--", "--io-uring"],
    ) else {
        return;
    };
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("--io-uring: setting up a ring")
            && out.stderr.contains("io_uring_disabled"),
        "{out}"
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(
        !ns.log().contains("TCP_STREAM"),
        "no test started: {}",
        ns.log()
    );
}

/// What a normal user's kernel does not take of what was asked is said,
/// never silently reported as if it had been: a congestion control
/// outside net.ipv4.tcp_allowed_congestion_control at both ends (read
/// back from each socket), SO_DEBUG without CAP_NET_ADMIN, a socket
/// buffer above net.core.wmem_max.
#[test]
fn what_a_normal_users_kernel_refuses_is_said() {
    let Some(mut cmd) = as_nobody(bin("netserver")) else {
        return;
    };
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1"]);
    let ns = Netserver::spawn(cmd);
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_default();
    let allowed = read("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    let refused = read("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .split_whitespace()
        .find(|a| !allowed.split_whitespace().any(|b| b == *a))
        .map(str::to_string);
    let wmem_max: u64 = read("/proc/sys/net/core/wmem_max")
        .trim()
        .parse()
        .unwrap_or(0);
    let big = (wmem_max * 4).max(1 << 20).to_string();
    let mut args = vec![
        "-t",
        "TCP_STREAM",
        "-l",
        "1",
        "-P",
        "0",
        "--",
        "-g",
        "-s",
        &big,
    ];
    let k = refused.as_ref().map(|a| format!("{a},{a}"));
    if let Some(k) = &k {
        args.extend(["-K", k]);
    } else {
        eprintln!("!!! every congestion control available is allowed here: -K not tried");
    }
    let out = netperf_as_nobody(ns.port(), &args).expect("as nobody").ok();
    assert!(num(fields(&out.stdout)[4]) > 0.0, "{out}");
    assert!(out.stderr.contains("-g: SO_DEBUG is not set"), "{out}");
    assert!(
        out.stderr.contains(&format!("SO_SNDBUF: {big} asked")),
        "{out}"
    );
    if let Some(a) = &refused {
        // the reason and the remedy, for each end
        assert!(
            out.stderr
                .contains("an unprivileged process may only choose"),
            "{out}"
        );
        assert!(
            out.stderr
                .contains("add it to that list on the netserver's host"),
            "{out}"
        );
        assert!(
            out.stderr.contains(&format!("-K {a}: our end ran")),
            "{out}"
        );
        assert!(
            out.stderr
                .contains(&format!("-K ,{a}: the netserver's end ran")),
            "{out}"
        );
        assert!(
            ns.wait_for_log(
                &format!("-K {a}: the kernel refused it"),
                Duration::from_secs(2)
            ),
            "{}",
            ns.log()
        );
    }
}
