//! How a data connection proves it is the test's, on the server: netperf's
//! TCP data connections wait in a room of their own, each under a short
//! deadline, while what they send is read on one event loop, all at once;
//! a UDP test's first datagram (or hello) names its peer.
//!
//! A third party at the data port costs the test nothing: a connection
//! that does not prove itself in time, or sends the wrong token, is
//! closed, and when the room is full the oldest unproven one makes room
//! for a new one (a connection is never turned away for being new: the
//! real flow may come last). Every one closed is counted for netperf's
//! report ([`TestCtl::saw_foreign`]).

use std::{
    collections::{HashMap, VecDeque},
    io::{self, Read},
    net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket},
    time::{Duration, Instant},
};

use engine::sys::{SockKind, Watch};
use engine::{
    conventions::{Conventions, Proof},
    handshake, sockopt,
    stream::udp,
};
use mio::{Events, Interest, Poll, Token as MioToken};
use proto::{ErrorCode, ErrorMsg, Protocol, TestSpec, Token};
use socket2::Socket;

use super::{ctl::TestCtl, data::server_side};
use crate::error::{aborted, failed, shortage};
use crate::log::Logger;

/// Connections held at once while they present their token, besides room
/// for every flow still to come.
pub(crate) const MAX_PENDING: usize = proto::test::DATA_WAITING as usize;
/// How long a new data connection has to present its token: netperf sends
/// it right after connecting, so a round trip or two, and a retransmission.
pub(crate) const PROOF_WINDOW: Duration = Duration::from_secs(3);

/// How the accept path knows a data connection is the test's: by the
/// conventions' proof, with this test's token or the control peer's
/// address (and, for UDP, the port netperf's request named).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expect<'a> {
    pub conv: Conventions,
    pub token: &'a Token,
    pub peer: IpAddr,
    /// netperf 2.7's request may name its data port: only datagrams from
    /// there are the test's.
    pub peer_port: Option<u16>,
}

/// A connection that has not yet proved itself.
struct Unproven {
    stream: TcpStream,
    /// How the room's loop watches it.
    watch: Watch,
    from: SocketAddr,
    buf: [u8; handshake::PREAMBLE_LEN],
    got: usize,
    since: Instant,
}

/// What became of what an unproven connection sent.
enum Sent {
    /// Not all of its preamble yet.
    Waiting,
    /// Its flow number: it is the test's.
    Proved(u32),
    /// Closed, or sent what no flow of this test sends.
    Foreign(&'static str),
}

impl Unproven {
    fn read(&mut self, expect: &Expect<'_>) -> Sent {
        while let Some(rest) = self.buf.get_mut(self.got..).filter(|r| !r.is_empty()) {
            match (&self.stream).read(rest) {
                Ok(0) => return Sent::Foreign("it closed before presenting a token"),
                Ok(n) => self.got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.watch.rearm();
                    return Sent::Waiting;
                }
                Err(_) => return Sent::Foreign("it failed before presenting a token"),
            }
        }
        match handshake::parse_preamble(&self.buf, expect.token) {
            Ok(flow) => Sent::Proved(flow),
            Err(_) => Sent::Foreign("it did not present the test's token"),
        }
    }
}

/// Tokens of the room's connections start here (never reused within a
/// test); the listener's is 0.
const FIRST: usize = 1;

