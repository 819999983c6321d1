//! iperf3's control protocol, as its clients (3.x) speak it: what a
//! session's bytes are, what its parameters ask, what its results say.
//! Sans-IO: the speaker in [`crate::conn`] drives it.
//!
//! A client connects to the server's port and sends a 37-byte cookie (36
//! base32 characters and a NUL). The server then leads with state bytes
//! (one signed byte each): PARAM_EXCHANGE, and the client sends its
//! parameters as a 4-byte big-endian length and that much JSON;
//! CREATE_STREAMS, and each stream connects to the same port and presents
//! the cookie (TCP), or sends a 4-byte hello datagram that the server
//! answers (UDP); TEST_START and TEST_RUNNING. The client says TEST_END;
//! the server says EXCHANGE_RESULTS and each side sends its results as
//! length-prefixed JSON, the client first; DISPLAY_RESULTS; the client says
//! IPERF_DONE. A server that will not serve says ACCESS_DENIED, or
//! SERVER_ERROR followed by an iperf3 error number and an errno (4 bytes
//! each, big-endian).

//!
//! # Layout
//! - [`wire`]: the bytes both ends write and read (cookie, state bytes,
//!   error numbers, framing, the parameters' and results' JSON).
//! - [`serve`]: a server's reading of a client's parameters, as a
//!   [`crate::test::TestSpec`].
//! - [`client`]: a client's: the parameters of a test it asks, its own
//!   results, the server's as [`crate::test::SideResults`], the server's
//!   errors in words.

mod client;
mod serve;
mod wire;

pub use client::*;
pub use serve::*;
pub use wire::*;

/// What an iperf3 peer's test asks beyond our wire's `TestSpec`, held on
/// the test ([`crate::TestSpec::iperf3`]) and set by iperf3's speakers
/// alone: the server's (`serve`: a client's parameters) and the client's
/// (netperf --iperf3: one send size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// The server's receiving flows wake for more than a packet once fast
    /// (iperf3's clients: engine's `Reader::batching`).
    pub batch_wakes: bool,
    /// Data both ways at once (`--bidir`): as many flows again, the server
    /// sending on them (the kind's flows come first).
    pub bidir: bool,
    /// UDP datagrams carry 64-bit sequence numbers (`udp_counters_64bit`).
    pub udp_counters64: bool,
    /// A client that ends the test itself says how long it will run, in
    /// milliseconds (`-t` and `-O`), where the test's end cannot.
    pub client_ends_after_ms: Option<u64>,
    /// What the client sends a call (a UDP sender's datagrams), for a
    /// server whose parameters carry it: `len`, one size at both ends.
    pub client_send_size: Option<u32>,
}

/// Whether an iperf3 client may test: its parameters' `authtoken` (iperf3's
/// RSA-encrypted username, password and time, base64), or none. The
/// implementation (RSA, the users file) lives outside this crate, which has
/// no cryptography of its own. `Err` is the reason, for the server's log:
/// the client is told only iperf3's "test authorization failed".
pub trait Iperf3Auth: Send + Sync {
    fn check(&self, authtoken: Option<&str>) -> Result<(), String>;
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_udp_connect_is_answered_in_its_own_byte_order() {
        // a little-endian client writes "9876", a big-endian one "6789"
        assert_eq!(udp_connect_reply(b"9876"), Some(*b"6789"));
        assert_eq!(udp_connect_reply(b"6789"), Some(*b"9876"));
        assert_eq!(
            udp_connect_reply(&LEGACY_UDP_CONNECT_MSG.to_le_bytes()),
            Some(LEGACY_UDP_CONNECT_REPLY.to_le_bytes())
        );
        assert_eq!(udp_connect_reply(b"987"), None);
        assert_eq!(udp_connect_reply(b"abcd"), None);
        // a datagram of the test's (iperf3's header, a sequence number) is not one
        assert_eq!(udp_connect_reply(&[0, 0, 0, 1, 0, 0, 0, 0]), None);
    }
    use super::*;
    use crate::{
        message::ErrorCode,
        test::{Family, TestKind},
    };

