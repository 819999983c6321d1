//! One control connection as a state machine over bytes, in the way
//! quinn-proto separates a connection from its sockets: what arrived goes
//! in ([`ServerConn::handle_bytes`]), with the time; what to send comes out
//! ([`ServerConn::output`]); events come out of `poll_event`; and
//! `poll_timeout` says by when `handle_timeout` must be called. The core
//! owns the framing, the frame-size cap in both directions, the sealing of
//! frames once a key is agreed (behind [`Sealer`]), and every deadline of
//! the protocol. The daemon's session and the client's control stream only
//! move bytes and read the clock.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use crate::{
    codec,
    dialect::{self, Dialect, Sniff},
    error::ProtoError,
    frame,
    message::{ClientMsg, ErrorCode, ErrorMsg, ServerMsg},
    netperf2::{self, Frame, Request, Served},
    session::{
        Authenticator, ClientError, ClientEvent, ClientSession, ServerAction, ServerSession,
    },
    test::{
        ClientDone, Family, FlowCounters, ForeignConnections, Grant, Limits, SideResults, TestSpec,
    },
};

/// Whether, and how, this server serves netperf 2.7 clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netperf2Policy {
    /// Serve them (else they are told, in their own frame, that we do not).
    pub serve: bool,
    /// netperf 2.7's `-Z`: the text its first frame must carry (plaintext).
    pub passphrase: Option<String>,
    /// The family of the control connection, for requests that leave it
    /// unspecified.
    pub control_family: Family,
    /// Why they are refused, when they are.
    pub refused: dialect::Netperf2Refused,
}

impl Default for Netperf2Policy {
    fn default() -> Netperf2Policy {
        Netperf2Policy {
            serve: false,
            passphrase: None,
            control_family: Family::V4,
            refused: dialect::Netperf2Refused::Disabled,
        }
    }
}

/// A netperf 2.7 conversation's state.
#[derive(Debug)]
struct Hp {
    /// The passphrase frame came (or none is needed).
    passed: bool,
    /// The test being served.
    served: Option<Served>,
    /// When the server ends the test itself (netserver 2.7's padded timer).
    pad_deadline: Option<Instant>,
    /// The padded timer ended the running test.
    padded: bool,
}

/// Seals frame bodies once both ends proved the key, and checks the
/// peer's. The implementation (HMAC-SHA256 with sequence numbers) lives
/// outside this crate.
pub trait Sealer: Send {
    /// Append what proves the body's origin and order.
    fn seal(&mut self, body: &mut Vec<u8>);
    /// Check a sealed body and return the message within.
    fn open(&mut self, sealed: &[u8]) -> Result<Vec<u8>, String>;
}

/// Requests a connection may make without running a test (netperf 2.7's
/// CPU calibrations and system-information requests, refused or unknown
/// requests) before it is closed: a client needs a handful.
pub const MAX_REQUESTS_WITHOUT_TEST: u32 = 256;

/// Per-flow counters go in frames of their own after this many flows, so
/// that no frame carries more than a few tens of KiB however many flows a
/// test has.
pub const FLOWS_PER_FRAME: usize = 512;
/// The most flows whose counters a client takes from a server (a hostile
/// one could otherwise send them without end): the largest `--max-flows`.
pub const MAX_FLOWS_REPORTED: usize = 1 << 20;

/// Encode one message as a frame, sealed if `sealer` is given; the body is
/// checked against the cap before it goes out.
fn encode_frame<M: serde::Serialize>(
    msg: &M,
    sealer: &mut Option<Box<dyn Sealer>>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    let mut body = Vec::new();
    codec::encode_into(msg, &mut body)?;
    if let Some(s) = sealer {
        s.seal(&mut body);
    }
    if body.len() > frame::MAX_FRAME {
        return Err(ProtoError::FrameTooLarge {
            len: body.len(),
            max: frame::MAX_FRAME,
        });
    }
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// Take the first whole frame off `inbuf`, opened if sealed. `Ok(None)`:
/// more bytes are needed.
fn take_frame(
    inbuf: &mut Vec<u8>,
    sealer: &mut Option<Box<dyn Sealer>>,
) -> Result<Option<Vec<u8>>, ProtoError> {
    let Some((body, used)) = frame::split(inbuf)? else {
        return Ok(None);
    };
    let body = match sealer {
        Some(s) => s.open(body).map_err(ProtoError::Auth)?,
        None => body.to_vec(),
    };
    inbuf.drain(..used);
    Ok(Some(body))
}

/// The server's deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For the first bytes of a new connection.
    pub first_bytes: Duration,
    /// For hello and authentication, in all.
    pub handshake: Duration,
    /// Between tests.
    pub idle: Duration,
    /// For a granted test to end (data connections, the longest test, and
    /// some slack).
    pub test: Duration,
    /// Once we close, for our last frame to go out.
    pub close_grace: Duration,
}

/// What the daemon must do, after bytes or a deadline.
#[derive(Debug, PartialEq)]
pub enum ServerEvent {
    /// The first bytes are not this suite's protocol: netperf 2.7's, or
    /// nothing known. The bytes read so far come with it; the core does
    /// nothing more with the connection.
    Foreign {
        dialect: Option<Dialect>,
        bytes: Vec<u8>,
    },
    /// Hello (and authentication) done.
    Established,
    /// A valid test request: set up its data sockets, then call
    /// [`ServerConn::granted`] or [`ServerConn::prepare_failed`].
    Prepare(Box<TestSpec>),
    /// netperf's data phase is over.
    ClientDone(ClientDone),
    /// End the running test now (an error, the peer gone, a deadline).
    AbortTest,
    /// The client failed to authenticate (for the daemon's rate limit).
    AuthFailed,
    /// Something to log: 0 errors, 1 tests, 2 sessions.
    Log(u8, String),
    /// A test's results went out.
    ResultsSent(Box<SideResults>),
    /// End the running test now, as its natural end would (netserver
    /// 2.7's padded timer, for a netperf 2.7 client: the results follow).
    EndTest,
}

