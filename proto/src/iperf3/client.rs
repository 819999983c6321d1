//! A client's side of iperf3's messages: the cookie it presents, the
//! parameters of the test it asks (from the [`TestSpec`] our netperf
//! builds), its own results, the server's results as the
//! [`SideResults`] our outputs read, and the server's error numbers in
//! iperf3's words.

use std::io;

use crate::{
    error::SpecError,
    message::{ErrorCode, ErrorMsg},
    test::{
        CpuStats, Direction, DropSource, FlowCounters, Protocol, SideResults, TcpStats, TestEnd,
        TestKind, TestSpec, Token, UdpRecvStats,
    },
};

use super::wire::{
    COOKIE_LEN, LEGACY_UDP_CONNECT_REPLY, MAX_STREAMS, MAX_TIME, Params, Results, StreamResult,
    UDP_CONNECT_REPLY, stream_id, stream_index,
};

/// iperf3's cookie alphabet (its `make_cookie`'s).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The cookie a test's token makes: 36 characters of iperf3's alphabet,
/// five bits of the token each, and the NUL. The token is the client's
/// secret random number, so the cookie is one too.
pub fn cookie_of(token: &Token) -> [u8; COOKIE_LEN] {
    let mut c = [0u8; COOKIE_LEN];
    for (i, slot) in c.iter_mut().take(COOKIE_LEN - 1).enumerate() {
        let bit = i * 5;
        let byte = |k: usize| u16::from(token.0.get(k).copied().unwrap_or(0));
        let word = (byte(bit / 8) << 8) | byte(bit / 8 + 1);
        let five = (word >> (11 - bit % 8)) & 0x1f;
        *slot = ALPHABET.get(usize::from(five)).copied().unwrap_or(b'a');
    }
    c
}

/// The datagram a UDP stream's client sends first ("9876": iperf3's
/// UDP_CONNECT_MSG as a little-endian host writes it, and as big-endian
/// builds arrange to).
pub const UDP_CONNECT: [u8; 4] = *b"9876";

/// Whether `d` is a server's answer to our UDP connect message: "6789"
/// (or the legacy answer), in the byte order we wrote it, as iperf3's
/// client takes it.
pub fn is_udp_connect_reply(d: &[u8]) -> bool {
    [UDP_CONNECT_REPLY, LEGACY_UDP_CONNECT_REPLY]
        .iter()
        .any(|r| d == r.to_le_bytes())
}

/// iperf3's default block size for TCP (its DEFAULT_TCP_BLKSIZE), the
/// most it moves a call (MAX_BLOCKSIZE), and a datagram's bounds.
const TCP_LEN: u32 = 128 * 1024;
const MAX_TCP_LEN: u32 = 1024 * 1024;
const UDP_LEN: std::ops::RangeInclusive<u32> = 16..=65_507;
/// The most an iperf3 server takes for a socket buffer (MAX_TCP_BUFFER).
const MAX_WINDOW: u32 = 512 * 1024 * 1024;

/// The tests an iperf3 server runs: its streams one way or the other
/// (`-R`), of TCP or UDP (our client asks UDP one way: iperf3's `-u`).
pub const RUNS: [TestKind; 3] = [
    TestKind::TcpStream,
    TestKind::TcpMaerts,
    TestKind::UdpStream,
];

fn unsupported(why: String) -> ErrorMsg {
    ErrorMsg::new(ErrorCode::Unsupported, why)
}

