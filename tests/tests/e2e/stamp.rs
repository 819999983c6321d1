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

/// A reflector in authenticated mode under the key in `key`, and its
/// address.
fn keyed_reflector(key: &Path) -> (Netserver, SocketAddr) {
    let n = Netserver::start(&[
        "--stamp",
        "127.0.0.1:0",
        "--stamp-key",
        key.to_str().unwrap(),
    ]);
    let at = reflector(&n);
    (n, at)
}

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
    // the reflection marked with DSCP1 (34 << 2), and EC1 (scapy's 0:
    // Not-ECT), never an ECN codepoint of its own
    assert_eq!(
        lines.iter().filter(|l| **l == "tos 136").count(),
        3,
        "{text}"
    );
    // Extra Padding returned, U cleared; Class of Service: DSCP1 34, DSCP2 46
    // and ECN 1 as received, RP 0, and in what RFC 8972 reserved, EC1 0 and
    // RPE 0b11 (the cos-ecn draft: the reflection's ECN set as EC1 asked);
    // an unknown TLV: U kept, as sent
    for want in [
        "tlv 1 0x0 6 5a5a5a5a5a5a",
        "tlv 4 0x0 4 8ae43000",
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
    let (n, at) = keyed_reflector(&key);
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
    // T2 (the kernel's receipt) before T3, both within a second of ours
    let now = proto::rfc_stamp::ntp_from_unix_nanos(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    assert!(d.receive_timestamp <= d.timestamp, "{d:?}");
    assert!(now.abs_diff(d.timestamp) < 1 << 32, "{d:?}");
    // its Error Estimate: the system clock's, as the kernel keeps it
    if let Some((synced, err)) = engine::sys::clock_error() {
        let want = proto::rfc_stamp::error_estimate_of(synced, err);
        assert_eq!(d.error_estimate & 0x8000, want & 0x8000, "S");
        let scale = |e: u16| i32::from((e >> 8) & 0x3F);
        assert!(
            (scale(d.error_estimate) - scale(want)).abs() <= 1,
            "{:#x} {want:#x}",
            d.error_estimate
        );
    }
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

/// `netperf -t STAMP` with `--json`, its document.
fn stamp_json(netperf: &mut Command, args: &[&str]) -> serde_json::Value {
    let out = netperf
        .args(["-t", "STAMP", "--json"])
        .args(args)
        .output()
        .expect("netperf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON document")
}

#[test]
fn netperfs_sender_against_our_reflector_each_numbering() {
    for (extra, stateful) in [(&[][..], true), (&["--stamp-stateless"][..], false)] {
        let mut args = vec!["--stamp", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let n = Netserver::start(&args);
        let at = reflector(&n);
        let port = format!(",{}", at.port());
        let doc = stamp_json(
            &mut Command::new(harness::bin("netperf")),
            &[
                "-H",
                "127.0.0.1",
                "-l",
                "-300",
                "--",
                "-P",
                &port,
                "-m",
                "100",
                "--rate",
                "800k",
            ],
        );
        let s = &doc["stamp"];
        assert_eq!(s["sent"], 300, "{s}");
        assert_eq!(s["reflected"], 300, "{s}");
        assert_eq!(s["lost"], 0, "{s}");
        assert_eq!(s["stateful"], stateful, "{s}");
        if stateful {
            assert_eq!(
                (s["lost_forward"].as_u64(), s["lost_backward"].as_u64()),
                (Some(0), Some(0))
            );
        } else {
            assert!(s["lost_forward"].is_null(), "{s}");
        }
        // each round trip's, as latency; the one-way figures beside
        let lat = &doc["latency_usec"];
        assert_eq!(lat["count"], 300, "{lat}");
        assert!(lat["p50"].as_f64().unwrap() > 0.0);
        assert_eq!(doc["one_way"]["probes_answered"], 300);
    }
}

#[test]
fn netperfs_sender_against_scapys_reflector() {
    let Some(python) = scapy_python("stamp::netperfs_sender_against_scapys_reflector") else {
        return;
    };
    let dir = tempfile_dir("stamp-scapy-reflector");
    let portfile = dir.join("port");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/stamp_scapy_reflector.py");
    let child = Command::new(python)
        .arg(&script)
        .arg(&portfile)
        .arg("200")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&portfile)
            && let Ok(p) = p.trim().parse::<u16>()
        {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "scapy's reflector did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let doc = netperf_stamp_to(port, &[]);
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "served 200");
    let s = &doc["stamp"];
    all_back_counted_by_the_reflector(s, 200);
    // scapy's reflector says 255 where it does not read the TTL
    assert_eq!(s["ttl"], 255);
    assert_eq!(doc["latency_usec"]["count"], 200);
    let _ = std::fs::remove_dir_all(dir);
}

/// `netperf -t STAMP`'s JSON: 200 test packets to 127.0.0.1:`port`.
fn netperf_stamp_to(port: u16, extra: &[&str]) -> serde_json::Value {
    let p = format!(",{port}");
    let mut args = vec!["-H", "127.0.0.1", "-l", "-200", "--", "-P", &p];
    args.extend_from_slice(extra);
    stamp_json(&mut Command::new(harness::bin("netperf")), &args)
}

/// All `n` reflected, by a reflector counting them itself (stateful), and
/// so nothing lost either way.
fn all_back_counted_by_the_reflector(s: &serde_json::Value, n: u64) {
    assert_eq!(
        (s["sent"].as_u64(), s["reflected"].as_u64()),
        (Some(n), Some(n)),
        "{s}"
    );
    assert_eq!(s["stateful"], true, "its own count from 0: {s}");
    assert_eq!(
        (s["lost_forward"].as_u64(), s["lost_backward"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
}

/// A reflector on `port` behind a router (network namespaces) whose
/// nftables rules each count and act on the packets one way (`name`,
/// "to the reflector" or "back", a match, an action); `netperf -t STAMP`
/// with `global` options and `test_opts` (after `-- -P ,port`): its
/// JSON and each rule's count, in order. `None`: no namespaces here.
fn through_a_router(
    test: &str,
    port: u16,
    rules: &[(&str, &str, &str, &str)],
    global: &[&str],
    test_opts: &[&str],
) -> Option<(serde_json::Value, Vec<u64>)> {
    use harness::netns::{ROUTED_SERVER, Routed, TO_CLIENT, TO_SERVER, nft, nft_counter};
    let r = Routed::new(test)?;
    let mut cmd = r.command(&r.server, &harness::bin("netserver"));
    cmd.args(["-D", "-p", "0", "-L", ROUTED_SERVER])
        .args(["--stamp", &format!("{ROUTED_SERVER}:{port}")]);
    let _n = Netserver::spawn(cmd);
    let counters: String = rules
        .iter()
        .map(|(name, ..)| format!("counter {name} {{ }}\n"))
        .collect();
    let lines: String = rules
        .iter()
        .map(|(name, way, select, act)| {
            let way = if *way == "back" {
                format!("oifname \"{TO_CLIENT}\" udp sport {port}")
            } else {
                format!("oifname \"{TO_SERVER}\" udp dport {port}")
            };
            format!("{way} {select} counter name \"{name}\" {act}\n")
        })
        .collect();
    nft(
        &r.router,
        &format!(
            "table inet npstamp {{
               {counters}
               chain forward {{
                 type filter hook forward priority 0; policy accept;
                 {lines}
               }}
             }}"
        ),
    );
    let p = format!(",{port}");
    let mut args = vec!["-H", ROUTED_SERVER];
    args.extend_from_slice(global);
    args.extend_from_slice(&["--", "-P", &p]);
    args.extend_from_slice(test_opts);
    let doc = stamp_json(&mut r.command(&r.client, &harness::bin("netperf")), &args);
    let counts = rules
        .iter()
        .map(|(name, ..)| nft_counter(&r.router, "npstamp", name))
        .collect();
    Some((doc, counts))
}

/// A router dropping every 7th test packet toward the reflector and every
/// 5th reflection back (nftables' own counters): the loss each way is
/// exactly the router's.
#[test]
fn loss_each_way_is_exactly_the_routers() {
    let Some((doc, counts)) = through_a_router(
        "loss_each_way_is_exactly_the_routers",
        8620,
        &[
            ("up", "to the reflector", "numgen inc mod 7 0", "drop"),
            ("down", "back", "numgen inc mod 5 0", "drop"),
        ],
        &["-l", "-2000"],
        &["--rate", "3520k"],
    ) else {
        return;
    };
    let (up, down) = (counts[0], counts[1]);
    let s = &doc["stamp"];
    eprintln!("router dropped {up} up, {down} down: {s}");
    assert!(up > 200 && down > 200, "{up} {down}");
    assert_eq!(s["sent"], 2000);
    assert_eq!(s["lost"].as_u64(), Some(up + down), "{s}");
    // the tail: a reflection lost after the last one that arrived counts
    // toward the reflector (a 5th of the last few at most)
    let fwd = s["lost_forward"].as_u64().unwrap();
    let back = s["lost_backward"].as_u64().unwrap();
    assert_eq!(fwd + back, up + down, "{s}");
    assert!(
        fwd >= up && fwd - up <= 1,
        "forward {fwd} against the router's {up}"
    );
    assert_eq!(back + (fwd - up), down, "{s}");
    // each hop takes one from the TTL: the router's
    assert_eq!(s["ttl"], 63, "{s}");
}

/// `-Y` asks a Class of Service: the test packets leave AF41 with ECT(0)
/// and the reflections are asked back the same; a router marks CE on every
/// 4th test packet, and on the way back sets CS1 on every 3rd reflection
/// and CE on every 5th (nftables' own counters): each count, each way,
/// is the router's.
#[test]
fn class_of_service_each_way_is_the_routers() {
    let Some((doc, counts)) = through_a_router(
        "class_of_service_each_way_is_the_routers",
        8621,
        &[
            (
                "fce",
                "to the reflector",
                "numgen inc mod 4 0",
                "ip ecn set ce",
            ),
            ("bdscp", "back", "numgen inc mod 3 0", "ip dscp set cs1"),
            ("bce", "back", "numgen inc mod 5 0", "ip ecn set ce"),
        ],
        &["-l", "-400", "-Y", "0x8a"],
        &["--rate", "1m"],
    ) else {
        return;
    };
    let (fce, bdscp, bce) = (counts[0], counts[1], counts[2]);
    let s = &doc["stamp"];
    let c = &s["cos"];
    eprintln!("router: {fce} CE there, {bdscp} CS1 back, {bce} CE back: {c}");
    assert_eq!(s["reflected"], 400, "{s}");
    assert_eq!((fce, bdscp, bce), (100, 134, 80));
    assert_eq!(
        (c["dscp"].as_u64(), c["ecn"].as_u64()),
        (Some(34), Some(2)),
        "{c}"
    );
    assert_eq!(c["answered"], 400, "{c}");
    assert_eq!(c["forward_ce"].as_u64(), Some(fce), "{c}");
    assert_eq!(
        (
            c["forward_remarked"].as_u64(),
            c["forward_not_ect"].as_u64()
        ),
        (Some(0), Some(0)),
        "{c}"
    );
    assert_eq!(
        (c["back_dscp_read"].as_u64(), c["back_ecn_read"].as_u64()),
        (Some(400), Some(400)),
        "{c}"
    );
    assert_eq!(c["back_remarked"].as_u64(), Some(bdscp), "{c}");
    assert_eq!(c["back_dscp_seen"], 8, "{c}");
    assert_eq!(c["back_ce"].as_u64(), Some(bce), "{c}");
    assert_eq!(c["back_not_ect"], 0, "{c}");
}

/// `-t STAMP --stamp-key` against `netserver --stamp-key`: every packet
/// reflected under the same key, none under another; and over IPv6.
#[test]
fn authenticated_sessions_and_ipv6() {
    let dir = tempfile_dir("stamp-auth-session");
    let (key, other) = (dir.join("key"), dir.join("other"));
    std::fs::write(&key, "lab key\n").unwrap();
    std::fs::write(&other, "not the lab's\n").unwrap();
    let n = Netserver::start(&[
        "--stamp",
        "127.0.0.1:0",
        "--stamp-key",
        key.to_str().unwrap(),
    ]);
    let port = format!(",{}", reflector(&n).port());
    for (k, reflected) in [(&key, 50), (&other, 0)] {
        let doc = stamp_json(
            &mut Command::new(harness::bin("netperf")),
            &[
                "-H",
                "127.0.0.1",
                "-l",
                "-50",
                "--",
                "-P",
                &port,
                "--rate",
                "900k",
                "--stamp-key",
                k.to_str().unwrap(),
            ],
        );
        let s = &doc["stamp"];
        assert_eq!(
            (s["sent"].as_u64(), s["reflected"].as_u64()),
            (Some(50), Some(reflected)),
            "{s}"
        );
        // 112-octet packets, authenticated mode's
        assert_eq!(doc["sizes"]["local_send_size"], 112);
    }
    drop(n);
    // IPv6: the reflector on ::1, the Hop Limit read back
    let n = Netserver::start_v6(&["--stamp", "[::1]:0"]);
    let port = format!(",{}", reflector(&n).port());
    let doc = stamp_json(
        &mut Command::new(harness::bin("netperf")),
        &[
            "-H", "::1", "-l", "-40", "--", "-P", &port, "--rate", "400k",
        ],
    );
    let s = &doc["stamp"];
    assert_eq!(
        (s["reflected"].as_u64(), s["ttl"].as_u64()),
        (Some(40), Some(64)),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `--policy`'s `[stamp] allow`: a sender outside the prefixes gets
/// nothing, one inside everything.
#[test]
fn the_policy_names_whom_the_reflector_answers() {
    let dir = tempfile_dir("stamp-policy");
    for (allow, reflected) in [("198.18.0.0/24", 0), ("127.0.0.0/8", 30)] {
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, format!("[stamp]\nallow = [\"{allow}\"]\n")).unwrap();
        let n = Netserver::start(&[
            "--stamp",
            "127.0.0.1:0",
            "--policy",
            policy.to_str().unwrap(),
        ]);
        let port = format!(",{}", reflector(&n).port());
        let doc = stamp_json(
            &mut Command::new(harness::bin("netperf")),
            &[
                "-H",
                "127.0.0.1",
                "-l",
                "-30",
                "--",
                "-P",
                &port,
                "--rate",
                "400k",
            ],
        );
        assert_eq!(
            doc["stamp"]["reflected"].as_u64(),
            Some(reflected),
            "{allow}: {}",
            doc["stamp"]
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Two messages of test packets, as a busy sender's NIC would coalesce
/// them: 16 of 44 octets, then 9 of 60 and one of 50 (UDP_SEGMENT cuts each
/// message into its datagrams). Sequence numbers from `first`.
fn send_bursts(s: &UdpSocket, first: u32) -> Vec<(u32, usize)> {
    use engine::sys::MsgBatch;
    let mut asked = Vec::new();
    let mut tx = MsgBatch::sending(2, 16 * 60, None);
    let mut lens = Vec::new();
    for (i, sizes) in [vec![44; 16], [vec![60; 9], vec![50]].concat()]
        .iter()
        .enumerate()
    {
        tx.set_segment(i, Some(sizes[0] as u16));
        let slot = tx.slot_mut(i);
        let mut at = 0;
        for &size in sizes {
            let seq = first + asked.len() as u32;
            let mut p = SenderPacket {
                seq,
                ..SenderPacket::default()
            }
            .encode(Mode::Unauthenticated, None);
            p.resize(size, 0);
            slot[at..at + size].copy_from_slice(&p);
            at += size;
            asked.push((seq, size));
        }
        lens.push(at);
    }
    assert_eq!(tx.send(s, &lens).expect("sendmmsg"), 2);
    asked
}

/// Every reflection that comes within half a second, decoded, with its
/// length.
fn reflections(s: &UdpSocket) -> Vec<(ReflectorPacket, usize)> {
    let mut got = Vec::new();
    let mut b = [0u8; 2048];
    while let Ok(len) = s.recv(&mut b) {
        let r = ReflectorPacket::decode(&b[..len], Mode::Unauthenticated, None).expect("decodes");
        got.push((r, len));
    }
    got
}

#[test]
#[cfg(target_os = "linux")]
fn coalesced_test_packets_are_each_reflected_as_their_own_datagram() {
    let n = Netserver::start(&["--stamp", "127.0.0.1:0"]);
    let at = reflector(&n);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(at).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let asked = send_bursts(&s, 1000);
    let got = reflections(&s);
    // each its own datagram, as long as its request, numbered in order
    // (stateful), in the order sent
    let back: Vec<(u32, usize)> = got.iter().map(|(r, l)| (r.sender_seq, *l)).collect();
    assert_eq!(back, asked);
    let seqs: Vec<u32> = got.iter().map(|(r, _)| r.seq).collect();
    assert_eq!(seqs, (0..26).collect::<Vec<u32>>());
    // the first 16 share one receipt time (T2), as do the last 10 (that
    // the kernel handed them over coalesced, one message each, is the
    // strace test's to see)
    let t2: Vec<u64> = got.iter().map(|(r, _)| r.receive_timestamp).collect();
    assert!(t2[..16].iter().all(|&t| t == t2[0]), "{t2:?}");
    assert!(t2[16..].iter().all(|&t| t == t2[16]), "{t2:?}");
    // T3 is each reflection's own, after its T2
    assert!(got.iter().all(|(r, _)| r.timestamp >= r.receive_timestamp));
}

/// The reflector's sends as strace saw them: each call's line, and the
/// datagrams or messages it returned.
fn sends(trace: &str) -> Vec<(&str, usize)> {
    trace
        .lines()
        .filter(|l| l.contains("sendmmsg(") || l.contains("sendto("))
        .map(|l| {
            let n = l.rsplit("= ").next().and_then(|n| n.parse().ok());
            (l, n.unwrap_or(0))
        })
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn reflections_go_in_runs_and_one_by_one_where_the_kernel_refuses_runs() {
    if !harness::have_strace() {
        return;
    }
    let exchange = |t: &harness::TracedServer, first: u32| {
        let at = reflector(&t.ns);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(at).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let asked = send_bursts(&s, first);
        let back: Vec<u32> = reflections(&s).iter().map(|(r, _)| r.sender_seq).collect();
        let want: Vec<u32> = asked.iter().map(|&(q, _)| q).collect();
        assert_eq!(back, want, "{}", t.trace());
        s
    };
    // the 16 read as one message of 704 octets (UDP_GRO); 26 reflections
    // in three messages: a run of 16, a run of 9, and the shorter one
    // alone, each run cut by the kernel (UDP_SEGMENT)
    let t = harness::TracedServer::start(
        &["-e", "trace=sendmmsg,sendto,recvmmsg"],
        &["--stamp", "127.0.0.1:0"],
        "stamp-runs",
    );
    exchange(&t, 0);
    let trace = t.trace();
    let calls = sends(&trace);
    assert!(
        calls.iter().all(|(l, _)| l.contains("sendmmsg(")),
        "{trace}"
    );
    assert_eq!(calls.iter().map(|&(_, n)| n).sum::<usize>(), 3, "{trace}");
    assert!(
        trace
            .lines()
            .any(|l| l.contains("recvmmsg(") && l.contains("msg_len=704")),
        "{trace}"
    );
    assert!(
        calls.iter().all(|(l, _)| l.contains("cmsg_level=SOL_UDP")),
        "{trace}"
    );
    drop(t);
    // the reflector's first sendmmsg refused as a route without checksum
    // offload refuses a run (EIO): every reflection still comes, and from
    // then on each goes as a datagram of its own
    let t = harness::TracedServer::start(
        &[
            "-e",
            "trace=sendmmsg,sendto",
            "-e",
            "inject=sendmmsg:error=EIO:when=1",
        ],
        &["--stamp", "127.0.0.1:0"],
        "stamp-refused",
    );
    let s = exchange(&t, 0);
    let asked = send_bursts(&s, 100);
    assert_eq!(reflections(&s).len(), asked.len(), "{}", t.trace());
    let trace = t.trace();
    let calls = sends(&trace);
    let (first, rest) = calls.split_first().expect("a send");
    assert!(
        first.0.contains("cmsg_level=SOL_UDP") && first.0.contains("INJECTED"),
        "{trace}"
    );
    assert!(rest.iter().all(|(l, _)| !l.contains("SOL_UDP")), "{trace}");
    // 52 datagrams after the refusal, each its own message or sendto
    let datagrams: usize = rest
        .iter()
        .map(|&(l, n)| if l.contains("sendto(") { 1 } else { n })
        .sum();
    assert_eq!(datagrams, 52, "{trace}");
}

/// stamp-suite (crates.io), a second implementation in Rust, where one is
/// installed: `NETPERF_STAMP_SUITE=PATH`, or `stamp-suite` on the PATH
/// (`cargo install stamp-suite`; not in Debian, so CI skips it, loudly).
fn stamp_suite() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("NETPERF_STAMP_SUITE")
        .map(std::path::PathBuf::from)
        .or_else(|| Some("stamp-suite".into()))
        .filter(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        eprintln!("!!! SKIPPED stamp-suite's tests: no stamp-suite (NETPERF_STAMP_SUITE)");
    }
    found
}

/// stamp-suite's sender's JSON summary of `count` test packets at
/// 1 ms to `to`, with `extra` options.
fn stamp_suite_sends(ss: &Path, to: SocketAddr, count: u32, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(ss)
        .args(["-r", &to.ip().to_string(), "-p", &to.port().to_string()])
        .args(["-c", &count.to_string(), "-d", "1ms", "-L", "1"])
        .args(["--output-format", "json"])
        .args(extra)
        .output()
        .expect("stamp-suite");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|d| d["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {text}"))
}

#[test]
fn stamp_suites_sender_against_our_reflector() {
    let Some(ss) = stamp_suite() else {
        return;
    };
    // its sender, with every TLV it sends, against our stateful reflector
    let n = Netserver::start(&["--stamp", "127.0.0.1:0"]);
    let at = reflector(&n);
    let d = stamp_suite_sends(
        &ss,
        at,
        100,
        &[
            "--timestamp-info",
            "--direct-measurement",
            "--location",
            "--extra-padding",
            "64",
            "--cos",
            "--dscp",
            "34",
        ],
    );
    assert_eq!(
        (d["packets_sent"].as_u64(), d["packets_received"].as_u64()),
        (Some(100), Some(100)),
        "{d}"
    );
    let m = &d["measurements"];
    assert_eq!(m["last_reflector_sequence"], 99, "stateful: {m}");
    let tlv = &m["tlv_validation"];
    assert_eq!(tlv["rejected_replies"], 0, "{tlv}");
    for t in ["1", "2", "3", "4", "5"] {
        assert_eq!(tlv["by_type"][t]["observed"], 100, "TLV {t}: {tlv}");
    }
    for f in ["unrecognized", "malformed", "integrity_failed"] {
        assert_eq!(tlv["flags"][f], 0, "{f}: {tlv}");
    }
    let dm = &m["direct_measurement"];
    assert_eq!(
        (
            dm["forward_missing"].as_u64(),
            dm["reverse_missing"].as_u64()
        ),
        (Some(0), Some(0)),
        "{dm}"
    );
    // Follow-Up Telemetry: each reflection names the one before it and
    // when the kernel saw that one leave; stamp-suite matches them
    let d = stamp_suite_sends(&ss, at, 50, &["--follow-up-telemetry"]);
    let fu = &d["measurements"]["follow_up"];
    // (a kernel before 6.13 tells none: every one unavailable)
    let least = if engine::sys::tx_stamp_ids() { 45 } else { 0 };
    assert!(fu["matched"].as_u64() >= Some(least), "{fu}");
    assert_eq!(
        (fu["unmatched"].as_u64(), fu["ambiguous"].as_u64()),
        (Some(0), Some(0)),
        "{fu}"
    );
    drop(n);

    // authenticated: the same key (its hex, our file's bytes) or nothing
    let dir = tempfile_dir("stamp-suite-key");
    let key = dir.join("key");
    std::fs::write(&key, "a lab STAMP key!xyz\n").unwrap();
    let hex: String = b"a lab STAMP key!xyz"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (n, at) = keyed_reflector(&key);
    let d = stamp_suite_sends(&ss, at, 30, &["-A", "A", "--hmac-key", &hex]);
    assert_eq!(d["packets_received"], 30, "{d}");
    let d = stamp_suite_sends(
        &ss,
        at,
        30,
        &["-A", "A", "--hmac-key", "00112233445566778899aabbccddeeff"],
    );
    assert_eq!(d["packets_received"], 0, "another key: {d}");
    drop(n);

    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn netperfs_sender_against_stamp_suites_reflector() {
    let Some(ss) = stamp_suite() else {
        return;
    };
    // its reflector (stateful), our sender
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut refl = Command::new(&ss)
        .args([
            "-i",
            "-S",
            "127.0.0.1",
            "-o",
            &port.to_string(),
            "--stateful-reflector",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("stamp-suite -i");
    std::thread::sleep(Duration::from_millis(500));
    let doc = netperf_stamp_to(port, &["--rate", "800k"]);
    all_back_counted_by_the_reflector(&doc["stamp"], 200);
    // with a Class of Service asked (AF41, ECT(0)): its answers read, and
    // its reflections marked as asked (the cos-ecn draft's EC1 and RPE)
    let p = format!(",{port}");
    let doc = stamp_json(
        &mut Command::new(harness::bin("netperf")),
        &[
            "-H",
            "127.0.0.1",
            "-l",
            "-100",
            "-Y",
            "0x8a",
            "--",
            "-P",
            &p,
            "--rate",
            "800k",
        ],
    );
    let _ = refl.kill();
    let _ = refl.wait();
    let c = &doc["stamp"]["cos"];
    assert_eq!(
        (c["answered"].as_u64(), c["back_ecn_read"].as_u64()),
        (Some(100), Some(100)),
        "{c}"
    );
    assert_eq!(
        (c["back_remarked"].as_u64(), c["back_not_ect"].as_u64()),
        (Some(0), Some(0)),
        "{c}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn follow_up_telemetry_tells_when_the_last_reflection_left() {
    use proto::rfc_stamp::{TLV_FOLLOW_UP_TELEMETRY, Tlv};
    // a kernel before 6.13 cannot stamp a send by its own ID: every
    // Follow-Up Telemetry is zeros there
    let told = engine::sys::tx_stamp_ids();
    if !told {
        eprintln!("!!! this kernel stamps no send by its own ID: zeros expected");
    }
    let n = Netserver::start(&["--stamp", "127.0.0.1:0"]);
    let at = reflector(&n);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut before: Option<ReflectorPacket> = None;
    for seq in 0..5u32 {
        let req = SenderPacket {
            seq,
            tlvs: vec![Tlv::request(TLV_FOLLOW_UP_TELEMETRY, vec![0; 16])],
            ..SenderPacket::default()
        }
        .encode(Mode::Unauthenticated, None);
        let b = exchange(&s, at, &req).expect("a reflection");
        let r = ReflectorPacket::decode(&b, Mode::Unauthenticated, None).unwrap();
        let v = &r.tlvs[0].value;
        assert_eq!(r.tlvs[0].flags, 0, "{r:?}");
        let last = u32::from_be_bytes(v[0..4].try_into().unwrap());
        let left = u64::from_be_bytes(v[4..12].try_into().unwrap());
        match &before {
            // the first: nothing has left before it
            None => assert_eq!((last, left, v[12]), (0, 0, 0), "{r:?}"),
            Some(_) if !told => assert_eq!((last, left, v[12]), (0, 0, 0), "{r:?}"),
            // the one before left after its T3 was read and before this
            // one came in, as the kernel stamped it (software, local)
            Some(p) => {
                assert_eq!(last, p.seq, "{r:?}");
                assert!(
                    p.timestamp <= left && left <= r.receive_timestamp,
                    "T3 {:#x} <= left {left:#x} <= T2 {:#x}",
                    p.timestamp,
                    r.receive_timestamp
                );
                assert_eq!(v[12], proto::rfc_stamp::STAMPED_SW_LOCAL);
            }
        }
        before = Some(r);
    }
}