/// The server end of one control connection.
pub struct ServerConn {
    session: ServerSession,
    timeouts: Timeouts,
    started: Instant,
    got_bytes: bool,
    dialect: Option<Dialect>,
    idle_since: Instant,
    test_deadline: Option<Instant>,
    closing_since: Option<Instant>,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    sealer: Option<Box<dyn Sealer>>,
    events: VecDeque<ServerEvent>,
    netperf2: Netperf2Policy,
    hp: Option<Hp>,
    cpu: (u32, u32),
    /// Requests since the last test began.
    requests: u32,
}

impl std::fmt::Debug for ServerConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConn")
            .field("session", &self.session)
            .field("closing", &self.closing_since.is_some())
            .finish()
    }
}

impl ServerConn {
    /// A new connection at `now`. `nonce` is the challenge sent when `auth`
    /// is set; the caller draws it from a secure random source.
    pub fn new(
        software: impl Into<String>,
        limits: Limits,
        auth: Option<Box<dyn Authenticator>>,
        nonce: [u8; 32],
        cpu: (u32, u32),
        timeouts: Timeouts,
        now: Instant,
    ) -> ServerConn {
        ServerConn {
            session: ServerSession::new(software, limits, auth, nonce).with_cpu_info(cpu.0, cpu.1),
            timeouts,
            started: now,
            got_bytes: false,
            dialect: None,
            idle_since: now,
            test_deadline: None,
            closing_since: None,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            sealer: None,
            events: VecDeque::new(),
            netperf2: Netperf2Policy::default(),
            hp: None,
            cpu,
            requests: 0,
        }
    }

    /// One more request: whether it is one too many without a test (then
    /// the connection is closed, saying why).
    fn one_more_request(&mut self, now: Instant) -> bool {
        self.requests = self.requests.saturating_add(1);
        if self.requests <= MAX_REQUESTS_WITHOUT_TEST {
            return false;
        }
        let text =
            format!("{MAX_REQUESTS_WITHOUT_TEST} requests without a test: closing the connection");
        self.events
            .push_back(ServerEvent::Log(1, format!("refused: {text}")));
        self.fail(ErrorMsg::new(ErrorCode::Protocol, text), now);
        true
    }

    /// Serve netperf 2.7 clients by `policy`.
    pub fn with_netperf2(mut self, policy: Netperf2Policy) -> ServerConn {
        self.netperf2 = policy;
        self
    }

    pub fn established(&self) -> bool {
        match &self.hp {
            Some(hp) => hp.passed,
            None => self.session.established(),
        }
    }

    /// The dialect the connection speaks, once its first bytes said.
    pub fn dialect(&self) -> Option<Dialect> {
        self.dialect
    }

    /// Bytes waiting to be sent.
    pub fn output(&self) -> &[u8] {
        &self.outbuf
    }

