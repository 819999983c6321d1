//! One control connection: a thread with a small mio loop over the control
//! socket and a waker that its running test (or a shutdown) pulls.
//!
//! This module only moves bytes and reads the clock. What the bytes mean,
//! the framing, the sealing and every deadline are [`proto::conn::ServerConn`]'s;
//! starting, ending and aborting the test's data path are [`family`]'s.

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::Arc,
    time::{Duration, Instant},
};

use mio::{Events, Interest, Poll, Token, Waker};
use proto::{
    Authenticator, ErrorCode, ErrorMsg,
    conn::{ServerConn, ServerEvent, Timeouts},
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

/// The core's deadlines, from the daemon's configuration.
pub(crate) fn timeouts(cfg: &crate::Config) -> Timeouts {
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

struct Session<'a> {
    shared: &'a Shared,
    poll: Poll,
    waker: Arc<Waker>,
    conn: mio::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    core: ServerConn,
    writable_interest: bool,
    test: Option<family::RunningTest>,
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
            crate::software(),
            cfg.limits.clone(),
            auth,
            nonce,
            (cpus, engine::cpu::meter_rate()),
            timeouts(cfg),
            Instant::now(),
        )
        .with_netperf2(proto::conn::Netperf2Policy {
            serve: cfg.netperf2,
            passphrase: cfg.netperf2_passphrase.clone(),
            control_family: match local.ip() {
                std::net::IpAddr::V4(_) => proto::Family::V4,
                std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => proto::Family::V4,
                std::net::IpAddr::V6(_) => proto::Family::V6,
            },
        });
        Ok(Session {
            shared,
            poll,
            waker,
            conn,
            peer,
            local,
            core,
            writable_interest: false,
            test: None,
        })
    }

    fn run(&mut self, pending: &mut bool) -> io::Result<()> {
        let _sub = self.shared.shutdown.subscribe(self.waker.clone());
        let mut events = Events::with_capacity(8);
        loop {
            if *pending && self.core.established() {
                *pending = false;
                self.shared.census.established();
            }
            let now = Instant::now();
            self.core.handle_timeout(now);
            self.drain_events();
            self.flush()?;
            if self.core.is_closed(Instant::now()) {
                return Ok(());
            }
            let wait = self.core.poll_timeout().saturating_duration_since(now);
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if self.shared.shutdown.is_triggered() {
                self.core.fail(
                    ErrorMsg::new(ErrorCode::ShuttingDown, "netserver is shutting down"),
                    Instant::now(),
                );
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
        }
    }

    /// Do what the core asks.
    fn drain_events(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            let log = &self.shared.config.logger;
            match ev {
                ServerEvent::Foreign { dialect, bytes } => {
                    log.warn_limited(
                        "protocol",
                        &format!(
                            "{}: {} ({} bytes): closed",
                            self.peer,
                            match dialect {
                                Some(proto::dialect::Dialect::Netperf2) => "speaks netperf 2.7's protocol, which this netserver does not speak yet (answered: remote error 93, protocol not supported)".to_string(),
                                Some(d) => format!("speaks {d:?}, which this netserver does not serve here"),
                                None => "does not speak this netserver's protocol".to_string(),
                            },
                            bytes.len()
                        ),
                    );
                }
                ServerEvent::Established => {}
                ServerEvent::Prepare(spec) => self.prepare(&spec),
                ServerEvent::ClientDone(done) => {
                    if let Some(t) = &self.test {
                        t.client_done(done);
                    }
                }
                ServerEvent::EndTest => {
                    if let Some(t) = &self.test {
                        t.end_now();
                    }
                }
                ServerEvent::AbortTest => {
                    if let Some(t) = self.test.take() {
                        t.abort();
                    }
                }
                ServerEvent::AuthFailed => self.shared.failures.record(self.peer.ip()),
                ServerEvent::Log(0, text) => {
                    log.log(0, &format!("{}: {}", self.peer, escape(&text)));
                }
                ServerEvent::Log(1, text) if text.starts_with("refused") => {
                    log.warn_limited("refused", &format!("{}: {}", self.peer, escape(&text)));
                }
                ServerEvent::Log(level, text) => {
                    log.log(level, &format!("{}: {}", self.peer, escape(&text)));
                }
                ServerEvent::ResultsSent(r) => {
                    if let Some(mut t) = self.test.take() {
                        t.join();
                        log.log(
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
                }
            }
        }
    }

    fn prepare(&mut self, spec: &proto::TestSpec) {
        let waker = self.waker.clone();
        let on_done = Box::new(move || {
            let _ = waker.wake();
        });
        let conv = engine::conventions::Conventions::from(
            self.core
                .dialect()
                .unwrap_or(proto::dialect::Dialect::Native),
        );
        match family::start(
            spec,
            self.local.ip(),
            self.peer.ip(),
            conv,
            &self.shared.config,
            on_done,
        ) {
            Ok(test) => {
                self.core.granted(test.grant.clone(), Instant::now());
                self.test = Some(test);
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
                self.core.prepare_failed(e);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
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
            self.poll
                .registry()
                .reregister(&mut self.conn, CONTROL, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    /// Read everything available and hand it to the core.
    fn read_control(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.conn.read(&mut chunk) {
                Ok(0) => {
                    // The client went away: end its test at once.
                    self.core.peer_gone(Instant::now());
                    self.drain_events();
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(n) => {
                    self.core
                        .handle_bytes(Instant::now(), chunk.get(..n).unwrap_or_default());
                    self.drain_events();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.core.peer_gone(Instant::now());
                    self.drain_events();
                    return Err(e);
                }
            }
        }
    }

    /// If the test's worker finished, tell the core.
    fn check_test(&mut self) {
        let Some(outcome) = self.test.as_ref().and_then(|t| t.try_result()) else {
            return;
        };
        if outcome.is_err()
            && let Some(t) = self.test.take()
        {
            t.abort();
        }
        self.core.test_ended(outcome, Instant::now());
        self.drain_events();
    }
}
