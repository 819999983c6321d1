//! One control connection as a state machine over bytes, in the way
//! quinn-proto separates a connection from its sockets: what arrived goes
//! in ([`ServerConn::handle_bytes`]), with the time; what to send comes out
//! ([`ServerConn::output`]); events come out of `poll_event`; and
//! `poll_timeout` says by when `handle_timeout` must be called. The core
//! owns the bytes in and out, the events and every deadline of the
//! protocol; what the bytes mean belongs to the dialect the first bytes
//! chose, a *speaker* ([`ours`] or [`netperf2`]), behind one interface:
//! the core never asks which one it drives. The daemon's session and the
//! client's control stream only move bytes and read the clock.
//!
//! # Layout
//! - this file: the two cores ([`ServerConn`], [`ClientConn`]), the
//!   speakers' interfaces, deadlines and events.
//! - [`ours`]: this suite's protocol (frames, sealing, sessions).
//! - [`netperf2`]: netperf 2.7's 656-byte frames, both ends.
//! - [`iperf3`]: iperf3's state bytes and JSON, both ends.

pub mod iperf3;
pub mod netperf2;
pub mod ours;

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use crate::{
    capabilities::Capabilities,
    dialect::{self, Dialect, Sniff},
    error::ProtoError,
    message::{ErrorCode, ErrorMsg},
    session::{Authenticator, ClientError, ClientEvent, ClientSession},
    test::{
        ClientDone, ClientSummary, Family, Grant, InterimReport, Limits, SideResults, TestSpec,
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

/// Per-flow counters go in frames of their own after this many flows, so
/// that no frame carries more than a few tens of KiB however many flows a
/// test has.
pub const FLOWS_PER_FRAME: usize = 512;
/// The most flows whose counters a client takes from a server (a hostile
/// one could otherwise send them without end): the largest `--max-flows`.
pub const MAX_FLOWS_REPORTED: usize = 1 << 20;
/// Requests a connection may make without running a test (netperf 2.7's
/// CPU calibrations and system-information requests, refused or unknown
/// requests) before it is closed: a client needs a handful.
pub const MAX_REQUESTS_WITHOUT_TEST: u32 = 256;

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
    /// A client this server does not serve in its protocol (netperf 2.7's,
    /// refused by policy): it was told why, and the connection closes.
    Foreign { dialect: Dialect, bytes: Vec<u8> },
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
    /// The client was refused, told why (the text it was told): for the
    /// log's `refused` events and their rate limit.
    Refused(String),
    /// A test's results went out.
    ResultsSent(Box<SideResults>),
    /// End the running test now, as its natural end would (netserver
    /// 2.7's padded timer, for a netperf 2.7 client: the results follow).
    EndTest,
    /// The client broke the protocol (undecodable bytes, a message out of
    /// order, another version): it was told, and the connection closes.
    ProtocolError,
    /// What the client made of the test whose results went out last
    /// (a client whose hello names `summary`).
    Summary(Box<ClientSummary>),
    /// A third-party test to run (`--fleet`, the key proved): run it, then
    /// call [`ServerConn::third_party_ended`].
    ThirdParty(Box<crate::ThirdParty>),
}

/// What a server-side speaker works on: the bytes in and out, the events,
/// and the state of the connection that every dialect shares.
#[derive(Debug)]
pub struct Shared {
    pub(crate) inbuf: Vec<u8>,
    pub(crate) outbuf: Vec<u8>,
    pub(crate) events: VecDeque<ServerEvent>,
    pub(crate) timeouts: Timeouts,
    pub(crate) idle_since: Instant,
    pub(crate) test_deadline: Option<Instant>,
    pub(crate) closing_since: Option<Instant>,
    /// Requests since the last test began.
    requests: u32,
}

impl Shared {
    pub(crate) fn event(&mut self, e: ServerEvent) {
        self.events.push_back(e);
    }

    pub(crate) fn log(&mut self, level: u8, text: impl Into<String>) {
        self.events.push_back(ServerEvent::Log(level, text.into()));
    }

    /// The client is refused: `why`, as it was told.
    pub(crate) fn refused(&mut self, why: impl Into<String>) {
        self.events.push_back(ServerEvent::Refused(why.into()));
    }

    pub(crate) fn closing(&self) -> bool {
        self.closing_since.is_some()
    }

    pub(crate) fn close(&mut self, now: Instant) {
        if self.closing_since.is_none() {
            self.closing_since = Some(now);
        }
    }

    /// Abort a test if one is granted.
    pub(crate) fn abort_test(&mut self) {
        if self.test_deadline.take().is_some() {
            self.events.push_back(ServerEvent::AbortTest);
        }
    }

    /// A test was granted: its deadline runs.
    pub(crate) fn test_granted(&mut self, now: Instant) {
        self.test_deadline = Some(now + self.timeouts.test);
    }

    /// A test is over (its results or its error went out).
    pub(crate) fn test_over(&mut self, now: Instant) {
        self.test_deadline = None;
        self.idle_since = now;
    }

    /// A request arrived: one more since the last test. Past the limit,
    /// the reason to close with (logged), for the speaker to tell.
    pub(crate) fn request(&mut self, now: Instant) -> Option<ErrorMsg> {
        self.idle_since = now;
        self.requests = self.requests.saturating_add(1);
        if self.requests <= MAX_REQUESTS_WITHOUT_TEST {
            return None;
        }
        let text =
            format!("{MAX_REQUESTS_WITHOUT_TEST} requests without a test: closing the connection");
        self.refused(text.clone());
        Some(ErrorMsg::new(ErrorCode::Protocol, text))
    }

    /// A test begins: the count of requests starts again.
    pub(crate) fn test_requested(&mut self) {
        self.requests = 0;
    }
}

/// The server end of one dialect: what its bytes mean.
pub(crate) trait ServerSpeaker: Send {
    fn established(&self) -> bool;
    /// Act on the whole messages waiting in `s.inbuf`.
    fn process(&mut self, s: &mut Shared, now: Instant);
    /// The test's data sockets are ready.
    fn granted(&mut self, s: &mut Shared, grant: Grant, now: Instant);
    /// Setting the test up failed: tell the client; the connection stays.
    fn prepare_failed(&mut self, s: &mut Shared, err: ErrorMsg);
    /// The server's side of the test ended.
    fn test_ended(&mut self, s: &mut Shared, outcome: Result<SideResults, ErrorMsg>, now: Instant);
    /// The test's interim reports, to go before its results where the
    /// dialect has them (netperf 2.7's has not).
    fn interim(&mut self, _reports: Vec<InterimReport>) {}
    /// The host's facts at the test's end, to go before its results where
    /// the client reads them (ours, naming `facts`).
    fn host_facts(&mut self, _facts: crate::facts::HostFacts) {}
    /// Tell the client `err`, in its framing (the core closes after).
    fn tell(&mut self, s: &mut Shared, err: &ErrorMsg);
    /// A deadline of the dialect's own, and what to do at it.
    fn own_deadline(&self) -> Option<Instant> {
        None
    }
    fn own_timeout(&mut self, _s: &mut Shared, _now: Instant) {}
    /// The test's streams have all come (a dialect whose streams the
    /// listener hands to the test: iperf3's).
    fn streams_ready(&mut self, _s: &mut Shared, _now: Instant) {}
    /// The test waits its turn, `ahead` tests before it, at most
    /// `limit_secs` (a dialect that can say so: ours, to a client that
    /// names `queue`).
    fn queued(&mut self, _s: &mut Shared, _ahead: u32, _limit_secs: u32) {}
    /// What the test's streams present to be handed to it (iperf3's
    /// cookie).
    fn stream_cookie(&self) -> Option<[u8; crate::iperf3::COOKIE_LEN]> {
        None
    }
    /// Whether the client named `capability` (netperf 2.7's names none).
    fn peer_can(&self, _capability: &str) -> bool {
        false
    }
    /// The public part of the token the client proved, if it came with
    /// one (`netserver token`).
    fn token(&self) -> Option<&str> {
        None
    }
    /// A third-party test ended (a dialect that runs them: ours).
    fn third_party_ended(
        &mut self,
        _s: &mut Shared,
        _outcome: Result<String, ErrorMsg>,
        _now: Instant,
    ) {
    }
}

/// What the server needs to make a speaker once the first bytes say which.
struct Seed {
    software: String,
    limits: Limits,
    auth: Option<Box<dyn Authenticator>>,
    nonce: [u8; 32],
    cpu: (u32, u32),
    netperf2: Netperf2Policy,
    /// What the policy allows one test, told in our hello.
    announce: crate::ServerLimits,
    /// Third-party tests are run (`--fleet`).
    fleet: bool,
    /// Whether an iperf3 client may test (`None`: any may).
    iperf3_auth: Option<std::sync::Arc<dyn crate::iperf3::Iperf3Auth>>,
}

/// The server end of one control connection.
pub struct ServerConn {
    shared: Shared,
    started: Instant,
    got_bytes: bool,
    dialect: Option<Dialect>,
    seed: Option<Seed>,
    speaker: Option<Box<dyn ServerSpeaker>>,
}

impl std::fmt::Debug for ServerConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConn")
            .field("dialect", &self.dialect)
            .field("closing", &self.shared.closing())
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
            shared: Shared {
                inbuf: Vec::new(),
                outbuf: Vec::new(),
                events: VecDeque::new(),
                timeouts,
                idle_since: now,
                test_deadline: None,
                closing_since: None,
                requests: 0,
            },
            started: now,
            got_bytes: false,
            dialect: None,
            seed: Some(Seed {
                software: software.into(),
                limits,
                auth,
                nonce,
                cpu,
                netperf2: Netperf2Policy::default(),
                announce: crate::ServerLimits::default(),
                fleet: false,
                iperf3_auth: None,
            }),
            speaker: None,
        }
    }

    /// Tell clients of ours in the hello what one test may ask (the
    /// policy's limits), so that they fit their tests to them.
    pub fn announcing(mut self, limits: crate::ServerLimits) -> ServerConn {
        if let Some(seed) = &mut self.seed {
            seed.announce = limits;
        }
        self
    }

    /// Run third-party tests for clients of ours that prove the key
    /// (`netserver --fleet`).
    pub fn fleet(mut self, fleet: bool) -> ServerConn {
        if let Some(seed) = &mut self.seed {
            seed.fleet = fleet;
        }
        self
    }

    /// A third-party test ended: its JSON document, or why it failed.
    pub fn third_party_ended(&mut self, outcome: Result<String, ErrorMsg>, now: Instant) {
        if let Err(e) = &outcome {
            self.shared
                .log(1, format!("third-party test failed: {}", e.message));
        }
        if let Some(sp) = &mut self.speaker {
            sp.third_party_ended(&mut self.shared, outcome, now);
        }
    }

    /// Serve iperf3 clients only as `auth` allows (`--key-file`,
    /// `--authorized-users-path`).
    pub fn iperf3_auth(
        mut self,
        auth: Option<std::sync::Arc<dyn crate::iperf3::Iperf3Auth>>,
    ) -> ServerConn {
        if let Some(seed) = &mut self.seed {
            seed.iperf3_auth = auth;
        }
        self
    }

    /// Speak `d` from the first byte, whatever the bytes (a listener of
    /// that dialect's own: iperf3's port).
    pub fn speaking(mut self, d: Dialect) -> ServerConn {
        self.choose(d);
        self
    }

    /// The test waits its turn: tell the client, where it can be told,
    /// and keep its deadline for the grant from running out meanwhile.
    pub fn queued(&mut self, ahead: u32, limit_secs: u32, now: Instant) {
        self.shared.idle_since = now;
        if let Some(sp) = &mut self.speaker {
            sp.queued(&mut self.shared, ahead, limit_secs);
        }
    }

    /// The test's streams have all come: tell the client to start.
    pub fn streams_ready(&mut self, now: Instant) {
        if let Some(sp) = &mut self.speaker {
            sp.streams_ready(&mut self.shared, now);
        }
    }

    /// What the test's streams present to be handed to it, where its
    /// dialect's streams come to the listener (iperf3's cookie).
    pub fn stream_cookie(&self) -> Option<[u8; crate::iperf3::COOKIE_LEN]> {
        self.speaker.as_ref().and_then(|s| s.stream_cookie())
    }

    /// Serve netperf 2.7 clients by `policy`.
    pub fn with_netperf2(mut self, policy: Netperf2Policy) -> ServerConn {
        if let Some(seed) = &mut self.seed {
            seed.netperf2 = policy;
        }
        self
    }

    pub fn established(&self) -> bool {
        self.speaker.as_ref().is_some_and(|s| s.established())
    }

    /// Whether the client named `capability` in its hello.
    pub fn peer_can(&self, capability: &str) -> bool {
        self.speaker
            .as_ref()
            .is_some_and(|s| s.peer_can(capability))
    }

    /// The public part of the token the client proved, if it came with
    /// one (for the policy's counts: the token's budget, expiry, prefix).
    pub fn token(&self) -> Option<&str> {
        self.speaker.as_ref().and_then(|s| s.token())
    }

    /// The dialect the connection speaks, once its first bytes said (for
    /// the data path's conventions and the log).
    pub fn dialect(&self) -> Option<Dialect> {
        self.dialect
    }

    /// Bytes waiting to be sent.
    pub fn output(&self) -> &[u8] {
        &self.shared.outbuf
    }

    /// `n` bytes of [`ServerConn::output`] went out.
    pub fn consumed(&mut self, n: usize) {
        let out = &mut self.shared.outbuf;
        out.drain(..n.min(out.len()));
    }

    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.shared.events.pop_front()
    }

    /// Whether the connection is done: closing, and its last frame out (or
    /// the grace for it over).
    pub fn is_closed(&self, now: Instant) -> bool {
        match self.shared.closing_since {
            Some(t) => self.shared.outbuf.is_empty() || now >= t + self.shared.timeouts.close_grace,
            None => false,
        }
    }

    pub fn is_closing(&self) -> bool {
        self.shared.closing()
    }

    /// The next instant [`ServerConn::handle_timeout`] must be called by.
    pub fn poll_timeout(&self) -> Instant {
        let t = &self.shared.timeouts;
        if let Some(c) = self.shared.closing_since {
            return c + t.close_grace;
        }
        if let Some(p) = self.speaker.as_ref().and_then(|s| s.own_deadline()) {
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
        match self.shared.test_deadline {
            Some(d) => d,
            None => self.shared.idle_since + t.idle,
        }
    }

    /// A deadline may have passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.shared.closing() || now < self.poll_timeout() {
            return;
        }
        if let Some(sp) = &mut self.speaker
            && sp.own_deadline().is_some_and(|d| now >= d)
        {
            sp.own_timeout(&mut self.shared, now);
            return;
        }
        let t = &self.shared.timeouts;
        let text = if !self.established() {
            if self.got_bytes {
                format!("handshake not completed within {} s", t.handshake.as_secs())
            } else {
                format!("nothing received within {} s", t.first_bytes.as_secs())
            }
        } else if self.shared.test_deadline.is_some() {
            format!(
                "test exceeded this netserver's limit of {} s",
                t.test.as_secs()
            )
        } else {
            format!("control connection idle for {} s", t.idle.as_secs())
        };
        self.shared.log(2, format!("closing: {text}"));
        self.fail(ErrorMsg::new(ErrorCode::Timeout, text), now);
    }

    /// Abort any test, tell the client `err`, and close (a shutdown, a
    /// deadline, too many requests).
    pub fn fail(&mut self, err: ErrorMsg, now: Instant) {
        if self.shared.closing() {
            return;
        }
        self.shared.abort_test();
        // before the first bytes chose a dialect, in ours
        if self.speaker.is_none() {
            self.choose(Dialect::Native);
        }
        if let Some(sp) = &mut self.speaker {
            sp.tell(&mut self.shared, &err);
        }
        self.shared.close(now);
    }

    /// The peer closed or the connection broke.
    pub fn peer_gone(&mut self, now: Instant) {
        self.shared.abort_test();
        self.shared.close(now);
    }

    /// Make the speaker of `d` (by policy, for netperf 2.7).
    fn choose(&mut self, d: Dialect) {
        let Some(seed) = self.seed.take() else { return };
        self.dialect = Some(d);
        self.speaker = Some(match d {
            Dialect::Native => Box::new(
                ours::OurServer::new(seed.software, seed.limits, seed.auth, seed.nonce, seed.cpu)
                    .announcing(seed.announce)
                    .fleet(seed.fleet),
            ),
            Dialect::Netperf2 => Box::new(netperf2::Netperf2Server::new(
                seed.netperf2,
                seed.limits,
                (seed.cpu, seed.auth),
                &mut self.shared,
            )),
            Dialect::Iperf3 => Box::new(iperf3::Iperf3Server::new(
                seed.netperf2.control_family,
                seed.iperf3_auth,
                seed.limits,
            )),
        });
    }

    /// Bytes arrived at `now`.
    pub fn handle_bytes(&mut self, now: Instant, data: &[u8]) {
        if data.is_empty() || self.shared.closing() {
            return;
        }
        self.got_bytes = true;
        self.shared.inbuf.extend_from_slice(data);
        if self.speaker.is_none() {
            match dialect::sniff(&self.shared.inbuf) {
                Sniff::NeedMore => return,
                Sniff::Is(d) => self.choose(d),
            }
        }
        if let Some(sp) = &mut self.speaker {
            sp.process(&mut self.shared, now);
        }
    }

    /// The test's data sockets are ready: tell the client.
    pub fn granted(&mut self, grant: Grant, now: Instant) {
        if let Some(sp) = &mut self.speaker {
            sp.granted(&mut self.shared, grant, now);
        }
    }

    /// Setting the test up failed: tell the client, and stay open.
    pub fn prepare_failed(&mut self, err: ErrorMsg) {
        if let Some(sp) = &mut self.speaker {
            sp.prepare_failed(&mut self.shared, err);
        }
    }

    /// The test's interim reports (`TestSpec::interim_ms`), sent before its
    /// results; call before [`ServerConn::test_ended`].
    pub fn interim(&mut self, reports: Vec<InterimReport>) {
        if let Some(sp) = &mut self.speaker {
            sp.interim(reports);
        }
    }

    /// Whether the client reads the host's facts with a test's results
    /// (then give them, [`ServerConn::host_facts`], before
    /// [`ServerConn::test_ended`]; else they need not be read).
    pub fn wants_facts(&self) -> bool {
        self.peer_can("facts")
    }

    /// The host's facts, sent before the test's results to a client that
    /// reads them.
    pub fn host_facts(&mut self, facts: crate::facts::HostFacts) {
        if let Some(sp) = &mut self.speaker {
            sp.host_facts(facts);
        }
    }

    /// The server's side of the test ended.
    pub fn test_ended(&mut self, outcome: Result<SideResults, ErrorMsg>, now: Instant) {
        if let Err(e) = &outcome {
            self.shared.log(1, format!("test failed: {}", e.message));
        }
        if let Some(sp) = &mut self.speaker {
            sp.test_ended(&mut self.shared, outcome, now);
        }
    }
}

