//! Property tests: every message round-trips through a frame; truncated,
//! oversized and random bytes give an error or "incomplete", never a panic.

use proptest::prelude::*;
use proto::{
    ClientDone, ClientMsg, CpuStats, DropSource, ErrorCode, ErrorMsg, Family, FlowCounters, Grant,
    Hello, ServerHello, ServerMsg, SideResults, SideSpec, TcpStats, TestEnd, TestKind, TestSpec,
    Token, UdpRecvStats, frame, message::take_frame,
};

fn kind() -> impl Strategy<Value = TestKind> {
    prop::sample::select(TestKind::ALL.to_vec())
}

fn end() -> impl Strategy<Value = TestEnd> {
    prop_oneof![
        any::<u64>().prop_map(|millis| TestEnd::Time { millis }),
        any::<u64>().prop_map(TestEnd::Bytes),
        any::<u64>().prop_map(TestEnd::Transactions),
    ]
}

fn side() -> impl Strategy<Value = SideSpec> {
    (
        (
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        ),
        any::<bool>(),
        any::<Option<u8>>(),
        prop::option::of("[a-z0-9_-]{0,20}"),
        any::<Option<u32>>(),
        any::<Option<u32>>(),
    )
        .prop_map(
            |((sb, rb, ss, rs), nodelay, tos, cc, priority, cpu_bind)| SideSpec {
                send_buf: sb,
                recv_buf: rb,
                send_size: ss,
                recv_size: rs,
                nodelay,
                tos,
                cong_control: cc,
                priority,
                cpu_bind,
                ..SideSpec::default()
            },
        )
}

fn spec() -> impl Strategy<Value = TestSpec> {
    (
        kind(),
        any::<bool>(),
        end(),
        side(),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (
            any::<Option<u32>>(),
            any::<bool>(),
            any::<Option<u64>>(),
            any::<bool>(),
        ),
        (
            any::<u32>(),
            any::<Option<u32>>(),
            any::<Option<u16>>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                kind,
                v6,
                end,
                server,
                (rq, rs, burst, flows),
                (to, spin, rate, cpu),
                (n, im, port, ka),
            )| {
                TestSpec {
                    kind,
                    family: if v6 { Family::V6 } else { Family::V4 },
                    end,
                    server,
                    request_size: rq,
                    response_size: rs,
                    burst,
                    flows,
                    recv_timeout_ms: to,
                    spin,
                    rate_bps: rate,
                    measure_cpu: cpu,
                    num_cpus: n,
                    interim_ms: im,
                    data_port: port,
                    data_addr: None,
                    keepalive: ka,
                    defer_accept: ka,
                    fastopen: spin,
                    connected_udp: cpu,
                    remote_fill: v6,
                    peer_data_port: port,
                    window: None,
                    udp_fast: proto::UdpFast::default(),
                    paths: proto::Paths::default(),
                    ecn: None,
                    iperf3: proto::iperf3::Extras::default(),
                }
            },
        )
}

fn results() -> impl Strategy<Value = SideResults> {
    (
        prop::array::uniform7(any::<u64>()),
        (any::<u32>(), any::<u32>()),
        prop::option::of((0.0f64..100.0, any::<u32>()).prop_map(|(u, n)| CpuStats {
            util: u,
            user: u / 2.0,
            system: u / 2.0,
            num_cpus: n,
            method: 'S',
            ..Default::default()
        })),
        prop::option::of(
            (any::<u64>(), any::<u32>(), "[a-z]{0,12}").prop_map(|(r, m, cc)| TcpStats {
                retransmits: r,
                mss: m,
                cong_control: cc,
                ..Default::default()
            }),
        ),
        prop::option::of(
            prop::array::uniform6(any::<u64>()).prop_map(|a| UdpRecvStats {
                received: a[0],
                out_of_order: a[1],
                duplicates: a[2],
                foreign: a[3],
                rcvbuf_drops: a[4],
                drops_source: DropSource::Socket,
                jitter_ns: a[5],
            }),
        ),
        prop::collection::vec(
            prop::array::uniform5(any::<u64>()).prop_map(|a| FlowCounters {
                bytes_sent: a[0],
                bytes_received: a[1],
                send_calls: a[2],
                recv_calls: a[3],
                transactions: a[4],
            }),
            0..4,
        ),
    )
        .prop_map(|(c, (sb, rb), cpu, tcp, udp, flows)| SideResults {
            elapsed_ns: c[0],
            bytes_sent: c[1],
            bytes_received: c[2],
            send_calls: c[3],
            recv_calls: c[4],
            transactions: c[5],
            send_errors: c[6],
            send_buf_end: sb,
            recv_buf_end: rb,
            cpu,
            tcp,
            udp,
            flow_count: flows.len() as u32,
            spread: (flows.len() > 1).then(|| proto::test::FlowSpread {
                min_bytes: c[1],
                max_bytes: c[2],
                min_transactions: c[3],
                max_transactions: c[4],
            }),
            flows,
            totals: Vec::new(),
            foreign_connections: Default::default(),
            rx: Default::default(),
            tx: Default::default(),
            ecn: None,
            own_cpu: None,
        })
}

