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
    net::{IpAddr, SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd,
    time::{Duration, Instant},
};

use engine::{
    conventions::{Conventions, Proof},
    handshake, sockopt,
    stream::udp,
};
use mio::{Events, Interest, Poll, Token as MioToken, unix::SourceFd};
use proto::{ErrorCode, ErrorMsg, Token};
use socket2::Socket;

use super::{TestCtl, aborted, failed, shortage};
use crate::log::Logger;

/// Connections held at once while they present their token, besides room
/// for every flow still to come.
pub(crate) const MAX_PENDING: usize = 32;
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
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::Waiting,
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
    let listener: TcpListener = listener
        .try_clone()
        .map_err(|e| failed("data listener", e))?
        .into();
    listener
        .set_nonblocking(true)
        .map_err(|e| failed("data listener", e))?;
    let mut poll = Poll::new().map_err(|e| failed("data listener", e))?;
    poll.registry()
        .register(
            &mut SourceFd(&listener.as_raw_fd()),
            MioToken(0),
            Interest::READABLE,
        )
        .map_err(|e| failed("data listener", e))?;
    let mut events = Events::with_capacity(256);
    // the room, by token; tokens oldest first in `order` (those already
    // gone are skipped)
    let mut room: HashMap<usize, Unproven> = HashMap::new();
    let mut order: VecDeque<usize> = VecDeque::new();
    let mut next_token = FIRST;
    let mut accepted: Vec<(u32, TcpStream)> = Vec::new();
    let mut last_error: Option<io::Error> = None;
    // an accept that failed is tried again at the next turn (the loop is
    // edge-triggered: no new event would say the connection still waits)
    let mut accept_again = false;
    let mut foreign = 0u64;
    let turn_away = |why: &str, from: SocketAddr, foreign: &mut u64| {
        *foreign += 1;
        log.warn_limited(
            "data-foreign",
            &format!("closed a data connection from {from}: {why}"),
        );
    };
    while accepted.len() < flows as usize {
        if ctl.is_aborted() {
            return Err(aborted());
        }
        let now = Instant::now();
        if now >= deadline {
            ctl.saw_foreign(foreign, false);
            return Err(ErrorMsg::new(
                ErrorCode::Timeout,
                match &last_error {
                    Some(e) => format!(
                        "only {} of {flows} data connections arrived in time (the last accept failed: {e}{})",
                        accepted.len(),
                        shortage(e.raw_os_error())
                            .map(|w| format!("; {w}"))
                            .unwrap_or_default()
                    ),
                    None => format!(
                        "only {} of {flows} data connections arrived in time",
                        accepted.len()
                    ),
                },
            ));
        }
        // the oldest unproven connection's deadline, the test's, and a
        // look at the abort flag every 100 ms
        let oldest = order
            .iter()
            .find_map(|t| room.get(t))
            .map(|u| u.since + PROOF_WINDOW);
        let wake = [
            Some(deadline),
            oldest,
            Some(now + Duration::from_millis(100)),
        ]
        .into_iter()
        .flatten()
        .min()
        .filter(|_| !accept_again)
        .unwrap_or(now);
        match poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed("poll", e)),
        }
        let mut readable: Vec<usize> = Vec::new();
        let mut listener_ready = std::mem::take(&mut accept_again);
        for ev in events.iter() {
            match ev.token() {
                MioToken(0) => listener_ready = true,
                MioToken(t) => readable.push(t),
            }
        }
        if listener_ready {
            loop {
                match listener.accept() {
                    Ok((s, from)) if expect.conv.proof == Proof::ControlPeer => {
                        if from.ip() != expect.peer {
                            turn_away("not the control connection's peer", from, &mut foreign);
                            continue;
                        }
                        let flow = accepted.len() as u32;
                        if let Some(s) = proven(s) {
                            accepted.push((flow, s));
                        }
                        if accepted.len() >= flows as usize {
                            break;
                        }
                    }
                    Ok((s, from)) => {
                        // room for every flow's connection still to come,
                        // and a few strangers: when full, the oldest
                        // unproven goes, never the newcomer
                        let cap = MAX_PENDING + (flows as usize).saturating_sub(accepted.len());
                        while room.len() >= cap {
                            let Some(t) = order.pop_front() else { break };
                            if let Some(old) = room.remove(&t) {
                                turn_away(
                                    "the waiting room was full and it had not presented a token",
                                    old.from,
                                    &mut foreign,
                                );
                            }
                        }
                        if s.set_nonblocking(true).is_err() {
                            continue;
                        }
                        let t = next_token;
                        next_token += 1;
                        if poll
                            .registry()
                            .register(
                                &mut SourceFd(&s.as_raw_fd()),
                                MioToken(t),
                                Interest::READABLE,
                            )
                            .is_err()
                        {
                            continue;
                        }
                        let u = Unproven {
                            stream: s,
                            from,
                            buf: [0; handshake::PREAMBLE_LEN],
                            got: 0,
                            since: Instant::now(),
                        };
                        room.insert(t, u);
                        order.push_back(t);
                        // its preamble may be here already
                        readable.push(t);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // Out of descriptors: the test cannot have its flows;
                    // say so now rather than at the deadline.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                        let why = shortage(e.raw_os_error()).unwrap_or_default();
                        let whose = if e.raw_os_error() == Some(libc::ENFILE) {
                            "the system"
                        } else {
                            "netserver"
                        };
                        return Err(ErrorMsg::new(
                            ErrorCode::Resource,
                            format!(
                                "{whose} ran out of file descriptors after {} of {flows} data connections ({e}; {why}, or ask for fewer --flows)",
                                accepted.len()
                            ),
                        ));
                    }
                    // Short of kernel memory (or a connection that went
                    // before it was accepted): tried again shortly, until
                    // the deadline, which then names what failed.
                    Err(e) => {
                        log.warn_limited("data-accept", &format!("data accept failed: {e}"));
                        if shortage(e.raw_os_error()).is_some() {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        last_error = Some(e);
                        accept_again = true;
                        break;
                    }
                }
            }
        }
        // What the unproven connections sent: proofs, strangers, or more
        // waiting.
        for t in readable {
            let Some(u) = room.get_mut(&t) else {
                continue;
            };
            let verdict = u.read(expect);
            if matches!(verdict, Sent::Waiting) {
                continue;
            }
            let Some(u) = room.remove(&t) else {
                continue;
            };
            let _ = poll
                .registry()
                .deregister(&mut SourceFd(&u.stream.as_raw_fd()));
            match verdict {
                Sent::Proved(flow) if flow >= flows || accepted.iter().any(|(n, _)| *n == flow) => {
                    turn_away("a flow number this test has not", u.from, &mut foreign);
                }
                Sent::Proved(flow) => {
                    if let Some(s) = proven(u.stream) {
                        accepted.push((flow, s));
                    }
                }
                Sent::Foreign(why) => turn_away(why, u.from, &mut foreign),
                Sent::Waiting => {}
            }
        }
        // Those silent past their window go.
        let now = Instant::now();
        while let Some(&t) = order.front() {
            match room.get(&t) {
                None => {
                    order.pop_front();
                }
                Some(u) if now >= u.since + PROOF_WINDOW => {
                    order.pop_front();
                    if let Some(u) = room.remove(&t) {
                        let _ = poll
                            .registry()
                            .deregister(&mut SourceFd(&u.stream.as_raw_fd()));
                        turn_away(
                            "it presented no token within its window",
                            u.from,
                            &mut foreign,
                        );
                    }
                }
                Some(_) => break,
            }
        }
    }
    // the test's flows are all here: whoever still waits is a stranger
    foreign += room.len() as u64;
    drop(room);
    ctl.saw_foreign(foreign, false);
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
        Proof::ControlPeer => udp::first_from(
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
