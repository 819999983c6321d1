//! The server's speaker of iperf3's control protocol ([`crate::iperf3`]):
//! a client of iperf3 3.x is served as a session like ours, its test a
//! [`TestSpec`] the daemon admits and runs like any other.
//!
//! The cookie, then PARAM_EXCHANGE and the client's parameters (checked,
//! bounded before they are read: a request the daemon cannot serve is told
//! with SERVER_ERROR and iperf3's error number, which the client prints);
//! the test prepared (`Prepare`), then CREATE_STREAMS once it is granted;
//! the streams come to the listener, which hands them to the test and says
//! so ([`ServerConn::streams_ready`]): TEST_START, TEST_RUNNING. The
//! client's TEST_END ends the test (`EndTest`); EXCHANGE_RESULTS, the
//! client's results, ours (iperf3's fields, the netserver's own figures),
//! DISPLAY_RESULTS; the client's IPERF_DONE closes.

use std::time::Instant;

use super::{ServerEvent, ServerSpeaker, Shared};
use crate::{
    ErrorCode, ErrorMsg, Grant, SideResults,
    iperf3::{self, Iperf3Test, Params, Results, StreamResult, errno, state},
    test::{Family, TestKind},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Cookie,
    Params,
    /// The test is being prepared.
    Prepared,
    /// Granted: the streams are coming.
    Streams,
    Running,
    /// TEST_END came: the data path is ending.
    Ending,
    /// EXCHANGE_RESULTS sent: the client's results are coming.
    ClientResults,
    /// DISPLAY_RESULTS sent: waiting for IPERF_DONE.
    Done,
}

/// One iperf3 client's session, server side.
pub(crate) struct Iperf3Server {
    phase: Phase,
    family: Family,
    cookie: Option<[u8; iperf3::COOKIE_LEN]>,
    test: Option<Iperf3Test>,
    /// The server's side of the test, once it ended.
    results: Option<SideResults>,
    started: Option<Instant>,
}

impl Iperf3Server {
    pub(crate) fn new(family: Family) -> Iperf3Server {
        Iperf3Server {
            phase: Phase::Cookie,
            family,
            cookie: None,
            test: None,
            results: None,
            started: None,
        }
    }

    fn state(s: &mut Shared, b: i8) {
        s.outbuf.push(b as u8);
    }

    /// SERVER_ERROR with iperf3's error number and an errno, and close.
    fn error(&mut self, s: &mut Shared, code: i32, why: &str, now: Instant) {
        s.refused(format!("iperf3 client: {why}"));
        Self::state(s, state::SERVER_ERROR);
        s.outbuf.extend_from_slice(&code.to_be_bytes());
        s.outbuf.extend_from_slice(&0i32.to_be_bytes());
        s.abort_test();
        s.close(now);
    }