impl Params {
    /// The parameters of the test `spec` asks of an iperf3 server: which
    /// way (TCP_MAERTS is iperf3's `-R`), how long (`-l` seconds as its
    /// `time`, `-l -bytes` as its `num`), its streams (`--flows` as `-P`),
    /// the block size (`len`: the datagrams' size for UDP), and what the
    /// server's side is asked (`-S` as its `window`, `-D` as `nodelay`,
    /// `-K ,rem` as `congestion`, `-Y ,rem` as `TOS`, `-T ,rcpu` as its
    /// affinity, `--rate` shared out as each stream's `bandwidth`). What
    /// iperf3 cannot run is an error naming it.
    pub fn of_spec(spec: &TestSpec, client_version: &str) -> Result<Params, ErrorMsg> {
        let (udp, reverse) = match spec.kind {
            TestKind::TcpStream => (false, false),
            TestKind::TcpMaerts => (false, true),
            TestKind::UdpStream => (true, false),
            k => {
                return Err(unsupported(format!(
                    "{k}: an iperf3 server runs {}",
                    RUNS.map(|k| k.to_string()).join(", ")
                )));
            }
        };
        let flows = spec.flows.max(1);
        if f64::from(flows) > MAX_STREAMS {
            return Err(unsupported(format!(
                "--flows {flows}: an iperf3 server runs at most {MAX_STREAMS} streams"
            )));
        }
        let (time, num) = match spec.end {
            TestEnd::Time { millis } => (millis.div_ceil(1000), 0),
            // (the server sends until told the end; the client tells it
            // when its own count is in, as iperf3's does, and what was on
            // its way arrives after)
            TestEnd::Bytes(_) if reverse => {
                return Err(unsupported(format!(
                    "-l -bytes: {} sent by an iperf3 server end when the client has counted them, and what is on its way arrives after; give TCP_MAERTS a time (-l secs)",
                    spec.kind
                )));
            }
            TestEnd::Bytes(n) => (0, n),
            TestEnd::Transactions(_) => {
                return Err(unsupported(
                    "-l: an iperf3 test ends on a time or a byte count".into(),
                ));
            }
        };
        if time as f64 > MAX_TIME {
            return Err(unsupported(format!(
                "-l {time}: an iperf3 test runs at most {MAX_TIME} s"
            )));
        }
        let s = &spec.server;
        if let Some(why) = not_expressed(spec) {
            return Err(unsupported(why));
        }
        let len = match (udp, reverse) {
            (true, _) => spec.iperf3.client_send_size.unwrap_or(1460),
            (false, false) => s
                .recv_size
                .or(spec.iperf3.client_send_size)
                .unwrap_or(TCP_LEN),
            (false, true) => s.send_size.unwrap_or(TCP_LEN),
        };
        if udp && !UDP_LEN.contains(&len) {
            return Err(unsupported(format!(
                "-m {len}: iperf3's datagrams are {} to {} bytes",
                UDP_LEN.start(),
                UDP_LEN.end()
            )));
        }
        if !udp && !(1..=MAX_TCP_LEN).contains(&len) {
            return Err(unsupported(format!(
                "-m/-M {len}: iperf3 moves 1 to {MAX_TCP_LEN} bytes a call"
            )));
        }
        let window = if reverse {
            s.send_buf.or(s.recv_buf)
        } else {
            s.recv_buf.or(s.send_buf)
        };
        if let Some(w) = window.filter(|w| *w > MAX_WINDOW) {
            return Err(unsupported(format!(
                "-S {w}: an iperf3 server takes socket buffers of at most {MAX_WINDOW} bytes"
            )));
        }
        Ok(Params {
            tcp: (!udp).then_some(true),
            udp: udp.then_some(true),
            omit: Some(0.0),
            time: Some(time as f64),
            num: Some(num as f64),
            blockcount: Some(0.0),
            nodelay: s.nodelay.then_some(true),
            parallel: Some(f64::from(flows)),
            reverse: reverse.then_some(true),
            window: window.map(f64::from),
            len: Some(f64::from(len)),
            // (iperf3's rate is each stream's; ours the test's)
            bandwidth: spec.rate_bps.map(|r| (r / u64::from(flows)).max(1) as f64),
            pacing_timer: Some(1000.0),
            tos: s.tos.map(f64::from),
            congestion: s.cong_control.clone(),
            server_affinity: s.cpu_bind.map(f64::from),
            client_version: Some(client_version.to_string()),
            ..Params::default()
        })
    }
}

