//! netperf 2.7's own protocol against our netserver: the captured control
//! streams of netperf 2.7.1 (proto/tests/hp-wire/streams) replayed, the
//! answers checked field by field where they are deterministic, the data
//! phase run as netperf 2.7 runs it, and hostile frames.

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpStream, UdpSocket},
    path::PathBuf,
    time::{Duration, Instant},
};

use harness::Netserver;
use proto::netperf2::{self, FRAME_LEN, Frame, omni::OmniResults};

fn stream(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../proto/tests/hp-wire/streams")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn read_frame(s: &mut TcpStream) -> Frame {
    let mut b = [0u8; FRAME_LEN];
    s.read_exact(&mut b).expect("a 656-byte frame");
    Frame(b)
}

fn control(ns: &Netserver) -> TcpStream {
    let s = TcpStream::connect(ns.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// The captured TCP_STREAM request, replayed: the response grants a data
/// port; exactly the bytes we send there are in the results, which come
/// once we half-close, as netperf 2.7 ends the test.
#[test]
fn captured_tcp_stream_request_is_served_to_the_byte() {
    let ns = Netserver::start(&[]);
    let mut c = control(&ns);
    let req = stream("TCP_STREAM.c2s");
    c.write_all(&req[..FRAME_LEN]).unwrap();
    let resp = read_frame(&mut c);
    assert_eq!((resp.word(0), resp.int(1)), (netperf2::OMNI_RESPONSE, 0));
    let g = netperf2::grant_of(&resp);
    assert!(
        g.data_port > 0 && g.recv_buf > 0 && g.recv_size > 0,
        "{g:?}"
    );
    // no token: the control peer's address is the proof
    let mut d = TcpStream::connect(("127.0.0.1", g.data_port)).unwrap();
    let chunk = vec![7u8; 10_000];
    for _ in 0..100 {
        d.write_all(&chunk).unwrap();
    }
    d.shutdown(Shutdown::Write).unwrap();
    let mut one = [0u8; 1];
    assert_eq!(d.read(&mut one).unwrap(), 0, "the server closes first");
    let results = read_frame(&mut c);
    assert_eq!(results.int(1), 0);
    let r = OmniResults::decode(&results);
    assert_eq!(r.bytes_received, 1_000_000);
    assert!(r.recv_calls >= 1);
    assert!(r.elapsed_time > 0.0 && r.elapsed_time < 10.0);
    // asked for (flag 0x20): the algorithm, and TCP's retransmissions
    assert!(!r.cong_control.is_empty());
    assert!(r.transport_retrans >= 0);
    c.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

/// The captured TCP_RR request: a transaction per request, counted by the
/// server; a second test on the same connection (netperf 2.7's -i) works.
#[test]
fn captured_tcp_rr_request_runs_twice_on_one_connection() {
    let ns = Netserver::start(&[]);
    let mut c = control(&ns);
    let req = stream("TCP_RR.c2s");
    for _ in 0..2 {
        c.write_all(&req[..FRAME_LEN]).unwrap();
        let g = netperf2::grant_of(&read_frame(&mut c));
        let mut d = TcpStream::connect(("127.0.0.1", g.data_port)).unwrap();
        let mut b = [0u8; 1];
        for _ in 0..500 {
            d.write_all(b"r").unwrap();
            d.read_exact(&mut b).unwrap();
        }
        d.shutdown(Shutdown::Write).unwrap();
        let _ = d.read(&mut b);
        let r = OmniResults::decode(&read_frame(&mut c));
        assert_eq!(
            (r.trans_received, r.bytes_received, r.bytes_sent),
            (500, 500, 500)
        );
    }
}

/// The captured UDP_STREAM request: datagrams from the control peer are
/// counted without a header; the empty datagrams end the test.
#[test]
fn captured_udp_stream_request_counts_every_datagram() {
    let ns = Netserver::start(&[]);
    let mut c = control(&ns);
    // netperf 2.7 names its data socket's port in the request (36951 in
    // the capture): ours, here, and only datagrams from it are the test's
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut req = Frame::from_bytes(&stream("UDP_STREAM.c2s")).unwrap();
    assert_eq!(req.word(netperf2::frame::ts(100)), 36951);
    req.set_word(
        netperf2::frame::ts(100),
        u32::from(u.local_addr().unwrap().port()),
    );
    c.write_all(req.as_bytes()).unwrap();
    let resp = read_frame(&mut c);
    assert_eq!(resp.int(1), 0);
    let g = netperf2::grant_of(&resp);
    u.connect(("127.0.0.1", g.data_port)).unwrap();
    for _ in 0..200 {
        u.send(&[9u8; 1024]).unwrap();
        std::thread::sleep(Duration::from_micros(50));
    }
    // (the first ends the test; once the socket is closed, the kernel may
    // refuse the next, as netperf 2.7 ignores)
    for _ in 0..3 {
        let _ = u.send(&[]);
    }
    let t0 = Instant::now();
    let r = OmniResults::decode(&read_frame(&mut c));
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "ended by the empty datagrams"
    );
    assert_eq!(r.bytes_received, 200 * 1024);
    assert_eq!(r.recv_calls, 200);
}

/// `-Z`: the passphrase frame first, as the captures have it; a wrong one
/// is closed without a word, as netserver 2.7 does.
#[test]
fn passphrase_frames() {
    let ns = Netserver::start(&["-Z", "sesame"]);
    let mut c = control(&ns);
    c.write_all(netperf2::passphrase_frame("sesame").as_bytes())
        .unwrap();
    c.write_all(netperf2::cpu_calibrate_request().as_bytes())
        .unwrap();
    let (rate, cpus) = netperf2::cpu_calibrate_of(&read_frame(&mut c));
    assert!(rate > 0.0 && cpus >= 1, "{rate} {cpus}");
    let mut bad = control(&ns);
    bad.write_all(netperf2::passphrase_frame("open").as_bytes())
        .unwrap();
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest);
    assert!(rest.is_empty(), "answered a wrong passphrase");
    // --key-file: netperf 2.7 clients cannot prove the key, and are refused
    let dir = std::env::temp_dir().join(format!("np2-key-{}", std::process::id()));
    std::fs::write(&dir, b"0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let kf = Netserver::start(&["--key-file", dir.to_str().unwrap()]);
    let mut c = control(&kf);
    c.write_all(&stream("TCP_RR.c2s")[..FRAME_LEN]).unwrap();
    let f = read_frame(&mut c);
    assert_eq!(f.int(1), 93, "refused in its own frame");
    let _ = std::fs::remove_file(&dir);
}

/// Hostile netperf 2.7 frames: every request type, absurd sizes and
/// fields, truncated frames. Each gets an errno or a close, never a hang
/// or a crash, and the daemon serves the next client.
#[test]
fn hostile_frames_are_refused_and_the_daemon_goes_on() {
    let ns = Netserver::start(&[]);
    let base = Frame::from_bytes(&stream("TCP_STREAM.c2s")).unwrap();
    let mut cases: Vec<Frame> = Vec::new();
    for t in [0u32, 4, 7, 8, 11, 50, 99, 301, 599, 999, 1000] {
        let mut f = base.clone();
        f.set_word(0, t);
        cases.push(f);
    }
    let w = |ts: usize| 2 + ts / 4;
    for (word, value) in [
        (w(8), 0),             // send alignment 0
        (w(32), 0),            // receive alignment 0
        (w(88), 9),            // socket type
        (w(84), 77),           // address family
        (w(80), 0x0001_0000),  // data port beyond 65535
        (w(28), 0x7fff_ffff),  // receive size
        (w(24), 0x7fff_ffff),  // socket buffer
        (w(56), -1i32 as u32), // a count of one byte
        (w(96), 0),            // no direction
    ] {
        let mut f = base.clone();
        f.set_word(word, value);
        cases.push(f);
    }
    for f in cases {
        let mut c = control(&ns);
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(f.as_bytes()).unwrap();
        let mut b = [0u8; FRAME_LEN];
        match c.read_exact(&mut b) {
            Ok(()) => {
                let reply = Frame(b);
                // an error, or a grant (then nothing connects, and the
                // server gives the test up on its own deadline)
                assert!(
                    reply.int(1) != 0 || reply.word(0) == netperf2::OMNI_RESPONSE,
                    "{f:?}"
                );
            }
            Err(e) => assert!(e.kind() == std::io::ErrorKind::UnexpectedEof, "{f:?}: {e}"),
        }
    }
    // truncated: a frame's first half, then silence, then the close
    let mut c = control(&ns);
    c.write_all(&base.as_bytes()[..300]).unwrap();
    drop(c);
    // the daemon still serves
    let mut c = control(&ns);
    c.write_all(&stream("TCP_RR.c2s")[..FRAME_LEN]).unwrap();
    assert_eq!(read_frame(&mut c).int(1), 0);
}

/// A stand-in for netserver 2.7, from the wire reference: it answers our
/// hello as an unknown request (serv_errno 998, its type word stale 0),
/// then serves one TCP_STREAM the way netserver 2.7 does (no token, the
/// data connection read to EOF, then closed, then the results).
fn fake_netserver_2_7() -> (u16, std::thread::JoinHandle<(OmniRequestSeen, u64)>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // our hello: one whole 656-byte frame of an unknown type
        let probe = read_frame(&mut c);
        assert_ne!(probe.word(0), netperf2::DO_OMNI);
        c.write_all(netperf2::error_frame(0, 998).as_bytes())
            .unwrap();
        let req = read_frame(&mut c);
        assert_eq!(req.word(0), netperf2::DO_OMNI);
        let r = netperf2::omni::OmniRequest::decode(&req);
        let data = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let resp = netperf2::omni::OmniResponse {
            recv_buf_size: 131072,
            receive_size: 131072,
            recv_width: 2,
            send_buf_size: 16384,
            send_size: -1,
            send_width: r.send_width as i32,
            data_port: u32::from(data.local_addr().unwrap().port()),
            socket_prio: -1,
            socket_tos: -1,
            ..Default::default()
        };
        c.write_all(resp.encode().as_bytes()).unwrap();
        let t0 = Instant::now();
        let (mut d, _) = data.accept().unwrap();
        let mut buf = vec![0u8; 65536];
        let (mut bytes, mut calls) = (0u64, 0u32);
        loop {
            let n = d.read(&mut buf).unwrap();
            calls += 1;
            if n == 0 {
                break;
            }
            bytes += n as u64;
        }
        drop(d);
        let results = OmniResults {
            bytes_received: bytes,
            recv_calls: calls,
            recv_buf_size: 131072,
            send_buf_size: 16384,
            elapsed_time: t0.elapsed().as_secs_f32(),
            transport_retrans: 0,
            cong_control: "cubic".into(),
            ..Default::default()
        };
        let mut f = results.encode();
        f.set_word(0, 0x6200_0000); // the stale, twice-swapped type (T1)
        c.write_all(f.as_bytes()).unwrap();
        // the end: netperf half-closes
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        (
            OmniRequestSeen {
                direction: r.direction,
                socket_type: r.socket_type,
                test_length: r.test_length,
            },
            bytes,
        )
    });
    (port, h)
}

