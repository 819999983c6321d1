//! The control connections: every session's control socket on the daemon's
//! one control event loop (the accept loop's), a few KiB each. A session
//! holds a thread only while a test runs (its worker, see [`family`]).
//!
//! This module only moves bytes and reads the clock. What the bytes mean,
//! the framing, the sealing and every deadline are [`proto::conn::ServerConn`]'s;
//! starting, ending and aborting the test's data path are [`family`]'s.
//! Nothing here blocks: a test's worker tells the loop it has finished by
//! queueing its session's token and waking the loop.

use std::{
    collections::{BTreeSet, HashMap},
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use mio::{Interest, Registry, Token, Waker, event::Event as Readiness};
use proto::{
    Authenticator, ErrorCode, ErrorMsg,
    conn::{ServerConn, ServerEvent, Timeouts},
};

mod state;

use state::State;

use crate::{
    admission::Refusal,
    family,
    log::{Event, escape},
    metrics::{Tally, dialect_label},
    record,
    shared::Shared,
};

/// Which dialect a listener's connections speak: ours and netperf 2.7's
/// (told apart by their first bytes) on the control port, iperf3's on its
/// own (`--iperf3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Control,
    Iperf3,
}

/// Once we decide to close, how long we try to deliver our last message.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Bytes read from one control connection before the loop turns to others.
const READ_BUDGET: usize = 64 * 1024;

/// The core's deadlines, from the daemon's configuration.
pub(crate) fn timeouts(cfg: &crate::config::Config) -> Timeouts {
    Timeouts {
        first_bytes: cfg.first_byte_timeout,
        handshake: cfg.handshake_timeout,
        idle: cfg.idle_timeout,
        test: cfg.data_connect_timeout
            + Duration::from_millis(cfg.limits.max_duration_ms)
            + Duration::from_secs(10),
        close_grace: CLOSE_GRACE,
    }
}

/// How a test's worker tells the loop it has finished (`tokens`), or
/// that the streams the listener hands it are all in (`ready`).
struct Finished {
    waker: Arc<Waker>,
    tokens: Mutex<Vec<usize>>,
    ready: Mutex<Vec<usize>>,
}

impl Finished {
    fn push(&self, token: usize) {
        Self::queue(&self.tokens, token);
        let _ = self.waker.wake();
    }

    fn push_ready(&self, token: usize) {
        Self::queue(&self.ready, token);
        let _ = self.waker.wake();
    }

    fn queue(q: &Mutex<Vec<usize>>, token: usize) {
        if let Ok(mut t) = q.lock() {
            t.push(token);
        }
    }

    fn take(q: &Mutex<Vec<usize>>) -> Vec<usize> {
        q.lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }
}

/// Every session of the loop, by token, and when each next needs the clock.
pub(crate) struct Sessions {
    shared: Arc<Shared>,
    live: HashMap<usize, Session>,
    /// (deadline, token): each live session's next deadline, once.
    timers: BTreeSet<(Instant, usize)>,
    finished: Arc<Finished>,
    /// Sessions whose reads stopped at the budget, to read on.
    again: Vec<usize>,
}

impl Sessions {
    /// `waker` wakes the loop that owns these sessions.
    pub(crate) fn new(shared: Arc<Shared>, waker: Arc<Waker>) -> Sessions {
        Sessions {
            shared,
            live: HashMap::new(),
            timers: BTreeSet::new(),
            finished: Arc::new(Finished {
                waker,
                tokens: Mutex::new(Vec::new()),
                ready: Mutex::new(Vec::new()),
            }),
            again: Vec::new(),
        }
    }