/// What `spec` asks of the server that iperf3's parameters have no word
/// for, named by its option.
fn not_expressed(spec: &TestSpec) -> Option<String> {
    let s = &spec.server;
    let asked = [
        (
            spec.data_port.is_some(),
            "-- -P ,rport: an iperf3 server's streams come to its control port",
        ),
        (
            spec.data_addr.is_some(),
            "-- -H: an iperf3 server's streams come to its control address",
        ),
        (
            s.priority.is_some(),
            "-y ,rprio: an iperf3 server sets no SO_PRIORITY",
        ),
        (
            spec.keepalive,
            "-S: an iperf3 server sets no SO_KEEPALIVE on its streams",
        ),
        (
            spec.remote_fill,
            "-F ,rfill: an iperf3 server fills its buffers itself",
        ),
    ];
    asked
        .into_iter()
        .find_map(|(yes, why)| yes.then(|| why.to_string()))
}

/// Whether the server receives in this test (and we send).
fn server_receives(kind: TestKind) -> bool {
    kind.direction() != Direction::Receive
}

impl Results {
    /// Our results message: each of our streams, numbered as iperf3
    /// numbers them, with what it moved (a UDP sender's datagrams too),
    /// and our CPU figures.
    pub fn of_ours(ours: &SideResults, spec: &TestSpec) -> Results {
        let n = spec.flows.max(1) as usize;
        let we_send = server_receives(spec.kind);
        let udp = spec.kind.protocol() == Protocol::Udp;
        let whole = FlowCounters {
            bytes_sent: ours.bytes_sent,
            bytes_received: ours.bytes_received,
            send_calls: ours.send_calls,
            recv_calls: ours.recv_calls,
            transactions: ours.transactions,
        };
        // one flow's retransmissions are known; many flows' are not told
        let retransmits = match (&ours.tcp, n) {
            (Some(t), 1) if we_send && !udp => Some(t.retransmits as i64),
            _ => None,
        };
        let end_time = ours.elapsed_ns as f64 / 1e9;
        let streams = (0..n)
            .map(|i| {
                let c = if n == 1 {
                    whole
                } else {
                    ours.flows.get(i).copied().unwrap_or_default()
                };
                StreamResult {
                    id: stream_id(i),
                    bytes: if we_send {
                        c.bytes_sent
                    } else {
                        c.bytes_received
                    },
                    retransmits: retransmits.unwrap_or(-1),
                    packets: if udp && we_send {
                        c.send_calls as i64
                    } else {
                        0
                    },
                    start_time: 0.0,
                    end_time,
                    ..StreamResult::default()
                }
            })
            .collect();
        let cpu = ours.cpu.as_ref();
        Results {
            cpu_util_total: cpu.map_or(0.0, |c| c.util),
            cpu_util_user: cpu.map_or(0.0, |c| c.user),
            cpu_util_system: cpu.map_or(0.0, |c| c.system),
            sender_has_retransmits: match (we_send, retransmits) {
                (false, _) => -1,
                (true, Some(_)) => 1,
                (true, None) => 0,
            },
            congestion_used: ours
                .tcp
                .as_ref()
                .map(|t| t.cong_control.clone())
                .filter(|c| !c.is_empty()),
            streams,
            server_output_text: None,
        }
    }