    /// `n` bytes of [`ServerConn::output`] went out.
    pub fn consumed(&mut self, n: usize) {
        self.outbuf.drain(..n.min(self.outbuf.len()));
    }

    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Whether the connection is done: closing, and its last frame out (or
    /// the grace for it over).
    pub fn is_closed(&self, now: Instant) -> bool {
        match self.closing_since {
            Some(t) => self.outbuf.is_empty() || now >= t + self.timeouts.close_grace,
            None => false,
        }
    }

    pub fn is_closing(&self) -> bool {
        self.closing_since.is_some()
    }

    /// The next instant [`ServerConn::handle_timeout`] must be called by.
    pub fn poll_timeout(&self) -> Instant {
        let t = &self.timeouts;
        if let Some(c) = self.closing_since {
            return c + t.close_grace;
        }
        if let Some(p) = self.hp.as_ref().and_then(|h| h.pad_deadline) {
            return p;
        }
        if !self.established() {
            let total = self.started + t.handshake;
            return if self.got_bytes {
                total
            } else {
                total.min(self.started + t.first_bytes)
            };
        }
        match self.test_deadline {
            Some(d) => d,
            None => self.idle_since + t.idle,
        }
    }

    /// A deadline may have passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closing_since.is_some() || now < self.poll_timeout() {
            return;
        }
        if let Some(hp) = &mut self.hp
            && hp.pad_deadline.is_some_and(|p| now >= p)
        {
            hp.pad_deadline = None;
            hp.padded = true;
            self.events.push_back(ServerEvent::EndTest);
            return;
        }
        let t = &self.timeouts;
        let text = if !self.established() {
            if self.got_bytes {
                format!("handshake not completed within {} s", t.handshake.as_secs())
            } else {
                format!("nothing received within {} s", t.first_bytes.as_secs())
            }
        } else if self.test_deadline.is_some() {
            format!(
                "test exceeded this netserver's limit of {} s",
                t.test.as_secs()
            )
        } else {
            format!("control connection idle for {} s", t.idle.as_secs())
        };
        self.events
            .push_back(ServerEvent::Log(2, format!("closing: {text}")));
        self.fail(ErrorMsg::new(ErrorCode::Timeout, text), now);
    }

    /// Abort any test, send `err`, and close (a shutdown, a deadline).
    pub fn fail(&mut self, err: ErrorMsg, now: Instant) {
        if self.closing_since.is_some() {
            return;
        }
        self.abort_test();
        if self.hp.is_some() {
            // netperf 2.7 reads a response or results frame: an errno
            let errno = netperf2::errno_of(err.code);
            self.events.push_back(ServerEvent::Log(
                1,
                format!("netperf 2.7 client: {}", err.message),
            ));
            self.outbuf
                .extend_from_slice(netperf2::error_frame(0, errno).as_bytes());
        } else {
            self.send(&ServerMsg::Error(err));
        }
        self.close(now);
    }

    /// The peer closed or the connection broke.
    pub fn peer_gone(&mut self, now: Instant) {
        self.abort_test();
        self.close(now);
    }

    fn abort_test(&mut self) {
        if self.test_deadline.take().is_some() {
            self.events.push_back(ServerEvent::AbortTest);
        }
    }

    fn close(&mut self, now: Instant) {
        if self.closing_since.is_none() {
            self.closing_since = Some(now);
        }
    }

    /// Queue one message, sealed if the session is; a message that would
    /// not fit a frame is replaced by an error saying so.
    fn send(&mut self, msg: &ServerMsg) {
        if let Err(e) = encode_frame(msg, &mut self.sealer, &mut self.outbuf) {
            self.events
                .push_back(ServerEvent::Log(0, format!("cannot send a reply: {e}")));
            let err = ServerMsg::Error(ErrorMsg::new(
                ErrorCode::TestFailed,
                format!("netserver cannot send its reply: {e}"),
            ));
            let _ = encode_frame(&err, &mut self.sealer, &mut self.outbuf);
        }
    }

    /// Results, with per-flow counters in frames of their own first when
    /// there are more than one frame holds.
    fn send_results(&mut self, mut r: Box<SideResults>) {
        // what was turned away from the data port, for a client that asks
        if r.foreign_connections.closed > 0 && self.session.peer_can("foreign") {
            self.send(&ServerMsg::Foreign(r.foreign_connections));
        }
        // a windowed test's whole-run counters first, in frames of their own
        let totals = std::mem::take(&mut r.totals);
        for (i, chunk) in totals.chunks(FLOWS_PER_FRAME).enumerate() {
            self.send(&ServerMsg::FlowTotals {
                first: (i * FLOWS_PER_FRAME) as u32,
                counters: chunk.to_vec(),
            });
        }
        if r.flows.len() > FLOWS_PER_FRAME {
            let flows = std::mem::take(&mut r.flows);
            for (i, chunk) in flows.chunks(FLOWS_PER_FRAME).enumerate() {
                self.send(&ServerMsg::Flows {
                    first: (i * FLOWS_PER_FRAME) as u32,
                    counters: chunk.to_vec(),
                });
            }
            r.flow_count = flows.len() as u32;
        } else if !r.flows.is_empty() {
            r.flow_count = r.flows.len() as u32;
        }
        self.send(&ServerMsg::Results(r.clone()));
        self.events.push_back(ServerEvent::ResultsSent(r));
    }

    /// Bytes arrived at `now`.
    pub fn handle_bytes(&mut self, now: Instant, data: &[u8]) {
        if data.is_empty() || self.closing_since.is_some() {
            return;
        }
        self.got_bytes = true;
        self.inbuf.extend_from_slice(data);
        if self.dialect.is_none() {
            match dialect::sniff(&self.inbuf) {
                Sniff::NeedMore => return,
                Sniff::Is(Dialect::Native) => self.dialect = Some(Dialect::Native),
                Sniff::Is(Dialect::Netperf2) if self.netperf2.serve => {
                    self.dialect = Some(Dialect::Netperf2);
                    let passed = self.netperf2.passphrase.is_none();
                    self.hp = Some(Hp {
                        passed,
                        served: None,
                        pad_deadline: None,
                        padded: false,
                    });
                    self.events
                        .push_back(ServerEvent::Log(2, "netperf 2.7 client".into()));
                    if passed {
                        self.events.push_back(ServerEvent::Established);
                    }
                }
                Sniff::Is(d) => {
                    self.foreign(Some(d), now);
                    return;
                }
                Sniff::Unknown => {
                    self.foreign(None, now);
                    return;
                }
            }
        }
        if self.hp.is_some() {
            self.process_hp(now);
        } else {
            self.process(now);
        }
    }

    /// Whole 656-byte frames of a netperf 2.7 client.
    fn process_hp(&mut self, now: Instant) {
        while self.closing_since.is_none() {
            let Some(f) = Frame::from_bytes(&self.inbuf) else {
                return;
            };
            self.inbuf.drain(..netperf2::FRAME_LEN);
            self.idle_since = now;
            if self.one_more_request(now) {
                return;
            }
            let req = Request::decode(&f);
            let Some(hp) = self.hp.as_mut() else { return };
            if let Request::Passphrase(text) = &req {
                if !hp.passed {
                    let right = self.netperf2.passphrase.as_ref().is_some_and(|p| {
                        crate::session::constant_time_eq(p.as_bytes(), text.as_bytes())
                    });
                    if right {
                        hp.passed = true;
                        self.events.push_back(ServerEvent::Established);
                    } else {
                        // as netserver 2.7: closed without a word
                        self.events.push_back(ServerEvent::AuthFailed);
                        self.events.push_back(ServerEvent::Log(
                            1,
                            "refused: a netperf 2.7 client with the wrong passphrase".into(),
                        ));
                        self.close(now);
                    }
                }
                // later, or unneeded, passphrases are ignored, as netserver 2.7
                continue;
            }
            if !hp.passed {
                self.events.push_back(ServerEvent::AuthFailed);
                self.events.push_back(ServerEvent::Log(
                    1,
                    "refused: a netperf 2.7 client without the passphrase (-Z)".into(),
                ));
                self.close(now);
                return;
            }
            let fam = self.netperf2.control_family;
            let served = match &req {
                Request::Omni(r) => netperf2::serve_omni(r, fam),
                Request::Classic(r) => netperf2::serve_classic(r, fam),
                Request::CpuCalibrate => {
                    let (cpus, rate) = self.cpu;
                    let reply = netperf2::cpu_calibrate_reply(rate as f32, cpus);
                    self.outbuf.extend_from_slice(reply.as_bytes());
                    continue;
                }
                Request::Debug => {
                    let reply = Frame::new(netperf2::DEBUG_OK, 0);
                    self.outbuf.extend_from_slice(reply.as_bytes());
                    continue;
                }
                Request::SysInfo => {
                    self.outbuf
                        .extend_from_slice(netperf2::sysinfo_reply().as_bytes());
                    continue;
                }
                Request::Unknown(code) => {
                    self.events.push_back(ServerEvent::Log(
                        1,
                        format!("netperf 2.7 client: unknown request {code}"),
                    ));
                    let reply = netperf2::error_frame(0, netperf2::UNKNOWN_REQUEST);
                    self.outbuf.extend_from_slice(reply.as_bytes());
                    continue;
                }
                Request::Passphrase(_) => continue,
            };
            let reply_type = match &req {
                Request::Classic(r) => r.code + 1,
                _ => netperf2::OMNI_RESPONSE,
            };
            if hp.served.is_some() {
                // netperf 2.7 sends nothing during a test
                self.events.push_back(ServerEvent::Log(
                    1,
                    "netperf 2.7 client: a request during a test".into(),
                ));
                self.abort_test();
                self.close(now);
                return;
            }
            let served = served.and_then(|s| match s.spec.validate(self.session.limits()) {
                Ok(()) => Ok(s),
                Err(e) => Err(netperf2::Refusal {
                    errno: netperf2::EINVAL,
                    why: e.to_string(),
                }),
            });
            match served {
                Ok(s) => {
                    let spec = Box::new(s.spec.clone());
                    hp.served = Some(s);
                    hp.padded = false;
                    self.requests = 0;
                    self.events.push_back(ServerEvent::Prepare(spec));
                }
                Err(r) => {
                    self.events.push_back(ServerEvent::Log(
                        1,
                        format!("refused: netperf 2.7 request: {}", r.why),
                    ));
                    let reply = netperf2::error_frame(reply_type, r.errno);
                    self.outbuf.extend_from_slice(reply.as_bytes());
                }
            }
        }
    }

    fn foreign(&mut self, dialect: Option<Dialect>, now: Instant) {
        let bytes = std::mem::take(&mut self.inbuf);
        self.events
            .push_back(ServerEvent::Foreign { dialect, bytes });
        match dialect {
            // Nothing we know: say so in our protocol, and close.
            None => {
                let err = self.session.protocol_error(&ProtoError::NotOurProtocol);
                self.send(&err);
            }
            // netperf 2.7: say so in its own frame, and close.
            Some(Dialect::Netperf2) => {
                if let Some(ServerEvent::Foreign { bytes, .. }) = self.events.back() {
                    let refusal = dialect::netperf2_refusal(bytes, self.netperf2.refused);
                    self.outbuf.extend_from_slice(&refusal);
                }
            }
            Some(Dialect::Native) => {}
        }
        self.closing_since = Some(now);
    }

    fn process(&mut self, now: Instant) {
        while self.closing_since.is_none() {
            let next = take_frame(&mut self.inbuf, &mut self.sealer)
                .and_then(|b| b.map(|b| ClientMsg::decode(&b)).transpose());
            match next {
                Ok(Some(msg)) => {
                    self.idle_since = now;
                    if self.one_more_request(now) {
                        return;
                    }
                    let was = self.session.established();
                    let action = self.session.handle(msg);
                    self.act(action, now);
                    if !was && self.session.established() {
                        self.events.push_back(ServerEvent::Established);
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.events.push_back(ServerEvent::Log(1, e.to_string()));
                    let msg = self.session.protocol_error(&e);
                    self.abort_test();
                    self.send(&msg);
                    self.close(now);
                    return;
                }
            }
        }
    }

    fn act(&mut self, action: ServerAction, now: Instant) {
        match action {
            ServerAction::Reply(m) => {
                self.send(&m);
                // The proofs are exchanged: seal every frame from now on.
                if matches!(m, ServerMsg::AuthOk { .. }) {
                    self.sealer = self.session.sealer();
                }
            }
            ServerAction::ReplyAndClose(m) => {
                if let ServerMsg::Error(e) = &m {
                    if e.code == ErrorCode::Auth {
                        self.events.push_back(ServerEvent::AuthFailed);
                    }
                    self.events
                        .push_back(ServerEvent::Log(1, format!("refused: {}", e.message)));
                }
                self.abort_test();
                self.send(&m);
                self.close(now);
            }
            ServerAction::Prepare(spec) => {
                self.requests = 0;
                self.events.push_back(ServerEvent::Prepare(spec));
            }
            ServerAction::ClientDone(done) => self.events.push_back(ServerEvent::ClientDone(done)),
            ServerAction::SendResults(m) => {
                self.test_deadline = None;
                self.idle_since = now;
                match m {
                    ServerMsg::Results(r) => self.send_results(r),
                    m => self.send(&m),
                }
            }
            ServerAction::Close => self.close(now),
        }
    }

    /// The test's data sockets are ready: tell the client.
    pub fn granted(&mut self, grant: Grant, now: Instant) {
        if let Some(hp) = &mut self.hp {
            if let Some(s) = &hp.served {
                self.outbuf
                    .extend_from_slice(netperf2::response(s, &grant).as_bytes());
                hp.pad_deadline = s.pad_timer.map(|d| now + d);
                self.test_deadline = Some(now + self.timeouts.test);
            }
            return;
        }
        let m = self.session.granted(grant);
        self.test_deadline = Some(now + self.timeouts.test);
        self.send(&m);
    }

    /// Setting the test up failed: tell the client, and stay open.
    pub fn prepare_failed(&mut self, err: ErrorMsg) {
        if let Some(hp) = &mut self.hp {
            let kind = match hp.served.take() {
                Some(s) if s.code != netperf2::DO_OMNI => s.code + 1,
                _ => netperf2::OMNI_RESPONSE,
            };
            self.events.push_back(ServerEvent::Log(
                1,
                format!("refused: netperf 2.7 request: {}", err.message),
            ));
            self.outbuf.extend_from_slice(
                netperf2::error_frame(kind, netperf2::errno_of(err.code)).as_bytes(),
            );
            return;
        }
        let m = self.session.prepare_failed(err);
        self.send(&m);
    }

    /// The server's side of the test ended.
    pub fn test_ended(&mut self, outcome: Result<SideResults, ErrorMsg>, now: Instant) {
        if let Err(e) = &outcome {
            self.events
                .push_back(ServerEvent::Log(1, format!("test failed: {}", e.message)));
        }
        if let Some(hp) = &mut self.hp {
            let Some(s) = hp.served.take() else { return };
            hp.pad_deadline = None;
            self.test_deadline = None;
            self.idle_since = now;
            match outcome {
                Ok(r) => {
                    let f = netperf2::results(&s, &r, hp.padded);
                    self.outbuf.extend_from_slice(f.as_bytes());
                    self.events.push_back(ServerEvent::ResultsSent(Box::new(r)));
                }
                Err(e) => {
                    // netserver 2.7 sends the errno and ends the connection
                    let f =
                        netperf2::error_frame(netperf2::OMNI_RESULTS, netperf2::errno_of(e.code));
                    self.outbuf.extend_from_slice(f.as_bytes());
                    self.close(now);
                }
            }
            return;
        }
        if let Some(action) = self.session.test_ended(outcome) {
            if matches!(action, ServerAction::ReplyAndClose(_)) {
                self.test_deadline = None;
            }
            self.act(action, now);
        }
    }
}