    /// Whether some session has bytes waiting to be read now.
    pub(crate) fn has_more(&self) -> bool {
        !self.again.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    pub(crate) fn owns(&self, token: usize) -> bool {
        self.live.contains_key(&token)
    }

    /// Serve an admitted connection (already counted in the census) under
    /// `token`; what already arrived waits in its socket.
    pub(crate) fn start(
        &mut self,
        registry: &Registry,
        stream: TcpStream,
        peer: SocketAddr,
        token: usize,
        origin: Origin,
        slot: Option<crate::policy::SessionSlot>,
    ) {
        match Session::new(
            stream,
            peer,
            &self.shared,
            token,
            self.finished.clone(),
            origin,
        ) {
            Ok(mut s) => match registry.register(&mut s.conn, Token(token), Interest::READABLE) {
                Ok(()) => {
                    s.slot = slot;
                    self.shared.config.metrics.session_accepted();
                    self.live.insert(token, s);
                    self.read(registry, token);
                }
                Err(e) => self.cannot_start(peer, &e),
            },
            Err(e) => self.cannot_start(peer, &e),
        }
    }

    fn cannot_start(&self, peer: SocketAddr, e: &io::Error) {
        self.shared
            .config
            .logger
            .warn_limited("session", &format!("{peer}: cannot start session: {e}"));
        self.shared.census.leave(peer.ip(), true);
    }

    /// Readiness of a session's control socket.
    pub(crate) fn on_event(&mut self, registry: &Registry, ev: &Readiness) {
        let token = ev.token().0;
        let Some(s) = self.live.get_mut(&token) else {
            return;
        };
        if ev.is_writable()
            && let Err(e) = s.flush(registry)
        {
            return self.settle(registry, token, Err(e));
        }
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            self.read(registry, token);
        } else {
            s.check_test();
            self.settle(registry, token, Ok(()));
        }
    }

    /// Read what a session's socket holds (up to the budget) and act on it;
    /// what is left is read at the loop's next turn.
    fn read(&mut self, registry: &Registry, token: usize) {
        let Some(s) = self.live.get_mut(&token) else {
            return;
        };
        let r = s.read_control();
        if r.is_ok() {
            s.check_test();
        }
        let more = matches!(r, Ok(true));
        self.settle(registry, token, r.map(drop));
        if more && self.live.contains_key(&token) && !self.again.contains(&token) {
            self.again.push(token);
        }
    }

    /// Tests that finished since last asked, reads left for this turn, and
    /// deadlines that passed.
    pub(crate) fn on_wake(&mut self, registry: &Registry, now: Instant) {
        for token in std::mem::take(&mut self.again) {
            self.read(registry, token);
        }
        if let Some(began) = self.shared.turns.hand_over(now) {
            self.shared.config.logger.log(
                2,
                &format!(
                    "{}'s turn begins: {} tests waited for it (--schedule exclusive)",
                    began.host,
                    began.sessions.len()
                ),
            );
            for token in began.sessions {
                match self.live.get_mut(&token) {
                    Some(s) => {
                        s.take_turn();
                        self.settle(registry, token, Ok(()));
                    }
                    // (gone meanwhile: no test of its in the turn)
                    None => self.shared.turns.done(token, now),
                }
            }
        }
        for token in self.shared.turns.expired(now) {
            if let Some(s) = self.live.get_mut(&token) {
                s.turn_expired();
                self.settle(registry, token, Ok(()));
            }
        }
        for token in Finished::take(&self.finished.ready) {
            if let Some(s) = self.live.get_mut(&token) {
                s.core.streams_ready(now);
                self.settle(registry, token, Ok(()));
            }
        }
        for token in Finished::take(&self.finished.tokens) {
            if let Some(s) = self.live.get_mut(&token) {
                s.check_test();
                self.settle(registry, token, Ok(()));
            }
        }
        let due: Vec<usize> = self
            .timers
            .iter()
            .take_while(|&&(at, _)| at <= now)
            .map(|&(_, token)| token)
            .collect();
        for token in due {
            self.settle(registry, token, Ok(()));
        }
    }

    /// Tell every client the daemon is going away (each session then ends
    /// as its core lets it: the last message delivered, or its grace out).
    pub(crate) fn shut_down(&mut self, registry: &Registry) {
        let tokens: Vec<usize> = self.live.keys().copied().collect();
        for token in tokens {
            if let Some(s) = self.live.get_mut(&token) {
                s.core.fail(
                    ErrorMsg::new(ErrorCode::ShuttingDown, "netserver is shutting down"),
                    Instant::now(),
                );
            }
            self.settle(registry, token, Ok(()));
        }
    }

