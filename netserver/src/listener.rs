//! The control loop: one mio event loop over the control listeners, the
//! connections that have not yet sent their first message, and every
//! session's control connection ([`session::Sessions`]).
//!
//! It never blocks on a client. A new connection waits in the loop's
//! waiting room, costing its socket and a few dozen bytes, not a thread,
//! until its first message has come; then it becomes a session of the same
//! loop (a few KiB; a thread only while a test runs) or, over a cap, is
//! told "busy" with one small non-blocking write and closed. A
//! connection silent for the first-bytes deadline is closed. When the room
//! is full, or descriptors run out, the oldest waiting connection of the
//! address that holds the most is closed to make room: silent connections
//! cannot lock out a real client, and one address cannot hold every place.
//! Running out of file descriptors or memory is logged
//! (rate-limited) and waited out; it never ends the daemon.

use std::{
    collections::{HashMap, VecDeque},
    io::{self, Write},
    net::{IpAddr, SocketAddr, TcpListener, TcpStream},
    sync::Arc,
    time::{Duration, Instant},
};

use engine::sys::{SockKind, Watch};
use mio::{Events, Interest, Poll, Token, Waker};
use proto::{ErrorCode, ErrorMsg};

use crate::{
    admission::{Refusal, SessionCap},
    scrape, session,
    session::Origin,
    shared::Shared,
};

const WAKE: Token = Token(usize::MAX);
/// Tokens of waiting connections start here (listeners are below).
const FIRST_WAITING: usize = 1 << 20;
/// How long to wait before accepting again after running out of resources.
const BACKOFF: Duration = Duration::from_millis(100);
/// Connections accepted from one listener before the loop turns to others.
const ACCEPT_BUDGET: usize = 256;
/// How long the daemon stays idle before it gives memory back.
const TRIM_AFTER: Duration = Duration::from_millis(200);

/// Connections that have sent nothing yet, in arrival order.
struct WaitingRoom {
    conns: HashMap<usize, (TcpStream, SocketAddr, Watch, Origin)>,
    /// (arrival, token), oldest first; tokens already gone are skipped.
    order: VecDeque<(Instant, usize)>,
    per_address: HashMap<IpAddr, usize>,
    next: usize,
    /// Connections with a part of their first message where no event
    /// will say that the rest came ([`Watch::PEEK_AGAIN`]): when to peek
    /// again, the token, and the wait before that (doubled each time, to
    /// [`PEEK_AGAIN_MAX`]: a client's rest comes at once, a squatter's
    /// never).
    again: Vec<(Instant, usize, Duration)>,
}

/// The longest wait between two peeks at a part of a first message.
const PEEK_AGAIN_MAX: Duration = Duration::from_millis(500);

/// What a peek at a waiting connection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum First {
    /// Its whole first message, or its end, or what no session will take:
    /// a session's to serve.
    In,
    /// A part of it: the rest is waited for.
    Part,
    /// Nothing yet.
    Nothing,
}