/// The client end of one control connection: what to send, what arrived,
/// and by when an answer is due.
pub struct ClientConn {
    session: ClientSession,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    sealer: Option<Box<dyn Sealer>>,
    deadline: Option<(Instant, &'static str)>,
    flows: Vec<FlowCounters>,
    /// A windowed test's whole-run counters, from `FlowTotals` frames.
    totals: Vec<FlowCounters>,
    /// What the server turned away from the data port, from a `Foreign`
    /// frame.
    foreign: ForeignConnections,
    /// No frame has come yet (the first may be netperf 2.7's).
    awaiting_first: bool,
}

impl std::fmt::Debug for ClientConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConn")
            .field("session", &self.session)
            .finish()
    }
}

/// What went wrong on the client's side of a control connection.
#[derive(Debug, PartialEq)]
pub enum ClientConnError {
    /// The server refused, or broke the protocol.
    Session(ClientError),
    /// Nothing came by the deadline: what was awaited, and for how long.
    Timeout(&'static str),
    /// The server answered our hello in netperf 2.7's protocol: it is
    /// netperf 2.7's netserver (its reply, a 656-byte frame, is left in
    /// [`ClientConn::take_input`]).
    Netperf2,
}

impl From<ClientError> for ClientConnError {
    fn from(e: ClientError) -> Self {
        ClientConnError::Session(e)
    }
}

impl From<ProtoError> for ClientConnError {
    fn from(e: ProtoError) -> Self {
        ClientConnError::Session(ClientError::Protocol(e))
    }
}

impl ClientConn {
    /// A new conversation: the hello is queued, due back within `wait`.
    pub fn new(
        session: ClientSession,
        software: &str,
        now: Instant,
        wait: Duration,
    ) -> Result<ClientConn, ClientConnError> {
        let mut c = ClientConn {
            session,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            sealer: None,
            deadline: None,
            flows: Vec::new(),
            totals: Vec::new(),
            foreign: ForeignConnections::default(),
            awaiting_first: true,
        };
        c.send(&ClientSession::hello(software))?;
        c.pad_hello();
        c.expect(now, wait, "hello");
        Ok(c)
    }