    /// The server's side of the test `spec`, as its results message says:
    /// each stream's bytes (received, or sent with TCP_MAERTS) as a flow's,
    /// a UDP receiver's datagrams, loss and jitter, a TCP sender's
    /// retransmissions, and, when `-C` asked, its CPU figures (iperf3's:
    /// the server process's time, in percent of one CPU). A stream that is
    /// not one of the test's is an error.
    pub fn side_results(&self, spec: &TestSpec) -> Result<SideResults, SpecError> {
        let n = spec.flows.max(1) as usize;
        if self.streams.len() > n {
            return Err(SpecError::new(
                "results",
                format!(
                    "the iperf3 server reported {} streams, the test has {n}",
                    self.streams.len()
                ),
            ));
        }
        let receives = server_receives(spec.kind);
        let udp = spec.kind.protocol() == Protocol::Udp;
        let mut flows = vec![FlowCounters::default(); n];
        let mut r = SideResults::default();
        let (mut received, mut jitter, mut retransmits) = (0u64, 0.0f64, 0u64);
        let mut elapsed = 0.0f64;
        for s in &self.streams {
            let f = stream_index(s.id)
                .and_then(|i| flows.get_mut(i))
                .ok_or_else(|| {
                    SpecError::new(
                        "results",
                        format!("stream id {} is not one of the test's {n} streams", s.id),
                    )
                })?;
            let span = s.end_time - s.start_time;
            if span.is_finite() {
                elapsed = elapsed.max(span);
            }
            if !receives {
                f.bytes_sent = s.bytes;
                retransmits += u64::try_from(s.retransmits).unwrap_or(0);
                continue;
            }
            f.bytes_received = s.bytes;
            if udp {
                // (3.21 counts from the end of its -O period; we ask none)
                let packets = s.packets.saturating_sub(s.omitted_packets);
                let lost = s.errors.saturating_sub(s.omitted_errors);
                f.recv_calls = u64::try_from(packets.saturating_sub(lost)).unwrap_or(0);
                received += f.recv_calls;
                if s.jitter.is_finite() && s.jitter > 0.0 {
                    jitter += s.jitter;
                }
            }
        }
        for f in &flows {
            r.bytes_sent += f.bytes_sent;
            r.bytes_received += f.bytes_received;
            r.recv_calls += f.recv_calls;
        }
        r.elapsed_ns = (elapsed.max(0.0) * 1e9) as u64;
        r.flow_count = n as u32;
        if udp && receives {
            let mean = jitter / self.streams.len().max(1) as f64;
            r.udp = Some(UdpRecvStats {
                received,
                out_of_order: 0,
                duplicates: 0,
                foreign: 0,
                rcvbuf_drops: 0,
                drops_source: DropSource::Unavailable,
                jitter_ns: (mean * 1e9).round() as u64,
            });
        }
        if !udp && !receives && self.sender_has_retransmits == 1 {
            r.tcp = Some(TcpStats {
                retransmits,
                cong_control: self.congestion_used.clone().unwrap_or_default(),
                ..TcpStats::default()
            });
        }
        if spec.measure_cpu {
            let pct = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
            r.cpu = Some(CpuStats {
                util: pct(self.cpu_util_total),
                user: pct(self.cpu_util_user),
                system: pct(self.cpu_util_system),
                num_cpus: 1,
                method: 'I',
                ..CpuStats::default()
            });
        }
        if n > 1 {
            r.flows = flows;
        }
        Ok(r)
    }
}

/// What an iperf3 client says of a server's SERVER_ERROR: iperf3's text
/// for the error number (its `iperf_strerror`), and the errno's.
pub fn server_error_text(i_errno: i32, errno: i32) -> String {
    let text = match error_text(i_errno) {
        Some(t) => t.to_string(),
        None => format!("iperf3 error {i_errno}"),
    };
    if errno > 0 {
        format!("{text}: {}", io::Error::from_raw_os_error(errno))
    } else {
        text
    }
}