impl WaitingRoom {
    fn new() -> WaitingRoom {
        WaitingRoom {
            conns: HashMap::new(),
            order: VecDeque::new(),
            per_address: HashMap::new(),
            next: FIRST_WAITING,
            again: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.conns.len()
    }

    /// A token no connection of the loop holds (waiting connections keep
    /// theirs as sessions).
    fn new_token(&mut self) -> usize {
        let token = self.next;
        self.next = if self.next == usize::MAX - 1 {
            FIRST_WAITING
        } else {
            self.next + 1
        };
        token
    }

    fn enter(
        &mut self,
        poll: &Poll,
        stream: TcpStream,
        peer: SocketAddr,
        origin: Origin,
    ) -> io::Result<()> {
        // looked at with a peek that must never wait
        stream.set_nonblocking(true)?;
        let token = self.new_token();
        let watch = Watch::new(
            poll.registry(),
            &stream,
            SockKind::Stream,
            Token(token),
            Interest::READABLE,
        )?;
        self.conns.insert(token, (stream, peer, watch, origin));
        self.order.push_back((Instant::now(), token));
        *self.per_address.entry(peer.ip()).or_insert(0) += 1;
        Ok(())
    }

    /// Whether a waiting connection's first message has all come (or it
    /// has ended, or says what no session will take): then it is a
    /// session's to serve. Until then it costs no thread: a client that
    /// sends a byte and stops holds no more than a silent one.
    fn first_message(&self, token: usize) -> First {
        let Some((stream, _, watch, origin)) = self.conns.get(&token) else {
            return First::In;
        };
        let mut buf = [0u8; 1024];
        let n = match stream.peek(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                watch.rearm();
                return First::Nothing;
            }
            Err(_) => return First::In,
        };
        let first = buf.get(..n).unwrap_or_default();
        if n == 0 || n == buf.len() {
            return First::In;
        }
        // iperf3's connections begin with their cookie, control and
        // streams alike
        if *origin == Origin::Iperf3 {
            return if n >= proto::iperf3::COOKIE_LEN {
                First::In
            } else {
                First::Part
            };
        }
        let whole = match proto::dialect::sniff(first) {
            proto::dialect::Sniff::NeedMore => false,
            proto::dialect::Sniff::Is(proto::dialect::Dialect::Netperf2) => {
                n >= proto::dialect::NETPERF2_FRAME
            }
            proto::dialect::Sniff::Is(proto::dialect::Dialect::Iperf3) => true,
            proto::dialect::Sniff::Is(proto::dialect::Dialect::Native) => {
                match first.first_chunk::<{ proto::frame::HEADER_LEN }>() {
                    None => false,
                    Some(h) => proto::frame::body_len(*h)
                        .map_or(true, |len| n >= proto::frame::HEADER_LEN + len),
                }
            }
        };
        if whole { First::In } else { First::Part }
    }

    /// Peek at `token` again, where the platform says no event will come
    /// when the rest of its first message does: after
    /// [`Watch::PEEK_AGAIN`] the first time, after twice `waited` since.
    /// Until then the loop does not watch it: where the platform reports
    /// bytes that are there over and over (Wine does), watching would wake
    /// the loop at once, forever; its end, too, is found by the peek.
    fn look_again(&mut self, poll: &Poll, token: usize, now: Instant, waited: Option<Duration>) {
        let Some(first) = Watch::PEEK_AGAIN else {
            return;
        };
        if waited.is_none()
            && let Some((_, _, watch, _)) = self.conns.get_mut(&token)
        {
            watch.deregister(poll.registry());
        }
        let wait = waited.map_or(first, |w| (w * 2).min(PEEK_AGAIN_MAX));
        self.again.push((now + wait, token, wait));
    }

    /// The connections to peek at again now, with the wait each had.
    fn due_again(&mut self, now: Instant) -> Vec<(usize, Duration)> {
        let mut due = Vec::new();
        self.again.retain(|&(at, token, wait)| {
            let now_due = at <= now;
            if now_due {
                due.push((token, wait));
            }
            !now_due
        });
        due
    }

    /// Take a connection out of the room (to serve it or to close it).
    fn leave(&mut self, poll: &Poll, token: usize) -> Option<(TcpStream, SocketAddr, Origin)> {
        let (stream, peer, mut watch, origin) = self.conns.remove(&token)?;
        if !self.again.is_empty() {
            self.again.retain(|&(_, t, _)| t != token);
        }
        watch.deregister(poll.registry());
        if let Some(n) = self.per_address.get_mut(&peer.ip()) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&peer.ip());
            }
        }
        Some((stream, peer, origin))
    }

    /// Close the connections silent since before `cutoff`, telling each
    /// why as the handshake's own deadline would.
    fn expire(&mut self, poll: &Poll, cutoff: Instant, code: ErrorCode, why: &str) -> usize {
        let mut closed = 0;
        while let Some(&(since, token)) = self.order.front() {
            if !self.conns.contains_key(&token) {
                self.order.pop_front();
                continue;
            }
            if since > cutoff {
                break;
            }
            self.order.pop_front();
            if let Some((stream, _, _)) = self.leave(poll, token) {
                refuse(&stream, &ErrorMsg::new(code, why));
                closed += 1;
            }
        }
        closed
    }

    /// When the next connection's deadline falls, or the next peek again.
    fn next_deadline(&mut self, limit: Duration) -> Option<Instant> {
        let oldest = loop {
            match self.order.front() {
                Some(&(since, token)) if self.conns.contains_key(&token) => {
                    break Some(since + limit);
                }
                Some(_) => _ = self.order.pop_front(),
                None => break None,
            }
        };
        let again = self.again.iter().map(|&(at, _, _)| at).min();
        [oldest, again].into_iter().flatten().min()
    }

    /// Close the oldest connection of the address that holds the most.
    fn evict(&mut self, poll: &Poll) -> Option<SocketAddr> {
        let (&ip, _) = self.per_address.iter().max_by_key(|(_, n)| **n)?;
        let token = self
            .order
            .iter()
            .map(|(_, t)| *t)
            .find(|t| self.conns.get(t).is_some_and(|(_, p, _, _)| p.ip() == ip))?;
        self.leave(poll, token).map(|(_, peer, _)| peer)
    }
}

