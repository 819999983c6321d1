//! netserver: serving many clients, surviving bad ones, the embedded
//! fallback, clean shutdown.

use std::{
    io::Write,
    net::TcpStream,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use harness::{
    Netserver, bin, fields, free_port, netns::Hosts, netperf, netperf_at, run_with_deadline,
};

#[test]
fn serves_clients_one_after_another() {
    let ns = Netserver::start(&[]);
    for test in ["TCP_STREAM", "TCP_MAERTS", "TCP_STREAM"] {
        ns.netperf(&["-t", test, "-l", "1", "-P", "0"]).ok();
    }
}

#[test]
fn serves_clients_at_once() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let runs: Vec<_> = ["TCP_STREAM", "TCP_MAERTS", "TCP_STREAM"]
        .into_iter()
        .map(|test| {
            let port = port.clone();
            thread::spawn(move || netperf_at(&port, &["-t", test, "-l", "2", "-P", "0"]))
        })
        .collect();
    for r in runs {
        let out = r.join().unwrap().ok();
        assert!(harness::num(fields(&out.stdout)[4]) > 0.0, "{out}");
    }
}

/// A client sending garbage, or vanishing mid-handshake, does not disturb
/// the next one.
#[test]
fn survives_bad_clients() {
    let ns = Netserver::start(&[]);
    let port = ns.port();
    for garbage in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        &[0xff; 64][..],
        &[0, 0, 0, 0][..],
        &[0, 1][..],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = s.write_all(garbage);
        drop(s);
    }
    netperf_at(&port.to_string(), &["-l", "1", "-P", "0"]).ok();
}