#[derive(Debug)]
struct OmniRequestSeen {
    direction: u32,
    socket_type: i32,
    test_length: i32,
}

/// Our netperf finds out in one round trip that the netserver is netperf
/// 2.7's, and runs the test in its protocol: the figure it prints is the
/// bytes netserver 2.7 counted over our elapsed time.
#[test]
fn our_netperf_speaks_netperf_2_7_to_its_netserver() {
    let (port, fake) = fake_netserver_2_7();
    let t0 = Instant::now();
    let out = harness::netperf_at(
        &port.to_string(),
        &["-t", "TCP_STREAM", "-l", "1", "-P", "0", "-v", "0"],
    );
    assert!(out.success(), "{out}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "no detection timeout"
    );
    let (seen, bytes) = fake.join().unwrap();
    assert_eq!(
        (seen.direction, seen.socket_type, seen.test_length),
        (4, 1, 1)
    );
    let mbps = harness::num(out.stdout.trim());
    let expect = bytes as f64 * 8.0 / 1e6;
    // over an elapsed time of a second or a little more
    assert!(
        mbps <= expect * 1.01 && mbps >= expect / 1.5,
        "{mbps} vs {expect}"
    );
}

/// Both of ours in netperf 2.7's protocol (`--dialect netperf2`): every
/// test runs, its figures agree with the server's counts as in ours.
#[test]
fn every_test_runs_in_netperf_2_7s_protocol_between_ours() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for test in [
        "TCP_STREAM",
        "TCP_MAERTS",
        "TCP_RR",
        "TCP_CRR",
        "UDP_STREAM",
        "UDP_RR",
        "TCP_CC",
        "OMNI",
    ] {
        let out = harness::netperf_at(
            &port,
            &[
                "--dialect",
                "netperf2",
                "-t",
                test,
                "-l",
                "1",
                "-P",
                "0",
                "-v",
                "0",
            ],
        );
        assert!(out.success(), "{test}: {out}");
        let v = harness::num(out.stdout.split_whitespace().next().unwrap_or("x"));
        assert!(v > 0.0, "{test}: {out}");
    }
    let out = harness::netperf_at(
        &port,
        &[
            "--dialect",
            "netperf2",
            "-t",
            "TCP_RR",
            "-l",
            "-500",
            "-P",
            "0",
            "-v",
            "0",
        ],
    );
    assert!(out.success(), "{out}");
    assert!(ns.log().contains("500 transactions"), "{}", ns.log());
}