/// How long a shutting-down loop waits for its sessions to end.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The daemon's control loop: its listeners, the connections waiting for
/// their first message, and every session's control connection. `first`
/// is a connection to serve from the start (inetd's); with no listeners,
/// the loop returns when its sessions have ended.
pub(crate) fn accept_loop(
    listeners: Vec<(TcpListener, Origin)>,
    udp: Vec<std::net::UdpSocket>,
    metrics: Option<TcpListener>,
    first: Option<(TcpStream, SocketAddr)>,
    shared: &Arc<Shared>,
) -> io::Result<()> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    let _sub = shared.shutdown.subscribe(waker.clone());
    // each listener with how the loop watches it
    let listeners: Vec<(TcpListener, Watch, Origin)> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, (l, origin))| {
            l.set_nonblocking(true)?;
            let w = Watch::new(
                poll.registry(),
                &l,
                SockKind::Listener,
                Token(i),
                Interest::READABLE,
            )?;
            Ok((l, w, origin))
        })
        .collect::<io::Result<_>>()?;
    let first_bytes = shared.config.first_byte_timeout;
    let mut l = ControlLoop {
        scrapes: scrape::Scrapes::new(metrics, poll.registry())?,
        udp: UdpStreams::new(udp, poll.registry())?,
        poll,
        listeners,
        room: WaitingRoom::new(),
        sessions: session::Sessions::new(shared.clone(), waker),
        shared: shared.clone(),
        first_bytes,
        silent: format!(
            "no whole first message received within {} s",
            first_bytes.as_secs()
        ),
        retry_at: None,
        stopping: None,
        trim: Trim::default(),
    };
    if let Some((stream, peer)) = first {
        let token = l.room.new_token();
        l.sessions.start(
            l.poll.registry(),
            stream,
            peer,
            token,
            Origin::Control,
            None,
        );
    }
    let mut events = Events::with_capacity(256);
    loop {
        let now = Instant::now();
        let Some(timeout) = l.before_waiting(now) else {
            return Ok(());
        };
        match l.poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                l.sessions.drop_all(l.poll.registry());
                return Err(e);
            }
        }
        let woken = l.on_events(&events);
        l.after_waking(woken);
    }
}

/// What the control loop holds between its waits.
struct ControlLoop {
    poll: Poll,
    listeners: Vec<(TcpListener, Watch, Origin)>,
    room: WaitingRoom,
    sessions: session::Sessions,
    scrapes: scrape::Scrapes,
    udp: UdpStreams,
    shared: Arc<Shared>,
    /// How long a connection may take to send its whole first message,
    /// and what it is told when it has not.
    first_bytes: Duration,
    silent: String,
    /// After a resource error we stop accepting until this instant, then
    /// try every listener again (mio is edge-triggered: no new event would
    /// come for connections already queued).
    retry_at: Option<Instant>,
    /// Once shutting down: until when the sessions may take to end.
    stopping: Option<Instant>,
    trim: Trim,
}

