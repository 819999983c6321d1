//! Before data flows: a UDP data socket's hello (the test's token and
//! flow number, echoed), and the return-routability challenge a hello
//! from another address than the control connection's must answer.

use std::{
    io,
    net::{IpAddr, SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use proto::Token;

use super::{Link, is_hello};
use crate::{EngineError, conventions::Conventions, handshake};

/// The first bytes of a return-routability challenge (see [`server_hello`]).
pub(crate) const CHALLENGE_TAG: &[u8; 8] = b"rsnetprf";
/// A challenge: the tag and a random cookie.
const CHALLENGE_LEN: usize = 8 + 32;

/// netperf's side of the handshake: send the preamble until the netserver
/// echoes it; answer the netserver's challenge if it sends one (it does
/// when our data address is not our control connection's). netperf 2.7's
/// conventions have no hello: nothing to do.
pub fn client_hello(
    link: Link<'_>,
    token: &Token,
    conv: &Conventions,
    deadline: Instant,
) -> Result<(), EngineError> {
    client_hello_flow(link, token, conv, 0, deadline)
}

/// [`client_hello`] of flow `flow` of a many-flow test: its hello names it.
pub fn client_hello_flow(
    link: Link<'_>,
    token: &Token,
    conv: &Conventions,
    flow: u32,
    deadline: Instant,
) -> Result<(), EngineError> {
    match conv.proof {
        crate::conventions::Proof::ControlPeer => return Ok(()),
        crate::conventions::Proof::Handed => return iperf3_connect(link, deadline),
        crate::conventions::Proof::Preamble => {}
    }
    let sock = link.socket();
    let hello = handshake::preamble(token, flow);
    let mut buf = [0u8; 64];
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    loop {
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(
                "the netserver did not answer the UDP data socket's hello".into(),
            ));
        }
        // Errors here (an ICMP error from an earlier try) are retried.
        let _ = link.send(&hello);
        match link.recv(&mut buf) {
            Ok(Some(n)) if buf.get(..n) == Some(&hello[..]) => break,
            Ok(Some(CHALLENGE_LEN)) if buf.starts_with(CHALLENGE_TAG) => {
                let _ = link.send(buf.get(..CHALLENGE_LEN).unwrap_or_default());
            }
            _ => {}
        }
    }
    sock.set_read_timeout(None)
        .map_err(|e| EngineError::io("clearing a receive timeout", e))
}

/// An iperf3 UDP stream's connect: its message ("9876"), then the
/// server's answer ("6789"), awaited until `deadline`. The message goes
/// again only when it could not go or an ICMP error came back (nothing
/// listened yet): a server that took it has made the stream, and takes
/// another as the next stream's.
fn iperf3_connect(link: Link<'_>, deadline: Instant) -> Result<(), EngineError> {
    let sock = link.socket();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut buf = [0u8; 64];
    let mut send = true;
    loop {
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(
                "the iperf3 server did not answer the UDP stream's connect message".into(),
            ));
        }
        if send {
            send = link.send(&proto::iperf3::UDP_CONNECT).is_err();
        }
        match link.recv(&mut buf) {
            Ok(Some(n))
                if proto::iperf3::is_udp_connect_reply(buf.get(..n).unwrap_or_default()) =>
            {
                break;
            }
            Ok(_) => {}
            Err(e) if crate::error::timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => send = true,
        }
    }
    sock.set_read_timeout(None)
        .map_err(|e| EngineError::io("clearing a receive timeout", e))
}