/// With `--no-netperf2`, or `--key-file` without `--allow-netperf2`, a
/// netperf 2.7 client (its first 656-byte frame, DO_OMNI) is answered in
/// its own frame with remote error 93 (EPROTONOSUPPORT), which it prints;
/// the frame and the log say it is the administrator's choice, and which
/// one; the next client of ours is served.
#[test]
fn netperf_2_7_clients_are_told_in_their_own_frame() {
    use std::io::Read;
    let key = std::env::temp_dir().join(format!("np2-refused-key-{}", std::process::id()));
    std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let key_arg = key.to_str().unwrap().to_string();
    for (args, why) in [
        (vec!["--no-netperf2"], "--no-netperf2"),
        (vec!["--key-file", key_arg.as_str()], "--allow-netperf2"),
    ] {
        let ns = Netserver::start(&args);
        let port = ns.port();
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut omni = [0u8; 656];
        omni[..8].copy_from_slice(&[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff]);
        s.write_all(&omni).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        assert_eq!(reply.len(), 656);
        let word = |i: usize| u32::from_be_bytes(reply[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!((word(0), word(1)), (98, 93));
        let text = String::from_utf8_lossy(&reply[8..]);
        assert!(text.contains(why) && !text.contains("yet"), "{text}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ns.log().contains("netperf 2.7 client") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        assert!(
            ns.log().contains("refused by policy") && ns.log().contains(why),
            "{}",
            ns.log()
        );
        if args[0] == "--no-netperf2" {
            netperf_at(&port.to_string(), &["-l", "1", "-P", "0"]).ok();
        }
    }
    let _ = std::fs::remove_file(&key);
}

/// No -H and nothing listening: an embedded netserver runs the test, and
/// stderr says so.
#[test]
fn embedded_netserver_when_none_is_running() {
    let port = free_port().to_string();
    let out = netperf(&["-p", &port, "-l", "1"]).ok();
    assert!(
        out.stderr.contains("started an embedded netserver"),
        "{out}"
    );
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(out.stdout.starts_with("MIGRATED TCP STREAM TEST"), "{out}");
    assert_eq!(out.stdout.lines().count(), 7, "{out}");
}

/// `-H 127.0.0.1` (or `-H localhost`) on the default port with no netserver
/// there also falls back. A fresh network namespace guarantees that port
/// 12865 is free whatever runs on this machine.
#[test]
fn embedded_netserver_for_an_explicit_loopback_host() {
    let Some(h) = Hosts::new("embedded_netserver_for_an_explicit_loopback_host") else {
        return;
    };
    for host in ["127.0.0.1", "localhost", "::1"] {
        let mut cmd = h.command(&h.b, &bin("netperf"));
        cmd.args(["-H", host, "-l", "1", "-t", "TCP_RR"]);
        let out = run_with_deadline(cmd, Duration::from_secs(30)).ok();
        assert!(
            out.stderr.contains(&format!(
                "no netserver on {host} port 12865; started an embedded netserver"
            )),
            "{out}"
        );
        assert!(
            out.stdout.starts_with("MIGRATED TCP REQUEST/RESPONSE TEST"),
            "{out}"
        );
    }
    // Every address of 127.0.0.0/8 is loopback; the embedded netserver
    // listens on the one named.
    let mut cmd = h.command(&h.b, &bin("netperf"));
    cmd.args(["-H", "127.0.0.2", "-l", "1"]);
    let out = run_with_deadline(cmd, Duration::from_secs(30)).ok();
    assert!(out.stderr.contains("127.0.0.2:"), "{out}");
}

/// With both -H and -p given, a refused port is an error, not a fallback.
#[test]
fn no_embedded_netserver_with_an_explicit_host_and_port() {
    let port = free_port().to_string();
    let out = netperf(&["-H", "localhost", "-p", &port, "-l", "1"]);
    assert!(!out.success(), "{out}");
    assert!(!out.stderr.contains("embedded"), "{out}");
}

#[test]
fn sigterm_ends_netserver_cleanly() {
    let mut ns = Netserver::start(&[]);
    let port = ns.port();
    let start = Instant::now();
    let status = ns
        .signal_and_wait("TERM", Duration::from_secs(5))
        .expect("netserver did not exit within 5 s of SIGTERM");
    assert!(status.success(), "{status}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "listener still open"
    );
}

#[test]
fn netserver_version_and_bad_options() {
    let mut cmd = Command::new(bin("netserver"));
    cmd.arg("-V");
    let out = run_with_deadline(cmd, Duration::from_secs(10));
    assert!(
        out.success() && out.stdout == "Netperf version 2.7.1\n",
        "{out}"
    );
    let mut cmd = Command::new(bin("netserver"));
    cmd.arg("--version");
    let out = run_with_deadline(cmd, Duration::from_secs(10));
    assert!(
        out.success() && out.stdout.contains("control protocol version"),
        "{out}"
    );
    let mut cmd = Command::new(bin("netserver"));
    cmd.args(["-p", "notaport"]);
    let out = run_with_deadline(cmd, Duration::from_secs(10));
    assert!(!out.success(), "{out}");
    assert!(out.stderr.starts_with("netserver: -p:"), "{out}");
}

/// Without -D, netserver detaches: the command returns at once and the
/// daemon serves on.
#[test]
fn netserver_detaches_without_dash_d() {
    let port = free_port();
    let pid_file = std::env::temp_dir().join(format!("np-detach-{}.pid", std::process::id()));
    let mut cmd = Command::new(bin("netserver"));
    cmd.args(["-p", &port.to_string(), "-L", "127.0.0.1", "--pid-file"])
        .arg(&pid_file);
    let out = run_with_deadline(cmd, Duration::from_secs(10));
    assert!(out.success(), "{out}");
    assert!(
        out.stdout
            .contains(&format!("listening on 127.0.0.1:{port}")),
        "{out}"
    );
    let res = netperf_at(&port.to_string(), &["-l", "1", "-P", "0"]);
    // stop the daemon this test started, by its pid (the detached child's,
    // from --pid-file), and no other process
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the pid file")
        .trim()
        .parse()
        .expect("a pid");
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        cmdline.contains("netserver"),
        "pid {pid} is not the netserver: {cmdline:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let t0 = std::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "still running"
    );
    assert!(!pid_file.exists(), "the pid file outlived the daemon");
    res.ok();
}

/// Over its per-client cap, netserver says "busy" at once; netperf tries
/// again for a few seconds, then reports it.
#[test]
fn busy_netserver_is_retried_then_reported() {
    use proto::{ClientMsg, Hello};
    use std::io::Read;
    let ns = Netserver::start(&["--max-per-client", "1"]);
    let port = ns.port().to_string();
    // a session with a test granted holds its place (an idle one would
    // make room for a new client)
    let hold = || {
        let mut s = TcpStream::connect(ns.addr()).unwrap();
        s.write_all(&ClientMsg::Hello(Hello::new("holder")).encode().unwrap())
            .unwrap();
        let mut b = [0u8; 256];
        assert!(s.read(&mut b).unwrap() > 0, "no server hello");
        let mut spec = proto::TestSpec::new(proto::TestKind::TcpStream, proto::Family::V4);
        spec.end = proto::TestEnd::Time { millis: 10_000 };
        s.write_all(&ClientMsg::Setup(Box::new(spec)).encode().unwrap())
            .unwrap();
        assert!(s.read(&mut b).unwrap() > 0, "no grant");
        s
    };
    let holder = hold();
    let start = Instant::now();
    let out = netperf_at(&port, &["-l", "1"]);
    assert!(!out.success(), "{out}");
    assert!(out.stderr.contains("busy"), "{out}");
    assert!(
        start.elapsed() >= Duration::from_millis(2500),
        "gave up too soon"
    );
    drop(holder);

    // A slot that frees up while netperf retries lets it through.
    let holder = hold();
    let release = thread::spawn(move || {
        thread::sleep(Duration::from_millis(800));
        drop(holder);
    });
    netperf_at(&port, &["-l", "1", "-P", "0"]).ok();
    release.join().unwrap();
}