/// What a wait's events left to do: listeners with connections to accept,
/// waiting connections whose first message is in (or whose peer closed),
/// and those with a part of it.
#[derive(Default)]
struct Woken {
    ready: Vec<usize>,
    serve: Vec<usize>,
    parts: Vec<usize>,
}

impl ControlLoop {
    /// Before a wait: shutting down, and how long to wait; `None` when the
    /// loop is over (nothing left to serve, or the sessions' time to end
    /// is up).
    fn before_waiting(&mut self, now: Instant) -> Option<Option<Duration>> {
        if self.shared.shutdown.is_triggered() && self.stopping.is_none() {
            self.stopping = Some(now + SHUTDOWN_WAIT);
            self.scrapes.stop(self.poll.registry());
            stop_accepting(
                &mut self.listeners,
                &self.poll,
                &mut self.room,
                &mut self.sessions,
                now,
            );
        }
        if self.listeners.is_empty() && self.sessions.len() == 0 {
            return None;
        }
        if self.stopping.is_some_and(|t| now >= t) {
            self.sessions.drop_all(self.poll.registry());
            return None;
        }
        self.trim.tick(
            self.sessions.len() == 0 && self.shared.workers.alive() == 0,
            now,
        );
        let wake_at = [
            self.retry_at,
            self.room.next_deadline(self.first_bytes),
            self.sessions.next_deadline(),
            self.stopping,
            self.trim.at,
            self.scrapes.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        Some(if self.sessions.has_more() || self.scrapes.has_more() {
            Some(Duration::ZERO)
        } else {
            wake_at.map(|t| t.saturating_duration_since(now))
        })
    }

    /// Each event to its owner: a session, a UDP stream, a scrape, a
    /// waiting connection, a listener.
    fn on_events(&mut self, events: &Events) -> Woken {
        let mut w = Woken::default();
        for ev in events {
            match ev.token() {
                WAKE => {}
                Token(t) if self.sessions.owns(t) => {
                    self.sessions.on_event(self.poll.registry(), ev);
                }
                Token(t) if self.udp.owns(t) => self.udp.on_readable(t, &self.shared),
                Token(t) if self.scrapes.owns(t) => {
                    let n = self.sessions.len();
                    self.scrapes
                        .on_event(self.poll.registry(), ev, &self.shared, n);
                }
                Token(t) if t >= FIRST_WAITING => {
                    // its whole first message (or its end): a session's
                    // to serve; a part of it waits on, for the rest
                    if ev.is_read_closed() {
                        w.serve.push(t);
                    } else {
                        match self.room.first_message(t) {
                            First::In => w.serve.push(t),
                            First::Part => w.parts.push(t),
                            First::Nothing => {}
                        }
                    }
                }
                Token(i) => w.ready.push(i),
            }
        }
        w
    }

    /// After a wait: first messages served, deadlines kept, connections
    /// accepted.
    fn after_waking(&mut self, w: Woken) {
        let Woken {
            mut ready,
            mut serve,
            parts,
        } = w;
        let now = Instant::now();
        for t in parts {
            self.room.look_again(&self.poll, t, now, None);
        }
        for (t, waited) in self.room.due_again(now) {
            match self.room.first_message(t) {
                First::In => serve.push(t),
                // no longer watched: only a peek finds what comes next
                First::Part | First::Nothing => {
                    self.room.look_again(&self.poll, t, now, Some(waited));
                }
            }
        }
        self.serve(serve);
        self.sessions.on_wake(self.poll.registry(), now);
        self.scrapes.expire(self.poll.registry(), now);
        self.expire_silent(now);
        if let Some(t) = self.retry_at {
            if now < t {
                return;
            }
            self.retry_at = None;
            ready = (0..self.listeners.len()).collect();
        }
        for i in ready {
            let Some(l) = self.listeners.get(i) else {
                continue;
            };
            if let Some(backoff) =
                drain(l, &self.shared, &self.poll, &mut self.room, &self.sessions)
            {
                self.retry_at = Some(Instant::now() + backoff);
            }
        }
    }

    /// Waiting connections whose first message is in: each a session (an
    /// iperf3 test's stream, presenting its session's cookie, to its test).
    fn serve(&mut self, tokens: Vec<usize>) {
        for t in tokens {
            let Some((stream, peer, origin)) = self.room.leave(&self.poll, t) else {
                continue;
            };
            let stream = match origin {
                Origin::Iperf3 => match hand_over(stream, &self.shared) {
                    Some(s) => s,
                    None => continue,
                },
                Origin::Control => stream,
            };
            admit(
                stream,
                peer,
                t,
                origin,
                &self.shared,
                &self.poll,
                &mut self.sessions,
            );
        }
    }

    /// Connections that sent no whole first message in time, closed.
    fn expire_silent(&mut self, now: Instant) {
        let Some(cutoff) = now.checked_sub(self.first_bytes) else {
            return;
        };
        let closed = self
            .room
            .expire(&self.poll, cutoff, ErrorCode::Timeout, &self.silent);
        if closed > 0 {
            self.shared.config.logger.log(
                2,
                &format!(
                    "closed {closed} connections that sent no whole first message within {} ms",
                    self.first_bytes.as_millis()
                ),
            );
        }
    }
}

/// Tokens of iperf3's UDP ports (below the metrics endpoint's).
const FIRST_UDP: usize = 1 << 18;

/// iperf3's UDP ports: a UDP stream's first datagram comes here; a test
/// of its address expecting a UDP stream gets a socket of its own on the
/// same port, connected to the stream's address (the kernel gives a
/// connected socket the datagrams of its peer), which answers it, as
/// iperf3's server does.
struct UdpStreams {
    socks: Vec<mio::net::UdpSocket>,
}

impl UdpStreams {
    fn new(socks: Vec<std::net::UdpSocket>, registry: &mio::Registry) -> io::Result<UdpStreams> {
        let mut out = Vec::with_capacity(socks.len());
        for (i, s) in socks.into_iter().enumerate() {
            s.set_nonblocking(true)?;
            let mut s = mio::net::UdpSocket::from_std(s);
            registry.register(&mut s, Token(FIRST_UDP + i), Interest::READABLE)?;
            out.push(s);
        }
        Ok(UdpStreams { socks: out })
    }