/// The client end of one dialect: what its bytes mean, what a request
/// becomes.
pub(crate) trait ClientSpeaker: Send {
    /// Ask for a test.
    fn setup(&mut self, spec: TestSpec, out: &mut Vec<u8>) -> Result<(), ClientConnError>;
    /// Our data phase is over.
    fn done(&mut self, done: ClientDone, out: &mut Vec<u8>) -> Result<(), ClientConnError>;
    /// Ask for a third-party test (a server of ours that names `fleet`).
    fn third_party(
        &mut self,
        _req: crate::ThirdParty,
        _out: &mut Vec<u8>,
    ) -> Result<(), ClientConnError> {
        Err(ClientError::Server(ErrorMsg::new(
            ErrorCode::Unsupported,
            "third-party tests are asked of our own netserver only",
        ))
        .into())
    }
    /// Ask for the netserver's CPU count and meter rate, if the hello did
    /// not tell them: whether an answer is awaited.
    fn calibrate(&mut self, out: &mut Vec<u8>) -> bool;
    /// End the conversation politely.
    fn bye(&mut self, out: &mut Vec<u8>);
    /// What the bytes in `inbuf` complete, if anything (whole messages are
    /// taken off it).
    fn handle(
        &mut self,
        inbuf: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Option<ClientEvent>, ClientConnError>;
    fn capabilities(&self) -> &Capabilities;
    /// The netserver's CPU count and CPU meter rate.
    fn server_cpu(&self) -> (u32, u32);
    /// After `bye`, the connection is half-closed and its end awaited
    /// (netperf 2.7's way), rather than closed.
    fn half_closes(&self) -> bool {
        false
    }
    /// Both ends proved the key.
    fn authenticated(&self) -> bool {
        false
    }
    /// A place in the netserver's turn queue it told of since last asked
    /// (tests ahead, the longest wait in seconds), taken.
    fn take_queued(&mut self) -> Option<(u32, u32)> {
        None
    }
    /// The server's interim reports of the last test, taken.
    fn take_interims(&mut self) -> Vec<InterimReport> {
        Vec::new()
    }
    /// The server's host facts told with the last test's results, taken.
    fn take_facts(&mut self) -> Option<Box<crate::facts::HostFacts>> {
        None
    }
    /// Tell the server what we made of the last test, if it takes that.
    fn summary(&mut self, _summary: ClientSummary, _out: &mut Vec<u8>) {}
    /// Our data connections are up: whether the server's word that the
    /// data phase begins is awaited (iperf3's TEST_START, TEST_RUNNING).
    fn start(&mut self) -> bool {
        false
    }
    /// Tell the server now that the test is over, before our data phase
    /// is (a server that sends until told: iperf3's TEST_END, told when a
    /// receiving client's time is up); `done` then tells nothing more.
    fn tell_end(&mut self, _out: &mut Vec<u8>) {}
    /// What our side counted, for a dialect whose results exchange
    /// carries both sides' (iperf3's): before `done`.
    fn our_results(&mut self, _ours: &SideResults) {}
}

/// What went wrong on the client's side of a control connection.
#[derive(Debug, PartialEq)]
pub enum ClientConnError {
    /// The server refused, or broke the protocol.
    Session(ClientError),
    /// Nothing came by the deadline: what was awaited.
    Timeout(&'static str),
    /// The server answered our hello in netperf 2.7's protocol, and this
    /// conversation must speak ours (`--dialect native`).
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

/// Which protocols a client conversation may end up speaking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speak {
    /// Ours; netperf 2.7's if the netserver answers our hello in it.
    Either,
    /// Ours only.
    Ours,
}

/// The client end of one control connection: what to send, what arrived,
/// and by when an answer is due. It starts in our protocol, with a hello
/// that netperf 2.7's netserver answers at once in its own
/// ([`ours::OurClient`]); then it speaks whichever the netserver does.
pub struct ClientConn {
    speaker: Box<dyn ClientSpeaker>,
    speak: Speak,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    deadline: Option<(Instant, &'static str)>,
    /// The netserver's turn queue, as it last told (tests ahead, the
    /// longest wait in seconds), and whether the grant's deadline was
    /// extended for it.
    queued: Option<(u32, u32)>,
    queue_extended: bool,
}

impl std::fmt::Debug for ClientConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConn")
            .field("dialect", &self.speaker.capabilities().dialect)
            .finish()
    }
}

impl ClientConn {
    /// A new conversation in our protocol: the hello is queued, due back
    /// within `wait`.
    pub fn new(
        session: ClientSession,
        software: &str,
        now: Instant,
        wait: Duration,
        speak: Speak,
    ) -> Result<ClientConn, ClientConnError> {
        let mut outbuf = Vec::new();
        let speaker = ours::OurClient::new(session, software, &mut outbuf)?;
        let mut c = ClientConn::speaking(Box::new(speaker), speak, outbuf);
        c.expect(now, wait, "hello");
        Ok(c)
    }

