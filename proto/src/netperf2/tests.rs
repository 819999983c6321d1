//! The captures of netperf 2.7.1 (proto/tests/hp-wire, from
//! ../shared/hp-wire) as test vectors: every frame decodes, requests
//! encode back byte for byte, and the mapping onto ours reads them as
//! netperf 2.7 meant.

use super::*;
use std::path::PathBuf;

/// (direction, frame) of a capture, in order.
fn capture(name: &str) -> Vec<(String, Frame)> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hp-wire")
        .join(format!("{name}.cap"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dir), Some(hex)) = (f.get(2), f.get(3)) else {
            continue;
        };
        if hex.len() < 2 * FRAME_LEN {
            continue;
        }
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        for chunk in bytes.chunks_exact(FRAME_LEN) {
            out.push((dir.to_string(), Frame::from_bytes(chunk).unwrap()));
        }
    }
    assert!(!out.is_empty(), "{name}: no frames");
    out
}

const OMNI: [&str; 10] = [
    "tcp_stream",
    "tcp_maerts",
    "tcp_rr",
    "tcp_crr",
    "udp_stream",
    "udp_rr",
    "tcp_rr_conf",
    "tcp_stream_cpu",
    "udp_v4addr",
    "udp_v6",
];

#[test]
fn every_captured_omni_request_encodes_back_byte_for_byte() {
    for name in OMNI {
        for (dir, f) in capture(name) {
            if dir == "C2S" && f.word(0) == DO_OMNI {
                let r = OmniRequest::decode(&f);
                assert_eq!(r.encode(), f, "{name}: {r:?}");
            }
        }
    }
}

#[test]
fn captured_requests_map_onto_our_tests() {
    let want = [
        ("tcp_stream", TestKind::TcpStream),
        ("tcp_maerts", TestKind::TcpMaerts),
        ("tcp_rr", TestKind::TcpRr),
        ("tcp_crr", TestKind::TcpCrr),
        ("udp_stream", TestKind::UdpStream),
        ("udp_rr", TestKind::UdpRr),
    ];
    for (name, kind) in want {
        let (_, f) = capture(name)
            .into_iter()
            .find(|(d, f)| d == "C2S" && f.word(0) == DO_OMNI)
            .unwrap();
        let Request::Omni(r) = Request::decode(&f) else {
            panic!("{name}")
        };
        let s = serve_omni(&r, Family::V4).unwrap();
        assert_eq!(s.spec.kind, kind, "{name}");
        assert_eq!(s.spec.end, TestEnd::Time { millis: 1000 }, "{name}");
        assert_eq!(s.spec.family, Family::V4);
        assert!(!s.spec.remote_fill);
        assert!(
            s.spec.validate(&crate::test::Limits::default()).is_ok(),
            "{name}"
        );
        if kind.is_rr() {
            assert_eq!((s.spec.request_size, s.spec.response_size), (1, 1));
        }
        // stock UDP_STREAM clears ROUTING_ALLOWED: netserver 2.7 sets
        // SO_DONTROUTE, and so do we
        assert_eq!(s.spec.server.dont_route, kind == TestKind::UdpStream);
        let padded = matches!(
            kind,
            TestKind::TcpCrr | TestKind::UdpStream | TestKind::UdpRr
        );
        assert_eq!(s.pad_timer.is_some(), padded, "{name}");
    }
}

#[test]
fn captured_addresses_and_cpu_requests() {
    let first = |name: &str| {
        let (_, f) = capture(name)
            .into_iter()
            .find(|(d, f)| d == "C2S" && f.word(0) == DO_OMNI)
            .unwrap();
        OmniRequest::decode(&f)
    };
    // -- -H 127.0.0.1 -L 127.0.0.2
    let v4 = first("udp_v4addr");
    assert_eq!(v4.netperf_ip, Some("127.0.0.2".parse().unwrap()));
    assert_eq!(v4.netserver_ip, Some("127.0.0.1".parse().unwrap()));
    // -6 -H ::1 -L ::1: word-swapped on the wire
    let v6 = first("udp_v6");
    assert_eq!(v6.ipfamily, NF_INET6);
    assert_eq!(v6.netserver_ip, Some("::1".parse().unwrap()));
    let s = serve_omni(&v6, Family::V4).unwrap();
    assert_eq!(s.spec.family, Family::V6);
    assert_eq!(s.spec.data_addr, Some("::1".parse().unwrap()));
    // -c -C
    let cpu = first("tcp_stream_cpu");
    assert!(serve_omni(&cpu, Family::V4).unwrap().spec.measure_cpu);
}