    fn owns(&self, token: usize) -> bool {
        (FIRST_UDP..FIRST_UDP + self.socks.len()).contains(&token)
    }

    /// Take what came (at most 256 datagrams a turn; readiness is edge-
    /// triggered, so a budget left over is taken at the next datagram).
    fn on_readable(&mut self, token: usize, shared: &Shared) {
        let Some(sock) = self.socks.get(token - FIRST_UDP) else {
            return;
        };
        let mut buf = [0u8; 64];
        for _ in 0..256 {
            let (reply, from) = match sock.recv_from(&mut buf) {
                Ok((n, from)) => (
                    proto::iperf3::udp_connect_reply(buf.get(..n).unwrap_or_default()),
                    from,
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => continue,
            };
            // (a datagram that is no stream's connect message is not one)
            let Some(reply) = reply else {
                continue;
            };
            let Some(tx) = shared.handoff.udp_stream(from) else {
                continue;
            };
            match sock
                .local_addr()
                .and_then(|local| stream_socket(local, from, reply))
            {
                Ok(s) => {
                    let _ = tx.try_send(s);
                }
                Err(e) => shared
                    .config
                    .logger
                    .warn_limited("iperf3-udp", &format!("{from}: a UDP stream's socket: {e}")),
            }
        }
    }
}

/// A UDP stream's own socket: on iperf3's port, connected to `from`,
/// having answered its first datagram with `reply`.
fn stream_socket(
    local: SocketAddr,
    from: SocketAddr,
    reply: [u8; 4],
) -> io::Result<std::net::UdpSocket> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(local),
        socket2::Type::DGRAM,
        None,
    )?;
    s.set_reuse_address(true)?;
    if local.is_ipv6() && local.ip().is_unspecified() {
        let _ = s.set_only_v6(false);
    }
    s.bind(&local.into())?;
    let to = match (local, from) {
        // a dual-stack port: an IPv4 stream's address, mapped
        (SocketAddr::V6(_), SocketAddr::V4(v4)) => {
            SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port())
        }
        _ => from,
    };
    s.connect(&to.into())?;
    let s: std::net::UdpSocket = s.into();
    s.send(&reply)?;
    Ok(s)
}

