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

use serde::{Deserialize, Serialize};

use crate::{
    error::SpecError,
    message::{ErrorCode, ErrorMsg},
    test::{Family, TestEnd, TestKind, TestSpec},
};

/// A cookie: 36 characters of base32 (`a-z`, `2-7`) and a NUL.
pub const COOKIE_LEN: usize = 37;

/// The state bytes.
pub mod state {
    pub const TEST_START: i8 = 1;
    pub const TEST_RUNNING: i8 = 2;
    pub const TEST_END: i8 = 4;
    pub const PARAM_EXCHANGE: i8 = 9;
    pub const CREATE_STREAMS: i8 = 10;
    pub const SERVER_TERMINATE: i8 = 11;
    pub const CLIENT_TERMINATE: i8 = 12;
    pub const EXCHANGE_RESULTS: i8 = 13;
    pub const DISPLAY_RESULTS: i8 = 14;
    pub const IPERF_START: i8 = 15;
    pub const IPERF_DONE: i8 = 16;
    pub const ACCESS_DENIED: i8 = -1;
    pub const SERVER_ERROR: i8 = -2;
}

/// iperf3's error numbers (`i_errno`) a server sends with SERVER_ERROR
/// (then an errno); the client prints its own text for each.
pub mod errno {
    /// "an option you are trying to set is not implemented yet": what this
    /// server does not do (SCTP, MPTCP, RSA authentication).
    pub const IEUNIMP: i32 = 13;
    /// "unable to receive parameters from client".
    pub const IERECVPARAMS: i32 = 114;
    /// "received an unknown control message".
    pub const IEMESSAGE: i32 = 110;
    /// "unable to receive results".
    pub const IERECVRESULTS: i32 = 117;
    /// "unable to initialize stream": a test the server could not set up
    /// or run.
    pub const IEINITSTREAM: i32 = 201;
}

/// The datagram a UDP stream's client sends first, and the server's
/// answer (iperf3's UDP_CONNECT_MSG and UDP_CONNECT_REPLY).
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// The same before iperf3 3.1.4 (and what later clients still accept).
pub const LEGACY_UDP_CONNECT_MSG: u32 = 123_456_789;
pub const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;

/// The answer to a UDP stream's first datagram: iperf3's reply in the
/// byte order the client wrote its message in (each client writes its
/// host's), the legacy pair for a legacy message; `None` when the
/// datagram is not a UDP stream's connect message.
pub fn udp_connect_reply(hello: &[u8]) -> Option<[u8; 4]> {
    let first: [u8; 4] = hello.get(..4)?.try_into().ok()?;
    [
        (UDP_CONNECT_MSG, UDP_CONNECT_REPLY),
        (LEGACY_UDP_CONNECT_MSG, LEGACY_UDP_CONNECT_REPLY),
    ]
    .into_iter()
    .find_map(|(msg, reply)| {
        if first == msg.to_le_bytes() {
            Some(reply.to_le_bytes())
        } else if first == msg.to_be_bytes() {
            Some(reply.to_be_bytes())
        } else {
            None
        }
    })
}

/// The most JSON a parameters or results message may hold (iperf3's own
/// MAX_PARAMS_JSON_STRING, and its results' bound).
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
pub const MAX_RESULTS_JSON: usize = 64 * 1024;

/// Whether `b` is a cookie as iperf3 makes them.
pub fn is_cookie(b: &[u8]) -> bool {
    match b.split_last() {
        Some((0, chars)) if b.len() == COOKIE_LEN => chars
            .iter()
            .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(c)),
        _ => false,
    }
}

/// A client's parameters, as its JSON has them (every field optional; a
/// field this server does not know is ignored, as iperf3's server does).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Params {
    pub tcp: Option<bool>,
    pub udp: Option<bool>,
    pub sctp: Option<bool>,
    pub omit: Option<f64>,
    pub time: Option<f64>,
    pub num: Option<f64>,
    pub blockcount: Option<f64>,
    #[serde(rename = "MSS")]
    pub mss: Option<f64>,
    pub nodelay: Option<bool>,
    pub parallel: Option<f64>,
    pub reverse: Option<bool>,
    pub bidirectional: Option<bool>,
    pub window: Option<f64>,
    pub len: Option<f64>,
    pub bandwidth: Option<f64>,
    pub fqrate: Option<f64>,
    pub pacing_timer: Option<f64>,
    pub burst: Option<f64>,
    #[serde(rename = "TOS")]
    pub tos: Option<f64>,
    pub flowlabel: Option<f64>,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    pub congestion: Option<String>,
    pub get_server_output: Option<f64>,
    pub udp_counters_64bit: Option<f64>,
    pub repeating_payload: Option<f64>,
    pub zerocopy: Option<f64>,
    pub dont_fragment: Option<f64>,
    pub authtoken: Option<String>,
    pub skip_rx_copy: Option<f64>,
    pub mptcp: Option<bool>,
    pub client_version: Option<String>,
}