    /// The parameters came: the test they ask, to prepare.
    fn params(&mut self, s: &mut Shared, json: &[u8], now: Instant) {
        let test = Params::decode(json)
            .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()))
            .and_then(|p| p.test(self.family));
        match test {
            Ok(t) => {
                s.log(
                    2,
                    format!(
                        "iperf3 client {}: {} {} streams{}",
                        t.client_version.as_deref().unwrap_or("?"),
                        t.spec.kind,
                        t.streams,
                        if t.bidir { ", both ways" } else { "" }
                    ),
                );
                let mut spec = t.spec.clone();
                spec.bidir = t.bidir;
                spec.udp_counters64 = t.udp64;
                spec.client_ends_after_ms = Some((u64::from(t.time) + u64::from(t.omit)) * 1000);
                self.test = Some(t);
                self.phase = Phase::Prepared;
                s.test_requested();
                s.event(ServerEvent::Prepare(Box::new(spec)));
            }
            Err(e) => self.refuse_test(s, e, now),
        }
    }

    /// The test cannot run: busy (a cap, a share, a wait past its turn) is
    /// iperf3's own ACCESS_DENIED; what the server does not do, and the
    /// rest, SERVER_ERROR with the iperf3 error the client prints.
    fn refuse_test(&mut self, s: &mut Shared, err: ErrorMsg, now: Instant) {
        if err.code == ErrorCode::Busy {
            s.refused(format!("iperf3 client: {}", err.message));
            Self::state(s, state::ACCESS_DENIED);
            s.close(now);
            return;
        }
        let code = match err.code {
            ErrorCode::Unsupported => errno::IEUNIMP,
            ErrorCode::InvalidRequest => errno::IERECVPARAMS,
            _ => errno::IEINITSTREAM,
        };
        self.error(s, code, &err.message, now);
    }

    /// The server's results message: a stream a flow, in the order the
    /// client made them (iperf3 numbers them 1, 3, 4, ...), its bytes (and
    /// for a UDP receiver its datagrams and their loss against what the
    /// client said it sent: exact where iperf3's own count stops at the
    /// highest sequence number seen).
    fn results_json(&self, client: &[(i64, i64)]) -> Vec<u8> {
        let Some(r) = &self.results else {
            return Results::default().encode();
        };
        let Some(t) = &self.test else {
            return Results::default().encode();
        };
        let flows = t.spec.flows.max(1) as usize;
        let elapsed = r.elapsed_ns as f64 / 1e9;
        let udp = t.spec.kind.protocol() == crate::Protocol::Udp;
        let receives = matches!(t.spec.kind, TestKind::TcpStream | TestKind::UdpStream);
        let streams = (0..t.streams as usize)
            .map(|i| {
                let id = if i == 0 { 1 } else { i as i64 + 2 };
                // with --bidir the first half are the server's receivers
                let receiving = if t.bidir { i < flows } else { receives };
                let c = r.flows.get(i).copied().unwrap_or(crate::FlowCounters {
                    bytes_sent: r.bytes_sent,
                    bytes_received: r.bytes_received,
                    send_calls: r.send_calls,
                    recv_calls: r.recv_calls,
                    transactions: r.transactions,
                });
                let bytes = if receiving {
                    c.bytes_received
                } else {
                    c.bytes_sent
                };
                let mut sr = StreamResult {
                    id,
                    bytes,
                    retransmits: if receiving { -1 } else { 0 },
                    start_time: 0.0,
                    end_time: elapsed,
                    ..StreamResult::default()
                };
                if udp && receiving {
                    // (a UDP flow's receive calls are its datagrams)
                    let got = c.recv_calls as i64;
                    let sent = client
                        .iter()
                        .find(|(sid, _)| *sid == id)
                        .map_or(got, |(_, packets)| (*packets).max(got));
                    sr.packets = sent;
                    sr.errors = sent - got;
                    sr.jitter = r.udp.as_ref().map_or(0.0, |u| u.jitter_ns as f64 / 1e9);
                } else if udp {
                    sr.packets = (c.send_calls) as i64;
                }
                sr
            })
            .collect();
        let cpu = r.cpu.as_ref();
        Results {
            cpu_util_total: cpu.map_or(0.0, |c| c.util),
            cpu_util_user: cpu.map_or(0.0, |c| c.user),
            cpu_util_system: cpu.map_or(0.0, |c| c.system),
            sender_has_retransmits: if receives && !t.bidir { -1 } else { 0 },
            congestion_used: r.tcp.as_ref().map(|c| c.cong_control.clone()),
            streams,
            server_output_text: t.server_output.then(|| self.server_text()),
        }
        .encode()
    }

    /// What iperf3's server would have printed, for `--get-server-output`.
    fn server_text(&self) -> String {
        let (Some(r), Some(t)) = (&self.results, &self.test) else {
            return String::new();
        };
        let secs = r.elapsed_ns as f64 / 1e9;
        let bytes = r.bytes_received.max(r.bytes_sent);
        let rate = if secs > 0.0 {
            bytes as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        };
        format!(
            "rsnetperf netserver, serving iperf3's protocol\n{} test, {} streams{}\n[SUM]   0.00-{secs:.2}  sec  {bytes} Bytes  {rate:.2} Mbits/sec  {}\n",
            t.spec.kind,
            t.streams,
            if t.bidir { ", both ways" } else { "" },
            if r.bytes_received >= r.bytes_sent {
                "receiver"
            } else {
                "sender"
            }
        )
    }
}

impl ServerSpeaker for Iperf3Server {
    fn established(&self) -> bool {
        self.phase != Phase::Cookie
    }