    /// A conversation `speaker` leads, its first bytes in `outbuf`.
    fn speaking(speaker: Box<dyn ClientSpeaker>, speak: Speak, outbuf: Vec<u8>) -> ClientConn {
        ClientConn {
            speaker,
            speak,
            inbuf: Vec::new(),
            outbuf,
            deadline: None,
            queued: None,
            queue_extended: false,
        }
    }

    /// A conversation in netperf 2.7's protocol from the start (`--dialect
    /// netperf2`, or netserver 2.7 started with `-Z`): its passphrase frame
    /// is queued if given. It is established at once (netperf 2.7 has no
    /// greeting).
    pub fn netperf2(passphrase: Option<&str>) -> ClientConn {
        let mut outbuf = Vec::new();
        let speaker = netperf2::Netperf2Client::new(passphrase, 0, &mut outbuf);
        ClientConn::speaking(Box::new(speaker), Speak::Either, outbuf)
    }

    /// A conversation with an iperf3 server (3.x) at `port`: the cookie
    /// that `token` makes is queued, PARAM_EXCHANGE due back within
    /// `wait`. Each test's streams present the same cookie; the grant
    /// names `port` and `token` for them.
    pub fn iperf3(
        token: crate::test::Token,
        port: u16,
        software: &str,
        now: Instant,
        wait: Duration,
    ) -> ClientConn {
        let mut outbuf = Vec::new();
        let speaker = iperf3::Iperf3Client::new(token, port, software, &mut outbuf);
        let mut c = ClientConn::speaking(Box::new(speaker), Speak::Either, outbuf);
        c.expect(now, wait, "PARAM_EXCHANGE");
        c
    }

