//! Test requests as a client sends them (our Setup frames), decoded and
//! validated, then every estimate the server admits them by: the buffers
//! it will allocate (checked against what it allocates), the descriptors
//! it can hold and its sockets' share of the kernel's memory. A request
//! that passes validation never makes an estimate panic or fall short.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common/estimate.rs"]
mod estimate;
use proto::{ClientMsg, Limits};

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = ClientMsg::decode(data) else {
        return;
    };
    let spec = match msg {
        ClientMsg::Setup(s) => *s,
        ClientMsg::SetupWindowed(mut s, w) => {
            s.window = Some(w);
            *s
        }
        ClientMsg::SetupTuned(mut s, t) => {
            s.window = t.window;
            s.udp_fast = t.udp_fast;
            *s
        }
        ClientMsg::SetupPaths(mut s, t, p) => {
            s.window = t.window;
            s.udp_fast = t.udp_fast;
            s.paths = p;
            *s
        }
        _ => return,
    };
    if spec.validate(&Limits::default()).is_ok() {
        estimate::check(&spec);
    } else {
        // what a refused request asks is still counted without a panic
        estimate::socket_memory(&spec);
    }
});