#[test]
fn captured_responses_and_results_decode() {
    // TCP_STREAM -l 1 (doc §5): data port 44951; 1363771392 bytes in 10760
    // receives over 1.00566 s; "bbr"
    let frames = capture("tcp_stream");
    let s2c: Vec<&Frame> = frames
        .iter()
        .filter(|(d, _)| d == "S2C")
        .map(|(_, f)| f)
        .collect();
    let g = grant_of(s2c[0]);
    assert_eq!(g.data_port, 44951);
    assert_eq!(
        (g.recv_buf, g.recv_size, g.send_buf),
        (131072, 131072, 16384)
    );
    assert!(!g.measure_cpu);
    let r = side_results_of(s2c[1], g.measure_cpu);
    assert_eq!((r.bytes_received, r.recv_calls), (1_363_771_392, 10760));
    assert_eq!(r.recv_buf_end, 3_847_289);
    assert!((r.elapsed_ns as f64 / 1e9 - 1.00566).abs() < 1e-4);
    assert!(r.cpu.is_none(), "stale CPU words are not read");
    assert_eq!(r.tcp.unwrap().cong_control, "bbr");
    // with -c -C the CPU words are read
    let frames = capture("tcp_stream_cpu");
    let s2c: Vec<&Frame> = frames
        .iter()
        .filter(|(d, _)| d == "S2C")
        .map(|(_, f)| f)
        .collect();
    let g = grant_of(s2c[0]);
    assert!(g.measure_cpu);
    let r = side_results_of(s2c[1], true);
    let c = r.cpu.unwrap();
    assert!(c.util > 0.0 && c.util <= 100.0, "{c:?}");
    assert_eq!(c.method, 'S');
    assert!(c.num_cpus >= 1);
    // every frame of every capture decodes without panic
    for name in OMNI.iter().chain(&[
        "classic_tcp_stream",
        "classic_tcp_maerts",
        "classic_tcp_rr",
        "classic_tcp_crr",
        "classic_udp_stream",
        "classic_udp_rr",
        "pass_ok",
        "pass_bad",
        "pass_none",
        "pass_unneeded",
    ]) {
        for (_, f) in capture(name) {
            let _ = Request::decode(&f);
            let _ = side_results_of(&f, true);
            let _ = grant_of(&f);
        }
    }
}

#[test]
fn captured_classic_requests_map_onto_our_tests() {
    let want = [
        ("classic_tcp_stream", TestKind::TcpStream),
        ("classic_tcp_maerts", TestKind::TcpMaerts),
        ("classic_tcp_rr", TestKind::TcpRr),
        ("classic_tcp_crr", TestKind::TcpCrr),
        ("classic_udp_stream", TestKind::UdpStream),
        ("classic_udp_rr", TestKind::UdpRr),
    ];
    for (name, kind) in want {
        let (_, f) = capture(name).into_iter().find(|(d, _)| d == "C2S").unwrap();
        let Request::Classic(r) = Request::decode(&f) else {
            panic!("{name}")
        };
        let s = serve_classic(&r, Family::V4).unwrap();
        assert_eq!(s.spec.kind, kind, "{name}");
        assert!(
            s.spec.validate(&crate::test::Limits::default()).is_ok(),
            "{name}"
        );
        // classic RR, CRR and the UDP tests end on the server's timer
        let padded = !matches!(kind, TestKind::TcpStream | TestKind::TcpMaerts);
        assert_eq!(s.pad_timer.is_some(), padded, "{name}");
    }
}

#[test]
fn passphrases_decode() {
    let frames = capture("pass_ok");
    let Request::Passphrase(p) = Request::decode(&frames[0].1) else {
        panic!()
    };
    assert!(!p.is_empty());
    assert_eq!(passphrase_frame(&p), frames[0].1);
}