    /// The netserver's turn queue as it last told, taken: so many tests
    /// ahead of ours, waiting at most so many seconds.
    pub fn take_queued(&mut self) -> Option<(u32, u32)> {
        self.queued.take()
    }

    pub fn capabilities(&self) -> &Capabilities {
        self.speaker.capabilities()
    }

    pub fn server_cpu(&self) -> (u32, u32) {
        self.speaker.server_cpu()
    }

    pub fn half_closes(&self) -> bool {
        self.speaker.half_closes()
    }

    /// Both ends proved the key (else a key was given to a netserver that
    /// asks for none, and the conversation runs without).
    pub fn authenticated(&self) -> bool {
        self.speaker.authenticated()
    }

    /// The server's interim reports of the last test (`TestSpec::interim_ms`),
    /// taken: they arrive before its results.
    pub fn take_interims(&mut self) -> Vec<InterimReport> {
        self.speaker.take_interims()
    }

    /// The netserver's host as it told it with the last test's results
    /// (`facts`), taken; `None` from a netserver that does not tell.
    pub fn take_facts(&mut self) -> Option<Box<crate::facts::HostFacts>> {
        self.speaker.take_facts()
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
        self.queue_extended = false;
    }

    /// Ask for a test; the grant is due within `wait`.
    pub fn setup(
        &mut self,
        spec: TestSpec,
        now: Instant,
        wait: Duration,
    ) -> Result<(), ClientConnError> {
        self.speaker.setup(spec, &mut self.outbuf)?;
        self.expect(now, wait, "answer to the test request");
        Ok(())
    }