    /// End every session now, without a word.
    pub(crate) fn drop_all(&mut self, registry: &Registry) {
        let tokens: Vec<usize> = self.live.keys().copied().collect();
        for token in tokens {
            self.close(registry, token, Ok(()));
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let turns = self.shared.turns.next_deadline();
        [self.timers.first().map(|&(at, _)| at), turns]
            .into_iter()
            .flatten()
            .min()
    }

    /// The session a new client may take the place of: one that runs no
    /// test, of the address holding the most sessions (of `ip` only, when
    /// given), idle the longest. Idle sessions cannot hold the daemon.
    fn idlest(&self, ip: Option<std::net::IpAddr>) -> Option<usize> {
        let mut held: HashMap<std::net::IpAddr, usize> = HashMap::new();
        for s in self.live.values() {
            *held.entry(s.peer.ip()).or_insert(0) += 1;
        }
        // a wrong attempt waiting for its refusal's turn makes room first,
        // where the key cannot be guessed anyway: a guesser's held
        // attempts never keep the right key out of its address
        let held_go = self
            .shared
            .config
            .key
            .as_ref()
            .is_some_and(engine::auth::Key::unguessable);
        self.live
            .iter()
            .filter(|(_, s)| {
                let waiting_refusal = held_go && s.state.is_held();
                !s.state.is_busy() && (waiting_refusal || !s.core.is_closing())
            })
            .filter(|(_, s)| ip.is_none_or(|ip| s.peer.ip() == ip))
            .max_by_key(|(_, s)| {
                (
                    held_go && s.state.is_held(),
                    held.get(&s.peer.ip()).copied().unwrap_or(0),
                    std::cmp::Reverse(s.state.idle_since()),
                )
            })
            .map(|(&t, _)| t)
    }

    /// Whether [`Sessions::evict_idle`] would find a session to close.
    pub(crate) fn has_idle(&self, ip: Option<std::net::IpAddr>) -> bool {
        self.idlest(ip).is_some()
    }

    /// Close the idlest session (see [`Sessions::idlest`]) to make room for
    /// a new client, telling it why; its place in the census is free at
    /// once. Returns its peer.
    pub(crate) fn evict_idle(
        &mut self,
        registry: &Registry,
        ip: Option<std::net::IpAddr>,
    ) -> Option<SocketAddr> {
        let token = self.idlest(ip)?;
        let s = self.live.get_mut(&token)?;
        let peer = s.peer;
        let idle = s.state.idle_since().elapsed().as_secs();
        s.core.fail(
            Refusal::Evicted { idle_s: Some(idle) }.told(&self.shared.config.metrics),
            Instant::now(),
        );
        s.drain_events();
        // one try to deliver the reason; the place is given up now
        let _ = s.flush(registry);
        self.close(registry, token, Ok(()));
        Some(peer)
    }

    /// After anything happened to a session: let its core act on the clock,
    /// send what it queued, and close it or note its next deadline.
    fn settle(&mut self, registry: &Registry, token: usize, r: io::Result<()>) {
        let Some(s) = self.live.get_mut(&token) else {
            return;
        };
        let r = r.and_then(|()| s.settle(registry));
        if let Some(at) = s.deadline.take() {
            self.timers.remove(&(at, token));
        }
        match r {
            Ok(false) => {
                let at = s
                    .state
                    .held_until()
                    .unwrap_or_else(|| s.core.poll_timeout());
                s.deadline = Some(at);
                self.timers.insert((at, token));
            }
            Ok(true) => self.close(registry, token, Ok(())),
            Err(e) => self.close(registry, token, Err(e)),
        }
    }

    fn close(&mut self, registry: &Registry, token: usize, why: io::Result<()>) {
        let Some(mut s) = self.live.remove(&token) else {
            return;
        };
        if let Some(at) = s.deadline.take() {
            self.timers.remove(&(at, token));
        }
        if let Err(e) = why {
            self.shared.config.logger.event(
                2,
                &s.about("session-ended"),
                &format!("{}: session ended: {e}", s.peer),
            );
        }
        let _ = registry.deregister(&mut s.conn);
        let (ip, pending) = (s.peer.ip(), s.pending);
        // a test still running is told to stop; its worker ends on its own
        drop(s);
        self.shared.census.leave(ip, pending);
    }
}

struct Session {
    shared: Arc<Shared>,
    /// Its number in the log and the record.
    id: u64,
    token: usize,
    finished: Arc<Finished>,
    conn: mio::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    core: ServerConn,
    writable_interest: bool,
    /// Still counted as a handshake in the census.
    pending: bool,
    /// Its entry in [`Sessions::timers`].
    deadline: Option<Instant>,
    /// What it is doing: idle, held (a wrong key's refusal waiting its
    /// address's turn, [`crate::admission::Failures`]: nothing is sent
    /// until then, and the session ends at once if its peer closes), a
    /// test waiting its turn (`--schedule exclusive`), a test running, or
    /// a third-party test (`--fleet`); and since when it has run nothing
    /// (the longest idle is closed first when a new client needs its
    /// place).
    state: State<Box<proto::TestSpec>, Testing, crate::fleet::Running>,
    /// A completed test's record line, waiting for what the client made
    /// of it (until its summary, its next request, or its end).
    record: Option<record::Finished>,
    /// Counted in its address's and prefix's sessions (`--policy`).
    slot: Option<crate::policy::SessionSlot>,
}

/// A running test and what the session keeps of it until its end.
#[derive(Debug)]
struct Testing {
    run: family::RunningTest,
    /// Its place in the metrics (failed if dropped).
    tally: Option<Tally>,
    /// When it was granted (the record's start).
    started_at: SystemTime,
    /// The UDP sender's datagrams, as the client said when done.
    datagrams_sent: Option<u64>,
    /// Where it is counted (`--policy`), for its end.
    counted: Option<crate::policy::Counted>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // its client went away: its third-party test stops now
        if let Some(r) = self.state.finish_third_party(Instant::now()) {
            r.stop();
            self.shared.config.logger.event(
                1,
                &self.about("third-party"),
                &format!(
                    "{}: third-party test against {}:{} stopped: its client went away",
                    self.peer, r.req.host, r.req.port
                ),
            );
        }
        self.write_record(None);
        self.forget_streams();
        self.turn_done();
    }
}

