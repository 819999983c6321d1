//! netserver --stamp: a STAMP reflector (RFC 8762/8972) against an
//! independent sender (scapy's STAMP codec) and against packets built
//! here, authenticated and paced.

use std::{
    net::{SocketAddr, UdpSocket},
    path::Path,
    process::Command,
    time::Duration,
};

use harness::Netserver;
use proto::rfc_stamp::{Mode, ReflectorPacket, SenderPacket};

/// The reflector's address, from its banner.
fn reflector(n: &Netserver) -> SocketAddr {
    assert!(
        n.wait_for_log("STAMP reflector on", Duration::from_secs(5)),
        "no reflector: {}",
        n.log()
    );
    n.log()
        .lines()
        .find_map(|l| l.strip_prefix("STAMP reflector on "))
        .and_then(|a| a.strip_suffix(" (UDP)")?.parse().ok())
        .expect("the reflector's address")
}

/// A python3 with Debian's scapy, or a loud skip (a failure under
/// `NETPERF_REQUIRE_SCAPY=1`, as in CI).
fn scapy_python(test: &str) -> Option<&'static str> {
    let found = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import scapy.contrib.stamp"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("NETPERF_REQUIRE_SCAPY").as_deref() != Ok("1"),
            "{test}: python3-scapy is not installed (NETPERF_REQUIRE_SCAPY=1)"
        );
        eprintln!("!!! SKIPPED {test}: python3-scapy is not installed");
    }
    found
}

#[test]
fn scapys_sender_reads_our_reflections_as_the_rfc_lays_them_out() {
    let Some(python) = scapy_python("stamp::scapys_sender") else {
        return;
    };
    let n = Netserver::start(&["--stamp", "127.0.0.1:0"]);
    let at = reflector(&n);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/stamp_scapy.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(at.port().to_string())
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    // three packets, 44 octets and 24 of TLVs each, reflected as long
    assert_eq!(
        lines.iter().filter(|l| **l == "sizes 68 68").count(),
        3,
        "{text}"
    );
    // stateful: its own count 0, 1, 2 beside the sender's 41, 42, 44
    for (mine, theirs) in [(0, 41), (1, 42), (2, 44)] {
        let want = format!("seq {mine} sender {theirs} ssid 0x1234 ttl 64");
        assert!(lines.contains(&want.as_str()), "{want}\n{text}");
    }
    assert_eq!(
        lines.iter().filter(|l| **l == "t1 1 t2<=t3 1").count(),
        3,
        "{text}"
    );
    // the reflection marked with DSCP1 (34 << 2), no ECN codepoint of its own
    assert_eq!(
        lines.iter().filter(|l| **l == "tos 136").count(),
        3,
        "{text}"
    );
    // Extra Padding returned, U cleared; Class of Service: DSCP1 34, DSCP2 46
    // and ECN 1 as received, RP 0; an unknown TLV: U kept, as sent
    for want in [
        "tlv 1 0x0 6 5a5a5a5a5a5a",
        "tlv 4 0x0 4 8ae40000",
        "tlv 200 0x80 2 7879",
    ] {
        assert_eq!(
            lines.iter().filter(|l| **l == want).count(),
            3,
            "{want}\n{text}"
        );
    }
}

/// One test packet's reflection, or `None` within half a second.
fn exchange(s: &UdpSocket, to: SocketAddr, pkt: &[u8]) -> Option<Vec<u8>> {
    s.send_to(pkt, to).expect("send");
    let mut b = [0u8; 2048];
    s.recv_from(&mut b).ok().map(|(n, _)| b[..n].to_vec())
}

#[test]
fn authenticated_mode_reflects_only_a_packet_whose_hmac_verifies() {
    let dir = tempfile_dir("stamp-key");
    let key = dir.join("key");
    std::fs::write(&key, "a lab's STAMP key\n").unwrap();
    let n = Netserver::start(&[
        "--stamp",
        "127.0.0.1:0",
        "--stamp-key",
        key.to_str().unwrap(),
    ]);
    let at = reflector(&n);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let k: &[u8] = b"a lab's STAMP key";
    let pkt = |seq: u32, key: &[u8]| {
        SenderPacket {
            seq,
            timestamp: 0xE000_0000_0000_0001,
            error_estimate: 0x0001,
            ssid: 7,
            tlvs: Vec::new(),
        }
        .encode(Mode::Authenticated, Some(key))
    };
    // under another key: no reflection at all
    assert_eq!(exchange(&s, at, &pkt(1, b"a guess")), None);
    // an unauthenticated packet to an authenticated reflector: none
    let plain = SenderPacket::default().encode(Mode::Unauthenticated, None);
    assert_eq!(exchange(&s, at, &plain), None);
    // the right key: a reflection of 112 octets whose own HMAC verifies
    let r = exchange(&s, at, &pkt(2, k)).expect("a reflection");
    assert_eq!(r.len(), 112);
    let d = ReflectorPacket::decode(&r, Mode::Authenticated, Some(k)).expect("its HMAC verifies");
    assert_eq!((d.seq, d.sender_seq, d.ssid, d.sender_ttl), (0, 2, 7, 64));
    assert!(ReflectorPacket::decode(&r, Mode::Authenticated, Some(b"a guess")).is_err());
    drop(n);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_address_is_held_to_the_rate_and_nothing_is_larger_than_asked() {
    let n = Netserver::start(&[
        "--stamp",
        "127.0.0.1:0",
        "--stamp-rate",
        "50",
        "--stamp-stateless",
    ]);
    let at = reflector(&n);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    // 200 packets at once, of 44 to 243 octets: at most a second's 50
    // reflections, each as long as its request, each numbered as sent
    for seq in 0..200u32 {
        let mut p = SenderPacket {
            seq,
            ..SenderPacket::default()
        }
        .encode(Mode::Unauthenticated, None);
        p.resize(44 + seq as usize, 0);
        s.send_to(&p, at).unwrap();
    }
    let mut got = 0;
    let mut b = [0u8; 2048];
    while let Ok((len, _)) = s.recv_from(&mut b) {
        let r = ReflectorPacket::decode(&b[..len], Mode::Unauthenticated, None).unwrap();
        assert_eq!(r.seq, r.sender_seq, "stateless");
        assert_eq!(len, 44 + r.sender_seq as usize, "as long as its request");
        got += 1;
    }
    assert!((40..=60).contains(&got), "{got} reflections at 50 a second");
    // a packet shorter than the base packet: none
    assert_eq!(exchange(&s, at, &[0u8; 20]), None);
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