    #[test]
    fn parameters_as_iperf3_3_12_sends_them() {
        let json = br#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":4,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
        let t = Params::decode(json).unwrap().test(Family::V4).unwrap();
        assert_eq!(t.spec.kind, TestKind::TcpMaerts);
        assert_eq!((t.spec.flows, t.streams, t.time), (4, 4, 10));
        assert_eq!(t.spec.server.send_size, Some(131_072));
        let json = br#"{"udp":true,"time":3,"parallel":1,"bidirectional":true,"len":1000,"bandwidth":10000000,"udp_counters_64bit":1,"window":262144}"#;
        let t = Params::decode(json).unwrap().test(Family::V6).unwrap();
        assert_eq!(t.spec.kind, TestKind::UdpStream);
        assert!(t.bidir && t.udp64);
        assert_eq!(t.streams, 2);
        assert_eq!(t.spec.rate_bps, Some(10_000_000));
        assert_eq!(t.spec.server.recv_buf, Some(262_144));
        // a token is the authorizer's business (iperf3 -s without
        // credentials ignores one): the test it asks is read as any other
        let rsa = br#"{"tcp":true,"authtoken":"xyz"}"#;
        let t = Params::decode(rsa).unwrap().test(Family::V4).unwrap();
        assert_eq!(t.spec.kind, TestKind::TcpStream);
        let e = Params::decode(br#"{"tcp":true,"sctp":true}"#)
            .unwrap()
            .test(Family::V4)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported, "{e:?}");
        // an upload's -b is the test's rate, as netperf's --rate (what a
        // policy's max_rate holds it to); without -b it is unpaced
        let up = br#"{"tcp":true,"parallel":2,"bandwidth":1000000}"#;
        let t = Params::decode(up).unwrap().test(Family::V4).unwrap();
        assert_eq!(
            (t.spec.kind, t.spec.rate_bps),
            (TestKind::TcpStream, Some(2_000_000))
        );
        let t = Params::decode(br#"{"tcp":true,"bandwidth":0}"#)
            .unwrap()
            .test(Family::V4)
            .unwrap();
        assert_eq!(t.spec.rate_bps, None);
        // 3.12's results write -1 as an unsigned 64-bit number
        let r = br#"{"cpu_util_total":1,"streams":[{"id":1,"bytes":10,"retransmits":18446744073709551615,"packets":763}]}"#;
        assert_eq!(client_streams(r), vec![(1, 763)]);
        assert!(client_streams(b"nonsense").is_empty());
        assert!(
            Params::decode(br#"{"parallel":-1}"#)
                .unwrap()
                .test(Family::V4)
                .is_err()
        );
        assert!(Params::decode(b"not json").is_err());
    }

    #[test]
    fn streams_from_one_sending_thread_are_woken_in_batches() {
        for (version, parallel, batched) in [
            ("3.21", 1, true),
            ("3.21", 4, false),
            ("3.12", 1, true),
            ("3.12", 8, true),
            ("3.16", 2, false),
        ] {
            let json =
                format!(r#"{{"tcp":true,"parallel":{parallel},"client_version":"{version}"}}"#);
            let t = Params::decode(json.as_bytes())
                .unwrap()
                .test(Family::V4)
                .unwrap();
            assert_eq!(
                t.spec.iperf3.batch_wakes, batched,
                "{version} -P {parallel}"
            );
        }
    }

    #[test]
    fn mss_and_server_affinity_reach_the_servers_side() {
        let json = br#"{"tcp":true,"time":1,"MSS":1200,"server_affinity":1}"#;
        let t = Params::decode(json).unwrap().test(Family::V4).unwrap();
        assert_eq!(
            (t.spec.server.mss, t.spec.server.cpu_bind),
            (Some(1200), Some(1))
        );
        let none = Params::decode(br#"{"tcp":true}"#)
            .unwrap()
            .test(Family::V4)
            .unwrap();
        assert_eq!(
            (none.spec.server.mss, none.spec.server.cpu_bind),
            (None, None)
        );
        // beyond iperf3's own limits: refused, naming the option
        for (json, option) in [
            (&br#"{"tcp":true,"MSS":40000}"#[..], "-M"),
            (&br#"{"tcp":true,"server_affinity":5000}"#[..], "-A"),
        ] {
            let e = Params::decode(json).unwrap().test(Family::V4).unwrap_err();
            assert!(e.message.contains(option), "{e:?}");
        }
    }

    #[test]
    fn messages_are_bounded_before_they_are_read() {
        let m = framed(br#"{"a":1}"#);
        assert_eq!(take_json(&m, 100).unwrap(), Some((&m[4..], m.len())));
        assert_eq!(take_json(&m[..5], 100).unwrap(), None);
        let huge = [0x7f, 0xff, 0xff, 0xff];
        assert!(take_json(&huge, MAX_PARAMS_JSON).is_err());
        assert!(is_cookie(b"abcdefghijklmnopqrstuvwxyz234567abcd\0"));
        assert!(!is_cookie(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567abcd\0"));
    }
}
