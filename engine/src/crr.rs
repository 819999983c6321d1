//! TCP_CRR and TCP_CC: a new connection for every transaction (connect,
//! request, response, close; TCP_CC's request and response are empty),
//! both roles.
//!
//! TIME_WAIT is handled as netperf 2.7 handles it: the requester binds each
//! connection explicitly to the next port of a range (`-p min,max`; netperf
//! chooses the default, see its `family::rr::default_ports`) with
//! SO_REUSEADDR; the responder closes first, right after its response, and
//! the requester closes once it has read the responder's end-of-file. The
//! TIME_WAIT is then the responder's, and with TCP timestamps on (Linux's
//! default) a SYN that reuses a port pair still in TIME_WAIT there opens a
//! new connection, on loopback or not, so a long test at full speed does
//! not run out of ports. (A requester that closed first would hold the
//! TIME_WAITs, and Linux reuses those for an explicitly bound connect only
//! on loopback, by net.ipv4.tcp_tw_reuse's default.) If the ports run out
//! anyway, the error says so and what to change.
//!
//! Every connection presents the test's token in the same send as its
//! request; the responder closes anything else unanswered.
//!
//! The responder's path is netserver 2.7's four system calls a
//! transaction: a blocking accept, one receive (the preamble and the
//! request come in one segment), one send, close. What each connection
//! needs (its receive and send timeouts, its buffer sizes) is set once on
//! the listener, which accepted sockets inherit.

use std::{
    io::{self, Read, Write},
    net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream},
    time::{Duration, Instant},
};

use proto::{Protocol, SideSpec, Token};
use socket2::Socket;

use crate::{
    EngineError, clock,
    conventions::{Closer, Conventions, Proof},
    flow::{CrrRequest, Ended, Io},
    handshake,
    latency::Latency,
    live::Live,
    rr::{RrOutcome, Until},
    sockopt::{self, LocalOpts},
    timer::StopFlag,
};

/// How long a responder waits for a connection's request, or for its
/// response to be taken, and at most in one accept.
const CONN_TIMEOUT: Duration = Duration::from_secs(1);

/// The requester's settings.
#[derive(Debug, Clone)]
pub struct CrrRequester {
    pub server: SocketAddr,
    pub local_ip: IpAddr,
    pub ports: (u16, u16),
    pub token: Token,
    pub req: usize,
    pub resp: usize,
    pub until: Until,
    pub timing: bool,
    /// Socket options for each connection.
    pub side: SideSpec,
    /// What we set on our own sockets only.
    pub local: LocalOpts,
    /// Whether a request carries the preamble, and who closes first.
    pub conv: Conventions,
    /// Which flow of the test this is (its preamble names it).
    pub flow: u32,
}

/// The next local port, cycling through the range.
#[derive(Debug)]
pub(crate) struct Ports {
    lo: u16,
    hi: u16,
    next: u16,
}

impl Ports {
    pub(crate) fn new((lo, hi): (u16, u16)) -> Ports {
        Ports { lo, hi, next: lo }
    }

    fn take(&mut self) -> u16 {
        let p = self.next;
        self.next = if p >= self.hi { self.lo } else { p + 1 };
        p
    }

    fn len(&self) -> u32 {
        u32::from(self.hi - self.lo) + 1
    }
}

fn out_of_ports(ports: &Ports, e: &io::Error) -> EngineError {
    EngineError::Invalid(format!(
        "TCP_CRR ran out of local ports: every port of {}-{} is busy ({e}); widen the range with -- -p min,max, make sure TCP timestamps are on (net.ipv4.tcp_timestamps=1), or lower net.ipv4.tcp_fin_timeout",
        ports.lo, ports.hi
    ))
}

/// One connected socket, bound to the next free port of the range.
#[inline(always)]
fn connect(p: &CrrRequester, ports: &mut Ports) -> Result<TcpStream, EngineError> {
    open(p, ports, false).map(Into::into)
}