/// Accept `flows` data connections that prove they are the test's, before
/// `deadline`. With our conventions a connection presents the test's token
/// and its flow number; with netperf 2.7's it comes from the control
/// connection's peer, and flows are numbered as they arrive. Others are
/// closed without touching the test, and counted. Returns the streams in
/// flow order, blocking.
pub(crate) fn accept_flows(
    listener: &Socket,
    expect: &Expect<'_>,
    flows: u32,
    deadline: Instant,
    ctl: &TestCtl,
    log: &Logger,
) -> Result<Vec<TcpStream>, ErrorMsg> {
    let mut room = Room::open(listener, expect, flows, log)?;
    let mut events = Events::with_capacity(256);
    while room.accepted.len() < flows as usize {
        if ctl.is_aborted() {
            return Err(aborted());
        }
        let now = Instant::now();
        if now >= deadline {
            ctl.saw_foreign(room.foreign, false);
            return Err(room.late());
        }
        let wake = room.wake(now, deadline);
        match room
            .poll
            .poll(&mut events, Some(wake.saturating_duration_since(now)))
        {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed("poll", e)),
        }
        let mut readable: Vec<usize> = Vec::new();
        let mut listener_ready = std::mem::take(&mut room.accept_again);
        for ev in events.iter() {
            match ev.token() {
                MioToken(0) => listener_ready = true,
                MioToken(t) => readable.push(t),
            }
        }
        if listener_ready {
            room.accept_ready(&mut readable)?;
        }
        room.read_ready(readable);
        room.expire();
    }
    // the test's flows are all here: whoever still waits is a stranger
    let foreign = room.foreign + room.waiting.len() as u64;
    drop(room.waiting);
    ctl.saw_foreign(foreign, false);
    let mut accepted = room.accepted;
    accepted.sort_by_key(|(n, _)| *n);
    let streams: Vec<TcpStream> = accepted.into_iter().map(|(_, s)| s).collect();
    for s in &streams {
        ctl.register_stream(s);
    }
    // A late abort may have missed these sockets; check again.
    if ctl.is_aborted() {
        return Err(aborted());
    }
    Ok(streams)
}

/// The waiting room of one test's data connections ([`accept_flows`]).
struct Room<'a, 'e> {
    listener: TcpListener,
    /// How the room's loop watches the listener.
    watch: Watch,
    poll: Poll,
    expect: &'a Expect<'e>,
    flows: u32,
    log: &'a Logger,
    /// The unproven connections by token; tokens oldest first in `order`
    /// (those already gone are skipped).
    waiting: HashMap<usize, Unproven>,
    order: VecDeque<usize>,
    next_token: usize,
    accepted: Vec<(u32, TcpStream)>,
    last_error: Option<io::Error>,
    /// An accept that failed is tried again at the next turn (the loop is
    /// edge-triggered: no new event would say the connection still waits).
    accept_again: bool,
    /// Connections closed as not the test's.
    foreign: u64,
}

impl<'a, 'e> Room<'a, 'e> {
    fn open(
        listener: &Socket,
        expect: &'a Expect<'e>,
        flows: u32,
        log: &'a Logger,
    ) -> Result<Self, ErrorMsg> {
        let listener: TcpListener = listener
            .try_clone()
            .map_err(|e| failed("data listener", e))?
            .into();
        listener
            .set_nonblocking(true)
            .map_err(|e| failed("data listener", e))?;
        let poll = Poll::new().map_err(|e| failed("data listener", e))?;
        let watch = Watch::new(
            poll.registry(),
            &listener,
            SockKind::Listener,
            MioToken(0),
            Interest::READABLE,
        )
        .map_err(|e| failed("data listener", e))?;
        Ok(Room {
            listener,
            watch,
            poll,
            expect,
            flows,
            log,
            waiting: HashMap::new(),
            order: VecDeque::new(),
            next_token: FIRST,
            accepted: Vec::new(),
            last_error: None,
            accept_again: false,
            foreign: 0,
        })
    }

    fn turn_away(&mut self, why: &str, from: SocketAddr) {
        self.foreign += 1;
        self.log.warn_limited(
            "data-foreign",
            &format!("closed a data connection from {from}: {why}"),
        );
    }

    /// What the client is told when its flows did not all come in time.
    fn late(&self) -> ErrorMsg {
        let (got, flows) = (self.accepted.len(), self.flows);
        ErrorMsg::new(
            ErrorCode::Timeout,
            match &self.last_error {
                Some(e) => format!(
                    "only {got} of {flows} data connections arrived in time (the last accept failed: {e}{})",
                    shortage(e).map(|w| format!("; {w}")).unwrap_or_default()
                ),
                None => format!("only {got} of {flows} data connections arrived in time"),
            },
        )
    }

