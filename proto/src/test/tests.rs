use super::*;

#[test]
fn flows_add_up_and_a_single_flow_needs_no_list() {
    let a = FlowCounters {
        bytes_sent: 10,
        send_calls: 2,
        ..FlowCounters::default()
    };
    let mut r = SideResults::default();
    r.add_flow(&a, 5);
    r.close_flows();
    assert_eq!((r.bytes_sent, r.flow_count, r.flows.len()), (10, 1, 0));
    let mut r = SideResults::default();
    r.add_flow(&a, 5);
    r.add_flow(&a, 7);
    r.close_flows();
    assert_eq!((r.bytes_sent, r.send_calls, r.elapsed_ns), (20, 4, 7));
    assert_eq!((r.flow_count, r.flows.len()), (2, 2));
    let mut r = SideResults::default();
    r.add_flow(&a, 1);
    r.add_flow(
        &FlowCounters {
            bytes_received: 3,
            transactions: 2,
            ..a
        },
        1,
    );
    r.close_flows();
    let s = r.spread.unwrap();
    assert_eq!((s.min_bytes, s.max_bytes), (10, 13));
    assert_eq!((s.min_transactions, s.max_transactions), (0, 2));
    assert_eq!(SideResults::of_flow(&a, 3).totals(), a);
}

#[test]
fn names_round_trip_case_insensitively() {
    for k in TestKind::ALL {
        assert_eq!(TestKind::from_name(k.name()), Some(k));
        assert_eq!(TestKind::from_name(&k.name().to_lowercase()), Some(k));
    }
    assert_eq!(TestKind::from_name("TCP_STREAMX"), None);
}

#[test]
fn default_spec_is_valid() {
    for k in TestKind::ALL {
        TestSpec::new(k, Family::V4)
            .validate(&Limits::default())
            .unwrap();
    }
}

#[test]
fn probes_are_one_flow_of_their_own_size() {
    let limits = Limits::default();
    let mut s = TestSpec::new(TestKind::UdpStamp, Family::V4);
    s.request_size = crate::stamp::LEN as u32;
    s.response_size = crate::stamp::LEN as u32;
    s.validate(&limits).unwrap();
    let refused = |f: &dyn Fn(&mut TestSpec)| {
        let mut t = s.clone();
        f(&mut t);
        t.validate(&limits).unwrap_err().to_string()
    };
    assert!(refused(&|t| t.flows = 2).contains("one flow"));
    assert!(refused(&|t| t.response_size = 9000).contains("32 bytes"));
    assert!(refused(&|t| t.burst = 1).contains("burst"));
    assert_eq!(TestKind::UdpStamp.protocol(), Protocol::Udp);
    assert_eq!(
        TestKind::from_name("UDP_STAMP"),
        None,
        "not a test a user names"
    );
}

#[test]
fn zero_and_oversized_messages_are_refused() {
    let limits = Limits::default();
    let mut s = TestSpec::new(TestKind::UdpStream, Family::V4);
    s.server.recv_size = Some(0);
    let e = s.validate(&limits).unwrap_err();
    assert!(e.field.starts_with("-M"), "{e}");
    s.server.recv_size = Some(65_508);
    assert!(s.validate(&limits).unwrap_err().problem.contains("65507"));
    s.family = Family::V6;
    s.validate(&limits).unwrap();

    let mut r = TestSpec::new(TestKind::TcpRr, Family::V4);
    r.response_size = 0;
    assert!(r.validate(&limits).unwrap_err().field.starts_with("-r"));
}

#[test]
fn udp_rr_burst_must_fit_its_tags() {
    let limits = Limits::default();
    let mut s = TestSpec::new(TestKind::UdpRr, Family::V4);
    s.request_size = 1;
    s.response_size = 1;
    s.burst = 255;
    s.validate(&limits).unwrap();
    s.burst = 256;
    let e = s.validate(&limits).unwrap_err();
    assert!(e.field.starts_with("-b"), "{e}");
    assert!(e.problem.contains("at most 256"), "{e}");
    s.request_size = 2;
    s.response_size = 64;
    s.validate(&limits).unwrap();
    s.kind = TestKind::TcpStream;
    s.burst = 1;
    assert!(s.validate(&limits).unwrap_err().field.starts_with("-b"));
}

#[test]
fn memory_cap_is_enforced() {
    let limits = Limits::default();
    // a receive buffer per UDP flow: 2,000 x 64 KiB can never fit
    let mut s = TestSpec::new(TestKind::UdpStream, Family::V4);
    s.server.recv_size = Some(65_507);
    s.flows = 2_000;
    assert_eq!(s.validate(&limits).unwrap_err().field, "buffers");
    // on event loops, what it needs depends on the server's CPUs: the
    // server counts them before it allocates
    let mut s = TestSpec::new(TestKind::TcpRr, Family::V4);
    s.request_size = 16 * 1024 * 1024;
    s.response_size = 16 * 1024 * 1024;
    s.flows = 3;
    s.validate(&limits).unwrap();
    let none = Ring::new(0, 0);
    let one_cpu = s.buffer_memory(none, none, 1);
    assert!(one_cpu < limits.memory_per_session);
    assert_eq!(
        s.buffer_memory(none, none, 3),
        3 * (one_cpu - 3 * FLOW_STATE_BYTES) + 3 * FLOW_STATE_BYTES
    );
    assert!(s.buffer_memory(none, none, 3) > limits.memory_per_session);
}