/// A socket bound to the next free port of the range and connecting to
/// the responder: connected, or (`nonblocking`) with its connect under way.
/// Inlined into both callers: the blocking requester's copy then costs
/// what its own loop did before the event loop shared it (callgrind).
#[inline(always)]
pub(crate) fn open(
    p: &CrrRequester,
    ports: &mut Ports,
    nonblocking: bool,
) -> Result<Socket, EngineError> {
    let family = sockopt::family_of(&p.server);
    let mut tried = 0u32;
    loop {
        let sock = sockopt::new_socket(family, Protocol::Tcp)?;
        sockopt::apply_side(&sock, &p.side, family, Protocol::Tcp, false)?;
        sockopt::apply_local(&sock, &p.local, family, Protocol::Tcp)?;
        // Only a requester that closes first holds TIME_WAITs on its
        // ports, which an explicit bind may reuse with SO_REUSEADDR; when
        // the responder closes first, a port is free once closed (and one
        // that is not is passed over below).
        if p.conv.crr_closer == Closer::Requester {
            sock.set_reuse_address(true)
                .map_err(|e| EngineError::io("setting SO_REUSEADDR", e))?;
        }
        let port = ports.take();
        tried += 1;
        let busy = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
            )
        };
        if let Err(e) = sock.bind(&SocketAddr::new(p.local_ip, port).into()) {
            if busy(&e) {
                if tried >= ports.len() {
                    return Err(out_of_ports(ports, &e));
                }
                continue;
            }
            return Err(EngineError::io(format!("binding to local port {port}"), e));
        }
        if nonblocking {
            sock.set_nonblocking(true)
                .map_err(|e| EngineError::io("making a connection non-blocking", e))?;
        }
        match sock.connect(&p.server.into()) {
            Ok(()) => return Ok(sock),
            Err(e) if nonblocking && crate::sys::connect_in_progress(&e) => {
                return Ok(sock);
            }
            Err(e) if busy(&e) => {
                if tried >= ports.len() {
                    return Err(out_of_ports(ports, &e));
                }
            }
            Err(e) => return Err(EngineError::io(format!("connect to {}", p.server), e)),
        }
    }
}

/// A request: the preamble first if the conventions want one.
pub(crate) fn fill_request(token: &Token, flow: u32, req: usize, conv: &Conventions) -> Vec<u8> {
    let mut v = match conv.proof {
        Proof::Preamble => handshake::preamble(token, flow).to_vec(),
        Proof::ControlPeer | Proof::Handed => Vec::new(),
    };
    v.resize(conv.crr_preamble() + req, b'r');
    v
}