    /// When to look again: the oldest unproven connection's deadline, the
    /// test's, and a look at the abort flag every 100 ms (now, for an
    /// accept to try again).
    fn wake(&self, now: Instant, deadline: Instant) -> Instant {
        let oldest = self
            .order
            .iter()
            .find_map(|t| self.waiting.get(t))
            .map(|u| u.since + PROOF_WINDOW);
        [
            Some(deadline),
            oldest,
            Some(now + Duration::from_millis(100)),
        ]
        .into_iter()
        .flatten()
        .min()
        .filter(|_| !self.accept_again)
        .unwrap_or(now)
    }

    /// Accept what waits at the listener; new unproven connections join
    /// `readable` (their preamble may be here already).
    fn accept_ready(&mut self, readable: &mut Vec<usize>) -> Result<(), ErrorMsg> {
        loop {
            match self.watch.accept(&self.listener) {
                Ok((s, from)) if self.expect.conv.proof == Proof::ControlPeer => {
                    if from.ip() != self.expect.peer {
                        self.turn_away("not the control connection's peer", from);
                        continue;
                    }
                    let flow = self.accepted.len() as u32;
                    if let Some(s) = proven(s) {
                        self.accepted.push((flow, s));
                    }
                    if self.accepted.len() >= self.flows as usize {
                        return Ok(());
                    }
                }
                Ok((s, from)) => self.enter(s, from, readable),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors: the test cannot have its flows; say
                // so now rather than at the deadline.
                Err(e) if engine::sys::out_of_descriptors(&e) => {
                    let why = shortage(&e).unwrap_or_default();
                    let whose = if engine::sys::system_out_of_descriptors(&e) {
                        "the system"
                    } else {
                        "netserver"
                    };
                    return Err(ErrorMsg::new(
                        ErrorCode::Resource,
                        format!(
                            "{whose} ran out of file descriptors after {} of {} data connections ({e}; {why}, or ask for fewer --flows)",
                            self.accepted.len(),
                            self.flows
                        ),
                    ));
                }
                // Short of kernel memory (or a connection that went before
                // it was accepted): tried again shortly, until the
                // deadline, which then names what failed.
                Err(e) => {
                    self.log
                        .warn_limited("data-accept", &format!("data accept failed: {e}"));
                    if shortage(&e).is_some() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    self.last_error = Some(e);
                    self.accept_again = true;
                    return Ok(());
                }
            }
        }
    }

    /// A new connection waits in the room for its token: room for every
    /// flow's connection still to come, and a few strangers; when full,
    /// the oldest unproven goes, never the newcomer.
    fn enter(&mut self, s: TcpStream, from: SocketAddr, readable: &mut Vec<usize>) {
        let cap = MAX_PENDING + (self.flows as usize).saturating_sub(self.accepted.len());
        while self.waiting.len() >= cap {
            let Some(t) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.waiting.remove(&t) {
                self.turn_away(
                    "the waiting room was full and it had not presented a token",
                    old.from,
                );
            }
        }
        if s.set_nonblocking(true).is_err() {
            return;
        }
        let t = self.next_token;
        self.next_token += 1;
        let Ok(watch) = Watch::new(
            self.poll.registry(),
            &s,
            SockKind::Stream,
            MioToken(t),
            Interest::READABLE,
        ) else {
            return;
        };
        self.waiting.insert(
            t,
            Unproven {
                stream: s,
                watch,
                from,
                buf: [0; handshake::PREAMBLE_LEN],
                got: 0,
                since: Instant::now(),
            },
        );
        self.order.push_back(t);
        readable.push(t);
    }

    /// What the unproven connections sent: proofs, strangers, or more
    /// waiting.
    fn read_ready(&mut self, readable: Vec<usize>) {
        for t in readable {
            let Some(u) = self.waiting.get_mut(&t) else {
                continue;
            };
            let verdict = u.read(self.expect);
            if matches!(verdict, Sent::Waiting) {
                continue;
            }
            let Some(mut u) = self.waiting.remove(&t) else {
                continue;
            };
            u.watch.deregister(self.poll.registry());
            match verdict {
                Sent::Proved(flow)
                    if flow >= self.flows || self.accepted.iter().any(|(n, _)| *n == flow) =>
                {
                    self.turn_away("a flow number this test has not", u.from);
                }
                Sent::Proved(flow) => {
                    if let Some(s) = proven(u.stream) {
                        self.accepted.push((flow, s));
                    }
                }
                Sent::Foreign(why) => self.turn_away(why, u.from),
                Sent::Waiting => {}
            }
        }
    }