    /// Ask the netserver to run a test as netperf against another
    /// netserver; its JSON document is due within `wait`.
    pub fn third_party(
        &mut self,
        req: crate::ThirdParty,
        now: Instant,
        wait: Duration,
    ) -> Result<(), ClientConnError> {
        self.speaker.third_party(req, &mut self.outbuf)?;
        self.expect(now, wait, "third-party test's results");
        Ok(())
    }

    /// Our data phase is over; the results are due within `wait`.
    pub fn done(
        &mut self,
        done: ClientDone,
        now: Instant,
        wait: Duration,
    ) -> Result<(), ClientConnError> {
        self.speaker.done(done, &mut self.outbuf)?;
        self.expect(now, wait, "results");
        Ok(())
    }

    /// Ask for the netserver's CPU figures where its hello did not say
    /// them; the answer is due within `wait`. Whether one is awaited.
    pub fn calibrate(&mut self, now: Instant, wait: Duration) -> bool {
        let awaited = self.speaker.calibrate(&mut self.outbuf);
        if awaited {
            self.expect(now, wait, "CPU calibration");
        }
        awaited
    }

    /// Tell the netserver what we made of the test whose results came
    /// last (only one that names `summary` is told; nothing answers).
    pub fn summary(&mut self, summary: ClientSummary) {
        self.speaker.summary(summary, &mut self.outbuf);
    }

