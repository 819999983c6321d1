//! Any bytes: the frame decoder returns a message, "incomplete" or an
//! error, and never panics or allocates past the cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::{ClientMsg, ServerMsg, frame, message::take_frame};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    // Decode frame after frame, as a connection's buffer would.
    while let Ok(Some((_, used))) = take_frame(rest, ClientMsg::decode) {
        rest = &rest[used..];
    }
    let _ = take_frame(data, ServerMsg::decode);
    let _ = ClientMsg::decode(data);
    let _ = ServerMsg::decode(data);
    if let Ok(Some((body, used))) = frame::split(data) {
        assert!(body.len() <= frame::MAX_FRAME && used <= data.len());
    }
});
