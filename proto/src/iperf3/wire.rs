//! iperf3's bytes on the wire, both ends': the cookie, the state bytes,
//! the error numbers, UDP's connect message, the length-prefixed JSON
//! and what its two messages (parameters, results) hold.

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

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
    /// server does not do (SCTP, MPTCP).
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
    /// "test authorization failed": the client did not authenticate as
    /// the server requires (its RSA-encrypted username and password).
    pub const IEAUTHTEST: i32 = 142;
    /// "test duration too long (maximum = 86400 seconds)": a test longer
    /// than the server allows, to a client before 3.20.
    pub const IEDURATION: i32 = 5;
    /// "client's requested duration exceeds the server's maximum
    /// permitted limit" (3.20 and later).
    pub const IEMAXSERVERTESTDURATIONEXCEEDED: i32 = 37;
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

/// The longest a test may be asked to run (iperf3's MAX_TIME), and its
/// omitted seconds (MAX_OMIT_TIME); the most streams (MAX_STREAMS).
pub const MAX_TIME: f64 = 86_400.0;
pub const MAX_OMIT: f64 = 600.0;
pub const MAX_STREAMS: f64 = 128.0;
/// The largest `-M` (MAX_MSS) and `-A`'s highest CPU, as iperf3 checks them.
pub const MAX_MSS: f64 = 32_767.0;
pub const MAX_AFFINITY: f64 = 1024.0;

/// The id of a test's stream `i` (from 0), as both ends number them:
/// 1, 3, 4, 5, ... (iperf3 skips 2, and its peers must agree).
pub fn stream_id(i: usize) -> i64 {
    if i == 0 { 1 } else { i as i64 + 2 }
}

/// The stream (from 0) whose id is `id`.
pub fn stream_index(id: i64) -> Option<usize> {
    match id {
        1 => Some(0),
        id if id >= 3 => usize::try_from(id - 2).ok(),
        _ => None,
    }
}

/// A client's parameters, as its JSON has them (every field optional; a
/// field this server does not know is ignored, as iperf3's server does).
/// What is `None` is left out of the JSON this side writes: iperf3's
/// servers take a boolean's presence as true.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sctp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockcount: Option<f64>,
    #[serde(rename = "MSS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelay: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqrate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<f64>,
    #[serde(rename = "TOS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flowlabel: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub get_server_output: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeating_payload: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dont_fragment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_rx_copy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_affinity: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

impl Params {
    /// Decode a parameters message's JSON.
    pub fn decode(json: &[u8]) -> Result<Params, SpecError> {
        serde_json::from_slice(json)
            .map_err(|e| SpecError::new("parameters", format!("not iperf3's JSON: {e}")))
    }

    /// The JSON to send.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// One stream's figures in a results message. Its integers are read
/// leniently ([`lenient`]): iperf3 3.12 writes -1 as
/// 18446744073709551615, and any number may come as a double.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct StreamResult {
    #[serde(deserialize_with = "lenient::int")]
    pub id: i64,
    #[serde(deserialize_with = "lenient::uint")]
    pub bytes: u64,
    #[serde(deserialize_with = "lenient::int")]
    pub retransmits: i64,
    pub jitter: f64,
    #[serde(deserialize_with = "lenient::int")]
    pub errors: i64,
    #[serde(deserialize_with = "lenient::int")]
    pub omitted_errors: i64,
    #[serde(deserialize_with = "lenient::int")]
    pub packets: i64,
    #[serde(deserialize_with = "lenient::int")]
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
    #[serde(deserialize_with = "lenient::int")]
    pub sender_has_retransmits: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

/// iperf3's integers as its two versions write them: a number of any
/// kind, and 3.12's unsigned 64-bit -1 (anything over `i64::MAX` reads
/// as -1).
mod lenient {
    use serde::{Deserializer, de};

    struct Int;

    impl de::Visitor<'_> for Int {
        type Value = i64;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            Ok(i64::try_from(v).unwrap_or(-1))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            if v.is_finite() {
                // (saturating: a double past i64's range is no count)
                Ok(v as i64)
            } else {
                Err(E::custom("a number that is not finite"))
            }
        }
    }

    pub(super) fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(Int)
    }

    pub(super) fn uint<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let v = d.deserialize_any(Int)?;
        u64::try_from(v).map_err(|_| de::Error::custom(format!("a count of {v}")))
    }
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