    /// Those silent past their window go.
    fn expire(&mut self) {
        let now = Instant::now();
        while let Some(&t) = self.order.front() {
            match self.waiting.get(&t) {
                None => {
                    self.order.pop_front();
                }
                Some(u) if now >= u.since + PROOF_WINDOW => {
                    self.order.pop_front();
                    if let Some(mut u) = self.waiting.remove(&t) {
                        u.watch.deregister(self.poll.registry());
                        self.turn_away("it presented no token within its window", u.from);
                    }
                }
                Some(_) => break,
            }
        }
    }
}

/// A data connection that proved itself: blocking again, and watched for a
/// client that vanishes without a word.
fn proven(s: TcpStream) -> Option<TcpStream> {
    s.set_nonblocking(false).ok()?;
    let _ = sockopt::set_liveness(socket2::SockRef::from(&s), Duration::from_secs(30));
    Some(s)
}

/// UDP tests: wait until netperf's hello with the test's token arrives from
/// `peer`; its address is the only one the data socket will then talk to,
/// through connect() if netperf asked (`-- -N`).
///
/// With netperf 2.7's conventions there is no hello: the first datagram
/// from the control connection's peer (at the data port its request named,
/// if it named one) names the address; it stays queued, as the test's
/// first.
pub(crate) fn udp_hello<'a>(
    sock: &'a std::net::UdpSocket,
    expect: &Expect<'_>,
    connect: bool,
    deadline: Instant,
    ctl: &TestCtl,
) -> Result<udp::Link<'a>, ErrorMsg> {
    let is_aborted = || ctl.is_aborted();
    let from = match expect.conv.proof {
        Proof::Preamble => udp::server_hello(
            sock,
            expect.token,
            expect.peer,
            connect,
            deadline,
            &is_aborted,
        ),
        Proof::ControlPeer | Proof::Handed => udp::first_from(
            sock,
            SocketAddr::new(expect.peer, expect.peer_port.unwrap_or(0)),
            connect,
            deadline,
            &is_aborted,
        ),
    };
    from.map(|from| {
        if connect {
            udp::Link::connected(sock)
        } else {
            udp::Link::to(sock, from)
        }
    })
    .map_err(|e| {
        if ctl.is_aborted() {
            aborted()
        } else {
            ErrorMsg::new(ErrorCode::Timeout, e.to_string())
        }
    })
}

/// UDP tests of many flows: a socket per flow, bound where `sock` is and
/// connected to that flow's sender once its hello arrives (see
/// [`udp::server_hellos`]), each registered for an abort.
pub(crate) fn udp_flow_sockets(
    spec: &TestSpec,
    sock: &UdpSocket,
    token: &proto::Token,
    peer: IpAddr,
    deadline: Instant,
    ctl: &TestCtl,
) -> Result<Vec<UdpSocket>, ErrorMsg> {
    let local = sock
        .local_addr()
        .map_err(|e| failed("UDP data socket", e))?;
    let side = server_side(spec, Protocol::Udp);
    let new_socket = || -> std::io::Result<UdpSocket> {
        let s = sockopt::new_socket(spec.family, Protocol::Udp)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        s.set_reuse_address(true)?;
        sockopt::apply_side(&s, &side, spec.family, Protocol::Udp, false)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        s.bind(&local.into())?;
        Ok(s.into())
    };
    let socks = udp::server_hellos(
        sock,
        token,
        peer,
        spec.flows,
        &new_socket,
        deadline,
        &|| ctl.is_aborted(),
    )
    .map_err(|e| failed("UDP data sockets", e))?;
    for s in &socks {
        ctl.register(s);
    }
    Ok(socks)
}
