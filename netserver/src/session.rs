//! One control connection: a thread with a small mio loop over the control
//! socket and a waker that its running test (or a shutdown) pulls.
//!
//! Every decision about what a message means is made by
//! [`proto::ServerSession`]; this module does the I/O and keeps the clocks:
//! a handshake deadline that dribbling cannot stretch, an idle limit between
//! tests, and a limit on each test's length.

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::Arc,
    time::{Duration, Instant},
};

use engine::auth::Channel;
use mio::{Events, Interest, Poll, Token, Waker};
use proto::{
    Authenticator, ClientMsg, ErrorCode, ErrorMsg, Role, ServerAction, ServerMsg, ServerSession,
    codec, frame,
};

use crate::{Shared, family, log::escape};

const CONTROL: Token = Token(0);
const WAKE: Token = Token(1);
/// Once we decide to close, how long we try to deliver our last message.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

pub(crate) fn serve(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let log = shared.config.logger.clone();
    let mut pending = true;
    match Session::new(stream, peer, &shared) {
        Ok(mut s) => {
            let r = s.run(&mut pending);
            if let Err(e) = r {
                log.log(2, &format!("{peer}: session ended: {e}"));
            }
        }
        Err(e) => log.warn_limited("session", &format!("{peer}: cannot start session: {e}")),
    }
    shared.census.leave(peer.ip(), pending);
}

struct Session<'a> {
    shared: &'a Shared,
    poll: Poll,
    waker: Arc<Waker>,
    conn: mio::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    proto: ServerSession,
    /// Seals and checks every frame once the client has authenticated.
    channel: Option<Channel>,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    writable_interest: bool,
    closing_since: Option<Instant>,
    test: Option<family::RunningTest>,
    started: Instant,
    got_bytes: bool,
    idle_since: Instant,
}

