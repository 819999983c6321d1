//! A sequence of frames from a client, as the daemon would feed them to its
//! session state machine, with the test ending at arbitrary points: no
//! sequence may panic, a closed session stays closed, and what a granted
//! request would allocate is what its memory estimate counts.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod estimate;
use proto::{
    ClientMsg, ErrorCode, ErrorMsg, Grant, Limits, ServerAction, ServerSession, SideResults, Token,
    message::take_frame,
};

fuzz_target!(|data: &[u8]| {
    let mut s = ServerSession::new("fuzz", Limits::default(), None, [7; 32]);
    let mut rest = data;
    let mut closed = false;
    let mut step = 0u8;
    loop {
        let msg = match take_frame(rest, ClientMsg::decode) {
            Ok(Some((m, used))) => {
                rest = &rest[used..];
                m
            }
            Ok(None) => break,
            Err(e) => {
                let _ = s.protocol_error(&e);
                break;
            }
        };
        if closed {
            break;
        }
        step = step.wrapping_add(1);
        match s.handle(msg) {
            ServerAction::Prepare(spec) => {
                // validated: within the limits, and counted as allocated
                assert!(spec.validate(&Limits::default()).is_ok());
                estimate::check(&spec);
                if step % 3 == 0 {
                    let _ = s.prepare_failed(ErrorMsg::new(ErrorCode::Resource, "no"));
                } else {
                    let _ = s.granted(Grant {
                        data_port: 1,
                        token: Token([0; 32]),
                        send_buf: 0,
                        recv_buf: 0,
                        send_size: 0,
                        recv_size: 0,
                        send_width: 1,
                        recv_width: 1,
                        measure_cpu: false,
                        num_cpus: 1,
                    });
                }
            }
            ServerAction::ReplyAndClose(_) | ServerAction::Close => closed = true,
            _ => {}
        }
        if s.in_test() && step % 2 == 1 {
            let outcome = if step % 5 == 0 {
                Err(ErrorMsg::new(ErrorCode::TestFailed, "x"))
            } else {
                Ok(SideResults::default())
            };
            if let Some(ServerAction::ReplyAndClose(_)) = s.test_ended(outcome) {
                closed = true;
            }
        }
    }
});