    fn process(&mut self, s: &mut Shared, now: Instant) {
        while !s.closing() {
            match self.phase {
                Phase::Cookie => {
                    let Some(c) = s.inbuf.first_chunk::<{ iperf3::COOKIE_LEN }>().copied() else {
                        return;
                    };
                    s.inbuf.drain(..iperf3::COOKIE_LEN);
                    if !iperf3::is_cookie(&c) {
                        // not an iperf3 client: nothing it would read
                        s.event(ServerEvent::ProtocolError);
                        s.refused("iperf3 port: the first bytes are not an iperf3 cookie");
                        s.close(now);
                        return;
                    }
                    self.cookie = Some(c);
                    s.event(ServerEvent::Established);
                    Self::state(s, state::PARAM_EXCHANGE);
                    self.phase = Phase::Params;
                }
                Phase::Params => {
                    let taken = match iperf3::take_json(&s.inbuf, iperf3::MAX_PARAMS_JSON) {
                        Ok(Some((json, used))) => Some((json.to_vec(), used)),
                        Ok(None) => return,
                        Err(e) => {
                            let why = e.to_string();
                            self.error(s, errno::IERECVPARAMS, &why, now);
                            return;
                        }
                    };
                    if let Some((json, used)) = taken {
                        s.inbuf.drain(..used);
                        self.params(s, &json, now);
                    }
                }
                Phase::ClientResults => {
                    // the client's TEST_END crossing ours (a length's first
                    // byte is 0: no results message is 16 MiB)
                    if let Some(&b) = s.inbuf.first()
                        && b != 0
                    {
                        s.inbuf.drain(..1);
                        if b as i8 != state::TEST_END {
                            let why =
                                format!("state {} from the client before its results", b as i8);
                            self.error(s, errno::IEMESSAGE, &why, now);
                        }
                        continue;
                    }
                    let taken = match iperf3::take_json(&s.inbuf, iperf3::MAX_RESULTS_JSON) {
                        Ok(Some((json, used))) => Some((json.to_vec(), used)),
                        Ok(None) => return,
                        Err(e) => {
                            let why = e.to_string();
                            self.error(s, errno::IERECVRESULTS, &why, now);
                            return;
                        }
                    };
                    if let Some((json, used)) = taken {
                        s.inbuf.drain(..used);
                        let client = iperf3::client_streams(&json);
                        s.outbuf.extend(iperf3::framed(&self.results_json(&client)));
                        Self::state(s, state::DISPLAY_RESULTS);
                        self.phase = Phase::Done;
                        if let Some(r) = self.results.take() {
                            s.event(ServerEvent::ResultsSent(Box::new(r)));
                        }
                    }
                }
                // state bytes from the client
                _ => {
                    let Some(&b) = s.inbuf.first() else { return };
                    s.inbuf.drain(..1);
                    match (self.phase, b as i8) {
                        (Phase::Running | Phase::Streams, state::TEST_END) => {
                            self.phase = Phase::Ending;
                            if self.results.is_some() {
                                Self::state(s, state::EXCHANGE_RESULTS);
                                self.phase = Phase::ClientResults;
                            } else {
                                s.event(ServerEvent::EndTest);
                            }
                        }
                        (Phase::Done, state::IPERF_DONE) => {
                            s.test_over(now);
                            s.close(now);
                        }
                        (_, state::CLIENT_TERMINATE) => {
                            s.log(1, "iperf3 client ended the test (CLIENT_TERMINATE)");
                            s.abort_test();
                            s.close(now);
                        }
                        (phase, other) => {
                            let why = format!("state {other} from the client in phase {phase:?}");
                            s.event(ServerEvent::ProtocolError);
                            self.error(s, errno::IEMESSAGE, &why, now);
                        }
                    }
                }
            }
        }
    }

    fn granted(&mut self, s: &mut Shared, _grant: Grant, now: Instant) {
        if self.phase == Phase::Prepared {
            s.test_granted(now);
            Self::state(s, state::CREATE_STREAMS);
            self.phase = Phase::Streams;
        }
    }

    fn stream_cookie(&self) -> Option<[u8; iperf3::COOKIE_LEN]> {
        self.cookie
    }

    fn streams_ready(&mut self, s: &mut Shared, now: Instant) {
        if self.phase == Phase::Streams {
            self.started = Some(now);
            Self::state(s, state::TEST_START);
            Self::state(s, state::TEST_RUNNING);
            self.phase = Phase::Running;
        }
    }

    fn prepare_failed(&mut self, s: &mut Shared, err: ErrorMsg) {
        self.refuse_test(s, err, Instant::now());
    }

    fn test_ended(&mut self, s: &mut Shared, outcome: Result<SideResults, ErrorMsg>, now: Instant) {
        match outcome {
            Ok(r) => {
                self.results = Some(r);
                // (the server's senders may end first, at the client's count
                // with `-R`: the client says TEST_END when all is in)
                if self.phase == Phase::Ending {
                    Self::state(s, state::EXCHANGE_RESULTS);
                    self.phase = Phase::ClientResults;
                }
                s.test_over(now);
            }
            Err(e) => self.error(s, errno::IEMESSAGE, &e.message, now),
        }
    }

    fn tell(&mut self, s: &mut Shared, err: &ErrorMsg) {
        // a busy daemon's answer is iperf3's own; anything else an error
        // the client prints with its text
        if err.code == ErrorCode::Busy && self.phase == Phase::Cookie {
            Self::state(s, state::ACCESS_DENIED);
        } else {
            Self::state(s, state::SERVER_ERROR);
            s.outbuf.extend_from_slice(&errno::IEMESSAGE.to_be_bytes());
            s.outbuf.extend_from_slice(&0i32.to_be_bytes());
        }
    }
}