impl<'a> Session<'a> {
    fn new(stream: TcpStream, peer: SocketAddr, shared: &'a Shared) -> io::Result<Session<'a>> {
        let local = stream.local_addr()?;
        let _ = stream.set_nodelay(true);
        let _ =
            engine::sockopt::set_liveness(socket2::SockRef::from(&stream), Duration::from_secs(30));
        stream.set_nonblocking(true)?;
        let poll = Poll::new()?;
        let mut conn = mio::net::TcpStream::from_std(stream);
        poll.registry()
            .register(&mut conn, CONTROL, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(io::Error::other)?;
        let auth = shared
            .config
            .key
            .clone()
            .map(|k| Box::new(k) as Box<dyn Authenticator>);
        let cpus = match shared.config.num_cpus {
            0 => engine::cpu::count(),
            n => n,
        };
        let proto =
            ServerSession::new(crate::software(), shared.config.limits.clone(), auth, nonce)
                .with_cpu_info(cpus, engine::cpu::meter_rate());
        let now = Instant::now();
        Ok(Session {
            shared,
            poll,
            waker,
            conn,
            peer,
            local,
            proto,
            channel: None,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            writable_interest: false,
            closing_since: None,
            test: None,
            started: now,
            got_bytes: false,
            idle_since: now,
        })
    }

    fn run(&mut self, pending: &mut bool) -> io::Result<()> {
        let _sub = self.shared.shutdown.subscribe(self.waker.clone());
        let mut events = Events::with_capacity(8);
        loop {
            if *pending && self.proto.established() {
                *pending = false;
                self.shared.census.established();
            }
            let now = Instant::now();
            let deadline = self.deadline();
            if now >= deadline {
                if self.closing_since.is_some() {
                    return Ok(());
                }
                self.deadline_passed();
                // Say why at once, then close.
                self.flush()?;
                if self.outbuf.is_empty() {
                    return Ok(());
                }
                continue;
            }
            match self.poll.poll(&mut events, Some(deadline - now)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if self.shared.shutdown.is_triggered() && self.closing_since.is_none() {
                self.fail(ErrorMsg::new(
                    ErrorCode::ShuttingDown,
                    "netserver is shutting down",
                ));
            }
            for ev in events.iter() {
                if ev.token() == CONTROL {
                    if ev.is_writable() {
                        self.flush()?;
                    }
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        self.read_control()?;
                    }
                }
            }
            self.check_test();
            self.flush()?;
            if self.closing_since.is_some() && self.outbuf.is_empty() {
                return Ok(());
            }
        }
    }

    /// The next instant something must happen by.
    fn deadline(&self) -> Instant {
        let cfg = &self.shared.config;
        if let Some(t) = self.closing_since {
            return t + CLOSE_GRACE;
        }
        if !self.proto.established() {
            let total = self.started + cfg.handshake_timeout;
            return if self.got_bytes {
                total
            } else {
                total.min(self.started + cfg.first_byte_timeout)
            };
        }
        match &self.test {
            Some(t) => t.deadline,
            None => self.idle_since + cfg.idle_timeout,
        }
    }

    fn deadline_passed(&mut self) {
        let cfg = &self.shared.config;
        let (code, text) = if !self.proto.established() {
            if self.got_bytes {
                (
                    ErrorCode::Timeout,
                    format!(
                        "handshake not completed within {} s",
                        cfg.handshake_timeout.as_secs()
                    ),
                )
            } else {
                (
                    ErrorCode::Timeout,
                    format!(
                        "nothing received within {} s",
                        cfg.first_byte_timeout.as_secs()
                    ),
                )
            }
        } else if self.test.is_some() {
            (
                ErrorCode::Timeout,
                format!(
                    "test exceeded this netserver's limit of {} s",
                    cfg.limits.max_duration_ms / 1000
                ),
            )
        } else {
            (
                ErrorCode::Timeout,
                format!(
                    "control connection idle for {} s",
                    cfg.idle_timeout.as_secs()
                ),
            )
        };
        cfg.logger
            .log(2, &format!("{}: closing: {text}", self.peer));
        self.fail(ErrorMsg::new(code, text));
    }

    /// Abort any test, send `err`, and close.
    fn fail(&mut self, err: ErrorMsg) {
        if let Some(t) = self.test.take() {
            t.abort();
        }
        self.queue(&ServerMsg::Error(err));
        self.close();
    }

    fn close(&mut self) {
        if self.closing_since.is_none() {
            self.closing_since = Some(Instant::now());
        }
    }

    fn queue(&mut self, msg: &ServerMsg) {
        let mut body = Vec::new();
        if let Err(e) = codec::encode_into(msg, &mut body) {
            self.shared
                .config
                .logger
                .log(0, &format!("cannot encode a reply: {e}"));
            return;
        }
        if let Some(c) = &mut self.channel {
            c.seal(&mut body);
        }
        self.outbuf
            .extend_from_slice(&(body.len() as u32).to_be_bytes());
        self.outbuf.extend_from_slice(&body);
    }

    fn flush(&mut self) -> io::Result<()> {
        while !self.outbuf.is_empty() {
            match self.conn.write(&self.outbuf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.abort_test();
                    return Err(e);
                }
            }
        }
        let want = !self.outbuf.is_empty();
        if want != self.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            self.poll
                .registry()
                .reregister(&mut self.conn, CONTROL, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    fn abort_test(&mut self) {
        if let Some(t) = self.test.take() {
            t.abort();
        }
    }

    /// Read everything available and act on each whole frame.
    fn read_control(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.conn.read(&mut chunk) {
                Ok(0) => {
                    // The client went away: end its test at once.
                    self.abort_test();
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(n) => {
                    self.got_bytes = true;
                    if self.closing_since.is_some() {
                        continue;
                    }
                    self.inbuf
                        .extend_from_slice(chunk.get(..n).unwrap_or_default());
                    self.process_frames();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.abort_test();
                    return Err(e);
                }
            }
        }
    }

    fn process_frames(&mut self) {
        while self.closing_since.is_none() {
            let channel = &mut self.channel;
            let next = frame::split(&self.inbuf).and_then(|f| match f {
                None => Ok(None),
                Some((body, used)) => {
                    let body = match channel {
                        Some(c) => c
                            .open(body)
                            .map_err(|e| proto::ProtoError::Auth(e.to_string()))?,
                        None => body,
                    };
                    Ok(Some((ClientMsg::decode(body)?, used)))
                }
            });
            match next {
                Ok(Some((msg, used))) => {
                    self.inbuf.drain(..used);
                    self.idle_since = Instant::now();
                    let action = self.proto.handle(msg);
                    self.act(action);
                }
                Ok(None) => return,
                Err(e) => {
                    self.shared.config.logger.warn_limited(
                        "protocol",
                        &format!("{}: {}", self.peer, escape(&e.to_string())),
                    );
                    let msg = self.proto.protocol_error(&e);
                    self.abort_test();
                    self.queue(&msg);
                    self.close();
                    return;
                }
            }
        }
    }

    fn act(&mut self, action: ServerAction) {
        match action {
            ServerAction::Reply(m) => {
                self.queue(&m);
                // The proofs are exchanged: seal every frame from now on.
                if let (ServerMsg::AuthOk { .. }, Some(key), Some((s, c))) =
                    (&m, &self.shared.config.key, self.proto.auth_nonces())
                {
                    self.channel = Some(key.channel(Role::Server, &s, &c));
                }
            }
            ServerAction::ReplyAndClose(m) => {
                if let ServerMsg::Error(e) = &m
                    && e.code == ErrorCode::Auth
                {
                    self.shared.failures.record(self.peer.ip());
                }
                if let ServerMsg::Error(e) = &m {
                    self.shared
                        .config
                        .logger
                        .warn_limited("refused", &format!("{}: {}", self.peer, escape(&e.message)));
                }
                self.abort_test();
                self.queue(&m);
                self.close();
            }
            ServerAction::Prepare(spec) => {
                let waker = self.waker.clone();
                let on_done = Box::new(move || {
                    let _ = waker.wake();
                });
                match family::start(
                    &spec,
                    self.local.ip(),
                    self.peer.ip(),
                    &self.shared.config,
                    on_done,
                ) {
                    Ok(test) => {
                        let m = self.proto.granted(test.grant.clone());
                        self.test = Some(test);
                        self.queue(&m);
                    }
                    Err(e) => {
                        self.shared.config.logger.log(
                            1,
                            &format!(
                                "{}: {} refused: {}",
                                self.peer,
                                spec.kind,
                                escape(&e.message)
                            ),
                        );
                        let m = self.proto.prepare_failed(e);
                        self.queue(&m);
                    }
                }
            }
            ServerAction::ClientDone(done) => {
                if let Some(t) = &self.test {
                    t.client_done(done);
                }
            }
            ServerAction::SendResults(m) => {
                if let (Some(mut t), ServerMsg::Results(r)) = (self.test.take(), &m) {
                    t.join();
                    self.shared.config.logger.log(
                        1,
                        &format!(
                            "{} {} {} bytes sent, {} received, {} transactions, {:.2} s",
                            self.peer,
                            t.spec.kind,
                            r.bytes_sent,
                            r.bytes_received,
                            r.transactions,
                            r.elapsed_ns as f64 / 1e9
                        ),
                    );
                }
                self.idle_since = Instant::now();
                self.queue(&m);
            }
            ServerAction::Close => self.close(),
        }
    }

    /// If the test's worker finished, tell the state machine.
    fn check_test(&mut self) {
        let Some(outcome) = self.test.as_ref().and_then(|t| t.try_result()) else {
            return;
        };
        if let Err(e) = &outcome {
            self.shared.config.logger.log(
                1,
                &format!("{}: test failed: {}", self.peer, escape(&e.message)),
            );
        }
        if let Some(action) = self.proto.test_ended(outcome) {
            self.act(action);
        }
    }
}
