//! The daemon's resources as an attacker on the same network would try
//! to take them (the security issue of round 4): descriptors, the right
//! key's way in from a shared address, the record's disk, each a test
//! that sends what the attacker sends and checks the effect.

use std::{
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use harness::{Netserver, RawClient, bin, fields, netperf_at, num, run_with_deadline};
use proto::{Authenticator, ClientMsg, ErrorCode, Hello, ServerMsg};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("np-exh-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Finding 1: one client asked for 16,384 flows and took every descriptor
/// of the daemon. Now the test is refused at once, naming the limit,
/// while another client's test runs on, and a test that fits runs.
#[test]
fn a_test_of_16384_flows_is_refused_while_another_runs() {
    let Some(ns) = Netserver::start_with_nofile(2000, &[]) else {
        return;
    };
    let port = ns.port().to_string();
    let other = {
        let port = port.clone();
        thread::spawn(move || netperf_at(&port, &["-t", "TCP_STREAM", "-l", "3", "-P", "0"]))
    };
    thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let big = netperf_at(
        &port,
        &["-t", "TCP_RR", "-l", "30", "--", "--flows", "16384"],
    );
    assert!(!big.success(), "{big}");
    assert!(
        big.stderr.contains("--max-test-fds") && big.stderr.contains("2000 open files"),
        "{big}"
    );
    assert!(!big.stderr.contains("-Z"), "{big}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // the daemon opened nothing for it
    assert!(open_fds(ns.pid()) < 100, "{}", open_fds(ns.pid()));
    let other = other.join().unwrap().ok();
    assert!(num(fields(&other.stdout)[4]) > 0.0, "{other}");
    // what fits runs: 190 flows (about 450 descriptors of the 466 a test
    // may hold here: a third of the 1398 for tests, so that two
    // addresses always leave a third its share)
    let fits = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "--", "--flows", "190"]).ok();
    assert!(fits.stdout.contains("190 flows"), "{fits}");
    assert!(ns.log().contains("refused: descriptors"), "{}", ns.log());
}

/// The second part of finding 1: tests one address runs at once are
/// bounded, so that two addresses cannot keep the daemon busy.
#[test]
fn an_address_runs_so_many_tests_at_once() {
    let ns = Netserver::start(&["--max-tests-per-client", "2"]);
    let port = ns.port().to_string();
    let long: Vec<_> = (0..2)
        .map(|_| {
            let port = port.clone();
            thread::spawn(move || netperf_at(&port, &["-t", "TCP_RR", "-l", "3", "-P", "0"]))
        })
        .collect();
    thread::sleep(Duration::from_millis(800));
    let third = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "-P", "0"]);
    assert!(!third.success(), "{third}");
    assert!(third.stderr.contains("--max-tests-per-client 2"), "{third}");
    for t in long {
        t.join().unwrap().ok();
    }
    // their turn over, it runs
    netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "-P", "0"]).ok();
}

fn key(dir: &std::path::Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.to_str().unwrap().to_string()
}

/// A hello and a proof made with `key`, the answer not waited for.
fn attempt(addr: SocketAddr, key: &engine::auth::Key) -> RawClient {
    let mut c = RawClient::connect(addr);
    c.send(&ClientMsg::Hello(Hello::new("guesser")));
    let Some(ServerMsg::Hello(h)) = c.recv(Duration::from_secs(5)) else {
        panic!("no hello")
    };
    let server_nonce = h.challenge.expect("a challenge");
    let nonce = [7u8; 32];
    c.send(&ClientMsg::Auth {
        nonce,
        proof: key.proof(proto::Role::Client, &server_nonce, &nonce),
    });
    c
}

/// How long the right key waits for the server's proof.
fn right_key_waits(addr: SocketAddr, key: &engine::auth::Key) -> Duration {
    let t0 = Instant::now();
    let mut c = attempt(addr, key);
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMsg::AuthOk { .. }) => t0.elapsed(),
        other => panic!("the right key was not let in: {other:?}"),
    }
}