impl Session {
    fn new(
        stream: TcpStream,
        peer: SocketAddr,
        shared: &Arc<Shared>,
        token: usize,
        finished: Arc<Finished>,
        origin: Origin,
    ) -> io::Result<Session> {
        let local = stream.local_addr()?;
        let _ = stream.set_nodelay(true);
        let _ =
            engine::sockopt::set_liveness(socket2::SockRef::from(&stream), Duration::from_secs(30));
        stream.set_nonblocking(true)?;
        let conn = mio::net::TcpStream::from_std(stream);
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(io::Error::other)?;
        let cfg = &shared.config;
        let auth = cfg
            .key
            .clone()
            .map(|k| Box::new(k) as Box<dyn Authenticator>);
        let cpus = match cfg.num_cpus {
            0 => engine::cpu::count(),
            n => n,
        };
        let core = ServerConn::new(
            crate::config::software(),
            cfg.limits.clone(),
            auth,
            nonce,
            (cpus, engine::cpu::meter_rate()),
            timeouts(cfg),
            Instant::now(),
        )
        .announcing(cfg.policy.announced())
        .fleet(cfg.fleet && cfg.key.is_some())
        .iperf3_auth(
            cfg.iperf3_gate
                .clone()
                .map(|g| g as Arc<dyn proto::iperf3::Iperf3Auth>),
        )
        .with_netperf2(proto::conn::Netperf2Policy {
            serve: cfg.netperf2_refused.is_none(),
            refused: cfg.netperf2_refused.unwrap_or_default(),
            passphrase: cfg.netperf2_passphrase.clone(),
            control_family: match local.ip() {
                std::net::IpAddr::V4(_) => proto::Family::V4,
                std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => proto::Family::V4,
                std::net::IpAddr::V6(_) => proto::Family::V6,
            },
        });
        let core = match origin {
            Origin::Iperf3 => core.speaking(proto::dialect::Dialect::Iperf3),
            Origin::Control => core,
        };
        Ok(Session {
            shared: shared.clone(),
            id: shared.session_id(),
            token,
            finished,
            conn,
            peer,
            local,
            core,
            writable_interest: false,
            pending: true,
            deadline: None,
            state: State::new(Instant::now()),
            record: None,
            slot: None,
        })
    }

    /// Its test is done (or it gave up waiting): its host's turn passes
    /// on when this was its last test (after the grace).
    fn turn_done(&self) {
        self.shared.turns.done(self.token, Instant::now());
    }