/// iperf3's words for its error numbers (3.21's; those a server sends).
fn error_text(i_errno: i32) -> Option<&'static str> {
    Some(match i_errno {
        5 => "test duration valid values are 0 to 86400 seconds",
        6 => "number of parallel streams too large (maximum = 128)",
        7 => "block size too large (maximum = 1048576 bytes)",
        8 => "socket buffer size too large (maximum = 536870912 bytes)",
        10 => "TCP MSS too large",
        11 => "this OS does not support sendfile",
        13 => "an option you are trying to set is not implemented yet",
        18 => "no SCTP support available",
        20 => "block size invalid (minimum = 16 bytes, maximum = 65507 bytes)",
        21 => "bad TOS value (must be between 0 and 255 inclusive)",
        27 => "total required bandwidth is larger than server limit",
        37 => "client's requested duration exceeds the server's maximum permitted limit",
        100 => "unable to create a new test",
        101 => "test initialization failed",
        102 => "unable to start listener for connections",
        104 => "unable to accept connection from client",
        106 => "unable to receive cookie at server",
        107 => "unable to write to the control socket",
        108 => "unable to read from the control socket",
        109 => "control socket has closed unexpectedly",
        110 => "received an unknown control message",
        111 => "unable to send control message",
        112 => "unable to receive control message",
        114 => "unable to receive parameters from client",
        115 => "unable to package results",
        116 => "unable to send results",
        117 => "unable to receive results",
        118 => "select failed",
        119 => "the client has terminated",
        120 => "the server has terminated",
        121 => "the server is busy running a test. try again later",
        122 => "unable to set TCP/SCTP NODELAY",
        123 => "unable to set TCP/SCTP MSS",
        124 => "unable to set socket buffer size",
        125 => "unable to set IP TOS",
        126 => "unable to set IPv6 traffic class",
        128 => "unable to reuse address on socket",
        129 => "unable to set socket to non-blocking",
        130 => "unable to set socket window size",
        131 => "protocol does not exist",
        132 => "unable to set CPU affinity",
        134 => {
            "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host"
        }
        140 => "unable to set socket pacing",
        141 => "socket buffer size not set correctly",
        142 => "test authorization failed",
        144 => "idle timeout for receiving data",
        160 => "server test duration expired",
        200 => "unable to create a new stream",
        201 => "unable to initialize stream",
        202 => "unable to start stream listener",
        203 => "unable to connect stream",
        204 => "unable to accept stream connection",
        205 => "unable to write to stream socket",
        206 => "unable to read from stream socket",
        207 => "stream socket has closed unexpectedly",
        208 => "stream has an invalid id",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test::Family;

    #[test]
    fn a_cookie_is_iperf3s_from_the_token() {
        let c = cookie_of(&Token([0xa5; 32]));
        assert!(super::super::is_cookie(&c), "{c:?}");
        let d = cookie_of(&Token([0x5a; 32]));
        assert_ne!(c, d);
        // every character of the alphabet is reachable
        let all = cookie_of(&Token([
            0x00, 0x44, 0x32, 0x14, 0xc7, 0x42, 0x54, 0xb6, 0x35, 0xcf, 0x84, 0x65, 0x3a, 0x56,
            0xd7, 0xc6, 0x75, 0xbe, 0x77, 0xdf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]));
        assert_eq!(&all[..32], ALPHABET);
    }

    #[test]
    fn a_spec_becomes_iperf3s_parameters() {
        let mut spec = TestSpec::new(TestKind::TcpMaerts, Family::V4);
        spec.flows = 4;
        spec.rate_bps = Some(400_000_000);
        spec.server.send_buf = Some(1 << 20);
        spec.server.nodelay = true;
        spec.server.tos = Some(0x10);
        spec.server.cong_control = Some("cubic".into());
        let p = Params::of_spec(&spec, "x").unwrap();
        let json = String::from_utf8(p.encode()).unwrap();
        for want in [
            r#""tcp":true"#,
            r#""reverse":true"#,
            r#""parallel":4.0"#,
            r#""time":10.0"#,
            r#""len":131072.0"#,
            r#""bandwidth":100000000.0"#,
            r#""window":1048576.0"#,
            r#""nodelay":true"#,
            r#""TOS":16.0"#,
            r#""congestion":"cubic""#,
        ] {
            assert!(json.contains(want), "{want} in {json}");
        }
        // presence is truth to iperf3: nothing unasked is written
        for absent in ["udp", "sctp", "bidirectional", "authtoken", "MSS", "null"] {
            assert!(!json.contains(absent), "{absent} in {json}");
        }
        // a UDP test's datagrams are the client's size; a count is `num`
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.iperf3.client_send_size = Some(1000);
        spec.end = TestEnd::Bytes(1_000_000);
        let p = Params::of_spec(&spec, "x").unwrap();
        assert_eq!((p.len, p.time, p.num), (Some(1000.0), Some(0.0), Some(1e6)));
        assert_eq!(p.udp, Some(true));
        spec.iperf3.client_send_size = Some(8);
        assert!(Params::of_spec(&spec, "x").is_err());
        // what iperf3 does not run, named
        let e = Params::of_spec(&TestSpec::new(TestKind::TcpRr, Family::V4), "x").unwrap_err();
        assert!(e.message.starts_with("TCP_RR"), "{e:?}");
        // a byte count the server sends: it sends until told
        let mut spec = TestSpec::new(TestKind::TcpMaerts, Family::V4);
        spec.end = TestEnd::Bytes(1000);
        let e = Params::of_spec(&spec, "x").unwrap_err();
        assert!(e.message.starts_with("-l -bytes"), "{e:?}");
        // what its parameters have no word for, by its option
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.data_port = Some(7000);
        let e = Params::of_spec(&spec, "x").unwrap_err();
        assert!(e.message.starts_with("-- -P ,rport"), "{e:?}");
        spec.data_port = None;
        spec.server.priority = Some(3);
        assert!(Params::of_spec(&spec, "x").is_err());
        // netperf 2.7's SO_DONTROUTE on a UDP stream is left out, not refused
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.server.dont_route = true;
        assert!(Params::of_spec(&spec, "x").is_ok());
    }

    #[test]
    fn our_results_and_the_servers() {
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.flows = 2;
        let ours = SideResults {
            bytes_sent: 3000,
            send_calls: 3,
            elapsed_ns: 2_000_000_000,
            flows: vec![
                FlowCounters {
                    bytes_sent: 2000,
                    send_calls: 2,
                    ..FlowCounters::default()
                },
                FlowCounters {
                    bytes_sent: 1000,
                    send_calls: 1,
                    ..FlowCounters::default()
                },
            ],
            ..SideResults::default()
        };
        let r = Results::of_ours(&ours, &spec);
        assert_eq!(r.streams.len(), 2);
        assert_eq!((r.streams[1].id, r.streams[1].packets), (3, 1));
        assert_eq!(r.sender_has_retransmits, 0);
        // the server's, as 3.12 writes them (-1 as an unsigned number)
        let theirs = br#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":2000,"retransmits":18446744073709551615,"jitter":0.0001,"errors":1,"packets":3,"start_time":0,"end_time":2.001},{"id":3,"bytes":1000,"retransmits":18446744073709551615,"jitter":0.0003,"errors":0,"packets":1,"start_time":0,"end_time":2}]}"#;
        let t = Results::decode(theirs).unwrap();
        assert_eq!(t.sender_has_retransmits, -1);
        let s = t.side_results(&spec).unwrap();
        assert_eq!((s.bytes_received, s.recv_calls), (3000, 3));
        assert_eq!(s.flows[0].recv_calls, 2);
        let u = s.udp.unwrap();
        assert_eq!((u.received, u.jitter_ns), (3, 200_000));
        assert!(s.cpu.is_none(), "not asked (-C)");
        // a stream the test does not have
        let bad = br#"{"streams":[{"id":2,"bytes":1}]}"#;
        assert!(Results::decode(bad).unwrap().side_results(&spec).is_err());
        let many = Results {
            streams: vec![StreamResult::default(); 3],
            ..Results::default()
        };
        assert!(many.side_results(&spec).is_err());
        assert!(Results::decode(br#"{"streams":[{"bytes":-5}]}"#).is_err());
    }

    #[test]
    fn errors_in_iperf3s_words() {
        assert_eq!(
            server_error_text(141, 0),
            "socket buffer size not set correctly"
        );
        assert!(server_error_text(124, 105).starts_with("unable to set socket buffer size: "));
        assert_eq!(server_error_text(999, 0), "iperf3 error 999");
        assert!(is_udp_connect_reply(b"6789"));
        assert!(!is_udp_connect_reply(b"9876") && !is_udp_connect_reply(b"678"));
        assert_eq!(
            super::super::udp_connect_reply(&UDP_CONNECT),
            Some(*b"6789")
        );
    }
}