/// Finding 2: the right key locked out from a shared address. Whatever a
/// guesser at the same address does (16 wrong attempts kept waiting, or
/// five wrong proofs and then a burst of 300 hellos), the right key is
/// served within a second: proofs are checked as they come, and only the
/// refusals of wrong ones wait their turn.
#[test]
fn the_right_key_is_served_at_once_despite_both_lockout_patterns() {
    let dir = temp("lockout");
    let right_text = "the right key, 32 bytes long....";
    let right_file = key(&dir, "right", right_text);
    let right = engine::auth::Key::from_file(std::path::Path::new(&right_file)).unwrap();
    let wrong = engine::auth::Key::from_passphrase("a wrong key, also long enough...").unwrap();
    let ns = Netserver::start(&["--key-file", &right_file]);
    let addr = ns.addr();
    // five wrong proofs: refused at once
    for _ in 0..5 {
        let mut c = attempt(addr, &wrong);
        match c.recv(Duration::from_secs(2)) {
            Some(ServerMsg::Error(e)) => assert_eq!(e.code, ErrorCode::Auth),
            other => panic!("{other:?}"),
        }
    }
    // pattern 1: 16 (and more) wrong attempts kept waiting
    let waiting: Vec<RawClient> = (0..20).map(|_| attempt(addr, &wrong)).collect();
    thread::sleep(Duration::from_millis(200));
    let waited = right_key_waits(addr, &right);
    assert!(waited < Duration::from_secs(1), "pattern 1: {waited:?}");
    // the held ones get their refusal in turn, one a second
    let mut waiting = waiting;
    match waiting[0].recv(Duration::from_secs(3)) {
        Some(ServerMsg::Error(e)) => assert_eq!(e.code, ErrorCode::Auth),
        other => panic!("{other:?}"),
    }
    // pattern 2: a burst of 300 hellos, each refused or dropped
    let burst = Instant::now();
    for _ in 0..300 {
        if let Ok(mut s) = TcpStream::connect(addr) {
            use std::io::Write;
            let _ = s.write_all(&ClientMsg::Hello(Hello::new("burst")).encode().unwrap());
        }
    }
    eprintln!("300 hellos in {:?}", burst.elapsed());
    let waited = right_key_waits(addr, &right);
    assert!(waited < Duration::from_secs(1), "pattern 2: {waited:?}");
    drop(waiting);
    // and netperf itself, with the right key, runs a test
    let out = netperf_at(
        &ns.port().to_string(),
        &[
            "--key-file",
            &right_file,
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "-P",
            "0",
        ],
    )
    .ok();
    assert!(num(fields(&out.stdout)[5]) > 0.0, "{out}");
    assert!(ns.log().contains("wait their turn"), "{}", ns.log());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 3: waiting attempts held descriptors with no deadline, and
/// their closing went unnoticed. A held refusal's connection is closed as
/// soon as its peer closes, and none is held past its limit.
#[test]
fn held_attempts_go_when_their_peer_does() {
    let dir = temp("held");
    let right_file = key(&dir, "right", "the right key, 32 bytes long....");
    let wrong = engine::auth::Key::from_passphrase("a wrong key, also long enough...").unwrap();
    let ns = Netserver::start(&["--key-file", &right_file]);
    let idle = open_fds(ns.pid());
    let held: Vec<RawClient> = (0..21).map(|_| attempt(ns.addr(), &wrong)).collect();
    thread::sleep(Duration::from_millis(300));
    let holding = open_fds(ns.pid());
    assert!(holding >= idle + 10, "{idle} -> {holding}");
    drop(held);
    let t0 = Instant::now();
    while open_fds(ns.pid()) > idle && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(20));
    }
    let after = open_fds(ns.pid());
    eprintln!(
        "descriptors: {idle} idle, {holding} holding 16 refusals, {after} {:?} after their peers closed",
        t0.elapsed()
    );
    assert_eq!(after, idle, "{}", ns.log());
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tests` one-byte tests on sessions of their own, each followed by a
/// forged summary: a 60 KB congestion control name and a rate of 10^29.
fn summary_flood(ns: &Netserver, tests: usize) {
    for _ in 0..tests {
        let (mut c, _) = RawClient::after_one_byte(ns.addr());
        let mut forged = proto::ClientSummary::default();
        forged.local.elapsed_ns = 1;
        forged.local.bytes_sent = u64::MAX / 2;
        forged.local.tcp = Some(proto::TcpStats {
            cong_control: "c".repeat(60_000),
            ..Default::default()
        });
        c.send(&ClientMsg::Summary(Box::new(forged)));
        c.send(&ClientMsg::Bye);
    }
}

/// Finding 4: `--record` filled a disk at 37 MB/s from one client's loop
/// of one-transaction tests with 60 KB summaries, and headlined a forged
/// figure. Each summary is now checked field by field (the forged one is
/// left out, and the line says why), the headline is the netserver's own,
/// and what one address's lines take is bounded.
#[test]
fn the_record_holds_its_bound_under_a_summary_flood() {
    let dir = temp("record");
    let record = dir.join("record.jsonl");
    let ns = Netserver::start(&["--record", record.to_str().unwrap()]);
    let t0 = Instant::now();
    let tests = 1500;
    summary_flood(&ns, tests);
    let took = t0.elapsed();
    thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    eprintln!(
        "{tests} tests in {took:?}: {} bytes, {} lines recorded",
        text.len(),
        lines.len()
    );
    // an address's lines: 1 MiB at once, then 64 KiB a second
    let bound = 1_048_576.0 + took.as_secs_f64() * 65536.0 + 8192.0;
    assert!((text.len() as f64) < bound, "{} bytes", text.len());
    for l in &lines {
        assert!(l["local"].is_null(), "{l}");
        assert!(
            l["client"]["invalid"]
                .as_str()
                .is_some_and(|w| w.starts_with("local.tcp.cong_control")),
            "{l}"
        );
        // the headline is the netserver's: one byte over its interval
        assert_eq!(l["remote"]["bytes_received"], 1);
        let rate = l["throughput"]["value"].as_f64().unwrap();
        let own = 8.0 / l["elapsed_s"].as_f64().unwrap();
        assert!((rate - own).abs() <= own * 1e-9, "{rate} vs {own}");
    }
    // the first megabyte's worth recorded, then what the rate allows
    assert!(
        lines.len() > 500 && lines.len() < tests,
        "{} lines",
        lines.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 7: the record and log paths followed symbolic links and made
/// files others could read; a FIFO at the record's path and a SIGHUP held
/// the signal thread, and SIGTERM went unheeded.
#[test]
fn record_and_log_files_are_private_regular_files() {
    use std::os::unix::fs::{MetadataExt, symlink};
    let dir = temp("files");
    // a link is refused at start, naming the option
    let target = dir.join("secret");
    std::fs::write(&target, "root only\n").unwrap();
    let link = dir.join("record.jsonl");
    symlink(&target, &link).unwrap();
    let out = run_with_deadline(
        {
            let mut c = Command::new(bin("netserver"));
            c.args(["-D", "-p", "0", "-L", "127.0.0.1", "--record"])
                .arg(&link);
            c
        },
        Duration::from_secs(10),
    );
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("--record") && out.stderr.contains("symbolic link"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root only\n");
    // a new file is made 0600
    let record = dir.join("made.jsonl");
    let log = dir.join("made.log");
    let mut ns = Netserver::start(&[
        "--record",
        record.to_str().unwrap(),
        "--log-file",
        log.to_str().unwrap(),
    ]);
    for f in [&record, &log] {
        assert_eq!(std::fs::metadata(f).unwrap().mode() & 0o777, 0o600, "{f:?}");
    }
    // a FIFO in the record's place, then SIGHUP: refused, nothing waits
    std::fs::remove_file(&record).unwrap();
    let made = Command::new("mkfifo").arg(&record).status().unwrap();
    assert!(made.success());
    assert_eq!(
        ns.signal_and_wait("HUP", Duration::from_millis(300)),
        None,
        "SIGHUP ended the daemon"
    );
    let t0 = Instant::now();
    let status = ns.signal_and_wait("TERM", Duration::from_secs(5));
    assert!(
        status.is_some(),
        "SIGTERM unheeded after a SIGHUP at a FIFO"
    );
    eprintln!("SIGTERM heeded in {:?}", t0.elapsed());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("not a regular file"), "{logged}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pages of memory all TCP sockets of the host hold (/proc/net/sockstat).
fn tcp_memory_pages() -> u64 {
    let s = std::fs::read_to_string("/proc/net/sockstat").unwrap();
    let line = s.lines().find(|l| l.starts_with("TCP:")).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let i = f.iter().position(|w| *w == "mem").unwrap();
    f[i + 1].parse().unwrap()
}

/// A TCP_MAERTS of `flows` whose client connects every flow and reads
/// nothing (each receive buffer as small as the kernel allows): the
/// session and the data connections, or the server's refusal.
fn maerts_unread(
    ns: &Netserver,
    flows: u32,
    send_buf: Option<u32>,
) -> Result<(RawClient, Vec<TcpStream>), proto::ErrorMsg> {
    let mut c = RawClient::hello(ns.addr());
    let mut spec = proto::TestSpec::new(proto::TestKind::TcpMaerts, proto::Family::V4);
    spec.end = proto::TestEnd::Time { millis: 8000 };
    spec.flows = flows;
    spec.server.send_buf = send_buf;
    spec.server.send_size = Some(65536);
    c.send(&ClientMsg::Setup(Box::new(spec)));
    let g = match c.recv(Duration::from_secs(10)) {
        Some(ServerMsg::Ready(g)) => g,
        Some(ServerMsg::Error(e)) => return Err(e),
        other => panic!("{other:?}"),
    };
    let to: SocketAddr = SocketAddr::new(ns.addr().ip(), g.data_port);
    let conns = (0..flows)
        .map(|i| {
            use std::io::Write;
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.connect(&to.into()).unwrap();
            let mut t: TcpStream = s.into();
            t.write_all(&engine::handshake::preamble(&g.token, i))
                .unwrap();
            t
        })
        .collect();
    Ok((c, conns))
}

/// Finding 5: 100 TCP_MAERTS flows asking `-S 256M`, to a client that
/// reads nothing, held 446 MB of the host's TCP memory; 500 would reach
/// its limit. The kernel's socket memory is now in a budget: what a
/// client asks for and cannot fit is refused with the figure, and
/// buffers left to the server are set to fit a test's share.
#[test]
fn unread_flows_hold_no_more_socket_memory_than_a_test_may() {
    let share: u64 = 100 << 20;
    let ns = Netserver::start(&["--socket-budget", "400M"]);
    let e = maerts_unread(&ns, 500, Some(256 << 20)).unwrap_err();
    assert!(
        e.message.contains("--socket-budget") && e.message.contains(&share.to_string()),
        "{}",
        e.message
    );
    let flows: u32 = 500;
    let before = tcp_memory_pages();
    let (_c, conns) = maerts_unread(&ns, flows, None).unwrap();
    // the netserver fills what it may of every send queue
    let mut peak = 0;
    for _ in 0..30 {
        thread::sleep(Duration::from_millis(100));
        peak = peak.max(tcp_memory_pages());
    }
    let page = 4096;
    let grew = peak.saturating_sub(before) * page;
    eprintln!(
        "{flows} unread flows: TCP memory {before} -> {peak} pages ({} MB more; a test may hold {} MB)",
        grew >> 20,
        share >> 20
    );
    // the test's share, and what the client's small receive queues hold
    // besides (each at most 64 KiB here). (With the buffers autotuning
    // left alone, 100 such flows grew it by 374 MB here.)
    assert!(grew <= share + u64::from(flows) * 65536, "{grew} bytes");
    assert!(grew > 10 << 20, "the flows moved nothing: {grew}");
    drop(conns);
}

/// One client of the hostile battery, by its number: garbage, a length
/// beyond any frame, a truncated frame, a slow sender, an aborted test, a
/// wrong netperf 2.7 frame, a test that completes.
fn hostile(addr: SocketAddr, i: usize) {
    use std::io::{Read, Write};
    let junk: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\n\r\n",
        &[0xff; 8],
        &[0, 0, 0, 9, 0, 1, 2],
        &[0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4],
    ];
    match i % 7 {
        0..=3 => {
            let Ok(mut s) = TcpStream::connect(addr) else {
                return;
            };
            let _ = s.write_all(junk[i % junk.len()]);
            // (answered and closed at once; the truncated frames are
            // left to their deadline, unread)
            if i % junk.len() < 2 {
                let mut b = [0u8; 512];
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let _ = s.read(&mut b);
            }
        }
        4 => {
            // a slow sender: a hello a byte at a time, then gone
            let Ok(mut s) = TcpStream::connect(addr) else {
                return;
            };
            let hello = ClientMsg::Hello(Hello::new("slow")).encode().unwrap();
            for b in hello.iter().take(6) {
                let _ = s.write_all(&[*b]);
                thread::sleep(Duration::from_millis(5));
            }
        }
        5 => {
            // a test asked for, then the client gone mid-test
            let mut c = RawClient::hello(addr);
            let mut spec = proto::TestSpec::new(proto::TestKind::TcpRr, proto::Family::V4);
            spec.flows = 4;
            spec.request_size = 100_000;
            spec.response_size = 100_000;
            c.send(&ClientMsg::Setup(Box::new(spec)));
            let _ = c.recv(Duration::from_secs(5));
        }
        _ => {
            let (mut c, _) = RawClient::after_one_byte(addr);
            c.send(&ClientMsg::Bye);
        }
    }
}

/// Finding 6, second part: the hostile battery run pass after pass
/// against one daemon grew its resident memory by about 270 KiB a pass
/// without levelling off. It levels off: twenty passes hold what two did,
/// within 1 MiB.
#[test]
fn the_hostile_battery_pass_after_pass_levels_off() {
    let ns = Netserver::start(&[]);
    let addr = ns.addr();
    let pass = || {
        let clients: Vec<_> = (0..16)
            .map(|t| {
                thread::spawn(move || {
                    for k in 0..7 {
                        hostile(addr, t * 7 + k);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        // the daemon idle again (its heap given back 200 ms after)
        thread::sleep(Duration::from_millis(300));
        harness::footprint(ns.pid())
    };
    let mut rss = Vec::new();
    for _ in 0..20 {
        rss.push(pass().rss_kib);
    }
    eprintln!("RSS after each pass (KiB): {rss:?}");
    let (second, last) = (rss[1], rss[19]);
    assert!(
        last <= second + 1024,
        "RSS {second} KiB after two passes, {last} after twenty: {rss:?}"
    );
    let f = harness::footprint(ns.pid());
    assert!(f.threads <= 4, "{} threads", f.threads);
}

/// Finding 6: 66 large request/response tests under a 64 MiB budget left
/// the idle daemon at 156 MB (the allocator kept each thread's largest
/// blocks). Idle again, it is back within the documented constant.
#[test]
fn idle_memory_after_large_tests_is_given_back() {
    let ns = Netserver::start(&["--memory-budget", "64M"]);
    let port = ns.port().to_string();
    let idle = harness::footprint(ns.pid()).rss_kib;
    for i in 0..66 {
        let sizes = if i % 2 == 0 { "-r 8M,8M" } else { "-r 1,16M" };
        let mut args = vec!["-t", "TCP_RR", "-l", "-2", "-P", "0", "--"];
        args.extend(sizes.split(' '));
        if i % 3 == 0 {
            args.extend(["--flows", "4"]);
        }
        netperf_at(&port, &args).ok();
    }
    thread::sleep(Duration::from_millis(500));
    let f = harness::footprint(ns.pid());
    eprintln!(
        "RSS idle {idle} KiB, after 66 large tests {} KiB (peak {} KiB)",
        f.rss_kib, f.peak_rss_kib
    );
    // doc/security.md: within its budget plus a constant above zero; idle,
    // within 16 MiB of where it started
    assert!(f.rss_kib <= idle + 16 * 1024, "{} KiB", f.rss_kib);
}