/// What the server resolves is what is counted: sizes it chose, the
/// placement of every buffer, a buffer per UDP flow.
#[test]
fn the_estimate_counts_what_is_allocated() {
    let mut s = TestSpec::new(TestKind::TcpMaerts, Family::V4);
    // 1-byte messages at the largest alignment and offset: a ring of
    // one buffer, 6 MiB with its placement, not 65,536 x 4 MiB
    let r = Ring::placed(1, 65_536, MAX_PLACEMENT, MAX_PLACEMENT - 1);
    assert_eq!(r.capped_width(), 1);
    assert_eq!(s.buffer_memory(r, r, 2), r.bytes());
    assert_eq!(r.bytes(), u64::from(2 * MAX_PLACEMENT - 2 + MAX_PLACEMENT));
    // an 8 MiB size the server took from its socket buffer
    s.kind = TestKind::TcpStream;
    let r = Ring::new(8 << 20, 2);
    assert_eq!(r.capped_width(), 1);
    assert!(s.buffer_memory(r, r, 2) >= 8 << 20);
    // a UDP receiver's buffer is a datagram's at most, per flow
    s.kind = TestKind::UdpStream;
    s.flows = 100;
    let r = Ring::new(8 << 20, 1);
    assert_eq!(
        s.buffer_memory(r, r, 2),
        100 * (u64::from(UDP_SLOT) + FLOW_STATE_BYTES)
    );
}

#[test]
fn a_window_needs_a_timed_test_within_the_limit() {
    let limits = Limits::default();
    let mut s = TestSpec::new(TestKind::TcpStream, Family::V4);
    s.window = Some(Window {
        warmup_ms: 2000,
        cooldown_ms: 1000,
    });
    s.validate(&limits).unwrap();
    assert_eq!(
        s.window.unwrap().total(std::time::Duration::from_secs(10)),
        std::time::Duration::from_secs(13)
    );
    s.end = TestEnd::Bytes(1000);
    assert_eq!(
        s.validate(&limits).unwrap_err().field,
        "--warmup/--cooldown"
    );
    s.end = TestEnd::Time { millis: 86_399_000 };
    assert!(
        s.validate(&limits)
            .unwrap_err()
            .problem
            .contains("warmup and cooldown")
    );
}

#[test]
fn length_units_must_fit_the_test() {
    let limits = Limits::default();
    let mut s = TestSpec::new(TestKind::TcpRr, Family::V4);
    s.end = TestEnd::Bytes(10);
    assert!(s.validate(&limits).is_err());
    s.end = TestEnd::Transactions(10);
    s.validate(&limits).unwrap();
    // a day-long soak runs by default; a day and a second does not
    s.end = TestEnd::Time { millis: 86_400_000 };
    s.validate(&limits).unwrap();
    s.end = TestEnd::Time { millis: 86_401_000 };
    assert!(s.validate(&limits).unwrap_err().problem.contains("86400 s"));
}

#[test]
fn socket_memory_fits_a_share_or_names_what_it_needs() {
    let k = KernelBuffers {
        wmem_max: 4 << 20,
        rmem_max: 4 << 20,
        tcp_wmem_max: 4 << 20,
        ..KernelBuffers::default()
    };
    let mut s = TestSpec::new(TestKind::TcpMaerts, Family::V4);
    // one flow, autotuning: a 4 MiB send queue, a receive buffer
    // as it starts
    let m = s.socket_memory(&k, 300_000_000).unwrap();
    assert_eq!((m.bytes, m.send_buf), ((4 << 20) + 131_072, None));
    // 500 flows: the send buffer left to the server is set to fit
    s.flows = 500;
    let m = s.socket_memory(&k, 300_000_000).unwrap();
    assert_eq!(m.send_buf, Some((600_000 - 131_072) / 2));
    assert!(m.bytes <= 300_000_000, "{}", m.bytes);
    // -S 256M: the kernel gives 8 MiB a flow (4 MiB doubled); 500 do
    // not fit, and the figure says what they would hold
    s.server.send_buf = Some(256 << 20);
    let need = s.socket_memory(&k, 300_000_000).unwrap_err();
    assert!(need >= 500 * (8 << 20), "{need}");
    // a flow count no buffer can fit
    s.server.send_buf = None;
    s.flows = 16_384;
    assert!(s.socket_memory(&k, 100_000_000).is_err());
}
