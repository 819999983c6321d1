//! netperf 2.7's protocol, from any bytes: the server's core (its sniff,
//! passphrase, requests, validation, responses and results) and the
//! client's decoders never panic; whatever the core grants passed
//! validation, and its memory estimate counts what it would allocate
//! (the placement fields, alignment and offset, included).
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;

#[path = "common/estimate.rs"]
mod estimate;
use proto::{
    Family, Grant, Limits, SideResults, Token,
    conn::{Netperf2Policy, ServerConn, ServerEvent, Timeouts},
    netperf2::{self, FRAME_LEN, Frame, Request},
};

fuzz_target!(|data: &[u8]| {
    // the decoders, on every 656-byte window
    for chunk in data.chunks(FRAME_LEN) {
        let mut b = [0u8; FRAME_LEN];
        b[..chunk.len()].copy_from_slice(chunk);
        let f = Frame(b);
        let _ = netperf2::grant_of(&f);
        let _ = netperf2::side_results_of(&f, chunk.first().is_some_and(|c| c & 1 == 1));
        let _ = netperf2::cpu_calibrate_of(&f);
        let served = match Request::decode(&f) {
            Request::Omni(r) => netperf2::serve_omni(&r, Family::V4).ok(),
            Request::Classic(r) => netperf2::serve_classic(&r, Family::V6).ok(),
            _ => None,
        };
        if let Some(s) = served {
            let g = Grant {
                data_port: 1,
                token: Token([0; 32]),
                send_buf: 1,
                recv_buf: 1,
                send_size: 1,
                recv_size: 1,
                send_width: 1,
                recv_width: 1,
                measure_cpu: s.spec.measure_cpu,
                num_cpus: 2,
            };
            let _ = netperf2::response(&s, &g);
            let _ = netperf2::results(&s, &SideResults::default(), true);
        }
    }
    // the server's core, fed the bytes as a netperf 2.7 client (a DO_OMNI
    // header first, so that the sniff takes it as one)
    let now = Instant::now();
    let t = Timeouts {
        first_bytes: Duration::from_secs(5),
        handshake: Duration::from_secs(10),
        idle: Duration::from_secs(60),
        test: Duration::from_secs(100),
        close_grace: Duration::from_secs(1),
    };
    let policy = Netperf2Policy {
        serve: true,
        passphrase: data
            .first()
            .filter(|c| **c & 2 == 2)
            .map(|_| "pass".to_string()),
        control_family: Family::V4,
        ..Netperf2Policy::default()
    };
    let mut s = ServerConn::new("fuzz", Limits::default(), None, [0; 32], (2, 100), t, now)
        .with_netperf2(policy);
    s.handle_bytes(now, &[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff]);
    for chunk in data.chunks(97) {
        s.handle_bytes(now, chunk);
        while let Some(ev) = s.poll_event() {
            if let ServerEvent::Prepare(spec) = ev {
                assert!(spec.validate(&Limits::default()).is_ok());
                estimate::check(&spec);
                s.granted(
                    Grant {
                        data_port: 2,
                        token: Token([0; 32]),
                        send_buf: 0,
                        recv_buf: 0,
                        send_size: 0,
                        recv_size: 0,
                        send_width: 0,
                        recv_width: 0,
                        measure_cpu: false,
                        num_cpus: 1,
                    },
                    now,
                );
                s.handle_timeout(now + Duration::from_secs(20));
                s.test_ended(Ok(SideResults::default()), now);
            }
        }
        let n = s.output().len();
        assert_eq!(n % FRAME_LEN, 0, "only whole netperf 2.7 frames go out");
        s.consumed(n);
    }
});