    /// Its turn came: the test that waited for it starts.
    fn take_turn(&mut self) {
        if let Some((spec, waited)) = self.state.end_wait(Instant::now()) {
            self.shared.config.metrics.turn_waited(waited.as_secs_f64());
            self.shared.config.logger.event(
                2,
                &self.about("turn"),
                &format!(
                    "{}: {} starts after waiting its turn {:.1} s",
                    self.peer,
                    spec.kind,
                    waited.as_secs_f64()
                ),
            );
            self.prepare(&spec);
        }
    }

    /// It waited its turn as long as it may: refused, saying so.
    fn turn_expired(&mut self) {
        if let Some((spec, waited)) = self.state.end_wait(Instant::now()) {
            let told = Refusal::Queue {
                kind: spec.kind,
                waited_s: waited.as_secs(),
            }
            .told(&self.shared.config.metrics);
            self.refused_test(&spec, &told.message);
            self.core.prepare_failed(told);
        }
    }

    /// Its test expects no more handed streams.
    fn forget_streams(&self) {
        if let Some(c) = self.core.stream_cookie() {
            self.shared.handoff.forget(&c);
        }
    }

    /// The fields of this session's log events.
    fn about(&self, event: &'static str) -> Event<'static> {
        Event {
            event,
            session: Some(self.id),
            peer: Some(self.peer),
            dialect: self.core.dialect().map(dialect_label),
            ..Event::default()
        }
    }

    /// Write the pending record line, with what the client made of the
    /// test if it told.
    fn write_record(&mut self, client: Option<proto::ClientSummary>) {
        if let (Some(f), Some(rec)) = (self.record.take(), &self.shared.config.record) {
            let client = client.map(|c| {
                c.validated(&self.shared.config.limits)
                    .and_then(|c| c.checked_against(&f.server, f.spec.kind, f.spec.flows))
            });
            rec.raw(record::line(&f, client.as_ref()), Some(f.peer.ip()));
        }
    }

    /// A test's results went out: counted, logged, recorded.
    fn results_sent(&mut self, r: &proto::SideResults) {
        self.forget_streams();
        // the turn it ran in (`--schedule exclusive`), for the record
        let turn = self
            .shared
            .turns
            .turn_of(self.token)
            .map(|(host, since)| (host, SystemTime::now() - since.elapsed()));
        self.turn_done();
        let Some(mut t) = self.state.finish(Instant::now()) else {
            return;
        };
        t.run.join();
        if let Some(c) = t.counted.take() {
            let secs = r.elapsed_ns.div_ceil(1_000_000_000);
            self.shared
                .config
                .policy
                .done(&c, r.bytes_sent.saturating_add(r.bytes_received), secs);
        }
        let kind = t.run.spec.kind;
        if let Some(tally) = t.tally.take() {
            tally.completed(kind, r);
        }
        let figures = serde_json::json!({
            "bytes_sent": r.bytes_sent,
            "bytes_received": r.bytes_received,
            "transactions": r.transactions,
            "elapsed_s": r.elapsed_ns as f64 / 1e9,
        });
        self.shared.config.logger.event(
            1,
            &Event {
                test: Some(kind.name()),
                outcome: Some("completed"),
                figures: Some(figures),
                ..self.about("test-completed")
            },
            &format!(
                "{} {} {} bytes sent, {} received, {} transactions, {:.2} s",
                self.peer,
                kind,
                r.bytes_sent,
                r.bytes_received,
                r.transactions,
                r.elapsed_ns as f64 / 1e9
            ),
        );
        if self.shared.config.record.is_some() {
            self.record = Some(record::Finished {
                session: self.id,
                peer: self.peer,
                dialect: self
                    .core
                    .dialect()
                    .unwrap_or(proto::dialect::Dialect::Native),
                spec: t.run.spec.clone(),
                start: t.started_at,
                end: SystemTime::now(),
                server: r.clone(),
                datagrams_sent: t.datagrams_sent,
                turn,
            });
            // a client that will not say what it made of it: now
            if !self.core.peer_can("summary") {
                self.write_record(None);
            }
        }
    }

    /// Let the core act on the clock and send what it queued; whether the
    /// session is over.
    fn settle(&mut self, registry: &Registry) -> io::Result<bool> {
        if self.pending && self.core.established() {
            self.pending = false;
            self.shared.census.established();
        }
        if self.state.held_at(Instant::now()) {
            return Ok(false);
        }
        self.core.handle_timeout(Instant::now());
        self.drain_events();
        self.flush(registry)?;
        Ok(self.core.is_closed(Instant::now()))
    }

    /// Do what the core asks.
    fn drain_events(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            let log = &self.shared.config.logger;
            match ev {
                ServerEvent::Foreign { dialect, bytes } => {
                    Refusal::Protocol.count(&self.shared.config.metrics);
                    log.warn_limited(
                        "protocol",
                        &format!(
                            "{}: a {dialect:?} client, refused by policy: {} (answered: remote error 93; {} bytes): closed",
                            self.peer,
                            self.shared.config.netperf2_refused.unwrap_or_default().text(),
                            bytes.len()
                        ),
                    );
                }
                ServerEvent::Established => {}
                ServerEvent::Prepare(spec) => self.prepare_in_turn(spec),
                ServerEvent::ClientDone(done) => {
                    if let Some(t) = self.state.test_mut() {
                        t.datagrams_sent = Some(done.datagrams_sent);
                        t.run.client_done(done);
                    }
                }
                ServerEvent::EndTest => {
                    if let Some(t) = self.state.test() {
                        t.run.end_now();
                    }
                }
                ServerEvent::AbortTest => {
                    self.forget_streams();
                    self.turn_done();
                    // (its tally dropped: counted failed)
                    if let Some(t) = self.state.abort(Instant::now()) {
                        t.run.abort();
                    }
                }
                ServerEvent::AuthFailed => self.auth_failed(),
                ServerEvent::ProtocolError => {
                    Refusal::Protocol.count(&self.shared.config.metrics);
                }
                ServerEvent::Summary(summary) => self.write_record(Some(*summary)),
                ServerEvent::Refused(why) => {
                    let why = escape(&why);
                    log.warn_event(
                        &Event {
                            reason: Some(&why),
                            ..self.about("refused")
                        },
                        &format!("{}: refused: {why}", self.peer),
                    );
                }
                ServerEvent::Log(level, text) => {
                    log.event(
                        level,
                        &self.about("session"),
                        &format!("{}: {}", self.peer, escape(&text)),
                    );
                }
                ServerEvent::ResultsSent(r) => self.results_sent(&r),
                ServerEvent::ThirdParty(req) => self.third_party(*req),
            }
        }
    }

