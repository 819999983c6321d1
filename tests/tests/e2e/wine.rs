//! The Windows builds under Wine, each way: `netperf.exe` against our
//! Linux netserver, and our Linux netperf against `netserver.exe`. Every
//! test that matters to a lab, with its figures checked as the Linux tests
//! check them: exact byte and transaction counts at both ends, UDP loss
//! exact to the datagram, every flow counted, a confidence run's
//! iterations. (Wine's sockets are slow, so counts are small.)

use std::time::Duration;

use harness::{
    Netserver, Output, cpu_ticks, netperf,
    wine::{Wine, wineserver_ticks},
};
use serde_json::Value;

fn json(out: &Output) -> Value {
    assert!(out.success(), "{out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One netperf run, `args` after `-H 127.0.0.1 -p PORT --json`, by `run`.
fn run(go: &dyn Fn(&[&str]) -> Output, port: &str, args: &[&str]) -> Value {
    let mut all = vec!["-H", "127.0.0.1", "-p", port, "--json"];
    all.extend_from_slice(args);
    let out = go(&all);
    let d = json(&out);
    eprintln!("{args:?}: {}", d["result"]["value"]);
    d
}

/// Every test of the list, through `go` (a netperf) against the netserver
/// at `port`; `drops_counted`: the netserver reads its socket's drops
/// (Linux's /proc), so UDP loss is held against them to the datagram.
fn every_test(go: &dyn Fn(&[&str]) -> Output, port: &str, drops_counted: bool) {
    // streams: exact counts at both ends
    let d = run(go, port, &["-t", "TCP_STREAM", "-l", "-8000000"]);
    assert_eq!(u(&d["local"]["bytes_sent"]), 8_000_000);
    assert_eq!(u(&d["remote"]["bytes_received"]), 8_000_000);
    let d = run(go, port, &["-t", "TCP_MAERTS", "-l", "-8000000"]);
    assert_eq!(u(&d["remote"]["bytes_sent"]), 8_000_000);
    assert_eq!(u(&d["local"]["bytes_received"]), 8_000_000);
    // UDP: every datagram sent is received or counted lost
    let d = run(
        go,
        port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "2",
            "--",
            "-m",
            "1024",
            "--rate",
            "20m",
        ],
    );
    let udp = &d["udp"];
    let (sent, got, lost) = (u(&udp["sent"]), u(&udp["received"]), u(&udp["lost"]));
    assert!(sent > 1000, "{d}");
    assert_eq!(sent, got + lost, "{d}");
    assert_eq!(got, u(&d["remote"]["udp"]["received"]), "{d}");
    if drops_counted {
        assert_eq!(lost, u(&udp["rcvbuf_drops"]), "{d}");
    }
    // request/response: the same transactions at both ends
    for (test, n) in [("TCP_RR", 1500u64), ("UDP_RR", 1500), ("TCP_CRR", 200)] {
        let d = run(go, port, &["-t", test, "-l", &format!("-{n}")]);
        assert_eq!(u(&d["local"]["transactions"]), n, "{test}: {d}");
        assert_eq!(u(&d["remote"]["transactions"]), n, "{test}: {d}");
    }
    // four flows: each counted, the sum exact
    let d = run(
        go,
        port,
        &["-t", "TCP_STREAM", "-l", "-8000000", "--", "--flows", "4"],
    );
    let flows = d["remote"]["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 4, "{d}");
    let sum: u64 = flows.iter().map(|f| u(&f["bytes_received"])).sum();
    assert_eq!(sum, 8_000_000, "{d}");
    assert_eq!(u(&d["local"]["bytes_sent"]), 8_000_000, "{d}");
    // CPU utilisation and service demand at both ends (Windows: the
    // machine's times, GetSystemTimes)
    let d = run(go, port, &["-t", "TCP_STREAM", "-l", "1", "-c", "-C"]);
    for side in ["local", "remote"] {
        let util = d["result"][format!("{side}_cpu_util")].as_f64();
        assert!(util.is_some_and(|u| u > 0.0 && u <= 100.0), "{side}: {d}");
        let sd = d["result"][format!("{side}_service_demand")].as_f64();
        assert!(sd.is_some_and(|s| s > 0.0), "{side}: {d}");
    }
    // a confidence run: its iterations, and the interval it reached
    let d = run(
        go,
        port,
        &["-t", "TCP_RR", "-l", "1", "-I", "99,10", "-i", "3,2"],
    );
    let its = d["iterations"].as_array().expect("iterations");
    assert!((2..=3).contains(&its.len()), "{d}");
    assert_eq!(d["confidence"]["level"], 99.0, "{d}");
}

/// `netperf.exe` (under Wine) against our Linux netserver.
#[test]
fn windows_netperf_against_linux_netserver() {
    let Some(w) = Wine::new("windows_netperf_against_linux_netserver") else {
        return;
    };
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    every_test(&|args| w.netperf(args), &port, true);
    // what Windows lacks is refused in one line naming it
    let out = w.netperf(&["-H", "127.0.0.1", "-p", &port, "--", "--zerocopy"]);
    assert_eq!(out.status.code(), Some(2), "{out}");
    assert!(
        out.stderr.contains("--zerocopy") && out.stderr.contains("Windows"),
        "{out}"
    );
}

/// Our Linux netperf against `netserver.exe` (under Wine).
#[test]
fn linux_netperf_against_windows_netserver() {
    let Some(w) = Wine::new("linux_netperf_against_windows_netserver") else {
        return;
    };
    let ns = w.netserver(&[]);
    let port = ns.port().to_string();
    every_test(&|args| netperf(args), &port, false);
    // the netserver says what its platform lacks, naming it
    let out = netperf(&[
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-l",
        "1",
        "--",
        "--rx-discard",
    ]);
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("--rx-discard") && out.stderr.contains("Windows"),
        "{out}"
    );
    assert!(
        ns.wait_for_log(
            "TCP_STREAM 0 bytes sent, 8000000 received",
            Duration::from_secs(1)
        ),
        "{}",
        ns.log()
    );
}

/// `netserver.exe` as a Windows service, under Wine's service manager:
/// installed with its options, started by `sc`, serving a test, stopped
/// by `sc` as Ctrl-C stops it (the port is free again), removed.
#[test]
fn windows_netserver_runs_as_a_service() {
    let Some(w) = Wine::new("windows_netserver_runs_as_a_service") else {
        return;
    };
    // the service manager lives while a program of the prefix does
    let _session = w.session();
    // (a run that failed half-way may have left it installed)
    let _ = w.run("sc", &["stop", "netserver"]);
    let _ = w.run("netserver.exe", &["--uninstall-service"]);
    let port = harness::free_port().to_string();
    // (Wine starts its service manager with the prefix's first program:
    // on a loaded machine it may not answer yet, so the first calls are
    // tried again for a while)
    let again = |exe: &str, args: &[&str], done: &dyn Fn(&harness::Output) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let out = w.run(exe, args);
            if done(&out) || std::time::Instant::now() > deadline {
                break out;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let out = again(
        "netserver.exe",
        &["--install-service", "-p", &port, "-L", "127.0.0.1"],
        &|o| o.success() && o.stdout.contains("installed"),
    );
    assert!(out.success() && out.stdout.contains("installed"), "{out}");
    struct Removed<'a>(&'a Wine);
    impl Drop for Removed<'_> {
        fn drop(&mut self) {
            let _ = self.0.run("sc", &["stop", "netserver"]);
            let _ = self.0.run("netserver.exe", &["--uninstall-service"]);
        }
    }
    let _removed = Removed(&w);
    let out = again("sc", &["start", "netserver"], &|o| o.success());
    assert!(out.success(), "sc start: {out}");
    // serving: a test runs against it
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = netperf(&["-H", "127.0.0.1", "-p", &port, "-l", "-2000000", "--json"]);
        if out.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let d = json(&out);
    assert_eq!(u(&d["remote"]["bytes_received"]), 2_000_000, "{out}");
    // stopped: its port is closed
    let out = w.run("sc", &["stop", "netserver"]);
    assert!(out.success(), "sc stop: {out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the service still listens"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = w.run("netserver.exe", &["--uninstall-service"]);
    assert!(out.success() && out.stdout.contains("removed"), "{out}");
}

/// A first message that comes in two parts is served when its second part
/// comes, by netserver.exe as by ours on Linux: Windows says nothing when
/// more bytes come to a socket whose bytes were only peeked at, so the
/// waiting room peeks again (not the 20 s first-bytes deadline later).
/// And a client that sends a byte and stops costs nothing while it waits:
/// watched, its byte made Wine's wineserver spin a CPU. (Alone: no other
/// Wine test shares the wineserver meanwhile.)
#[test]
fn a_first_message_in_two_parts_is_served_when_it_is_whole() {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use proto::netperf2::{FRAME_LEN, Frame};

    let Some(w) = Wine::alone("a_first_message_in_two_parts_is_served_when_it_is_whole") else {
        return;
    };
    let servers = [
        ("Linux", Netserver::start(&["--handshake-timeout", "40"])),
        ("Windows", w.netserver(&["--handshake-timeout", "40"])),
    ];
    for (platform, ns) in &servers {
        // a request netperf 2.7 may send that no netserver knows: the
        // answer is one frame
        let request = Frame::new(999, -1);
        let mut c = TcpStream::connect(("127.0.0.1", ns.port())).unwrap();
        c.set_nodelay(true).unwrap();
        c.write_all(&request.as_bytes()[..300]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        c.write_all(&request.as_bytes()[300..]).unwrap();
        let sent = std::time::Instant::now();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = [0u8; FRAME_LEN];
        let got = c.read_exact(&mut reply);
        let waited = sent.elapsed();
        assert!(
            got.is_ok(),
            "{platform}: no answer {waited:?} after the second part: {got:?}\n{}",
            ns.log()
        );
        let f = Frame::from_bytes(&reply).unwrap();
        assert_ne!(f.int(1), 0, "{platform}: an error answers it: {f:?}");
        eprintln!("{platform}: answered {waited:?} after the second part");
        // a client that sends one byte and stops: what the daemon (and
        // under Wine the wineserver, Windows' kernel) spends meanwhile
        let _squatter = {
            let mut c = TcpStream::connect(("127.0.0.1", ns.port())).unwrap();
            c.write_all(&[0]).unwrap();
            c
        };
        std::thread::sleep(Duration::from_millis(500));
        let proc_dir = std::path::PathBuf::from(format!("/proc/{}", ns.pid()));
        let ticks = || cpu_ticks(&proc_dir) + wineserver_ticks();
        let before = ticks();
        std::thread::sleep(Duration::from_secs(3));
        let used = ticks() - before;
        eprintln!("{platform}: {used} ticks of CPU in 3 s with a one-byte client waiting");
        // a whole CPU would be 300
        assert!(used < 60, "{platform}: {used} ticks in 3 s\n{}", ns.log());
    }
}