    /// Our hello goes as a frame of exactly netperf 2.7's 656 bytes: our
    /// netserver reads the hello and ignores what follows it; netperf
    /// 2.7's netserver reads one whole request of an unknown type and
    /// answers it at once (serv_errno 998), which tells us what it is
    /// without waiting for a timeout.
    fn pad_hello(&mut self) {
        let total = crate::netperf2::FRAME_LEN;
        if self.outbuf.len() < total
            && let Some(len) = self.outbuf.get_mut(..4)
        {
            len.copy_from_slice(&((total - 4) as u32).to_be_bytes());
            self.outbuf.resize(total, 0);
        }
    }

    /// What arrived and was not consumed (after [`ClientConnError::Netperf2`]:
    /// the beginning of netperf 2.7's reply).
    pub fn take_input(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.inbuf)
    }

    pub fn session(&self) -> &ClientSession {
        &self.session
    }

    pub fn output(&self) -> &[u8] {
        &self.outbuf
    }

    pub fn consumed(&mut self, n: usize) {
        self.outbuf.drain(..n.min(self.outbuf.len()));
    }

    /// When the awaited answer is due, and what it is.
    pub fn poll_timeout(&self) -> Option<(Instant, &'static str)> {
        self.deadline
    }

    /// The awaited answer did not come by the deadline.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ClientConnError> {
        match self.deadline {
            Some((d, what)) if now >= d => Err(ClientConnError::Timeout(what)),
            _ => Ok(()),
        }
    }

    fn expect(&mut self, now: Instant, wait: Duration, what: &'static str) {
        self.deadline = Some((now + wait, what));
    }

    fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientConnError> {
        Ok(encode_frame(msg, &mut self.sealer, &mut self.outbuf)?)
    }

    /// Ask for a test; the grant is due within `wait`.
    pub fn setup(
        &mut self,
        spec: TestSpec,
        now: Instant,
        wait: Duration,
    ) -> Result<(), ClientConnError> {
        let m = self.session.setup(spec)?;
        self.send(&m)?;
        self.expect(now, wait, "answer to the test request");
        Ok(())
    }

    /// Our data phase is over; the results are due within `wait`.
    pub fn done(
        &mut self,
        done: ClientDone,
        now: Instant,
        wait: Duration,
    ) -> Result<(), ClientConnError> {
        let m = self.session.done(done)?;
        self.send(&m)?;
        self.flows.clear();
        self.foreign = ForeignConnections::default();
        self.expect(now, wait, "results");
        Ok(())
    }

    pub fn bye(&mut self) {
        let _ = self.send(&ClientMsg::Bye);
        self.deadline = None;
    }

    /// Bytes arrived. Returns what they completed, if anything: the
    /// conversation established, a grant, or results (with every flow's
    /// counters gathered from the frames before them).
    pub fn handle_bytes(&mut self, data: &[u8]) -> Result<Option<ClientEvent>, ClientConnError> {
        self.inbuf.extend_from_slice(data);
        if self.awaiting_first && dialect::sniff_reply(&self.inbuf) == Sniff::Is(Dialect::Netperf2)
        {
            return Err(ClientConnError::Netperf2);
        }
        self.process()
    }

    /// Whether a whole frame is still waiting in what arrived.
    pub fn process(&mut self) -> Result<Option<ClientEvent>, ClientConnError> {
        while let Some(body) = take_frame(&mut self.inbuf, &mut self.sealer)? {
            self.awaiting_first = false;
            let msg = ServerMsg::decode(&body)?;
            if let ServerMsg::Foreign(f) = msg {
                self.foreign = f;
                continue;
            }
            if let ServerMsg::Flows { first, counters }
            | ServerMsg::FlowTotals { first, counters } = &msg
            {
                let list = if matches!(msg, ServerMsg::Flows { .. }) {
                    &mut self.flows
                } else {
                    &mut self.totals
                };
                if *first as usize != list.len() {
                    return Err(ProtoError::Malformed(format!(
                        "flow counters from flow {first}, expected {}",
                        list.len()
                    ))
                    .into());
                }
                if list.len() + counters.len() > MAX_FLOWS_REPORTED {
                    return Err(ProtoError::Malformed(format!(
                        "counters of more than {MAX_FLOWS_REPORTED} flows"
                    ))
                    .into());
                }
                list.extend_from_slice(counters);
                continue;
            }
            match self.session.handle(msg)? {
                ClientEvent::Send(m) => self.send(&m)?,
                ClientEvent::Established => {
                    // The proofs are exchanged: seal every frame from now on.
                    self.sealer = self.session.sealer();
                    self.deadline = None;
                    return Ok(Some(ClientEvent::Established));
                }
                ClientEvent::Results(mut r) => {
                    if !self.flows.is_empty() {
                        r.flows = std::mem::take(&mut self.flows);
                    }
                    r.totals = std::mem::take(&mut self.totals);
                    r.foreign_connections = std::mem::take(&mut self.foreign);
                    if !r.totals.is_empty() && r.totals.len() != (r.flow_count.max(1) as usize) {
                        return Err(ProtoError::Malformed(format!(
                            "results of {} flows carried whole-run counters of {}",
                            r.flow_count,
                            r.totals.len()
                        ))
                        .into());
                    }
                    if r.flows.len() != r.flow_count as usize
                        && !(r.flow_count <= 1 && r.flows.is_empty())
                    {
                        return Err(ProtoError::Malformed(format!(
                            "results of {} flows carried counters of {}",
                            r.flow_count,
                            r.flows.len()
                        ))
                        .into());
                    }
                    self.deadline = None;
                    return Ok(Some(ClientEvent::Results(r)));
                }
                e => {
                    self.deadline = None;
                    return Ok(Some(e));
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        message::Hello,
        session::Role,
        test::{Family, TestKind},
    };

    fn timeouts() -> Timeouts {
        Timeouts {
            first_bytes: Duration::from_secs(5),
            handshake: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            test: Duration::from_secs(30),
            close_grace: Duration::from_secs(2),
        }
    }

    fn server(now: Instant) -> ServerConn {
        ServerConn::new(
            "srv",
            Limits::default(),
            None,
            [1; 32],
            (2, 100),
            timeouts(),
            now,
        )
    }

    fn client(now: Instant) -> ClientConn {
        ClientConn::new(
            ClientSession::new(None, [2; 32]),
            "cli",
            now,
            Duration::from_secs(10),
        )
        .unwrap()
    }

    fn hp_server(now: Instant) -> ServerConn {
        server(now).with_netperf2(Netperf2Policy {
            serve: true,
            ..Netperf2Policy::default()
        })
    }

    /// A netperf 2.7 request of every type up to past the largest one it
    /// sends: each is answered by whole 656-byte frames (or, for a test,
    /// a Prepare that passed validation), and nothing panics.
    #[test]
    fn netperf2_requests_of_every_type() {
        let now = Instant::now();
        for t in 0..=1100u32 {
            let mut s = hp_server(now);
            let mut f = Frame::new(t, -1);
            // alignments of 8, and a stock test length, as netperf 2.7 sends
            for w in [4, 10] {
                f.set_word(w, 8);
            }
            s.handle_bytes(now, f.as_bytes());
            while let Some(ev) = s.poll_event() {
                if let ServerEvent::Prepare(spec) = ev {
                    assert!(spec.validate(&Limits::default()).is_ok(), "type {t}");
                    s.granted(grant(), now);
                    s.test_ended(Ok(SideResults::default()), now);
                }
            }
            if (1..=1000).contains(&t) {
                assert_eq!(s.output().len() % netperf2::FRAME_LEN, 0, "type {t}");
            } else {
                // not a request type of netperf 2.7's: our framing refuses
                // it, or waits for the rest of a frame that long
                assert_ne!(s.dialect(), Some(Dialect::Netperf2), "type {t}");
            }
        }
    }

    /// A client that asks and asks without running a test is answered a
    /// bounded number of times, then closed with the reason, in its own
    /// protocol.
    #[test]
    fn requests_without_a_test_are_bounded() {
        let now = Instant::now();
        let mut s = hp_server(now);
        let unknown = Frame::new(999, -1);
        for _ in 0..10_000 {
            s.handle_bytes(now, unknown.as_bytes());
            if s.is_closing() {
                break;
            }
        }
        assert!(s.is_closing());
        let frames = s.output().len() / netperf2::FRAME_LEN;
        assert_eq!(
            frames as u32,
            MAX_REQUESTS_WITHOUT_TEST + 1,
            "answers, then the reason"
        );
        let last = Frame::from_bytes(&s.output()[(frames - 1) * netperf2::FRAME_LEN..]).unwrap();
        assert_eq!(last.int(1), netperf2::EINVAL);
        // ours: refused test requests
        let mut s = server(now);
        let mut c = client(now);
        shuttle(&mut s, &mut c, now);
        let mut bad = TestSpec::new(TestKind::TcpRr, Family::V4);
        bad.flows = 0;
        let m = ClientMsg::Setup(Box::new(bad));
        let frame = crate::frame::encode(&m).unwrap();
        for _ in 0..1_000 {
            s.handle_bytes(now, &frame);
        }
        assert!(s.is_closing());
        while let Some(e) = s.poll_event() {
            if let ServerEvent::Log(1, t) = e
                && t.contains("requests without a test")
            {
                return;
            }
        }
        panic!("no log line says why");
    }

    /// The padded timer: a netperf 2.7 UDP_STREAM that never sends its
    /// empty datagrams is ended by the server 4 s after its length, and
    /// the results leave the pad out.
    #[test]
    fn netperf2_padded_timer_ends_the_test() {
        let now = Instant::now();
        let mut s = hp_server(now);
        let r = netperf2::omni::OmniRequest {
            socket_type: netperf2::omni::NST_DGRAM,
            protocol: netperf2::omni::IPPROTO_UDP,
            test_length: 1,
            ..Default::default()
        };
        s.handle_bytes(now, r.encode().as_bytes());
        assert!(matches!(s.poll_event(), Some(ServerEvent::Log(..))));
        assert!(matches!(s.poll_event(), Some(ServerEvent::Established)));
        assert!(matches!(s.poll_event(), Some(ServerEvent::Prepare(_))));
        s.granted(grant(), now);
        assert_eq!(s.poll_timeout(), now + Duration::from_secs(5));
        s.handle_timeout(now + Duration::from_secs(5));
        assert_eq!(s.poll_event(), Some(ServerEvent::EndTest));
        s.test_ended(
            Ok(SideResults {
                elapsed_ns: 5_000_000_000,
                ..SideResults::default()
            }),
            now + Duration::from_secs(5),
        );
        let out = s.output();
        assert_eq!(out.len(), 2 * netperf2::FRAME_LEN);
        let results = Frame::from_bytes(&out[netperf2::FRAME_LEN..]).unwrap();
        let elapsed = netperf2::omni::OmniResults::decode(&results).elapsed_time;
        assert!((elapsed - 1.0).abs() < 1e-6, "{elapsed}");
    }

    fn grant() -> Grant {
        Grant {
            data_port: 5000,
            token: crate::test::Token([7; 32]),
            send_buf: 1,
            recv_buf: 2,
            send_size: 3,
            recv_size: 4,
            send_width: 1,
            recv_width: 1,
            measure_cpu: false,
            num_cpus: 2,
        }
    }

    /// Move the bytes each way until neither has anything to send.
    fn shuttle(s: &mut ServerConn, c: &mut ClientConn, now: Instant) -> Vec<ClientEvent> {
        let mut got = Vec::new();
        loop {
            let to_s = c.output().to_vec();
            c.consumed(to_s.len());
            s.handle_bytes(now, &to_s);
            let to_c = s.output().to_vec();
            s.consumed(to_c.len());
            if let Some(e) = c.handle_bytes(&to_c).unwrap() {
                got.push(e);
            }
            if c.output().is_empty() && s.output().is_empty() {
                return got;
            }
        }
    }

    #[test]
    fn a_test_in_memory_with_many_flows() {
        let now = Instant::now();
        let mut s = server(now);
        let mut c = client(now);
        assert_eq!(shuttle(&mut s, &mut c, now), vec![ClientEvent::Established]);
        assert_eq!(s.poll_event(), Some(ServerEvent::Established));
        c.setup(
            TestSpec::new(TestKind::TcpRr, Family::V4),
            now,
            Duration::from_secs(5),
        )
        .unwrap();
        shuttle(&mut s, &mut c, now);
        assert!(matches!(s.poll_event(), Some(ServerEvent::Prepare(_))));
        s.granted(grant(), now);
        let e = shuttle(&mut s, &mut c, now);
        assert!(matches!(e.as_slice(), [ClientEvent::Granted(_)]));
        // the test deadline is the test's
        assert_eq!(s.poll_timeout(), now + Duration::from_secs(30));
        c.done(ClientDone::default(), now, Duration::from_secs(5))
            .unwrap();
        shuttle(&mut s, &mut c, now);
        assert!(matches!(s.poll_event(), Some(ServerEvent::ClientDone(_))));
        // 10,000 flows: more than one frame holds
        let flows: Vec<FlowCounters> = (0..10_000u64)
            .map(|i| FlowCounters {
                transactions: i,
                ..FlowCounters::default()
            })
            .collect();
        s.test_ended(
            Ok(SideResults {
                transactions: flows.iter().map(|f| f.transactions).sum(),
                flows,
                ..SideResults::default()
            }),
            now,
        );
        let e = shuttle(&mut s, &mut c, now);
        let [ClientEvent::Results(r)] = e.as_slice() else {
            panic!("{e:?}")
        };
        assert_eq!(r.flows.len(), 10_000);
        assert_eq!(r.flows[9_999].transactions, 9_999);
        assert_eq!(r.flow_count, 10_000);
        assert_eq!(s.poll_timeout(), now + Duration::from_secs(60));
    }

    #[test]
    fn deadlines_close_with_a_reason() {
        let now = Instant::now();
        let mut s = server(now);
        assert_eq!(s.poll_timeout(), now + Duration::from_secs(5));
        s.handle_timeout(now + Duration::from_secs(4));
        assert!(!s.is_closing());
        s.handle_timeout(now + Duration::from_secs(5));
        assert!(s.is_closing());
        let (m, _) = frame::decode::<ServerMsg>(s.output()).unwrap().unwrap();
        let ServerMsg::Error(e) = m else { panic!() };
        assert_eq!(e.code, ErrorCode::Timeout);
        assert!(e.message.contains("nothing received within 5 s"));
        // a dribbling client gets the whole handshake limit, no more
        let mut s = server(now);
        s.handle_bytes(now, &[0]);
        assert_eq!(s.poll_timeout(), now + Duration::from_secs(10));
    }

    #[test]
    fn a_client_asks_too_late_for_an_answer() {
        let now = Instant::now();
        let mut c = ClientConn::new(
            ClientSession::new(None, [2; 32]),
            "cli",
            now,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(c.handle_timeout(now + Duration::from_secs(9)), Ok(()));
        assert_eq!(
            c.handle_timeout(now + Duration::from_secs(10)),
            Err(ClientConnError::Timeout("hello"))
        );
    }

    #[test]
    fn the_first_bytes_choose_the_dialect() {
        let now = Instant::now();
        // netperf 2.7's first frame: a request type, then -1
        let mut s = server(now);
        let mut hp = vec![0u8; 656];
        hp[..8].copy_from_slice(&[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff]);
        s.handle_bytes(now, &hp[..20]);
        let Some(ServerEvent::Foreign { dialect, bytes }) = s.poll_event() else {
            panic!()
        };
        assert_eq!(dialect, Some(Dialect::Netperf2));
        assert_eq!(bytes.len(), 20);
        // answered in netperf 2.7's own frame: remote error 93
        assert_eq!(s.output().len(), 656);
        assert_eq!(&s.output()[..8], &[0, 0, 0, 98, 0, 0, 0, 93]);
        assert!(s.is_closing());
        // something else entirely: ours, wrongly framed
        let mut s = server(now);
        s.handle_bytes(now, b"GET / HTTP/1.1\r\n\r\n");
        assert!(
            matches!(s.poll_event(), Some(ServerEvent::Log(1, m)) if m.contains("exceeds the limit"))
        );
        assert!(s.is_closing());
        // ours, byte by byte
        let mut s = server(now);
        let hello = crate::frame::encode(&ClientMsg::Hello(Hello::new("x"))).unwrap();
        for b in &hello {
            s.handle_bytes(now, &[*b]);
        }
        assert_eq!(s.poll_event(), Some(ServerEvent::Established));
    }

    #[test]
    fn frames_too_large_are_not_sent() {
        let now = Instant::now();
        let mut s = server(now);
        s.send(&ServerMsg::Error(ErrorMsg::new(
            ErrorCode::TestFailed,
            "x".repeat(70_000),
        )));
        let (m, _) = frame::decode::<ServerMsg>(s.output()).unwrap().unwrap();
        let ServerMsg::Error(e) = m else { panic!() };
        assert!(e.message.contains("cannot send its reply"), "{}", e.message);
        let _ = Role::Client;
    }
}
