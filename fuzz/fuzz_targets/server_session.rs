//! The daemon's control session as it is: `proto::conn::ServerConn`, every
//! dialect (ours and netperf 2.7's, chosen by the first bytes; iperf3's,
//! by the port), fed bytes
//! split at points the input chooses, with the clock advanced, tests
//! granted or refused, ended well or badly, output taken in parts and the
//! peer gone, all as the input says. Nothing may panic; every request
//! granted passed validation, and its estimates (buffers, descriptors,
//! socket memory) hold; a client's summary is checked without panicking;
//! and what goes out stays bounded.
//!
//! The input: a byte of settings (a key; netperf 2.7 served or refused;
//! its passphrase; the control family; iperf3's port), then operations,
//! each a byte and what it takes.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;

#[path = "common/estimate.rs"]
mod estimate;
use proto::{
    Authenticator, ErrorCode, ErrorMsg, Family, Grant, InterimReport, Limits, SideResults, Token,
    conn::{Netperf2Policy, ServerConn, ServerEvent, Timeouts},
};

/// What a session may have queued to send at once: results with their
/// per-flow frames, interim reports, an error.
const MAX_OUTPUT: usize = 8 << 20;

fn grant() -> Grant {
    Grant {
        data_port: 2,
        token: Token([3; 32]),
        send_buf: 87_380,
        recv_buf: 131_072,
        send_size: 16_384,
        recv_size: 131_072,
        send_width: 1,
        recv_width: 1,
        measure_cpu: false,
        num_cpus: 2,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&settings, mut rest)) = data.split_first() else {
        return;
    };
    let limits = Limits::default();
    let t = Timeouts {
        first_bytes: Duration::from_secs(5),
        handshake: Duration::from_secs(10),
        idle: Duration::from_secs(60),
        test: Duration::from_secs(100),
        close_grace: Duration::from_secs(2),
    };
    let auth = (settings & 1 == 1).then(|| {
        Box::new(engine::auth::Key::from_passphrase("fuzzing key, long enough").unwrap())
            as Box<dyn Authenticator>
    });
    let policy = Netperf2Policy {
        serve: settings & 2 == 2,
        passphrase: (settings & 4 == 4).then(|| "pass".to_string()),
        control_family: if settings & 8 == 8 {
            Family::V6
        } else {
            Family::V4
        },
        ..Netperf2Policy::default()
    };
    let mut now = Instant::now();
    let mut s = ServerConn::new("fuzz", limits.clone(), auth, [7; 32], (2, 100), t, now)
        .with_netperf2(policy);
    // iperf3's port: its dialect from the first byte
    if settings & 16 == 16 {
        s = s.speaking(proto::dialect::Dialect::Iperf3);
    }
    let mut prepared = false;
    let mut in_test = false;
    while let Some((&op, more)) = rest.split_first() {
        rest = more;
        if s.is_closed(now) {
            break;
        }
        match op {
            // bytes from the client, in a piece of the input's choosing
            0..=127 => {
                let n = (usize::from(op) % 97 + 1).min(rest.len());
                let (piece, more) = rest.split_at(n);
                rest = more;
                s.handle_bytes(now, piece);
            }
            // time passes
            128..=159 => {
                now += Duration::from_millis(u64::from(op - 128) * 250);
                s.handle_timeout(now);
            }
            // the test's sockets set up, or not
            160..=175 if prepared => {
                prepared = false;
                if op & 1 == 0 {
                    s.granted(grant(), now);
                    in_test = true;
                } else {
                    s.prepare_failed(ErrorMsg::new(ErrorCode::Resource, "no"));
                }
            }
            // the test ends, well or badly
            176..=191 if in_test => {
                in_test = false;
                let outcome = if op & 1 == 0 {
                    Ok(SideResults {
                        elapsed_ns: u64::from(op) * 1_000_000,
                        bytes_received: u64::from(op),
                        ..SideResults::default()
                    })
                } else {
                    Err(ErrorMsg::new(ErrorCode::TestFailed, "x"))
                };
                s.test_ended(outcome, now);
            }
            192..=199 => s.interim(vec![InterimReport::default(); usize::from(op - 191)]),
            // part of what it sends is taken
            200..=231 => {
                let n = s.output().len() * usize::from(op - 199) / 32;
                s.consumed(n);
            }
            232 => s.peer_gone(now),
            233 => s.fail(ErrorMsg::new(ErrorCode::ShuttingDown, "bye"), now),
            // the listener handed the test its streams; the turn queue
            234 => s.streams_ready(now),
            235 => s.queued(2, 60, now),
            _ => {}
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                ServerEvent::Prepare(spec) => {
                    assert!(!prepared, "a second request before the first was answered");
                    assert!(spec.validate(&limits).is_ok());
                    estimate::check(&spec);
                    prepared = true;
                }
                ServerEvent::Summary(summary) => {
                    if let Ok(v) = summary.validated(&limits) {
                        assert!(v.local.flows.is_empty());
                    }
                }
                ServerEvent::AbortTest => in_test = false,
                _ => {}
            }
        }
        assert!(
            s.output().len() <= MAX_OUTPUT,
            "{} bytes out",
            s.output().len()
        );
    }
});