/// netserver's side of the handshake: wait for the token, and echo it to
/// the sender's exact address and port, which is from then on the only one
/// the socket talks to; with `connect`, the socket is connected to it.
/// Until then the socket sends nothing but challenges.
///
/// A hello from `peer_ip` (the control connection's peer) is taken at once.
/// A hello from another address (netperf's data address is another of its
/// host's) is answered with a challenge, a random cookie, and taken once
/// the cookie comes back from there: whoever knows the token can only
/// direct our datagrams to an address it receives at, never to a third
/// party's.
pub fn server_hello(
    sock: &UdpSocket,
    token: &Token,
    peer_ip: IpAddr,
    connect: bool,
    deadline: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<SocketAddr, EngineError> {
    let mut buf = [0u8; 128];
    // Challenges sent, to at most a few addresses.
    let mut challenged: Vec<(SocketAddr, [u8; CHALLENGE_LEN])> = Vec::new();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let hello = handshake::preamble(token, 0);
    let from = loop {
        if aborted() {
            return Err(EngineError::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(
                "the UDP data socket received no hello with the test's token".into(),
            ));
        }
        let Ok((n, Some(from))) = crate::sys::recv_from(sock, &mut buf, false) else {
            continue;
        };
        let d = buf.get(..n).unwrap_or_default();
        if is_hello(d, token) {
            if from.ip() == peer_ip {
                break from;
            }
            let c = match challenged.iter().find(|(a, _)| *a == from) {
                Some((_, c)) => *c,
                None => {
                    let mut c = [0u8; CHALLENGE_LEN];
                    c[..8].copy_from_slice(CHALLENGE_TAG);
                    getrandom::fill(&mut c[8..])
                        .map_err(|e| EngineError::Invalid(format!("no random numbers: {e}")))?;
                    if challenged.len() >= 8 {
                        challenged.remove(0);
                    }
                    challenged.push((from, c));
                    c
                }
            };
            let _ = sock.send_to(&c, from);
        } else if n == CHALLENGE_LEN
            && challenged
                .iter()
                .any(|(a, c)| *a == from && handshake::bytes_eq(c, d))
        {
            break from;
        }
        // anything else, from anyone, is ignored
    };
    let link = if connect {
        sock.connect(from)
            .map_err(|e| EngineError::io("connecting the UDP data socket", e))?;
        Link::connected(sock)
    } else {
        Link::to(sock, from)
    };
    link.send(&hello)
        .map_err(|e| EngineError::io("answering the UDP hello", e))?;
    Ok(from)
}

/// netserver's side of a many-flow test's hellos: `flows` hellos, each
/// naming its flow, from `peer_ip` (the control connection's peer); each
/// flow gets a socket of its own from `new_socket` (bound to the same
/// address and port, with SO_REUSEADDR), connected to that hello's sender,
/// which answers it. The kernel then delivers each flow's datagrams to its
/// own socket (a connected socket is the better match), so each flow is
/// received, and its socket's drops counted, on its own. A repeated hello
/// is answered again from its flow's socket.
pub fn server_hellos(
    sock: &UdpSocket,
    token: &Token,
    peer_ip: IpAddr,
    flows: u32,
    new_socket: &dyn Fn() -> io::Result<UdpSocket>,
    deadline: Instant,
    aborted: &dyn Fn() -> bool,
) -> Result<Vec<UdpSocket>, EngineError> {
    let mut buf = [0u8; 128];
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut got: Vec<Option<UdpSocket>> = (0..flows).map(|_| None).collect();
    let mut left = flows as usize;
    while left > 0 {
        if aborted() {
            return Err(EngineError::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(EngineError::Timeout(format!(
                "the UDP data socket received the hellos of {} flows of {flows}",
                flows as usize - left
            )));
        }
        let Ok((n, Some(from))) = crate::sys::recv_from(sock, &mut buf, false) else {
            continue;
        };
        let d = buf.get(..n).unwrap_or_default();
        if from.ip() != peer_ip || n != handshake::PREAMBLE_LEN {
            continue;
        }
        let Ok(i) = handshake::parse_preamble(d, token) else {
            continue;
        };
        let Some(slot) = got.get_mut(i as usize) else {
            continue;
        };
        let hello = handshake::preamble(token, i);
        if let Some(s) = slot {
            let _ = s.send(&hello);
            continue;
        }
        let s = new_socket().map_err(|e| EngineError::io("a flow's UDP socket", e))?;
        s.connect(from)
            .map_err(|e| EngineError::io("connecting a flow's UDP socket", e))?;
        s.send(&hello)
            .map_err(|e| EngineError::io("answering a UDP hello", e))?;
        *slot = Some(s);
        left -= 1;
    }
    Ok(got.into_iter().flatten().collect())
}