/// Shutting down: no more accepting; those waiting, held or in session
/// are told.
fn stop_accepting(
    listeners: &mut Vec<(TcpListener, Watch, Origin)>,
    poll: &Poll,
    room: &mut WaitingRoom,
    sessions: &mut session::Sessions,
    now: Instant,
) {
    for (_, mut w, _) in listeners.drain(..) {
        w.deregister(poll.registry());
    }
    room.expire(
        poll,
        now,
        ErrorCode::ShuttingDown,
        "netserver is shutting down",
    );
    sessions.shut_down(poll.registry());
}

/// Idle again (no session, no test's worker): when to give the heap back,
/// and whether it was since the last activity.
struct Trim {
    at: Option<Instant>,
    trimmed: bool,
}

impl Default for Trim {
    fn default() -> Self {
        Trim {
            at: None,
            trimmed: true,
        }
    }
}

impl Trim {
    fn tick(&mut self, idle: bool, now: Instant) {
        if !idle {
            (self.trimmed, self.at) = (false, None);
        } else if !self.trimmed {
            match self.at {
                None => self.at = Some(now + TRIM_AFTER),
                Some(t) if now >= t => {
                    // what the tests' threads freed goes back to the
                    // system: an idle daemon is back to its idle size
                    engine::sys::trim_heap();
                    (self.trimmed, self.at) = (true, None);
                }
                Some(_) => {}
            }
        }
    }
}

