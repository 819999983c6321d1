//! The accept loop: one mio event loop over the control listeners.
//!
//! It never blocks on a client: each accepted connection is either handed to
//! a session thread at once or, over a cap, told "busy" with one small
//! non-blocking write and closed. Running out of file descriptors, memory or
//! threads is logged (rate-limited) and waited out; it never ends the daemon.

use std::{
    io::{self, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

use std::os::fd::AsRawFd;

use mio::{Events, Interest, Poll, Token, Waker, unix::SourceFd};
use proto::{ErrorCode, ErrorMsg, ServerMsg};

use crate::{Refusal, Shared, session};

const WAKE: Token = Token(usize::MAX);
/// How long to wait before accepting again after running out of resources.
const BACKOFF: Duration = Duration::from_millis(100);

pub(crate) fn accept_loop(listeners: Vec<TcpListener>, shared: &Arc<Shared>) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    let _sub = shared.shutdown.subscribe(waker);
    for (i, l) in listeners.iter().enumerate() {
        l.set_nonblocking(true)?;
        poll.registry()
            .register(&mut SourceFd(&l.as_raw_fd()), Token(i), Interest::READABLE)?;
    }
    let mut events = Events::with_capacity(64);
    // After a resource error we stop accepting until this instant, then try
    // every listener again (mio is edge-triggered: no new event would come
    // for connections already queued).
    let mut retry_at: Option<Instant> = None;
    loop {
        let timeout = retry_at.map(|t| t.saturating_duration_since(Instant::now()));
        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if shared.shutdown.is_triggered() {
            return Ok(());
        }
        let mut ready: Vec<usize> = events
            .iter()
            .filter(|e| e.token() != WAKE)
            .map(|e| e.token().0)
            .collect();
        if let Some(t) = retry_at {
            if Instant::now() < t {
                continue;
            }
            retry_at = None;
            ready = (0..listeners.len()).collect();
        }
        for i in ready {
            let Some(l) = listeners.get(i) else { continue };
            if let Some(backoff) = drain(l, shared) {
                retry_at = Some(Instant::now() + backoff);
            }
        }
    }
}

/// Accept until the listener would block. Returns a back-off if a resource
/// ran out.
fn drain(l: &TcpListener, shared: &Arc<Shared>) -> Option<Duration> {
    let log = &shared.config.logger;
    loop {
        match l.accept() {
            Ok((stream, peer)) => {
                if let Err(backoff) = admit(stream, peer, shared) {
                    return Some(backoff);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
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
}

fn is_resource_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Hand a new connection to a session thread, or refuse it.
fn admit(std_stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared>) -> Result<(), Duration> {
    let cfg = &shared.config;
    let log = &cfg.logger;
    if shared.failures.blocked(peer.ip()) {
        let text =
            "too many failed authentication attempts from your address; try again in a minute";
        log.warn_limited("auth-blocked", &format!("refused {peer}: {text}"));
        refuse(&std_stream, ErrorCode::Auth, text);
        return Ok(());
    }
    if let Err(why) = shared.census.admit(peer.ip(), cfg) {
        let text = match why {
            Refusal::Sessions(n) => {
                format!("netserver is busy: it already serves {n} sessions; try again later")
            }
            Refusal::PerClient(n) => format!(
                "netserver is busy: {n} sessions from your address already; try again later"
            ),
            Refusal::Pending(n) => format!(
                "netserver is busy: {n} connections are still in their handshake; try again later"
            ),
        };
        log.warn_limited("busy", &format!("refused {peer}: {text}"));
        refuse(&std_stream, ErrorCode::Busy, &text);
        return Ok(());
    }
    let s = shared.clone();
    // A second descriptor of the connection, so that the client can be told
    // why if no thread can be started for it (the first goes with the
    // closure, which a failed spawn drops).
    let reply = std_stream.try_clone().ok();
    let spawned = thread::Builder::new()
        .name(format!("session {peer}"))
        .stack_size(256 * 1024)
        .spawn(move || session::serve(std_stream, peer, s));
    match spawned {
        Ok(_) => Ok(()),
        Err(e) => {
            shared.census.leave(peer.ip(), true);
            log.warn_limited(
                "spawn",
                &format!("cannot start a session thread ({e}); pausing accepts for 100 ms"),
            );
            if let Some(r) = reply {
                refuse(
                    &r,
                    ErrorCode::Resource,
                    &format!("netserver cannot start a session thread ({e}); try again later"),
                );
            }
            Err(BACKOFF)
        }
    }
}

/// Best effort: tell the client why, without blocking, and close.
pub(crate) fn refuse(stream: &TcpStream, code: ErrorCode, text: &str) {
    if let Ok(frame) = ServerMsg::Error(ErrorMsg::new(code, text)).encode() {
        let _ = stream.set_nonblocking(true);
        let _ = (&*stream).write(&frame);
    }
}
