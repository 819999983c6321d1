//! `--metrics ADDR:PORT`: the metrics endpoint, an HTTP/1.1 server of one
//! resource (`GET /metrics`), on the control loop itself: no thread per
//! scrape, and nothing it does can wait. Each connection is bounded: its
//! request at most [`MAX_REQUEST`] bytes, its whole life [`DEADLINE`], one
//! request, then closed; at most [`MAX_CONNS`] at once (for a new one,
//! the oldest that has asked nothing, or had its answer, since an earlier
//! turn of the loop is closed; else the new one waits in the backlog). A scraper that never reads costs its socket until
//! its deadline, and the answer's bytes the kernel holds.

use std::{
    collections::HashMap,
    io::{self, Read, Write},
    net::TcpListener,
    time::{Duration, Instant},
};

use mio::{Interest, Registry, Token, event::Event};

use crate::{metrics::Held, shared::Shared};

/// The listener's token, and the range its connections' come from (below
/// the waiting room's, above the control listeners').
pub(crate) const LISTENER: usize = (1 << 20) - 1;
const FIRST: usize = 1 << 19;
/// Connections at once.
pub(crate) const MAX_CONNS: usize = 64;
/// A request's bytes, headers included.
pub(crate) const MAX_REQUEST: usize = 8 * 1024;
/// From accept to the last byte of the answer.
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);
/// Connections accepted at one readiness before the loop turns to others.
const ACCEPT_BUDGET: usize = 64;

struct Conn {
    stream: mio::net::TcpStream,
    request: Vec<u8>,
    /// How much of `request` has been searched for the headers' end.
    scanned: usize,
    /// The answer, once the request is whole, and how much of it went.
    answer: Option<(Vec<u8>, usize)>,
    /// The answer went: what else the client sends is read and dropped
    /// until it closes (closing with bytes unread would reset the
    /// connection, and the answer with it).
    draining: bool,
    since: Instant,
}

/// The endpoint: its listener and its connections.
pub(crate) struct Scrapes {
    listener: Option<mio::net::TcpListener>,
    conns: HashMap<usize, Conn>,
    next: usize,
    /// Connections may be waiting in the listener's backlog: accept again
    /// at the loop's next turn (the budget ran out), or at this instant
    /// (descriptors ran out).
    again: bool,
    retry_at: Option<Instant>,
}

/// After running out of descriptors, how long before accepting again.
const BACKOFF: Duration = Duration::from_millis(100);

impl Scrapes {
    pub(crate) fn new(listener: Option<TcpListener>, registry: &Registry) -> io::Result<Scrapes> {
        let listener = match listener {
            Some(l) => {
                l.set_nonblocking(true)?;
                let mut l = mio::net::TcpListener::from_std(l);
                registry.register(&mut l, Token(LISTENER), Interest::READABLE)?;
                Some(l)
            }
            None => None,
        };
        Ok(Scrapes {
            listener,
            conns: HashMap::new(),
            next: FIRST,
            again: false,
            retry_at: None,
        })
    }

    /// Whether connections may wait to be accepted now.
    pub(crate) fn has_more(&self) -> bool {
        self.again
    }

    pub(crate) fn owns(&self, token: usize) -> bool {
        (FIRST..=LISTENER).contains(&token) && self.listener.is_some()
    }