    pub fn bye(&mut self) {
        self.speaker.bye(&mut self.outbuf);
        self.deadline = None;
    }

    /// Our data connections are up: whether the server's word that the
    /// data phase begins is awaited ([`ClientEvent::Started`], due within
    /// `wait`); most dialects begin at once.
    pub fn start(&mut self, now: Instant, wait: Duration) -> bool {
        let awaited = self.speaker.start();
        if awaited {
            self.expect(now, wait, "start of the test");
        }
        awaited
    }

    /// Tell the server now that the test is over, where its dialect has
    /// the client say so (a receiving client's time is up); nothing for
    /// the others, whose senders stop by themselves.
    pub fn tell_end(&mut self) {
        self.speaker.tell_end(&mut self.outbuf);
    }

    /// What our side counted, for a dialect whose results exchange
    /// carries both sides' (iperf3's): call before [`ClientConn::done`].
    pub fn our_results(&mut self, ours: &SideResults) {
        self.speaker.our_results(ours);
    }

    /// Bytes arrived. Returns what they completed, if anything: the
    /// conversation established, a grant, results (with every flow's
    /// counters gathered from the frames before them), a calibration.
    pub fn handle_bytes(&mut self, data: &[u8]) -> Result<Option<ClientEvent>, ClientConnError> {
        self.inbuf.extend_from_slice(data);
        self.process()
    }