fn client_msg() -> impl Strategy<Value = ClientMsg> {
    prop_oneof![
        (".{0,40}", any::<u32>()).prop_map(|(s, v)| {
            let mut h = Hello::new(s);
            h.protocol = v;
            ClientMsg::Hello(h)
        }),
        (any::<[u8; 32]>(), any::<[u8; 32]>())
            .prop_map(|(nonce, proof)| ClientMsg::Auth { nonce, proof }),
        spec().prop_map(|s| ClientMsg::Setup(Box::new(s))),
        (spec(), any::<u32>(), any::<u32>()).prop_map(|(s, warmup_ms, cooldown_ms)| {
            ClientMsg::SetupWindowed(
                Box::new(s),
                proto::Window {
                    warmup_ms,
                    cooldown_ms,
                },
            )
        }),
        (spec(), any::<u32>(), any::<u32>(), any::<bool>()).prop_map(
            |(s, batch, segments, windowed)| {
                ClientMsg::SetupTuned(
                    Box::new(s),
                    proto::Tuning {
                        window: windowed.then_some(proto::Window {
                            warmup_ms: batch,
                            cooldown_ms: segments,
                        }),
                        udp_fast: proto::UdpFast { batch, segments },
                    },
                )
            }
        ),
        (spec(), 0u8..3, any::<bool>()).prop_map(|(s, rx, uring)| {
            let rx = match rx {
                0 => proto::RxPath::Copy,
                1 => proto::RxPath::Discard,
                _ => proto::RxPath::ZeroCopy,
            };
            ClientMsg::SetupPaths(
                Box::new(s),
                proto::Tuning::default(),
                proto::Paths { rx, uring },
            )
        }),
        (spec(), any::<bool>(), any::<bool>(), any::<u32>()).prop_map(|(s, one, count, ms)| {
            ClientMsg::SetupEcn(
                Box::new(s),
                proto::Tuning::default(),
                proto::Paths::default(),
                proto::ecn::EcnAsk {
                    mark: if one {
                        proto::ecn::Codepoint::Ect1
                    } else {
                        proto::ecn::Codepoint::Ect0
                    },
                    count,
                    interval_ms: ms,
                },
            )
        }),
        any::<u64>().prop_map(|n| ClientMsg::Done(ClientDone { datagrams_sent: n })),
        Just(ClientMsg::Bye),
    ]
}