/// Our answers, read back as netperf 2.7 reads them.
#[test]
fn our_response_and_results_read_back() {
    let (_, f) = capture("tcp_rr")
        .into_iter()
        .find(|(d, f)| d == "C2S" && f.word(0) == DO_OMNI)
        .unwrap();
    let Request::Omni(r) = Request::decode(&f) else {
        panic!()
    };
    let s = serve_omni(&r, Family::V4).unwrap();
    let g = Grant {
        data_port: 40000,
        token: Token([0; 32]),
        send_buf: 16384,
        recv_buf: 131072,
        send_size: 1,
        recv_size: 1,
        send_width: 1,
        recv_width: 1,
        measure_cpu: false,
        num_cpus: 2,
    };
    let resp = response(&s, &g);
    assert_eq!((resp.word(0), resp.int(1)), (OMNI_RESPONSE, 0));
    let back = grant_of(&resp);
    assert_eq!(back.data_port, 40000);
    assert_eq!((back.send_buf, back.recv_buf), (16384, 131072));
    let res = SideResults {
        elapsed_ns: 1_000_000_000,
        bytes_received: 24_000,
        bytes_sent: 24_000,
        recv_calls: 24_001,
        send_calls: 24_000,
        transactions: 24_000,
        tcp: Some(TcpStats {
            retransmits: 3,
            cong_control: "cubic".into(),
            ..TcpStats::default()
        }),
        ..SideResults::default()
    };
    let frame = results(&s, &res, false);
    let o = OmniResults::decode(&frame);
    assert_eq!((o.trans_received, o.transport_retrans), (24_000, 3));
    assert_eq!(o.cong_control, "cubic");
    assert!((o.elapsed_time - 1.0).abs() < 1e-6);
    let padded = results(
        &s,
        &SideResults {
            elapsed_ns: 5_000_000_000,
            ..res
        },
        true,
    );
    assert!((OmniResults::decode(&padded).elapsed_time - 1.0).abs() < 1e-6);
}

#[test]
fn our_request_is_what_netperf_2_7_sends() {
    // TCP_RR -l 1: byte for byte the captured request, once our spec says
    // what netperf 2.7's says (its widths of one)
    let (_, f) = capture("tcp_rr")
        .into_iter()
        .find(|(d, f)| d == "C2S" && f.word(0) == DO_OMNI)
        .unwrap();
    let mut spec = TestSpec::new(TestKind::TcpRr, Family::V4);
    spec.end = TestEnd::Time { millis: 1000 };
    spec.server.send_width = Some(1);
    spec.server.recv_width = Some(1);
    assert_eq!(omni_request(&spec, 0), f);
}

#[test]
fn bad_requests_are_refused_with_an_errno() {
    let r = OmniRequest {
        send_alignment: 0,
        ..OmniRequest::default()
    };
    assert_eq!(serve_omni(&r, Family::V4).unwrap_err().errno, EINVAL);
    let r = OmniRequest {
        socket_type: 9,
        ..OmniRequest::default()
    };
    assert_eq!(
        serve_omni(&r, Family::V4).unwrap_err().errno,
        EPROTONOSUPPORT
    );
    let r = OmniRequest {
        ipfamily: 7,
        ..OmniRequest::default()
    };
    assert!(serve_omni(&r, Family::V4).is_err());
    let r = OmniRequest {
        data_port: 70_000,
        ..OmniRequest::default()
    };
    assert!(serve_omni(&r, Family::V4).is_err());
    let r = OmniRequest {
        fill_file: "/etc/shadow".into(),
        ..OmniRequest::default()
    };
    assert!(serve_omni(&r, Family::V4).unwrap().spec.remote_fill);
    // any request type decodes
    for t in [0u32, 4, 7, 999, 1000, u32::MAX] {
        let _ = Request::decode(&Frame::new(t, -1));
    }
}

/// Every captured OMNI_RESPONSE encodes back to its bytes in every word we
/// model (the others are netserver 2.7's stale leftovers, T2/T3).
#[test]
fn captured_responses_encode_back_in_the_words_we_model() {
    let modelled = [0, 1, 2, 3, 4, 5, 6, 7, 9, 13, 18, 19];
    for name in OMNI {
        for (dir, f) in capture(name) {
            if dir != "S2C" || f.word(0) != OMNI_RESPONSE {
                continue;
            }
            let back = OmniResponse::decode(&f).encode();
            for w in modelled {
                assert_eq!(back.word(w), f.word(w), "{name}: word {w}");
            }
            // flags: only the bits netperf 2.7 reads (T3)
            assert_eq!(back.word(8) & 0xb, f.word(8) & 0xb, "{name}: flags");
        }
    }
}

/// Found by the fuzzer: a results frame whose elapsed time is a float no
/// Duration holds. Any float reads as a time or as "not measured".
#[test]
fn any_elapsed_time_float_is_read_without_a_panic() {
    for v in [
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -1.0,
        1e30,
        f32::MIN_POSITIVE,
    ] {
        let mut f = Frame([0u8; FRAME_LEN]);
        f.set_float(frame::ts(40), v);
        let r = side_results_of(&f, false);
        assert_eq!(r.elapsed_ns, 0, "{v} is no elapsed time");
    }
    let mut f = Frame([0u8; FRAME_LEN]);
    f.set_float(frame::ts(40), 2.5);
    assert_eq!(side_results_of(&f, false).elapsed_ns, 2_500_000_000);
}