fn read_exact(s: &TcpStream, buf: &mut [u8]) -> io::Result<u64> {
    let mut off = 0;
    let mut calls = 0;
    while let Some(rest) = buf.get_mut(off..).filter(|r| !r.is_empty()) {
        match (&*s).read(rest) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                off += n;
                calls += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(calls)
}

/// Read until end-of-file: the peer has closed its side.
fn read_eof(s: &TcpStream) -> io::Result<()> {
    let mut scratch = [0u8; 64];
    loop {
        match (&*s).read(&mut scratch) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// A request's send or a response's receive on `c`, as the flow asks
/// (the prober's).
fn exchange(
    flow: &mut CrrRequest,
    c: &TcpStream,
    io: Io,
    request: &[u8],
    resp: &mut [u8],
) -> Result<(), EngineError> {
    let short = || EngineError::Invalid("TCP_CRR: a transfer beyond its buffer".into());
    match io {
        Io::Send { offset, len } => {
            let buf = request.get(offset..offset + len).ok_or_else(short)?;
            match (&*c).write(buf) {
                Ok(n) => flow.sent(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(EngineError::io("sending a request", e)),
            }
        }
        Io::Recv { offset, len } => {
            let buf = resp.get_mut(offset..offset + len).ok_or_else(short)?;
            match (&*c).read(buf) {
                Ok(n) => flow.received(n).map_err(|_| {
                    EngineError::io("receiving a response", io::ErrorKind::UnexpectedEof.into())
                })?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(EngineError::io("receiving a response", e)),
            }
        }
        _ => {}
    }
    Ok(())
}

/// Requester role (netperf's side of TCP_CRR): drives a [`CrrRequest`].
pub fn requester(p: &CrrRequester, stop: &StopFlag, live: &Live) -> Result<RrOutcome, EngineError> {
    let request = fill_request(&p.token, p.flow, p.req, &p.conv);
    let mut resp = vec![0u8; p.resp];
    let mut ports = Ports::new(p.ports);
    let mut flow = CrrRequest::new(p.conv.crr_preamble(), p.req, p.resp, p.until.limit());
    let mut lat = Latency::new();
    let mut mss = None;
    let mut conn: Option<TcpStream> = None;
    let no_conn = || EngineError::Invalid("TCP_CRR: no connection open".into());
    let start = Instant::now();
    let mut last = clock::now_ns();
    loop {
        match flow.next() {
            Io::Connect => {
                if stop.is_set() {
                    flow.stop();
                    continue;
                }
                let c = connect(p, &mut ports)?;
                if flow.counters.transactions == 0 {
                    mss = sockopt::mss(socket2::SockRef::from(&c));
                }
                conn = Some(c);
                flow.connected();
            }
            // (written out here, not through `exchange`: this loop's
            // instructions per transaction are measured, and the shared
            // helper cost 58 more, by callgrind)
            Io::Send { offset, len } => {
                let c = conn.as_ref().ok_or_else(no_conn)?;
                let buf = request.get(offset..offset + len).ok_or_else(no_conn)?;
                match (&*c).write(buf) {
                    Ok(n) => flow.sent(n),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(EngineError::io("sending a request", e)),
                }
            }
            Io::Recv { offset, len } => {
                let c = conn.as_ref().ok_or_else(no_conn)?;
                let buf = resp.get_mut(offset..offset + len).ok_or_else(no_conn)?;
                match (&*c).read(buf) {
                    Ok(n) => flow.received(n).map_err(|_| {
                        EngineError::io("receiving a response", io::ErrorKind::UnexpectedEof.into())
                    })?,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(EngineError::io("receiving a response", e)),
                }
            }
            Io::Close => {
                let c = conn.take().ok_or_else(no_conn)?;
                // Ours: we close first, and the TIME_WAIT stays on our
                // side, where the port range and SO_REUSEADDR deal with
                // it. netperf 2.7's responder closes first.
                if p.conv.crr_closer == Closer::Requester {
                    c.shutdown(Shutdown::Write)
                        .map_err(|e| EngineError::io("closing a connection", e))?;
                }
                read_eof(&c).map_err(|e| EngineError::io("closing a connection", e))?;
                drop(c);
                flow.closed();
                live.publish(flow.counters.bytes_received, flow.counters.recv_calls);
                live.publish_transactions(flow.counters.transactions);
                if p.timing {
                    let now = clock::now_ns();
                    lat.record(now.wrapping_sub(last));
                    last = now;
                }
            }
            Io::Done => break,
        }
    }
    let latency = lat.summary();
    Ok(RrOutcome {
        counters: flow.counters,
        elapsed: start.elapsed(),
        latency,
        histogram: latency.map(|_| Box::new(lat)),
        mss,
        ..RrOutcome::default()
    })
}

/// One probe of a responsiveness test (netperf's `-t RPM`): a new
/// connection's handshake and its request's response, each one round trip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// When it began, since the prober began.
    pub at_ns: u64,
    /// connect(2) to its return: the SYN out, the SYN-ACK back.
    pub connect_ns: u64,
    /// The request's first byte out to the response's last byte in.
    pub response_ns: u64,
}

/// The requester paced: a transaction (a probe) at most every `every`, each one's
/// two round trips handed to `record` as it ends. The counts are the
/// requester's, so the netserver's answers are checked against them as a
/// TCP_CRR test's are.
pub fn prober(
    p: &CrrRequester,
    stop: &StopFlag,
    live: &Live,
    every: Duration,
    record: &mut dyn FnMut(Probe),
) -> Result<RrOutcome, EngineError> {
    let request = fill_request(&p.token, p.flow, p.req, &p.conv);
    let mut resp = vec![0u8; p.resp];
    let mut ports = Ports::new(p.ports);
    let mut flow = CrrRequest::new(p.conv.crr_preamble(), p.req, p.resp, p.until.limit());
    let mut lat = Latency::new();
    let mut conn: Option<TcpStream> = None;
    let no_conn = || EngineError::Invalid("RPM: no probe connection open".into());
    let start = Instant::now();
    let begun = clock::now_ns();
    let mut probe = Probe::default();
    let mut connected_at = 0;
    // the next probe's turn: `every` after the last one began (a slow
    // probe delays the next; none are made up for after it)
    let mut due = start;
    loop {
        match flow.next() {
            Io::Connect => {
                while !stop.is_set() && Instant::now() < due {
                    std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
                }
                if stop.is_set() {
                    flow.stop();
                    continue;
                }
                due = Instant::now() + every;
                let t0 = clock::now_ns();
                conn = Some(connect(p, &mut ports)?);
                connected_at = clock::now_ns();
                probe = Probe {
                    at_ns: t0.wrapping_sub(begun),
                    connect_ns: connected_at.wrapping_sub(t0),
                    response_ns: 0,
                };
                flow.connected();
            }
            io @ (Io::Send { .. } | Io::Recv { .. }) => {
                let c = conn.as_ref().ok_or_else(no_conn)?;
                exchange(&mut flow, c, io, &request, &mut resp)?;
            }
            Io::Close => {
                probe.response_ns = clock::now_ns().wrapping_sub(connected_at);
                let c = conn.take().ok_or_else(no_conn)?;
                if p.conv.crr_closer == Closer::Requester {
                    c.shutdown(Shutdown::Write)
                        .map_err(|e| EngineError::io("closing a probe's connection", e))?;
                }
                read_eof(&c).map_err(|e| EngineError::io("closing a probe's connection", e))?;
                drop(c);
                flow.closed();
                live.publish(flow.counters.bytes_received, flow.counters.recv_calls);
                live.publish_transactions(flow.counters.transactions);
                lat.record(probe.connect_ns);
                lat.record(probe.response_ns);
                record(probe);
            }
            Io::Done => break,
        }
    }
    let latency = lat.summary();
    Ok(RrOutcome {
        counters: flow.counters,
        elapsed: start.elapsed(),
        latency,
        histogram: latency.map(|_| Box::new(lat)),
        ..RrOutcome::default()
    })
}

/// Connections one responder thread holds while they present their
/// preamble; when full, the oldest goes.
const MAX_UNPROVEN: usize = proto::test::DATA_WAITING as usize;

/// A connection accepted before its whole preamble came: it waits, without
/// holding up the connections behind it, until the preamble completes or
/// [`CONN_TIMEOUT`] passes.
struct Unproven {
    conn: TcpStream,
    preamble: [u8; handshake::PREAMBLE_LEN],
    got: usize,
    since: Instant,
}

/// One answering thread's state: its buffers, its counts, and the
/// connections waiting to prove themselves.
struct Answerer<'a> {
    token: &'a Token,
    conv: &'a Conventions,
    /// The preamble's length, and room for the request after it.
    pre: usize,
    reqbuf: Vec<u8>,
    respbuf: Vec<u8>,
    out: Ended,
    refused: u64,
    per_flow: Vec<u64>,
    waiting: Vec<Unproven>,
}

impl Answerer<'_> {
    /// A connection just accepted: take what has arrived of its request,
    /// without waiting, and answer it, or let it wait for the rest of its
    /// preamble.
    fn take(&mut self, conn: TcpStream) {
        // netperf 2.7's connections are proven by their address: their
        // request is read as it comes
        if self.pre == 0 {
            return self.answer(&conn, 0);
        }
        match crate::sys::recv_nowait(&conn, &mut self.reqbuf) {
            Ok(n) if n >= self.pre => {
                self.out.counters.recv_calls += 1;
                self.answer(&conn, n);
            }
            Ok(0) => self.refused += 1,
            Ok(n) => {
                let mut preamble = [0u8; handshake::PREAMBLE_LEN];
                if let (Some(d), Some(s)) = (preamble.get_mut(..n), self.reqbuf.get(..n)) {
                    d.copy_from_slice(s);
                }
                self.wait(conn, preamble, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.wait(conn, [0; handshake::PREAMBLE_LEN], 0);
            }
            Err(_) => self.refused += 1,
        }
    }

    fn wait(&mut self, conn: TcpStream, preamble: [u8; handshake::PREAMBLE_LEN], got: usize) {
        if self.waiting.len() >= MAX_UNPROVEN {
            self.waiting.remove(0);
            self.refused += 1;
        }
        self.waiting.push(Unproven {
            conn,
            preamble,
            got,
            since: Instant::now(),
        });
    }

    /// Wait until the listener or a waiting connection has something, at
    /// most until the oldest waiting one's time is up: whether the listener
    /// has a connection to accept.
    fn next_ready(&self, listener: &TcpListener) -> Result<bool, EngineError> {
        let oldest = self.waiting.iter().map(|u| u.since).min();
        let left = oldest.map_or(CONN_TIMEOUT, |t| {
            (t + CONN_TIMEOUT).saturating_duration_since(Instant::now())
        });
        let mut socks = vec![crate::sys::borrowed(listener)];
        socks.extend(self.waiting.iter().map(|u| crate::sys::borrowed(&u.conn)));
        let ready = crate::sys::wait_readable(&socks, left.max(Duration::from_millis(1)))
            .map_err(|e| EngineError::io("waiting on the data listener", e))?;
        Ok(ready.first().copied().unwrap_or(false))
    }

    /// Those waiting: a look at what they sent since, without waiting; the
    /// proven answered, the silent past their time closed.
    fn look_again(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while let Some(u) = self.waiting.get_mut(i) {
            let rest = u.preamble.get_mut(u.got..).unwrap_or_default();
            let verdict = match crate::sys::recv_nowait(&u.conn, rest) {
                Ok(0) => Some(false),
                Ok(n) => {
                    u.got += n;
                    (u.got >= self.pre).then_some(true)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    (now >= u.since + CONN_TIMEOUT).then_some(false)
                }
                Err(_) => Some(false),
            };
            match verdict {
                None => i += 1,
                Some(false) => {
                    self.waiting.swap_remove(i);
                    self.refused += 1;
                }
                Some(true) => {
                    let u = self.waiting.swap_remove(i);
                    let pre = self.pre;
                    if let (Some(d), Some(s)) = (self.reqbuf.get_mut(..pre), u.preamble.get(..pre))
                    {
                        d.copy_from_slice(s);
                    }
                    self.answer(&u.conn, pre);
                }
            }
        }
    }

    /// Answer a connection whose first `got` bytes of request are in the
    /// buffer (its preamble among them): read the rest (it proved itself,
    /// so a blocking read, under the inherited timeout), check the
    /// preamble, respond, close as the conventions say; or refuse it.
    fn answer(&mut self, conn: &TcpStream, got: usize) {
        let Ok(calls) = read_exact(conn, self.reqbuf.get_mut(got..).unwrap_or_default()) else {
            self.refused += 1;
            return;
        };
        let flow = match self.conv.proof {
            Proof::Preamble => match handshake::parse_preamble(&self.reqbuf, self.token) {
                Ok(f) if (f as usize) < self.per_flow.len() => f as usize,
                _ => {
                    self.refused += 1;
                    return;
                }
            },
            Proof::ControlPeer | Proof::Handed => 0,
        };
        let c = &mut self.out.counters;
        c.recv_calls += calls;
        c.bytes_received += (self.reqbuf.len() - self.pre) as u64;
        // TCP_CC answers nothing: the connection itself is the transaction.
        if !self.respbuf.is_empty() {
            if (&*conn).write_all(&self.respbuf).is_err() {
                self.refused += 1;
                return;
            }
            c.send_calls += 1;
        }
        c.bytes_sent += self.respbuf.len() as u64;
        c.transactions += 1;
        if let Some(t) = self.per_flow.get_mut(flow) {
            *t += 1;
        }
        // netperf 2.7's conventions: we close first, as the loop goes on
        if self.conv.crr_closer == Closer::Requester {
            let _ = read_eof(conn);
        }
    }
}

/// Responder role (netserver's side of TCP_CRR): accept, check the
/// connection's proof (the token in its request, or, by netperf 2.7's
/// conventions, that it comes from `peer`), answer, close as the
/// conventions say, until `stop` is raised. Returns the count of
/// connections refused too, and the transactions of each of `flows` flows
/// (by the flow each connection's preamble names; another is refused).
/// Several threads may answer on one listener, each with its own counts.
///
/// A connection is never read waiting: the first receive takes what has
/// arrived (the listener defers accepts until data comes, see
/// [`sockopt::set_defer_accept`], so a real request is there), and one that
/// has not yet sent its whole preamble waits in a small room of its own,
/// looked at again whenever the thread wakes, until its deadline. So a
/// third party holding connections open costs the test nothing.
#[allow(clippy::too_many_arguments)]
pub fn responder(
    listener: &Socket,
    token: &Token,
    peer: IpAddr,
    conv: &Conventions,
    req: usize,
    resp: usize,
    flows: usize,
    stop: &StopFlag,
    live: &Live,
) -> Result<(Ended, u64, Vec<u64>), EngineError> {
    // Blocking, with the timeouts every accepted connection inherits: a
    // request that does not come, or a response nobody reads, costs at most
    // CONN_TIMEOUT. An accept that waits as long returns, to look at the
    // stop flag (the session also shuts the listener down to wake it).
    listener
        .set_nonblocking(false)
        .and_then(|()| listener.set_read_timeout(Some(CONN_TIMEOUT)))
        .and_then(|()| listener.set_write_timeout(Some(CONN_TIMEOUT)))
        .map_err(|e| EngineError::io("data listener", e))?;
    let listener: TcpListener = listener
        .try_clone()
        .map_err(|e| EngineError::io("data listener", e))?
        .into();
    let pre = conv.crr_preamble();
    let mut a = Answerer {
        token,
        conv,
        pre,
        reqbuf: vec![0u8; pre + req],
        respbuf: vec![b'R'; resp],
        out: Ended::default(),
        refused: 0,
        per_flow: vec![0u64; flows.max(1)],
        waiting: Vec::new(),
    };
    let mut first: Option<Instant> = None;
    loop {
        if !a.waiting.is_empty() {
            a.look_again();
        }
        // Connections wait for the rest of their preamble: wake for them
        // or for the next connection, whichever comes first (an accept
        // would sleep through their requests until its timeout).
        if !a.waiting.is_empty() && !a.next_ready(&listener)? {
            if stop.is_set() {
                break;
            }
            continue;
        }
        let conn = match crate::sys::accept_within(&listener, CONN_TIMEOUT) {
            Ok((c, from)) if conv.proof == Proof::ControlPeer && from.ip() != peer => {
                drop(c);
                a.refused += 1;
                continue;
            }
            Ok((c, _)) => c,
            // the listener's receive timeout passed, or the session shut
            // it down (EINVAL) because the test is over
            Err(_) if stop.is_set() => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(EngineError::io("accept on the data listener", e)),
        };
        first.get_or_insert_with(Instant::now);
        a.take(conn);
        live.publish(a.out.counters.bytes_received, a.out.counters.recv_calls);
        live.publish_transactions(a.out.counters.transactions);
    }
    // whoever still waits did not prove itself
    a.refused += a.waiting.len() as u64;
    a.out.elapsed = first.map_or(Duration::ZERO, |f| f.elapsed());
    Ok((a.out, a.refused, a.per_flow))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Family;
    use std::thread;

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    type Served = thread::JoinHandle<(Ended, u64)>;

    /// A responder on loopback with `conv`, until the returned flag.
    fn serve(conv: Conventions, req: usize, resp: usize) -> (SocketAddr, Token, StopFlag, Served) {
        let (l, addr) = listener();
        let token = handshake::new_token().unwrap();
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let srv = thread::spawn(move || {
            let (e, refused, _) =
                responder(&l, &token, LOOPBACK, &conv, req, resp, 1, &s2, &Live::new()).unwrap();
            (e, refused)
        });
        (addr, token, stop, srv)
    }

    /// A requester of `n` transactions to `addr`.
    fn to(
        addr: SocketAddr,
        token: Token,
        conv: Conventions,
        req: usize,
        resp: usize,
        n: u64,
    ) -> CrrRequester {
        CrrRequester {
            server: addr,
            local_ip: "127.0.0.1".parse().unwrap(),
            ports: (30000, 60000),
            token,
            req,
            resp,
            until: Until::Transactions(n),
            timing: true,
            side: SideSpec::default(),
            local: LocalOpts::default(),
            conv,
            flow: 0,
        }
    }

    fn listener() -> (Socket, SocketAddr) {
        let s = sockopt::new_socket(Family::V4, Protocol::Tcp).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s.listen(128).unwrap();
        let a = s.local_addr().unwrap().as_socket().unwrap();
        (s, a)
    }

    #[test]
    fn exact_transactions_and_token_check() {
        let (addr, token, stop, srv) = serve(Conventions::NATIVE, 10, 20);
        // a stranger without the token is refused, not counted
        let mut stranger = TcpStream::connect(addr).unwrap();
        stranger.write_all(&[0u8; 46]).unwrap();
        let p = to(addr, token, Conventions::NATIVE, 10, 20, 300);
        let o = requester(&p, &StopFlag::new(), &Live::new()).unwrap();
        stop.set();
        let (r, refused) = srv.join().unwrap();
        assert_eq!(o.counters.transactions, 300);
        assert_eq!(r.counters.transactions, 300);
        assert_eq!(refused, 1);
        assert_eq!(o.counters.bytes_received, 300 * 20);
        assert_eq!(r.counters.bytes_received, 300 * 10);
        assert_eq!(o.latency.unwrap().count, 300);
    }

    #[test]
    fn connect_close_carries_no_data() {
        let (addr, token, stop, srv) = serve(Conventions::NATIVE, 0, 0);
        let mut p = to(addr, token, Conventions::NATIVE, 0, 0, 50);
        p.timing = false;
        let o = requester(&p, &StopFlag::new(), &Live::new()).unwrap();
        stop.set();
        let (r, refused) = srv.join().unwrap();
        assert_eq!(
            (o.counters.transactions, r.counters.transactions, refused),
            (50, 50, 0)
        );
        assert_eq!((o.counters.bytes_sent, o.counters.bytes_received), (0, 0));
        assert_eq!(
            (
                r.counters.bytes_sent,
                r.counters.bytes_received,
                r.counters.send_calls
            ),
            (0, 0, 0)
        );
        // the token's write, nothing else
        assert_eq!(o.counters.send_calls, 50);
    }

    /// netperf 2.7's conventions: no token, the responder closes first
    /// (its side holds the TIME_WAIT), and a connection from another
    /// address than the control peer's is refused.
    #[test]
    fn netperf2_responder_closes_first_and_checks_the_peer_address() {
        let conv = Conventions::NETPERF2;
        let (addr, _, stop, srv) = serve(conv, 10, 20);
        // from 127.0.0.2: not the control peer
        let other = sockopt::new_socket(Family::V4, Protocol::Tcp).unwrap();
        other
            .bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        other.connect(&addr.into()).unwrap();
        let other: TcpStream = other.into();
        (&other).write_all(&[b'r'; 10]).unwrap();
        other
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 32];
        assert!(matches!((&other).read(&mut b), Ok(0) | Err(_)), "answered");
        let mut p = to(addr, handshake::new_token().unwrap(), conv, 10, 20, 100);
        p.timing = false;
        let o = requester(&p, &StopFlag::new(), &Live::new()).unwrap();
        stop.set();
        let (r, refused) = srv.join().unwrap();
        assert_eq!(
            (o.counters.transactions, r.counters.transactions),
            (100, 100)
        );
        assert_eq!(refused, 1);
        assert_eq!(o.counters.bytes_sent, 100 * 10);
        assert_eq!(r.counters.bytes_received, 100 * 10);
        // the TIME_WAITs are the responder's: on its port, not ours
        let ss = std::process::Command::new("ss")
            .args(["-tan", "state", "time-wait"])
            .output();
        if let Ok(ss) = ss {
            let text = String::from_utf8_lossy(&ss.stdout);
            let ours = format!("127.0.0.1:{}", addr.port());
            let lines: Vec<&str> = text.lines().filter(|l| l.contains(&ours)).collect();
            assert!(!lines.is_empty(), "no TIME_WAIT on the responder's port");
            assert!(
                lines
                    .iter()
                    .all(|l| l.split_whitespace().nth(2) == Some(ours.as_str())),
                "{lines:?}"
            );
        }
    }

    /// Against a netserver of this suite from before it closed first, the
    /// requester closes first, and both ends still agree on every count.
    #[test]
    fn requester_closes_first_for_an_older_netserver() {
        let conv = Conventions {
            crr_closer: Closer::Requester,
            ..Conventions::NATIVE
        };
        let (addr, token, stop, srv) = serve(conv, 10, 20);
        let mut p = to(addr, token, conv, 10, 20, 200);
        p.timing = false;
        let o = requester(&p, &StopFlag::new(), &Live::new()).unwrap();
        stop.set();
        let (r, refused) = srv.join().unwrap();
        assert_eq!(
            (o.counters.transactions, r.counters.transactions, refused),
            (200, 200, 0)
        );
    }

    #[test]
    fn ports_cycle() {
        let mut p = Ports::new((10, 12));
        assert_eq!([p.take(), p.take(), p.take(), p.take()], [10, 11, 12, 10]);
        assert_eq!(p.len(), 3);
    }
}