fn server_msg() -> impl Strategy<Value = ServerMsg> {
    let codes = vec![
        ErrorCode::Version,
        ErrorCode::Protocol,
        ErrorCode::InvalidRequest,
        ErrorCode::Busy,
        ErrorCode::Auth,
        ErrorCode::Unsupported,
        ErrorCode::Resource,
        ErrorCode::Timeout,
        ErrorCode::ShuttingDown,
        ErrorCode::TestFailed,
    ];
    prop_oneof![
        (".{0,40}", any::<Option<[u8; 32]>>()).prop_map(|(s, challenge)| ServerMsg::Hello(
            ServerHello {
                hello: Hello::new(s),
                challenge,
                num_cpus: 2,
                cpu_rate: 100,
            }
        )),
        any::<[u8; 32]>().prop_map(|proof| ServerMsg::AuthOk { proof }),
        (
            any::<u16>(),
            any::<[u8; 32]>(),
            prop::array::uniform4(any::<u32>()),
            any::<bool>()
        )
            .prop_map(|(port, t, s, cpu)| ServerMsg::Ready(Grant {
                data_port: port,
                token: Token(t),
                send_buf: s[0],
                recv_buf: s[1],
                send_size: s[2],
                recv_size: s[3],
                send_width: 2,
                recv_width: 1,
                measure_cpu: cpu,
                num_cpus: 4,
            })),
        results().prop_map(|r| ServerMsg::Results(Box::new(r))),
        any::<u64>()
            .prop_map(|mapped_bytes| ServerMsg::Received(proto::RxFigures { mapped_bytes })),
        (
            prop::collection::vec(any::<[u64; 4]>(), 0..8),
            any::<u32>(),
            any::<Option<u8>>()
        )
            .prop_map(|(c, ms, sysctl)| {
                let counts = |v: &[u64; 4]| proto::ecn::EcnCounts {
                    not_ect: v[0],
                    ect0: v[1],
                    ect1: v[2],
                    ce: v[3],
                };
                ServerMsg::Ecn(Box::new(proto::ecn::EcnReport {
                    received: c.first().map(counts),
                    series: Some(proto::ecn::EcnSeries {
                        interval_ms: ms,
                        intervals: c.iter().map(counts).collect(),
                    }),
                    tcp: Some(proto::ecn::TcpEcn {
                        connections: ms,
                        negotiated: ms / 2,
                        delivered: c.len() as u64,
                        delivered_ce: 0,
                        sysctl,
                    }),
                }))
            }),
        (any::<u64>(), any::<u64>()).prop_map(|(closed, measured)| ServerMsg::Foreign(
            proto::ForeignConnections { closed, measured }
        )),
        (any::<u32>(), prop::collection::vec(any::<[u64; 5]>(), 0..8)).prop_map(|(first, c)| {
            ServerMsg::FlowTotals {
                first,
                counters: c
                    .into_iter()
                    .map(|v| proto::FlowCounters {
                        bytes_sent: v[0],
                        bytes_received: v[1],
                        send_calls: v[2],
                        recv_calls: v[3],
                        transactions: v[4],
                    })
                    .collect(),
            }
        }),
        (prop::sample::select(codes), ".{0,80}")
            .prop_map(|(code, m)| ServerMsg::Error(ErrorMsg::new(code, m))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn client_messages_round_trip(msg in client_msg()) {
        let bytes = msg.encode().unwrap();
        let (back, used) = take_frame(&bytes, ClientMsg::decode).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn server_messages_round_trip(msg in server_msg()) {
        let bytes = msg.encode().unwrap();
        let (back, used) = take_frame(&bytes, ServerMsg::decode).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn truncated_frames_are_incomplete(msg in client_msg(), cut in any::<prop::sample::Index>()) {
        let bytes = msg.encode().unwrap();
        let cut = cut.index(bytes.len());
        prop_assert_eq!(take_frame(&bytes[..cut], ClientMsg::decode).unwrap(), None);
    }

    #[test]
    fn truncated_bodies_fail_cleanly(msg in server_msg(), cut in any::<prop::sample::Index>()) {
        // Re-frame a truncated body with a consistent header: decoding must
        // fail (or, rarely, produce some other valid message), never panic.
        let bytes = msg.encode().unwrap();
        let body = &bytes[frame::HEADER_LEN..];
        let cut = cut.index(body.len());
        let _ = ServerMsg::decode(&body[..cut]);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = take_frame(&bytes, ClientMsg::decode);
        let _ = take_frame(&bytes, ServerMsg::decode);
        let _ = ClientMsg::decode(&bytes);
        let _ = ServerMsg::decode(&bytes);
    }

    #[test]
    fn random_specs_validate_without_panic(s in spec()) {
        let _ = s.validate(&proto::Limits::default());
        let _ = s.server_memory();
    }

    #[test]
    fn oversized_lengths_fail_before_the_body(len in (frame::MAX_FRAME as u32 + 1)..=u32::MAX) {
        let header = len.to_be_bytes();
        let is_too_large = matches!(
            take_frame(&header, ClientMsg::decode),
            Err(proto::ProtoError::FrameTooLarge { .. })
        );
        prop_assert!(is_too_large);
    }
}

#[test]
fn a_newer_hello_with_extra_fields_is_still_understood() {
    let mut h = Hello::new("future netperf");
    h.protocol = 7;
    let mut bytes = ClientMsg::Hello(h).encode().unwrap();
    bytes.extend_from_slice(&[1, 2, 3, 4]);
    let n = (bytes.len() - frame::HEADER_LEN) as u32;
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    let (msg, _) = take_frame(&bytes, ClientMsg::decode).unwrap().unwrap();
    let ClientMsg::Hello(h) = msg else { panic!() };
    let err = h.check().unwrap_err();
    assert!(err.to_string().contains("version 7"), "{err}");
}
