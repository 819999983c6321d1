//! iperf3's control messages from any bytes: a length-prefixed message
//! (bounded before its body), the parameters' JSON and the test they ask,
//! a client's results read leniently. Nothing panics; a test the
//! parameters give passes the netserver's validation or is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::{
    Family, Limits,
    iperf3::{self, Params},
};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((json, used))) = iperf3::take_json(data, iperf3::MAX_PARAMS_JSON) {
        assert!(json.len() <= iperf3::MAX_PARAMS_JSON && used == json.len() + 4);
    }
    if let Ok(p) = Params::decode(data) {
        for family in [Family::V4, Family::V6] {
            if let Ok(t) = p.test(family) {
                assert!(t.streams >= 1 && t.streams <= 256);
                let _ = t.spec.validate(&Limits::default());
            }
        }
    }
    let _ = iperf3::client_streams(data);
    let _ = iperf3::Results::decode(data);
});