/// What an iperf3 test is, beyond the [`TestSpec`] the data path runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Iperf3Test {
    pub spec: TestSpec,
    /// `--bidir`: as many streams the other way (the spec's flows are the
    /// server's receiving ones, `bidir` as many sending).
    pub bidir: bool,
    /// Streams the client opens (with `--bidir`, both ways).
    pub streams: u32,
    /// The client's `-t`, and `-O` (seconds).
    pub time: u32,
    pub omit: u32,
    /// UDP: 64-bit sequence numbers in the datagrams.
    pub udp64: bool,
    /// `--get-server-output`.
    pub server_output: bool,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    pub client_version: Option<String>,
}

/// The longest a test may be asked to run (iperf3's MAX_TIME), and its
/// omitted seconds (MAX_OMIT_TIME); the most streams (MAX_STREAMS).
const MAX_TIME: f64 = 86_400.0;
const MAX_OMIT: f64 = 600.0;
const MAX_STREAMS: f64 = 128.0;

fn whole(v: Option<f64>, field: &str, max: f64) -> Result<Option<u64>, SpecError> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(Some(x as u64)),
        Some(x) => Err(SpecError::new(field, format!("{x} is out of range"))),
    }
}

impl Params {
    /// Decode a parameters message's JSON.
    pub fn decode(json: &[u8]) -> Result<Params, SpecError> {
        serde_json::from_slice(json)
            .map_err(|e| SpecError::new("parameters", format!("not iperf3's JSON: {e}")))
    }

    /// The test these parameters ask of a server whose control connection
    /// is of `family`: which way the data goes, how many streams, their
    /// sizes and socket options. What this server does not do (SCTP,
    /// MPTCP, iperf3's RSA authentication) is an error naming it.
    pub fn test(&self, family: Family) -> Result<Iperf3Test, ErrorMsg> {
        let unsupported = |option: &str, what: &str| {
            Err(ErrorMsg::new(
                ErrorCode::Unsupported,
                format!("{option}: {what} is not supported by this server"),
            ))
        };
        if self.sctp == Some(true) {
            return unsupported("--sctp", "SCTP");
        }
        if self.mptcp == Some(true) {
            return unsupported("--mptcp", "MPTCP");
        }
        if self.authtoken.is_some() {
            return unsupported(
                "--username",
                "iperf3's RSA authentication (it authenticates its own clients with a key: see its documentation)",
            );
        }
        self.data_path(family)
            .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()))
    }

    /// The test's data path, as the parameters ask it.
    fn data_path(&self, family: Family) -> Result<Iperf3Test, SpecError> {
        let udp = self.udp == Some(true);
        let reverse = self.reverse == Some(true);
        let bidir = self.bidirectional == Some(true);
        let kind = match (udp, reverse) {
            (false, false) => TestKind::TcpStream,
            (false, true) => TestKind::TcpMaerts,
            (true, false) => TestKind::UdpStream,
            (true, true) => TestKind::UdpMaerts,
        };
        let parallel = whole(self.parallel, "-P", MAX_STREAMS)?.unwrap_or(1).max(1) as u32;
        let time = whole(self.time, "-t", MAX_TIME)?.unwrap_or(10) as u32;
        let omit = whole(self.omit, "-O", MAX_OMIT)?.unwrap_or(0) as u32;
        let len = whole(self.len, "-l", f64::from(u32::MAX))?.map(|l| l as u32);
        let window = whole(self.window, "-w", 512.0 * 1024.0 * 1024.0)?.map(|w| w as u32);
        let mut spec = TestSpec::new(kind, family);
        spec.flows = parallel;
        // the client ends the test (TEST_END); the server's own limit is
        // the netserver's longest test
        spec.end = TestEnd::Time { millis: 0 };
        spec.server.send_size = len.filter(|l| *l > 0);
        spec.server.recv_size = len.filter(|l| *l > 0);
        spec.server.send_buf = window.filter(|w| *w > 0);
        spec.server.recv_buf = window.filter(|w| *w > 0);
        spec.server.nodelay = self.nodelay == Some(true);
        spec.server.tos = whole(self.tos, "-S", 255.0)?
            .map(|t| t as u8)
            .filter(|t| *t > 0);
        spec.server.cong_control = self.congestion.clone().filter(|c| !c.is_empty());
        // what the server sends is paced as the client asked, each stream
        // at -b (UDP's default 1 Mbit/s comes in the parameters) or at
        // --fq-rate, the lower
        let rate = [
            whole(self.bandwidth, "-b", 1e15)?,
            whole(self.fqrate, "--fq-rate", 1e15)?,
        ]
        .into_iter()
        .flatten()
        .filter(|b| *b > 0)
        .min();
        if reverse || bidir {
            spec.rate_bps = rate.map(|r| r.saturating_mul(u64::from(parallel)));
            // a sending server stops at the client's count (`-n`, `-k`)
            let num = whole(self.num, "-n", 1e18)?.filter(|n| *n > 0);
            let blocks = whole(self.blockcount, "-k", 1e18)?.filter(|n| *n > 0);
            let block = u64::from(len.unwrap_or(if udp { 1460 } else { 128 * 1024 }));
            if let Some(bytes) = num.or(blocks.map(|b| b.saturating_mul(block))) {
                spec.end = TestEnd::Bytes(bytes);
            }
        }
        if self.skip_rx_copy.is_some_and(|s| s > 0.0) {
            spec.paths.rx = crate::test::RxPath::Discard;
        }
        Ok(Iperf3Test {
            spec,
            bidir,
            streams: if bidir { parallel * 2 } else { parallel },
            time,
            omit,
            udp64: self.udp_counters_64bit.is_some_and(|v| v > 0.0),
            server_output: self.get_server_output.is_some_and(|v| v > 0.0),
            title: self.title.clone(),
            extra_data: self.extra_data.clone(),
            client_version: self.client_version.clone(),
        })
    }
}