    /// The earliest deadline of a connection, or of accepting again.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .map(|c| c.since + DEADLINE)
            .chain(self.retry_at)
            .min()
    }

    /// Close the connections past their deadline; accept what waits if
    /// it is time.
    pub(crate) fn expire(&mut self, registry: &Registry, now: Instant) {
        if self.again || self.retry_at.is_some_and(|t| now >= t) {
            self.accept(registry);
        }
        let late: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| now >= c.since + DEADLINE)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            self.close(registry, t);
        }
    }

    /// Shutting down: no more scrapes.
    pub(crate) fn stop(&mut self, registry: &Registry) {
        if let Some(mut l) = self.listener.take() {
            let _ = registry.deregister(&mut l);
        }
        let all: Vec<usize> = self.conns.keys().copied().collect();
        for t in all {
            self.close(registry, t);
        }
    }

    pub(crate) fn on_event(
        &mut self,
        registry: &Registry,
        ev: &Event,
        shared: &Shared,
        sessions: usize,
    ) {
        let token = ev.token().0;
        if token == LISTENER {
            self.accept(registry);
            return;
        }
        let turn = shared.turns.holder();
        let held = || Held {
            sessions: sessions as u64,
            memory_used: shared.config.memory_budget.in_use(),
            memory_limit: shared.config.memory_budget.limit(),
            fds_used: shared.descriptors.in_use(),
            fds_limit: shared.descriptors.shares().tests,
            sockets_used: shared.config.socket_budget.in_use(),
            sockets_limit: shared.config.socket_budget.limit(),
            waiting: shared.turns.waiting() as u64,
            turn_tests: turn.0.map_or(0, |(_, _, n)| n as u64),
            turns: turn.1,
            policy_scopes: shared.config.policy.remembered() as u64,
            policy_tests: shared
                .config
                .policy
                .usage(crate::policy::Scope::Daemon)
                .day_tests,
            policy_bytes: shared
                .config
                .policy
                .usage(crate::policy::Scope::Daemon)
                .day_bytes,
            log_dropped: shared.config.logger.dropped(),
            record_dropped: shared.config.record.as_ref().map_or(0, |r| r.dropped()),
        };
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        let done = c
            .serve(|| shared.config.metrics.encode(held()))
            .unwrap_or(true);
        if done {
            self.close(registry, token);
        } else if c.answer.is_some() {
            let _ = registry.reregister(&mut c.stream, Token(token), Interest::WRITABLE);
        }
    }

    fn accept(&mut self, registry: &Registry) {
        (self.again, self.retry_at) = (false, None);
        let round = Instant::now();
        for _ in 0..ACCEPT_BUDGET {
            // At the cap, room is made of the oldest that has asked
            // nothing, or had its answer, since an earlier turn of the
            // loop: every connection is read once first (a scraper asks at
            // once). With none, the rest wait in the backlog for the
            // loop's next turn.
            let room = if self.conns.len() >= MAX_CONNS {
                match self.idlest(round) {
                    Some(t) => Some(t),
                    None => break,
                }
            } else {
                None
            };
            let Some(l) = &self.listener else { return };
            match l.accept() {
                Ok((mut stream, _)) => {
                    if let Some(t) = room {
                        self.close(registry, t);
                    }
                    let token = self.new_token();
                    if registry
                        .register(&mut stream, Token(token), Interest::READABLE)
                        .is_ok()
                    {
                        self.conns.insert(
                            token,
                            Conn {
                                stream,
                                request: Vec::new(),
                                scanned: 0,
                                answer: None,
                                draining: false,
                                since: Instant::now(),
                            },
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // out of descriptors, or the like: try again shortly
                Err(_) => {
                    self.retry_at = Some(Instant::now() + BACKOFF);
                    return;
                }
            }
        }
        // the budget ran out: more may be queued
        self.again = true;
    }

    /// The oldest connection accepted before `round` that has sent no
    /// whole request, or has had its answer, and has nothing waiting to
    /// be read (a scraper whose request came while the loop was busy
    /// elsewhere is not idle: it is read at the loop's next turn).
    fn idlest(&self, round: Instant) -> Option<usize> {
        let waiting = |c: &Conn| matches!(c.stream.peek(&mut [0u8; 1]), Ok(n) if n > 0);
        self.conns
            .iter()
            .filter(|(_, c)| (c.answer.is_none() || c.draining) && c.since < round)
            .filter(|(_, c)| c.draining || !waiting(c))
            .min_by_key(|(_, c)| c.since)
            .map(|(t, _)| *t)
    }

    fn new_token(&mut self) -> usize {
        loop {
            let t = self.next;
            self.next = if t + 1 >= LISTENER { FIRST } else { t + 1 };
            if !self.conns.contains_key(&t) {
                return t;
            }
        }
    }

    fn close(&mut self, registry: &Registry, token: usize) {
        if let Some(mut c) = self.conns.remove(&token) {
            let _ = registry.deregister(&mut c.stream);
        }
    }
}

impl Conn {
    /// Read what came, answer once the request is whole, write what the
    /// socket takes. Whether the connection is done.
    fn serve(&mut self, body: impl Fn() -> String) -> io::Result<bool> {
        if self.draining {
            return self.drain();
        }
        if self.answer.is_none() {
            let mut chunk = [0u8; 2048];
            loop {
                let room = MAX_REQUEST - self.request.len();
                if room == 0 {
                    self.answer = Some((
                        response(
                            431,
                            "Request Header Fields Too Large",
                            "",
                            "request too large\n",
                        ),
                        0,
                    ));
                    break;
                }
                let want = room.min(chunk.len());
                match self.stream.read(chunk.get_mut(..want).unwrap_or_default()) {
                    Ok(0) => return Ok(true),
                    Ok(n) => {
                        self.request
                            .extend_from_slice(chunk.get(..n).unwrap_or_default());
                        if let Some(a) = answer(&self.request, self.scanned, &body) {
                            self.answer = Some((a, 0));
                            break;
                        }
                        self.scanned = self.request.len();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let Some((bytes, sent)) = &mut self.answer else {
            return Ok(false);
        };
        while *sent < bytes.len() {
            match self.stream.write(bytes.get(*sent..).unwrap_or_default()) {
                Ok(0) => return Ok(true),
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // all of it went: the client reads it, then closes
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        self.draining = true;
        self.drain()
    }

    /// Read and drop what comes until the client closes (its deadline
    /// bounds it). Whether it has.
    fn drain(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 2048];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The answer to a whole request (its headers ended), or `None` while it
/// is not whole; the first `scanned` bytes were searched before (only what
/// came since is, so a request sent a byte at a time costs no more than
/// one sent whole). The body is made only for a good request.
fn answer(request: &[u8], scanned: usize, body: impl FnOnce() -> String) -> Option<Vec<u8>> {
    let from = scanned.saturating_sub(3);
    let tail = request.get(from..).unwrap_or_default();
    let end = from
        + tail
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .or_else(|| tail.windows(2).position(|w| w == b"\n\n"))?;
    let head = String::from_utf8_lossy(request.get(..end).unwrap_or_default()).into_owned();
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target, version) = (words.next(), words.next(), words.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Some(response(400, "Bad Request", "", "bad request\n"));
    }
    let path = target.unwrap_or("").split('?').next().unwrap_or("");
    // OpenMetrics to a scraper that asks for it (Prometheus does), the
    // Prometheus text format to others
    let openmetrics = head.lines().skip(1).any(|h| {
        h.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    Some(match (method, path) {
        (Some("GET"), "/metrics") if openmetrics => response(200, "OK", OPENMETRICS, &body()),
        (Some("GET"), "/metrics") => response(
            200,
            "OK",
            PROMETHEUS_TEXT,
            &crate::metrics::prometheus_text(&body()),
        ),
        (Some("GET"), _) => response(404, "Not Found", "", "only /metrics is served\n"),
        _ => response(405, "Method Not Allowed", "", "only GET /metrics\n"),
    })
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

fn response(code: u16, reason: &str, content_type: &str, body: &str) -> Vec<u8> {
    let ct = if content_type.is_empty() {
        "text/plain; charset=utf-8"
    } else {
        content_type
    };
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if code == 405 {
        out.push_str("Allow: GET\r\n");
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_whole(r: &[u8], body: impl FnOnce() -> String) -> Option<Vec<u8>> {
        answer(r, 0, body)
    }

    fn text(r: Option<Vec<u8>>) -> String {
        String::from_utf8(r.expect("an answer")).unwrap()
    }

    #[test]
    fn one_resource_and_clear_refusals() {
        assert!(answer_whole(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", || "m".into()).is_none());
        let ok = text(answer_whole(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
            || "# EOF\n".into(),
        ));
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: application/openmetrics-text"),
            "{ok}"
        );
        assert!(ok.contains("Content-Length: 6\r\n") && ok.ends_with("\r\n\r\n# EOF\n"));
        let plain = text(answer_whole(b"GET /metrics HTTP/1.1\r\n\r\n", || {
            "# EOF\n".into()
        }));
        assert!(
            plain.contains("version=0.0.4") && plain.ends_with("\r\n\r\n"),
            "{plain}"
        );
        let q = text(answer_whole(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", || {
            "m".into()
        }));
        assert!(q.starts_with("HTTP/1.1 200"));
        let nf = text(answer_whole(b"GET / HTTP/1.1\r\n\r\n", || unreachable!()));
        assert!(nf.starts_with("HTTP/1.1 404"));
        let post = text(answer_whole(
            b"POST /metrics HTTP/1.1\r\n\r\n",
            || unreachable!(),
        ));
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("Allow: GET"));
        let junk = text(answer_whole(b"\x16\x03\x01 garbage\n\n", || unreachable!()));
        assert!(junk.starts_with("HTTP/1.1 400"));
        // a byte at a time: each search starts where the last ended
        let whole = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        for n in 1..whole.len() {
            assert!(answer(&whole[..n], n - 1, || "m".into()).is_none(), "{n}");
        }
        assert!(answer(whole, whole.len() - 1, || "m".into()).is_some());
    }
}