/// Accept until the listener would block (at most [`ACCEPT_BUDGET`]), into
/// the waiting room. Returns when to accept again: after a back-off if a
/// resource ran out, at once if the budget did.
fn drain(
    (l, watch, origin): &(TcpListener, Watch, Origin),
    shared: &Arc<Shared>,
    poll: &Poll,
    room: &mut WaitingRoom,
    sessions: &session::Sessions,
) -> Option<Duration> {
    let log = &shared.config.logger;
    for _ in 0..ACCEPT_BUDGET {
        match watch.accept(l) {
            Ok((stream, peer)) => {
                // Over a session cap, with no idle session to take the
                // place of: told at once, as before its first bytes it
                // would only wait to be told.
                if let Err(why) = shared
                    .census
                    .would_admit(peer.ip(), shared.config.session_caps())
                    && !sessions.has_idle(why.only(peer.ip()))
                {
                    busy(&stream, peer, why, shared);
                    continue;
                }
                if room.len() >= shared.config.max_pending.max(1)
                    && let Some(gone) = room.evict(poll)
                {
                    Refusal::Evicted { idle_s: None }.count(&shared.config.metrics);
                    log.warn_limited(
                        "waiting-full",
                        &format!(
                            "{} connections waiting for their first bytes (--max-pending): closed the oldest of {gone}",
                            shared.config.max_pending
                        ),
                    );
                }
                if let Err(e) = room.enter(poll, stream, peer, *origin) {
                    log.warn_limited("waiting", &format!("{peer}: cannot wait for it: {e}"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors with silent connections holding some:
            // close one of them and go on.
            Err(e) if is_resource_error(&e) && room.len() > 0 => {
                if let Some(gone) = room.evict(poll) {
                    Refusal::Evicted { idle_s: None }.count(&shared.config.metrics);
                    log.warn_limited(
                        "accept-evict",
                        &format!(
                            "accept failed ({e}): closed the oldest silent connection of {gone}"
                        ),
                    );
                }
            }
            Err(e) if is_resource_error(&e) => {
                log.warn_limited(
                    "accept-resources",
                    &format!("accept failed ({e}); pausing accepts for 100 ms"),
                );
                return Some(BACKOFF);
            }
            // ECONNABORTED and the like: that client is gone, others wait.
            Err(e) => {
                log.warn_limited("accept", &format!("accept failed: {e}"));
            }
        }
    }
    // more may be queued: accept on at the loop's next turn
    Some(Duration::ZERO)
}

fn is_resource_error(e: &io::Error) -> bool {
    crate::error::shortage(e).is_some()
}

/// Make a new connection a session of the loop, under its waiting token,
/// or refuse it. At a session cap, the idlest session that runs no test
/// makes room. (An address that failed to authenticate lately is not held
/// back here: its proofs are checked as they come, and only the refusal
/// of a wrong one waits its turn, in its session.)
fn admit(
    stream: TcpStream,
    peer: SocketAddr,
    token: usize,
    origin: Origin,
    shared: &Arc<Shared>,
    poll: &Poll,
    sessions: &mut session::Sessions,
) {
    let cfg = &shared.config;
    if let Err(why) = shared.census.admit(peer.ip(), cfg.session_caps()) {
        // (the evicted session's refusal counted as it is told)
        let Some(gone) = sessions.evict_idle(poll.registry(), why.only(peer.ip())) else {
            busy(&stream, peer, why, shared);
            return;
        };
        cfg.logger.warn_limited(
            "evicted",
            &format!("closed the idlest session, of {gone}, to make room for {peer}"),
        );
        if let Err(why) = shared.census.admit(peer.ip(), cfg.session_caps()) {
            busy(&stream, peer, why, shared);
            return;
        }
    }
    // the policy's sessions of its address and prefix (`--policy`)
    let slot = match cfg.policy.open_session(peer.ip()) {
        Ok(slot) => slot,
        Err(over) => {
            shared.census.leave(peer.ip(), true);
            let told = Refusal::PolicySessions(over).told(&cfg.metrics);
            cfg.logger
                .warn_limited("policy", &format!("refused {peer}: {}", told.message));
            refuse(&stream, &told);
            return;
        }
    };
    sessions.start(poll.registry(), stream, peer, token, origin, Some(slot));
}

/// A connection to iperf3's port whose cookie a test expects is that
/// test's stream: its cookie read off and the connection handed over.
/// Otherwise it is given back, to be a session (its cookie unread).
fn hand_over(stream: TcpStream, shared: &Shared) -> Option<TcpStream> {
    let mut cookie = [0u8; proto::iperf3::COOKIE_LEN];
    let n = stream.peek(&mut cookie).unwrap_or(0);
    let from = stream.peer_addr().ok()?;
    match shared.handoff.expects(&cookie, from.ip()) {
        _ if n < cookie.len() => return Some(stream),
        None => return Some(stream),
        Some(true) => {}
        // a test's cookie from another address than its control
        // connection's: never that test's stream (the cookie crossed the
        // control connection in the clear), and no session either
        Some(false) => {
            shared.config.logger.warn_limited(
                "iperf3-cookie",
                &format!(
                    "{from}: an iperf3 stream with the cookie of another address's test: closed"
                ),
            );
            return None;
        }
    }
    // (the cookie is there, peeked: this read takes it and nothing more)
    if std::io::Read::read_exact(&mut &stream, &mut cookie).is_err()
        || stream.set_nonblocking(false).is_err()
    {
        return None;
    }
    // (a test that ended meanwhile: the stream is closed)
    let _ = shared.handoff.hand(&cookie, stream);
    None
}
/// Tell a client over a session cap which cap, and which option raises it.
fn busy(stream: &TcpStream, peer: SocketAddr, why: SessionCap, shared: &Shared) {
    let told = Refusal::Cap(why).told(&shared.config.metrics);
    shared
        .config
        .logger
        .warn_limited("busy", &format!("refused {peer}: {}", told.message));
    refuse(stream, &told);
}

/// Best effort: tell the client why, without blocking, and close; in its
/// own protocol, as what it sent so far says (netperf 2.7's frame to a
/// netperf 2.7 client).
pub(crate) fn refuse(stream: &TcpStream, told: &ErrorMsg) {
    let _ = stream.set_nonblocking(true);
    let mut first = [0u8; 64];
    let n = stream.peek(&mut first).unwrap_or(0);
    let answer = proto::dialect::refusal(first.get(..n).unwrap_or_default(), told);
    let _ = (&*stream).write(&answer);
}