/// One stream's figures in a results message.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct StreamResult {
    pub id: i64,
    pub bytes: u64,
    pub retransmits: i64,
    pub jitter: f64,
    pub errors: i64,
    pub omitted_errors: i64,
    pub packets: i64,
    pub omitted_packets: i64,
    pub start_time: f64,
    pub end_time: f64,
}

/// A side's results message.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Results {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    pub sender_has_retransmits: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

impl Results {
    /// Decode a results message's JSON.
    pub fn decode(json: &[u8]) -> Result<Results, SpecError> {
        serde_json::from_slice(json)
            .map_err(|e| SpecError::new("results", format!("not iperf3's JSON: {e}")))
    }

    /// The JSON to send.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What a client's results say of its streams: each one's id and the
/// datagrams it sent (UDP), read leniently (iperf3 3.12 writes -1 as
/// 18446744073709551615; a field that is not a number reads as 0).
pub fn client_streams(json: &[u8]) -> Vec<(i64, i64)> {
    let number = |v: &serde_json::Value| -> i64 {
        v.as_i64()
            .or_else(|| v.as_u64().map(|_| -1))
            .or_else(|| v.as_f64().map(|f| f as i64))
            .unwrap_or(0)
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else {
        return Vec::new();
    };
    v.get("streams")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .map(|s| {
                    let f = |k: &str| s.get(k).map_or(0, number);
                    (f("id"), f("packets"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A length-prefixed JSON message: its 4-byte big-endian length, then the
/// bytes.
pub fn framed(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(json);
    out
}

/// A whole length-prefixed message at the start of `buf`, if it has come:
/// its JSON and the bytes it took; an error if its length is over `max`
/// (checked before anything is read of it).
pub fn take_json(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, SpecError> {
    // a first byte that is not 0 makes a length of 16 MiB or more: over
    // any bound, known before the rest of the length comes (a state byte
    // out of turn reads so)
    if max < 1 << 24
        && let Some(&b) = buf.first()
        && b != 0
    {
        return Err(SpecError::new(
            "length",
            format!(
                "a JSON message of {b:#04x}... bytes, more than {max} (or a state byte out of turn)"
            ),
        ));
    }
    let Some(len) = buf
        .first_chunk::<4>()
        .map(|l| u32::from_be_bytes(*l) as usize)
    else {
        return Ok(None);
    };
    if len > max {
        return Err(SpecError::new(
            "length",
            format!("a JSON message of {len} bytes, more than {max}"),
        ));
    }
    Ok(buf.get(4..4 + len).map(|j| (j, 4 + len)))
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
        let rsa = br#"{"tcp":true,"authtoken":"xyz"}"#;
        let e = Params::decode(rsa).unwrap().test(Family::V4).unwrap_err();
        assert!(
            e.message.contains("RSA") && e.code == ErrorCode::Unsupported,
            "{e:?}"
        );
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