    /// What the bytes already in complete (a whole frame may still wait).
    pub fn process(&mut self) -> Result<Option<ClientEvent>, ClientConnError> {
        // netperf 2.7's netserver answers our first frame in its own
        if self.speaker.capabilities().dialect == Dialect::Native
            && self.deadline.is_some_and(|(_, what)| what == "hello")
            && dialect::sniff_reply(&self.inbuf) == Sniff::Is(Dialect::Netperf2)
        {
            if self.speak == Speak::Ours {
                return Err(ClientConnError::Netperf2);
            }
            let mut out = Vec::new();
            self.speaker = Box::new(netperf2::Netperf2Client::new(
                None,
                crate::netperf2::FRAME_LEN,
                &mut out,
            ));
        }
        let ev = self.speaker.handle(&mut self.inbuf, &mut self.outbuf)?;
        // waiting its turn: the grant may take as long as the queue says
        if let Some((ahead, limit)) = self.speaker.take_queued() {
            if !self.queue_extended
                && let Some((d, what)) = self.deadline
            {
                self.deadline = Some((d + Duration::from_secs(u64::from(limit) + 5), what));
                self.queue_extended = true;
            }
            self.queued = Some((ahead, limit));
        }
        if ev
            .as_ref()
            .is_some_and(|e| !matches!(e, ClientEvent::Send(_) | ClientEvent::Queued { .. }))
        {
            self.deadline = None;
        }
        if ev.is_none()
            && let Some((ahead, limit_secs)) = self.queued
        {
            self.queued = None;
            return Ok(Some(ClientEvent::Queued { ahead, limit_secs }));
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        frame,
        message::{ClientMsg, Hello, ServerMsg},
        netperf2::{self, Frame},
        session::Role,
        test::{FlowCounters, TestKind},
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
            Speak::Either,
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
            if let ServerEvent::Refused(t) = e
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

    /// A server's interim reports go before its results, in frames of at
    /// most 128, and reach the client whole; a client that takes more
    /// than a test can have is refused.
    #[test]
    fn interim_reports_travel_before_the_results() {
        let now = Instant::now();
        let mut s = server(now);
        let mut c = client(now);
        shuttle(&mut s, &mut c, now);
        assert!(c.capabilities().interim);
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.interim_ms = Some(100);
        c.setup(spec, now, Duration::from_secs(5)).unwrap();
        shuttle(&mut s, &mut c, now);
        while s.poll_event().is_some() {}
        s.granted(grant(), now);
        shuttle(&mut s, &mut c, now);
        c.done(ClientDone::default(), now, Duration::from_secs(5))
            .unwrap();
        shuttle(&mut s, &mut c, now);
        let reports: Vec<InterimReport> = (1..=1000u64)
            .map(|i| InterimReport {
                elapsed_ns: i * 100_000_000,
                bytes: i * 1000,
                tcp: vec![crate::test::TcpSample::default(); 8],
                ..InterimReport::default()
            })
            .collect();
        s.interim(reports.clone());
        s.test_ended(
            Ok(SideResults {
                bytes_received: 1_000_000,
                ..SideResults::default()
            }),
            now,
        );
        let e = shuttle(&mut s, &mut c, now);
        assert!(matches!(e.as_slice(), [ClientEvent::Results(_)]), "{e:?}");
        assert_eq!(c.take_interims(), reports);
        assert!(c.take_interims().is_empty(), "taken once");

        // more than a test keeps: refused as malformed
        let mut c = client(now);
        let mut s = server(now);
        shuttle(&mut s, &mut c, now);
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.interim_ms = Some(100);
        c.setup(spec, now, Duration::from_secs(5)).unwrap();
        shuttle(&mut s, &mut c, now);
        let too_many = ServerMsg::Interim(vec![
            InterimReport::default();
            crate::test::INTERIM_REPORTS_PER_FRAME
        ]);
        let frame = crate::frame::encode(&too_many).unwrap();
        let mut last = Ok(None);
        for _ in 0..=crate::test::MAX_INTERIM_REPORTS / crate::test::INTERIM_REPORTS_PER_FRAME {
            last = c.handle_bytes(&frame);
            if last.is_err() {
                break;
            }
        }
        assert!(
            last.as_ref()
                .is_err_and(|e| format!("{e:?}").contains("interim reports")),
            "{last:?}"
        );
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
            Speak::Either,
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
        assert_eq!(dialect, Dialect::Netperf2);
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

    /// Both ends of netperf 2.7's protocol in memory, driven by the same
    /// cores as ours: a calibration, a test granted, its results.
    #[test]
    fn a_netperf2_conversation_in_memory() {
        let now = Instant::now();
        let mut s = hp_server(now);
        let mut c = ClientConn::netperf2(None);
        assert!(!c.capabilities().flows && !c.capabilities().details);
        assert!(c.calibrate(now, Duration::from_secs(5)));
        assert_eq!(shuttle(&mut s, &mut c, now), vec![ClientEvent::Calibrated]);
        assert_eq!(c.server_cpu(), (2, 100));
        let mut spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        spec.end = crate::test::TestEnd::Time { millis: 1000 };
        c.setup(spec, now, Duration::from_secs(5)).unwrap();
        shuttle(&mut s, &mut c, now);
        let mut prepared = false;
        while let Some(e) = s.poll_event() {
            prepared |= matches!(e, ServerEvent::Prepare(_));
        }
        assert!(prepared);
        s.granted(grant(), now);
        let e = shuttle(&mut s, &mut c, now);
        assert!(
            matches!(e.as_slice(), [ClientEvent::Granted(g)] if g.data_port == 5000),
            "{e:?}"
        );
        c.done(ClientDone::default(), now, Duration::from_secs(5))
            .unwrap();
        s.test_ended(
            Ok(SideResults {
                bytes_received: 12_345,
                elapsed_ns: 1_000_000_000,
                ..SideResults::default()
            }),
            now,
        );
        let e = shuttle(&mut s, &mut c, now);
        assert!(
            matches!(e.as_slice(), [ClientEvent::Results(r)] if r.bytes_received == 12_345),
            "{e:?}"
        );
        // an errno is the netserver's error, named
        c.setup(
            TestSpec::new(TestKind::TcpRr, Family::V4),
            now,
            Duration::from_secs(5),
        )
        .unwrap();
        let mut f = Frame::new(netperf2::OMNI_RESPONSE, netperf2::EINVAL);
        f.set_word(4, 0);
        let err = c.handle_bytes(f.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, ClientConnError::Session(ClientError::Server(m)) if m.message.contains("remote error 22")),
            "{err:?}"
        );
    }

    /// Our hello, answered by netserver 2.7 with serv_errno 998 in its own
    /// frame: the client core speaks netperf 2.7's protocol from then on,
    /// or, asked to speak ours only, says so.
    #[test]
    fn our_hello_answered_by_netperf2_switches_the_speaker() {
        let now = Instant::now();
        let mut answer = Frame::new(0, netperf2::UNKNOWN_REQUEST).as_bytes().to_vec();
        let tail = answer.split_off(300);
        let mut c = client(now);
        assert_eq!(c.handle_bytes(&answer).unwrap(), None);
        assert_eq!(
            c.handle_bytes(&tail).unwrap(),
            Some(ClientEvent::Established)
        );
        assert_eq!(c.capabilities().dialect, Dialect::Netperf2);
        let mut c = ClientConn::new(
            ClientSession::new(None, [2; 32]),
            "cli",
            now,
            Duration::from_secs(10),
            Speak::Ours,
        )
        .unwrap();
        let mut both = answer.clone();
        both.extend_from_slice(&tail);
        assert_eq!(c.handle_bytes(&both), Err(ClientConnError::Netperf2));
    }

    #[test]
    fn frames_too_large_are_not_sent() {
        let now = Instant::now();
        let mut s = server(now);
        s.fail(
            ErrorMsg::new(ErrorCode::TestFailed, "x".repeat(70_000)),
            now,
        );
        let (m, _) = frame::decode::<ServerMsg>(s.output()).unwrap().unwrap();
        let ServerMsg::Error(e) = m else { panic!() };
        assert!(e.message.contains("cannot send its reply"), "{}", e.message);
        let _ = Role::Client;
    }
}
