//! The server's side of iperf3's parameters: the test a client asks,
//! as the [`TestSpec`] the daemon runs; what its results say of its
//! streams.

use crate::{
    error::SpecError,
    message::{ErrorCode, ErrorMsg},
    test::{Family, TestEnd, TestKind, TestSpec},
};

use super::wire::{MAX_AFFINITY, MAX_MSS, MAX_OMIT, MAX_STREAMS, MAX_TIME, Params};

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

/// Whether an iperf3 client of this `client_version` sends every stream
/// from one thread: before 3.16 (which gave each stream a thread of its
/// own), or one too old to say its version. Anything else (a newer iperf3,
/// our netperf --iperf3) sends from several.
pub fn one_sending_thread(client_version: Option<&str>) -> bool {
    if client_version.is_none() {
        return true;
    }
    match version_of(client_version) {
        Some((3, minor)) => minor < 16,
        Some((major, _)) => major < 3,
        None => false,
    }
}

/// The version a client says (`client_version`), as (major, minor).
fn version_of(client_version: Option<&str>) -> Option<(u32, u32)> {
    let mut parts = client_version?.trim().split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
}

/// The iperf3 error number that says "your test is longer than this
/// server allows" in a client's own words: 3.20 and later have one
/// (IEMAXSERVERTESTDURATIONEXCEEDED); earlier ones print "test duration
/// too long" for IEDURATION.
pub fn too_long_errno(client_version: Option<&str>) -> i32 {
    match version_of(client_version) {
        Some((major, minor)) if (major, minor) >= (3, 20) => {
            super::errno::IEMAXSERVERTESTDURATIONEXCEEDED
        }
        _ => super::errno::IEDURATION,
    }
}

fn whole(v: Option<f64>, field: &str, max: f64) -> Result<Option<u64>, SpecError> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(Some(x as u64)),
        Some(x) => Err(SpecError::new(field, format!("{x} is out of range"))),
    }
}

impl Params {
    /// The test these parameters ask of a server whose control connection
    /// is of `family`: which way the data goes, how many streams, their
    /// sizes and socket options. What this server does not do (SCTP,
    /// MPTCP) is an error naming it. (The `authtoken` is checked by the
    /// speaker's [`super::Iperf3Auth`], where the server requires one.)
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
        // a client that sends from one thread (every stream before 3.16,
        // or its only stream): its streams woken for more than a packet
        // (as iperf3 -s, reading them all on one thread, effectively is);
        // many senders of a thread a stream lose by it (engine's
        // Reader::batching)
        spec.iperf3.batch_wakes =
            parallel == 1 || one_sending_thread(self.client_version.as_deref());
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
        // -M: the server's end too, as iperf3 -s sets it on its listener
        spec.server.mss = whole(self.mss, "-M", MAX_MSS)?
            .map(|m| m as u32)
            .filter(|m| *m > 0);
        // -A N,M: the server's test on CPU M, as iperf3 -s pins itself
        spec.server.cpu_bind = whole(self.server_affinity, "-A", MAX_AFFINITY)?.map(|c| c as u32);
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
        // the whole test's rate: what the server paces its sends at, and
        // what the client says it paces its own at (the rate a policy's
        // max_rate holds a test of any dialect to, as netperf's --rate)
        spec.rate_bps = rate.map(|r| r.saturating_mul(u64::from(parallel)));
        if reverse || bidir {
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

#[cfg(test)]
mod wake_tests {
    use super::one_sending_thread;

    #[test]
    fn clients_before_3_16_send_from_one_thread() {
        for (v, one) in [
            (Some("3.12"), true),
            (Some("3.15.1"), true),
            (Some("3.16"), false),
            (Some("3.21+"), false),
            (Some("4.0"), false),
            (Some("rsnetperf netperf 0.1.0"), false),
            (None, true),
        ] {
            assert_eq!(one_sending_thread(v), one, "{v:?}");
        }
    }
}
