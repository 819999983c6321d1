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
//!
//! The client's speaker ([`Iperf3Client`]) is our netperf's end of the
//! same conversation, against any iperf3 3.x server: the cookie; at
//! PARAM_EXCHANGE, the test asked as iperf3's parameters; at
//! CREATE_STREAMS, the grant (the streams go to the control port and
//! present the cookie); TEST_START and TEST_RUNNING begin the data phase
//! ([`super::ClientConn::start`]); our TEST_END, told when our senders are
//! done or a receiver's time is up; at EXCHANGE_RESULTS, our results,
//! then the server's, read as its side's figures; at DISPLAY_RESULTS, our
//! IPERF_DONE. ACCESS_DENIED (busy) and SERVER_ERROR (iperf3's error
//! number and an errno) are the server's refusals, in iperf3's words.

use std::{sync::Arc, time::Instant};

use super::{ClientConnError, ClientSpeaker, ServerEvent, ServerSpeaker, Shared};
use crate::{
    Capabilities, ClientDone, ClientError, ClientEvent, ErrorCode, ErrorMsg, Grant, ProtoError,
    SideResults, TestSpec,
    iperf3::{self, Iperf3Test, Params, Results, StreamResult, errno, state},
    test::{Family, TestKind, Token},
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

/// How long after the length it said an iperf3 client has to end its test.
const END_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// One iperf3 client's session, server side.
pub(crate) struct Iperf3Server {
    phase: Phase,
    /// Whether its client may test (`None`: every client may, as iperf3
    /// -s without credentials).
    auth: Option<Arc<dyn iperf3::Iperf3Auth>>,
    /// What one test may ask of this daemon, as for every dialect.
    limits: crate::Limits,
    family: Family,
    cookie: Option<[u8; iperf3::COOKIE_LEN]>,
    test: Option<Iperf3Test>,
    /// The server's side of the test, once it ended.
    results: Option<SideResults>,
    started: Option<Instant>,
}

impl Iperf3Server {
    pub(crate) fn new(
        family: Family,
        auth: Option<Arc<dyn iperf3::Iperf3Auth>>,
        limits: crate::Limits,
    ) -> Iperf3Server {
        Iperf3Server {
            phase: Phase::Cookie,
            auth,
            limits,
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
        let params = Params::decode(json)
            .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()));
        // authorized before anything it asks is read, as iperf3 -s does;
        // refused in iperf3's words ("test authorization failed")
        if let (Ok(p), Some(auth)) = (&params, &self.auth) {
            if let Err(why) = auth.check(p.authtoken.as_deref()) {
                s.event(ServerEvent::AuthFailed);
                self.error(
                    s,
                    errno::IEAUTHTEST,
                    &format!("test authorization failed: {why}"),
                    now,
                );
                return;
            }
        }
        let test = params.and_then(|p| p.test(self.family));
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
                spec.iperf3.bidir = t.bidir;
                spec.iperf3.udp_counters64 = t.udp64;
                spec.iperf3.client_ends_after_ms =
                    Some((u64::from(t.time) + u64::from(t.omit)) * 1000);
                // the daemon's limits, as for a test of any dialect
                if let Err(e) = spec.validate(&self.limits) {
                    if e.field.starts_with("-t") {
                        let code = iperf3::too_long_errno(t.client_version.as_deref());
                        return self.error(s, code, &e.to_string(), now);
                    }
                    let e = ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string());
                    return self.refuse_test(s, e, now);
                }
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
                let id = iperf3::stream_id(i);
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
        // as iperf3 -s states its own: the CPU time its test's threads
        // used, in percent of the test's time
        let (cpu_util_total, cpu_util_user, cpu_util_system) = r
            .own_cpu
            .map_or((0.0, 0.0, 0.0), |c| c.percent_of(r.elapsed_ns));
        Results {
            cpu_util_total,
            cpu_util_user,
            cpu_util_system,
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

    /// A client that said how long it runs (iperf3's -t and -O) and has
    /// not ended its test a few seconds after: its test ends then (a
    /// client that counts bytes or blocks is held to the daemon's limit).
    fn own_deadline(&self) -> Option<Instant> {
        if self.phase != Phase::Running {
            return None;
        }
        let t = self.test.as_ref()?;
        let secs = u64::from(t.time) + u64::from(t.omit);
        if t.time == 0 {
            return None;
        }
        Some(self.started? + std::time::Duration::from_secs(secs) + END_GRACE)
    }

    fn own_timeout(&mut self, s: &mut Shared, now: Instant) {
        let secs = self.test.as_ref().map_or(0, |t| t.time + t.omit);
        let why = format!(
            "the client did not end its {secs} s test within {} s of its end",
            END_GRACE.as_secs()
        );
        self.error(s, errno::IEMESSAGE, &why, now);
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

/// What an iperf3 client awaits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    /// PARAM_EXCHANGE, after our cookie.
    ParamExchange,
    /// Our test request.
    Request,
    /// CREATE_STREAMS, after our parameters.
    Create,
    /// TEST_START and TEST_RUNNING, once our streams are up.
    Start,
    /// Our data phase runs.
    Running,
    /// EXCHANGE_RESULTS, after our TEST_END.
    Exchange,
    /// The server's results message.
    Results,
    /// DISPLAY_RESULTS.
    Display,
    /// IPERF_DONE sent: anything more is let go (a 3.21 server may still
    /// send a stream's write error).
    Done,
}

/// Our netperf's end of an iperf3 conversation: one test.
pub(crate) struct Iperf3Client {
    capabilities: Capabilities,
    awaiting: Awaiting,
    token: Token,
    port: u16,
    software: String,
    spec: Option<TestSpec>,
    /// Our side's figures, for the results exchange.
    ours: Option<SideResults>,
    /// The server's, once its results came.
    theirs: Option<SideResults>,
    /// TEST_END went.
    told_end: bool,
    /// EXCHANGE_RESULTS came before our figures did.
    exchange_asked: bool,
}

impl Iperf3Client {
    /// The cookie `token` makes goes first.
    pub(crate) fn new(token: Token, port: u16, software: &str, out: &mut Vec<u8>) -> Iperf3Client {
        out.extend_from_slice(&iperf3::cookie_of(&token));
        Iperf3Client {
            capabilities: Capabilities::iperf3(),
            awaiting: Awaiting::ParamExchange,
            token,
            port,
            software: software.to_string(),
            spec: None,
            ours: None,
            theirs: None,
            told_end: false,
            exchange_asked: false,
        }
    }

    fn state(out: &mut Vec<u8>, b: i8) {
        out.push(b as u8);
    }

    /// The server's refusal: ACCESS_DENIED, or SERVER_ERROR and its two
    /// numbers (`None` while they have not all come).
    fn refusal(inbuf: &mut Vec<u8>, b: i8) -> Option<ClientConnError> {
        let said = |code, text: String| {
            Some(ClientConnError::Session(ClientError::Server(
                ErrorMsg::new(code, text),
            )))
        };
        match b {
            state::ACCESS_DENIED => {
                inbuf.clear();
                said(
                    ErrorCode::Busy,
                    "the iperf3 server is busy running a test; try again later".into(),
                )
            }
            state::SERVER_ERROR => {
                let n = |r: std::ops::Range<usize>| {
                    inbuf
                        .get(r)
                        .and_then(|b| <[u8; 4]>::try_from(b).ok())
                        .map(i32::from_be_bytes)
                };
                let (i_errno, errno) = (n(1..5)?, n(5..9)?);
                inbuf.clear();
                let code = match i_errno {
                    errno::IEUNIMP | 18 | 131 | 134 => ErrorCode::Unsupported,
                    121 => ErrorCode::Busy,
                    _ => ErrorCode::TestFailed,
                };
                said(
                    code,
                    format!(
                        "iperf3 server error {i_errno}: {}",
                        iperf3::server_error_text(i_errno, errno)
                    ),
                )
            }
            state::SERVER_TERMINATE => {
                inbuf.clear();
                said(
                    ErrorCode::TestFailed,
                    "the iperf3 server has terminated (SERVER_TERMINATE)".into(),
                )
            }
            _ => None,
        }
    }

    /// The grant CREATE_STREAMS makes: the streams go to the control
    /// port; the sizes are what the parameters asked.
    fn grant(&self) -> Result<Grant, ClientConnError> {
        let spec = self
            .spec
            .as_ref()
            .ok_or_else(|| ProtoError::Malformed("CREATE_STREAMS before our parameters".into()))?;
        let p = Params::of_spec(spec, &self.software)
            .map_err(|e| ClientConnError::Session(ClientError::Server(e)))?;
        let len = p.len.unwrap_or(0.0) as u32;
        let window = p.window.unwrap_or(0.0) as u32;
        Ok(Grant {
            data_port: self.port,
            token: self.token,
            send_buf: window,
            recv_buf: window,
            send_size: len,
            recv_size: len,
            send_width: 1,
            recv_width: 1,
            measure_cpu: spec.measure_cpu,
            num_cpus: 1,
        })
    }

    /// EXCHANGE_RESULTS, once our data phase is over: our results go,
    /// the server's are awaited.
    fn exchange(&mut self, out: &mut Vec<u8>) {
        if self.awaiting != Awaiting::Exchange {
            self.exchange_asked = true;
            return;
        }
        let ours = self.ours.take().unwrap_or_default();
        if let Some(spec) = &self.spec {
            out.extend(iperf3::framed(&Results::of_ours(&ours, spec).encode()));
        }
        self.awaiting = Awaiting::Results;
    }

    /// The server's results message, whole.
    fn server_results(&mut self, inbuf: &mut Vec<u8>) -> Result<bool, ClientConnError> {
        let taken = iperf3::take_json(inbuf, iperf3::MAX_RESULTS_JSON)
            .map_err(|e| ProtoError::Malformed(format!("the iperf3 server's results: {e}")))?
            .map(|(json, used)| (Results::decode(json), used));
        let Some((decoded, used)) = taken else {
            return Ok(false);
        };
        inbuf.drain(..used);
        let spec = self
            .spec
            .as_ref()
            .ok_or_else(|| ProtoError::Malformed("results before a test".into()))?;
        let theirs = decoded
            .and_then(|r| r.side_results(spec))
            .map_err(|e| ProtoError::Malformed(format!("the iperf3 server's results: {e}")))?;
        self.theirs = Some(theirs);
        self.awaiting = Awaiting::Display;
        Ok(true)
    }
}

impl ClientSpeaker for Iperf3Client {
    fn setup(&mut self, spec: TestSpec, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        if self.awaiting != Awaiting::Request {
            return Err(ProtoError::Malformed(
                "an iperf3 server runs one test a connection".into(),
            )
            .into());
        }
        let p = Params::of_spec(&spec, &self.software)
            .map_err(|e| ClientConnError::Session(ClientError::Server(e)))?;
        out.extend(iperf3::framed(&p.encode()));
        self.spec = Some(spec);
        self.awaiting = Awaiting::Create;
        Ok(())
    }

    fn start(&mut self) -> bool {
        self.awaiting == Awaiting::Start
    }

    fn tell_end(&mut self, out: &mut Vec<u8>) {
        if matches!(self.awaiting, Awaiting::Start | Awaiting::Running) && !self.told_end {
            Self::state(out, state::TEST_END);
            self.told_end = true;
        }
    }

    fn our_results(&mut self, ours: &SideResults) {
        self.ours = Some(ours.clone());
    }

    fn done(&mut self, _done: ClientDone, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        if !matches!(self.awaiting, Awaiting::Start | Awaiting::Running) {
            return Err(ProtoError::Malformed(format!(
                "our data phase ended while awaiting {:?} of the iperf3 server",
                self.awaiting
            ))
            .into());
        }
        self.tell_end(out);
        self.awaiting = Awaiting::Exchange;
        if self.exchange_asked {
            self.exchange(out);
        }
        Ok(())
    }

    fn calibrate(&mut self, _out: &mut Vec<u8>) -> bool {
        false
    }

    fn bye(&mut self, out: &mut Vec<u8>) {
        // a test cut short is the client's to end, as iperf3's does on a
        // signal
        if matches!(
            self.awaiting,
            Awaiting::Create
                | Awaiting::Start
                | Awaiting::Running
                | Awaiting::Exchange
                | Awaiting::Results
                | Awaiting::Display
        ) {
            Self::state(out, state::CLIENT_TERMINATE);
        }
        self.awaiting = Awaiting::Done;
    }

    fn handle(
        &mut self,
        inbuf: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Option<ClientEvent>, ClientConnError> {
        loop {
            match self.awaiting {
                Awaiting::Done => {
                    inbuf.clear();
                    return Ok(None);
                }
                // (a length's first byte is 0: no results message is 16
                // MiB; a state byte there is the server's error)
                Awaiting::Results if inbuf.first().is_none_or(|b| *b == 0) => {
                    if !self.server_results(inbuf)? {
                        return Ok(None);
                    }
                    continue;
                }
                _ => {}
            }
            let Some(&b) = inbuf.first() else {
                return Ok(None);
            };
            let b = b as i8;
            if matches!(
                b,
                state::ACCESS_DENIED | state::SERVER_ERROR | state::SERVER_TERMINATE
            ) {
                return match Self::refusal(inbuf, b) {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            if self.awaiting == Awaiting::Results {
                // not a state the server may send here: read as a length
                self.server_results(inbuf)?;
                return Ok(None);
            }
            inbuf.drain(..1);
            match (self.awaiting, b) {
                (Awaiting::ParamExchange, state::PARAM_EXCHANGE) => {
                    self.awaiting = Awaiting::Request;
                    return Ok(Some(ClientEvent::Established));
                }
                (Awaiting::Create, state::CREATE_STREAMS) => {
                    let g = self.grant()?;
                    self.awaiting = Awaiting::Start;
                    return Ok(Some(ClientEvent::Granted(g)));
                }
                (Awaiting::Start, state::TEST_START) => {}
                (Awaiting::Start, state::TEST_RUNNING) => {
                    self.awaiting = Awaiting::Running;
                    return Ok(Some(ClientEvent::Started));
                }
                (Awaiting::Running | Awaiting::Exchange, state::EXCHANGE_RESULTS)
                    if self.told_end =>
                {
                    self.exchange(out);
                }
                (Awaiting::Display, state::DISPLAY_RESULTS) => {
                    Self::state(out, state::IPERF_DONE);
                    self.awaiting = Awaiting::Done;
                    let r = self.theirs.take().unwrap_or_default();
                    return Ok(Some(ClientEvent::Results(Box::new(r))));
                }
                // (a server may say IPERF_DONE too: nothing)
                (_, state::IPERF_DONE) => {}
                (awaiting, b) => {
                    return Err(ProtoError::Malformed(format!(
                        "the iperf3 server sent state {b} while we awaited {awaiting:?} (is it an iperf3 server?)"
                    ))
                    .into());
                }
            }
        }
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn server_cpu(&self) -> (u32, u32) {
        (0, 0)
    }

    fn half_closes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        FlowCounters, Limits,
        conn::{ClientConn, ServerConn, Timeouts},
        dialect::Dialect,
        test::{Family, TestEnd},
    };

    const WAIT: Duration = Duration::from_secs(5);

    fn server(now: Instant) -> ServerConn {
        server_with(now, None)
    }

    fn server_with(now: Instant, auth: Option<Arc<dyn iperf3::Iperf3Auth>>) -> ServerConn {
        let t = Timeouts {
            first_bytes: WAIT,
            handshake: WAIT,
            idle: WAIT,
            test: Duration::from_secs(30),
            close_grace: WAIT,
        };
        ServerConn::new("srv", Limits::default(), None, [1; 32], (2, 100), t, now)
            .iperf3_auth(auth)
            .speaking(Dialect::Iperf3)
    }

    fn client(now: Instant) -> ClientConn {
        ClientConn::iperf3(Token([7; 32]), 5201, "test client", now, WAIT)
    }

    /// Move the bytes each way until neither has anything to send; the
    /// client's events, and the server's.
    fn shuttle(s: &mut ServerConn, c: &mut ClientConn, now: Instant) -> Vec<ClientEvent> {
        let mut got = Vec::new();
        loop {
            let to_s = c.output().to_vec();
            c.consumed(to_s.len());
            s.handle_bytes(now, &to_s);
            let to_c = s.output().to_vec();
            s.consumed(to_c.len());
            let mut ev = c.handle_bytes(&to_c).unwrap();
            while let Some(e) = ev {
                got.push(e);
                ev = c.process().unwrap();
            }
            if c.output().is_empty() && s.output().is_empty() {
                return got;
            }
        }
    }

    /// A grant of one data port, as a netserver makes it.
    fn a_grant() -> Grant {
        Grant {
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
        }
    }

    fn server_events(s: &mut ServerConn) -> Vec<ServerEvent> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    /// Our client speaker against our server speaker, in memory: the
    /// cookie, the parameters, the grant, the start, TEST_END, both
    /// results, IPERF_DONE; the server's figures reach the client as its
    /// side's, flow by flow.
    #[test]
    fn a_whole_test_in_memory() {
        let now = Instant::now();
        let (mut s, mut c) = (server(now), client(now));
        assert_eq!(c.capabilities().dialect, Dialect::Iperf3);
        assert_eq!(shuttle(&mut s, &mut c, now), vec![ClientEvent::Established]);
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.flows = 2;
        spec.end = TestEnd::Time { millis: 2000 };
        c.setup(spec, now, WAIT).unwrap();
        assert!(shuttle(&mut s, &mut c, now).is_empty());
        let asked = server_events(&mut s)
            .into_iter()
            .find_map(|e| match e {
                ServerEvent::Prepare(p) => Some(p),
                _ => None,
            })
            .expect("the server prepares the test");
        assert_eq!((asked.kind, asked.flows), (TestKind::TcpStream, 2));
        // the streams present the cookie the client's token makes
        assert_eq!(s.stream_cookie(), Some(iperf3::cookie_of(&Token([7; 32]))));
        s.granted(a_grant(), now);
        let ev = shuttle(&mut s, &mut c, now);
        let [ClientEvent::Granted(g)] = ev.as_slice() else {
            panic!("{ev:?}")
        };
        assert_eq!((g.data_port, g.token), (5201, Token([7; 32])));
        assert_eq!(g.recv_size, 128 * 1024);
        assert!(c.start(now, WAIT));
        s.streams_ready(now);
        assert_eq!(shuttle(&mut s, &mut c, now), vec![ClientEvent::Started]);
        assert!(!c.start(now, WAIT), "begun: nothing more to await");
        let flows = vec![
            FlowCounters {
                bytes_sent: 1000,
                ..FlowCounters::default()
            },
            FlowCounters {
                bytes_sent: 500,
                ..FlowCounters::default()
            },
        ];
        c.our_results(&SideResults {
            bytes_sent: 1500,
            flows: flows.clone(),
            ..SideResults::default()
        });
        c.done(ClientDone::default(), now, WAIT).unwrap();
        shuttle(&mut s, &mut c, now);
        assert!(server_events(&mut s).contains(&ServerEvent::EndTest));
        let received: Vec<FlowCounters> = flows
            .iter()
            .map(|f| FlowCounters {
                bytes_received: f.bytes_sent,
                ..FlowCounters::default()
            })
            .collect();
        s.test_ended(
            Ok(SideResults {
                bytes_received: 1500,
                elapsed_ns: 2_000_000_000,
                flows: received.clone(),
                flow_count: 2,
                ..SideResults::default()
            }),
            now,
        );
        let ev = shuttle(&mut s, &mut c, now);
        let [ClientEvent::Results(r)] = ev.as_slice() else {
            panic!("{ev:?}")
        };
        assert_eq!(r.bytes_received, 1500);
        assert_eq!(r.flows, received);
        assert_eq!(r.elapsed_ns, 2_000_000_000);
        // IPERF_DONE went: the server closes, and anything more from it
        // (a 3.21 server's late stream error) is let go
        assert!(s.is_closing());
        assert_eq!(c.handle_bytes(&[0xfe, 0, 0, 0, 205, 0, 0, 0, 0]), Ok(None));
        // one test a connection
        let again = TestSpec::new(TestKind::TcpStream, Family::V4);
        assert!(c.setup(again, now, WAIT).is_err());
    }

    /// Lets through the token "good" alone.
    struct OnlyGood;

    impl iperf3::Iperf3Auth for OnlyGood {
        fn check(&self, token: Option<&str>) -> Result<(), String> {
            match token {
                Some("good") => Ok(()),
                Some(_) => Err("wrong credentials".into()),
                None => Err("no credentials".into()),
            }
        }
    }

    /// A server that requires authentication: a client without a token,
    /// or with a wrong one, is told iperf3's "test authorization failed"
    /// (SERVER_ERROR, IEAUTHTEST) before any test is prepared; one with a
    /// good token is served.
    #[test]
    fn a_server_that_requires_authentication_refuses_in_iperf3s_words() {
        let now = Instant::now();
        let params = |token: Option<&str>| {
            let json = match token {
                Some(t) => format!(r#"{{"tcp":true,"time":1,"authtoken":"{t}"}}"#),
                None => r#"{"tcp":true,"time":1}"#.to_string(),
            };
            let mut b = (json.len() as u32).to_be_bytes().to_vec();
            b.extend_from_slice(json.as_bytes());
            b
        };
        for (token, served) in [(None, false), (Some("bad"), false), (Some("good"), true)] {
            let mut s = server_with(now, Some(Arc::new(OnlyGood)));
            s.handle_bytes(now, &iperf3::cookie_of(&Token([7; 32])));
            assert_eq!(s.output(), &[state::PARAM_EXCHANGE as u8]);
            let n = s.output().len();
            s.consumed(n);
            s.handle_bytes(now, &params(token));
            let events = server_events(&mut s);
            let prepared = events.iter().any(|e| matches!(e, ServerEvent::Prepare(_)));
            assert_eq!(prepared, served, "{token:?}: {events:?}");
            if !served {
                let mut refusal = vec![state::SERVER_ERROR as u8];
                refusal.extend_from_slice(&errno::IEAUTHTEST.to_be_bytes());
                refusal.extend_from_slice(&0i32.to_be_bytes());
                assert_eq!(s.output(), refusal.as_slice(), "{token:?}");
                assert!(events.contains(&ServerEvent::AuthFailed), "{events:?}");
                assert!(s.is_closing());
            }
        }
        // without an authorizer a token is ignored, as iperf3 -s does
        let mut s = server(now);
        s.handle_bytes(now, &iperf3::cookie_of(&Token([7; 32])));
        let n = s.output().len();
        s.consumed(n);
        s.handle_bytes(now, &params(Some("anything")));
        assert!(
            server_events(&mut s)
                .iter()
                .any(|e| matches!(e, ServerEvent::Prepare(_)))
        );
    }

    /// A client that said -t 2 and never says TEST_END: its test ends
    /// 2 s + the grace after it began (not at the daemon's limit), and it
    /// is told; one longer than the daemon's limit is refused by
    /// validation (`TestSpec::validate`).
    #[test]
    fn a_client_that_does_not_end_its_test_is_ended_after_its_length() {
        let now = Instant::now();
        let (mut s, mut c) = (server(now), client(now));
        shuttle(&mut s, &mut c, now);
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.end = TestEnd::Time { millis: 2000 };
        c.setup(spec, now, WAIT).unwrap();
        shuttle(&mut s, &mut c, now);
        let asked = server_events(&mut s)
            .into_iter()
            .find_map(|e| match e {
                ServerEvent::Prepare(p) => Some(p),
                _ => None,
            })
            .expect("prepared");
        assert_eq!(asked.iperf3.client_ends_after_ms, Some(2000));
        let limits = Limits {
            max_duration_ms: 1000,
            ..Limits::default()
        };
        let e = asked.validate(&limits).unwrap_err().to_string();
        assert!(e.contains("-t") && e.contains("--max-test-length"), "{e}");
        s.granted(a_grant(), now);
        s.streams_ready(now);
        let end = now + Duration::from_secs(2) + END_GRACE;
        assert_eq!(s.poll_timeout(), end);
        s.handle_timeout(end - Duration::from_millis(1));
        assert!(!s.is_closing());
        let n = s.output().len();
        s.consumed(n);
        s.handle_timeout(end);
        assert!(server_events(&mut s).contains(&ServerEvent::AbortTest));
        assert_eq!(s.output().first(), Some(&(state::SERVER_ERROR as u8)));
        assert!(s.is_closing());
    }

    /// Bytes from a server that is not iperf3's, or is hostile: each a
    /// clear error, none read past its bound.
    #[test]
    fn hostile_servers_are_refused_clearly() {
        let now = Instant::now();
        let said = |r: Result<Option<ClientEvent>, ClientConnError>| match r {
            Err(ClientConnError::Session(ClientError::Server(m))) => (m.code, m.message),
            other => panic!("{other:?}"),
        };
        // busy: ACCESS_DENIED instead of PARAM_EXCHANGE
        let (code, text) = said(client(now).handle_bytes(&[0xff]));
        assert_eq!(code, ErrorCode::Busy);
        assert!(text.contains("busy"), "{text}");
        // SERVER_ERROR with an errno, its numbers split across reads
        let mut c = client(now);
        assert_eq!(c.handle_bytes(&[9]), Ok(Some(ClientEvent::Established)));
        assert_eq!(c.handle_bytes(&[0xfe, 0, 0, 0, 124, 0, 0]), Ok(None));
        let (code, text) = said(c.handle_bytes(&[0, 105]));
        assert_eq!(code, ErrorCode::TestFailed);
        assert!(
            text.starts_with("iperf3 server error 124: unable to set socket buffer size: "),
            "{text}"
        );
        // an option it does not implement
        let (code, text) = said(client(now).handle_bytes(&[0xfe, 0, 0, 0, 13, 0, 0, 0, 0]));
        assert_eq!(code, ErrorCode::Unsupported);
        assert!(text.contains("not implemented"), "{text}");
        // a state byte out of turn (not an iperf3 server)
        let e = client(now).handle_bytes(&[4]).unwrap_err();
        assert!(format!("{e:?}").contains("state 4"), "{e:?}");
        // results longer than the bound: refused on the length's first
        // byte, before the rest comes
        let mut c = at_results(now);
        let e = c.handle_bytes(&[0x7f]).unwrap_err();
        assert!(format!("{e:?}").contains("more than"), "{e:?}");
        let mut c = at_results(now);
        let over = (iperf3::MAX_RESULTS_JSON as u32 + 1).to_be_bytes();
        let e = c.handle_bytes(&over).unwrap_err();
        assert!(format!("{e:?}").contains("more than"), "{e:?}");
        // results that are not iperf3's, or name a stream the test has not
        for bad in [&b"not json"[..], br#"{"streams":[{"id":2,"bytes":1}]}"#] {
            let mut c = at_results(now);
            assert!(c.handle_bytes(&iperf3::framed(bad)).is_err(), "{bad:?}");
        }
        // the server terminated mid-test
        let (_, text) = said(at_results(now).handle_bytes(&[11]));
        assert!(text.contains("terminated"), "{text}");
    }

    /// A client whose test ran and whose TEST_END went, awaiting the
    /// server's results.
    fn at_results(now: Instant) -> ClientConn {
        let mut c = client(now);
        let mut out = Vec::new();
        assert_eq!(c.handle_bytes(&[9]), Ok(Some(ClientEvent::Established)));
        c.setup(TestSpec::new(TestKind::TcpMaerts, Family::V4), now, WAIT)
            .unwrap();
        assert!(matches!(
            c.handle_bytes(&[10]),
            Ok(Some(ClientEvent::Granted(_)))
        ));
        assert_eq!(c.handle_bytes(&[1, 2]), Ok(Some(ClientEvent::Started)));
        // a receiving client tells the end early; the exchange comes
        // before our figures do, and is answered once they have
        let before = c.output().len();
        c.tell_end();
        assert_eq!(c.handle_bytes(&[13]), Ok(None));
        c.our_results(&SideResults::default());
        c.done(ClientDone::default(), now, WAIT).unwrap();
        out.extend_from_slice(c.output().get(before..).unwrap_or_default());
        assert_eq!(out.first(), Some(&(state::TEST_END as u8)), "{out:?}");
        assert!(out.len() > 5, "our results went: {out:?}");
        assert!(
            iperf3::take_json(&out[1..], iperf3::MAX_RESULTS_JSON)
                .unwrap()
                .is_some()
        );
        c
    }
}
