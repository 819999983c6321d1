//! Writes the seed corpus: real encoded frames and conversations.
//! `cargo run --manifest-path fuzz/Cargo.toml --bin make_seeds`

use std::{fs, path::Path};

use proto::netperf2::omni;
use proto::{
    ClientDone, ClientMsg, ErrorCode, ErrorMsg, Family, Grant, Hello, ServerHello, ServerMsg,
    SideResults, TestEnd, TestKind, TestSpec, Token,
};

fn frames(msgs: &[ClientMsg]) -> Vec<u8> {
    msgs.iter()
        .flat_map(|m| m.encode().expect("encode"))
        .collect()
}

/// The server_session target's input for a conversation: its settings
/// byte, then the bytes in pieces of 40, each followed by what the
/// daemon does between them (grant a request, end a test, take what goes
/// out, let a second pass).
fn script(settings: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![settings];
    for piece in bytes.chunks(40) {
        out.push(piece.len() as u8 - 1);
        out.extend_from_slice(piece);
        out.extend_from_slice(&[160, 176, 231, 132]);
    }
    out
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join(name), bytes).expect("write");
    };
    let hello = ClientMsg::Hello(Hello::new("seed"));
    let mut conversations = Vec::new();
    for (i, kind) in TestKind::ALL.into_iter().enumerate() {
        let mut spec = TestSpec::new(kind, if i % 2 == 0 { Family::V4 } else { Family::V6 });
        spec.end = match kind {
            TestKind::UdpStream => TestEnd::Bytes(100_000),
            k if k.is_rr() => TestEnd::Transactions(100),
            _ => TestEnd::Time { millis: 1000 },
        };
        let msgs = vec![
            hello.clone(),
            ClientMsg::Setup(Box::new(spec)),
            ClientMsg::Done(ClientDone { datagrams_sent: 2 }),
            ClientMsg::Bye,
        ];
        conversations.push((format!("conversation-{}", kind.name()), frames(&msgs)));
    }
    // buffers placed at the largest alignment and offset, the widest ring
    for kind in [
        TestKind::TcpMaerts,
        TestKind::TcpStream,
        TestKind::UdpStream,
    ] {
        let mut spec = TestSpec::new(kind, Family::V4);
        spec.server.send_size = Some(1);
        spec.server.recv_size = Some(1);
        spec.server.send_width = Some(65_536);
        spec.server.recv_width = Some(65_536);
        spec.server.send_align = proto::test::MAX_PLACEMENT;
        spec.server.recv_align = proto::test::MAX_PLACEMENT;
        spec.server.send_offset = proto::test::MAX_PLACEMENT - 1;
        spec.server.recv_offset = proto::test::MAX_PLACEMENT - 1;
        let msgs = vec![
            hello.clone(),
            ClientMsg::Setup(Box::new(spec)),
            ClientMsg::Bye,
        ];
        conversations.push((format!("placed-{}", kind.name()), frames(&msgs)));
    }
    // netperf 2.7's requests of the same
    for (name, direction) in [("placed-maerts", omni::XMIT), ("placed-stream", omni::RECV)] {
        let r = omni::OmniRequest {
            send_size: 1,
            receive_size: 1,
            send_width: 65_536,
            recv_width: 65_536,
            send_alignment: proto::test::MAX_PLACEMENT,
            recv_alignment: proto::test::MAX_PLACEMENT,
            send_offset: proto::test::MAX_PLACEMENT - 1,
            recv_offset: proto::test::MAX_PLACEMENT - 1,
            direction,
            ..Default::default()
        };
        write("netperf2_decode", name, r.encode().as_bytes());
    }
    for (name, bytes) in &conversations {
        write("server_session", name, &script(2, bytes));
        write("frame_decode", name, bytes);
    }
    // every test request's body alone, for the estimates
    for (i, kind) in TestKind::ALL.into_iter().enumerate() {
        let mut spec = TestSpec::new(kind, Family::V4);
        spec.flows = [1, 4, 1000][i % 3];
        let m = ClientMsg::Setup(Box::new(spec)).encode().expect("encode");
        write(
            "estimate",
            &format!("setup-{}", kind.name()),
            &m[proto::frame::HEADER_LEN..],
        );
    }
    let server = [
        ServerMsg::Hello(ServerHello {
            hello: Hello::new("s"),
            challenge: Some([9; 32]),
            num_cpus: 2,
            cpu_rate: 100,
        }),
        ServerMsg::Ready(Grant {
            data_port: 5000,
            token: Token([1; 32]),
            send_buf: 16384,
            recv_buf: 131072,
            send_size: 16384,
            recv_size: 131072,
            send_width: 2,
            recv_width: 1,
            measure_cpu: true,
            num_cpus: 2,
        }),
        ServerMsg::Results(Box::default()),
        ServerMsg::Results(Box::new(SideResults {
            bytes_received: 1 << 40,
            ..SideResults::default()
        })),
        ServerMsg::Error(ErrorMsg::new(ErrorCode::Busy, "busy")),
    ];
    for (i, m) in server.iter().enumerate() {
        write(
            "frame_decode",
            &format!("server-{i}"),
            &m.encode().expect("encode"),
        );
    }
    write(
        "frame_decode",
        "oversized",
        &[0xff, 0xff, 0xff, 0xff, 1, 2, 3],
    );
    write("frame_decode", "empty-frame", &[0, 0, 0, 0]);
    // netperf 2.7's requests, to a session that serves them, and one
    // that asks its passphrase first
    let omni = omni::OmniRequest {
        direction: omni::XMIT,
        ..Default::default()
    };
    write(
        "server_session",
        "netperf2-omni",
        &script(2, omni.encode().as_bytes()),
    );
    write(
        "server_session",
        "netperf2-omni-passphrase",
        &script(2 | 4, omni.encode().as_bytes()),
    );
    write(
        "server_session",
        "auth-out-of-order",
        &script(
            1,
            &frames(&[ClientMsg::Auth {
                nonce: [1; 32],
                proof: [2; 32],
            }]),
        ),
    );
    let mut a = vec![0u8; 64];
    a[..32].copy_from_slice(&[4; 32]);
    write("auth_handshake", "nonce-and-proof", &a);
    write("auth_handshake", "short", b"not a proof");
    // iperf3's port: a 3.12 client's cookie and parameters, TCP and UDP
    for (name, params) in [
        ("tcp", &br#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#[..]),
        ("udp", &br#"{"udp":true,"omit":0,"time":3,"parallel":1,"bidirectional":true,"len":1000,"bandwidth":1048576,"udp_counters_64bit":1,"client_version":"3.21"}"#[..]),
    ] {
        let mut conversation = b"abcdefghijklmnopqrstuvwxyz234567abcd\0".to_vec();
        conversation.extend(proto::iperf3::framed(params));
        conversation.push(4);
        conversation.extend(proto::iperf3::framed(br#"{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":100,"retransmits":0,"jitter":0,"errors":0,"packets":100,"start_time":0,"end_time":1}]}"#));
        conversation.push(16);
        let mut script = vec![16u8 | 2];
        for piece in conversation.chunks(40) {
            script.push(piece.len() as u8 - 1);
            script.extend_from_slice(piece);
            script.extend_from_slice(&[160, 234, 176, 231, 132]);
        }
        write("server_session", &format!("iperf3-{name}"), &script);
        write("iperf3_control", &format!("params-{name}"), &proto::iperf3::framed(params));
        write("iperf3_control", &format!("json-{name}"), params);
    }
    println!("seed corpus written to {}", dir.display());
}