    /// A test asked: prepared now, or when its host's turn comes
    /// (`--schedule exclusive`), the client told its place.
    fn prepare_in_turn(&mut self, spec: Box<proto::TestSpec>) {
        self.write_record(None);
        if let Err(e) = self.state.ready("start a test") {
            self.illegal(&e);
            self.core
                .prepare_failed(ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()));
            return;
        }
        let now = Instant::now();
        match self.shared.turns.ask(self.token, self.peer.ip(), now) {
            crate::admission::Turn::Go => self.prepare(&spec),
            crate::admission::Turn::Wait(ahead) => {
                let limit = self.shared.turns.max_wait().as_secs();
                self.shared.config.logger.event(
                    1,
                    &self.about("queued"),
                    &format!(
                        "{}: {} waits its turn, {ahead} ahead (--schedule exclusive)",
                        self.peer, spec.kind
                    ),
                );
                self.core.queued(
                    u32::try_from(ahead).unwrap_or(u32::MAX),
                    u32::try_from(limit).unwrap_or(u32::MAX),
                    now,
                );
                if let Err(e) = self.state.wait(spec, now) {
                    self.illegal(&e);
                }
            }
        }
    }

    /// A wrong key: counted; its address's refusals paced once it fails
    /// too often.
    fn auth_failed(&mut self) {
        Refusal::Auth.count(&self.shared.config.metrics);
        let now = Instant::now();
        let at = self.shared.failures.refusal_at(self.peer.ip(), now);
        if at > now {
            if let Err(e) = self.state.hold(at, now) {
                self.illegal(&e);
                return;
            }
            self.shared.config.logger.warn_limited(
                "auth-slow",
                &format!(
                    "{}: its address failed to authenticate too often lately: refusals of wrong keys from it wait their turn (one a second); right keys are served at once",
                    self.peer
                ),
            );
        }
    }

    /// Start a third-party test (`--fleet`; the core checked the key's
    /// proof), or tell the client why not.
    fn third_party(&mut self, req: proto::ThirdParty) {
        let about = format!(
            "third-party {} against {}:{} ({})",
            self.peer,
            req.host,
            req.port,
            escape(&client::third_party::test_words(&req.test).join(" "))
        );
        if let Err(e) = self.state.ready("start a third-party test") {
            self.illegal(&e);
            let e = ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string());
            self.core.third_party_ended(Err(e), Instant::now());
            return;
        }
        let Some(key) = self.shared.config.key.clone() else {
            let e = ErrorMsg::new(ErrorCode::Auth, "third-party test refused: no key");
            self.core.third_party_ended(Err(e), Instant::now());
            return;
        };
        let (finished, token) = (self.finished.clone(), self.token);
        match crate::fleet::start(req, key, &self.shared.third_party, move || {
            finished.push(token)
        }) {
            Ok(r) => {
                self.shared.config.logger.event(
                    1,
                    &self.about("third-party"),
                    &format!("{about}: started"),
                );
                if let Err(e) = self.state.start_third_party(r) {
                    self.illegal(&e);
                }
            }
            Err(e) => {
                self.shared.config.logger.warn_event(
                    &Event {
                        reason: Some(&e.message),
                        ..self.about("refused")
                    },
                    &format!("{about}: {}", e.message),
                );
                self.core.third_party_ended(Err(e), Instant::now());
            }
        }
    }

    /// If its third-party test ended, tell the core (and the record).
    fn check_third_party(&mut self) {
        let Some(outcome) = self.state.third_party().and_then(|r| r.try_outcome()) else {
            return;
        };
        if let Some(r) = self.state.finish_third_party(Instant::now()) {
            if let Some(rec) = &self.shared.config.record {
                rec.raw(
                    r.record_line(self.id, self.peer, outcome.is_ok()),
                    Some(self.peer.ip()),
                );
            }
            let text = match &outcome {
                Ok(json) => format!("completed, {} bytes of JSON", json.len()),
                Err(e) => e.message.clone(),
            };
            self.shared.config.logger.event(
                1,
                &self.about("third-party"),
                &format!(
                    "{}: third-party test against {}:{}: {}",
                    self.peer,
                    r.req.host,
                    r.req.port,
                    escape(&text)
                ),
            );
        }
        self.core.third_party_ended(outcome, Instant::now());
        self.drain_events();
    }

    fn prepare(&mut self, spec: &proto::TestSpec) {
        // the policy's test limits and budgets (`--policy`): a test the
        // netserver sends may be paced at its rate
        let mut fitted = spec.clone();
        let admitted =
            self.shared
                .config
                .policy
                .admit(self.peer.ip(), &mut fitted, self.core.token());
        let counted = match admitted {
            Ok(counted) => counted,
            Err(why) => {
                let told = Refusal::Policy(why).told(&self.shared.config.metrics);
                self.refused_test(spec, &told.message);
                self.core.prepare_failed(told);
                self.turn_done();
                return;
            }
        };
        let spec = &fitted;
        let finished = self.finished.clone();
        let token = self.token;
        let on_done = Box::new(move || finished.push(token));
        let dialect = self
            .core
            .dialect()
            .unwrap_or(proto::dialect::Dialect::Native);
        let conv = match dialect {
            proto::dialect::Dialect::Iperf3 => {
                engine::conventions::Conventions::iperf3(spec.iperf3.udp_counters64)
            }
            d => engine::conventions::Conventions::from(d),
        };
        // iperf3's streams come to its port and are handed over
        let handed = self.core.stream_cookie().map(|cookie| {
            let streams = spec.streams();
            let ready = self.finished.clone();
            let all_in = Box::new(move || ready.push_ready(token));
            let handoff = &self.shared.handoff;
            match spec.kind.protocol() {
                proto::Protocol::Tcp => family::data::HandedSocks::Tcp(family::data::Handed {
                    streams: handoff.expect(cookie, self.peer.ip(), streams),
                    all_in,
                }),
                proto::Protocol::Udp => family::data::HandedSocks::Udp(family::data::Handed {
                    streams: handoff.expect_udp(cookie, self.peer.ip(), streams),
                    all_in,
                }),
            }
        });
        match family::start(
            spec,
            self.local.ip(),
            self.peer.ip(),
            conv,
            &self.shared,
            handed,
            on_done,
        ) {
            Ok(test) => {
                self.core.granted(test.grant.clone(), Instant::now());
                let testing = Testing {
                    run: test,
                    tally: Some(self.shared.config.metrics.test_started(spec.kind, dialect)),
                    started_at: SystemTime::now(),
                    datagrams_sent: None,
                    counted: Some(counted),
                };
                if let Err(e) = self.state.start(testing) {
                    self.illegal(&e);
                }
            }
            Err(e) => {
                self.refused_test(spec, &e.message);
                self.core.prepare_failed(e);
                self.turn_done();
            }
        }
    }

    /// A move its state does not allow: a defect of ours (the core lets
    /// through one request at a time), logged. A request is checked with
    /// `State::ready` before anything is granted, and refused if so.
    fn illegal(&self, e: &state::Illegal) {
        self.shared.config.logger.warn_event(
            &Event {
                reason: Some(&e.to_string()),
                ..self.about("internal")
            },
            &format!("{}: {e}", self.peer),
        );
    }

    /// A test of this session refused: logged, with why.
    fn refused_test(&self, spec: &proto::TestSpec, why: &str) {
        let why = escape(why);
        self.shared.config.logger.event(
            1,
            &Event {
                test: Some(spec.kind.name()),
                outcome: Some("refused"),
                reason: Some(&why),
                ..self.about("test-refused")
            },
            &format!("{}: {} refused: {why}", self.peer, spec.kind),
        );
    }

    fn flush(&mut self, registry: &Registry) -> io::Result<()> {
        while !self.core.output().is_empty() {
            match self.conn.write(self.core.output()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.core.consumed(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.core.peer_gone(Instant::now());
                    self.drain_events();
                    return Err(e);
                }
            }
        }
        let want = !self.core.output().is_empty();
        if want != self.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry.reregister(&mut self.conn, Token(self.token), interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    /// Read what is available, up to [`READ_BUDGET`], and hand it to the
    /// core. `Ok(true)`: the budget ran out with bytes left (mio tells of
    /// readiness once: the loop reads on at its next turn, so that one
    /// client cannot keep it from the others).
    fn read_control(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 4096];
        let mut budget = READ_BUDGET;
        loop {
            if self.state.is_held() {
                return self.read_while_held();
            }
            if self.core.is_closing() {
                // what would come is not read any more
                return Ok(false);
            }
            if budget == 0 {
                return Ok(true);
            }
            match self.conn.read(&mut chunk) {
                Ok(0) => {
                    // The client went away: end its test at once. Between
                    // tests, that is how a session ends.
                    let mid_test = self.state.test().is_some();
                    self.core.peer_gone(Instant::now());
                    self.drain_events();
                    if !mid_test && self.core.output().is_empty() {
                        return Ok(false);
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the client closed the control connection during a test",
                    ));
                }
                Ok(n) => {
                    budget = budget.saturating_sub(n);
                    self.core
                        .handle_bytes(Instant::now(), chunk.get(..n).unwrap_or_default());
                    self.drain_events();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.core.peer_gone(Instant::now());
                    self.drain_events();
                    return Err(e);
                }
            }
        }
    }

    /// A session whose refusal waits its turn: what comes is dropped,
    /// unread by the core; the peer's close ends the session at once (so
    /// that a held connection nobody waits on holds no descriptor).
    fn read_while_held(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 4096];
        for _ in 0..READ_BUDGET / chunk.len() {
            match self.conn.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "closed while the refusal of its wrong key waited its turn",
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// If the test's worker finished, tell the core.
    fn check_test(&mut self) {
        self.check_third_party();
        let Some(outcome) = self.state.test().and_then(|t| t.run.try_result()) else {
            return;
        };
        if let Some(t) = self.state.test()
            && outcome.is_ok()
        {
            self.core.interim(t.run.take_interims());
            if self.core.wants_facts() {
                // what this host is now (a sysctl or an offload may have
                // changed since the last test)
                self.core
                    .host_facts(self.shared.host_facts(self.local.ip()));
            }
        }
        if outcome.is_err()
            && let Some(t) = self.state.finish(Instant::now())
        {
            // (its tally dropped: counted failed)
            t.run.abort();
        }
        self.core.test_ended(outcome, Instant::now());
        self.drain_events();
    }
}
