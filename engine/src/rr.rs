//! TCP_RR and UDP_RR: the requester's and the responder's loops.
//!
//! A transaction is one request of `req` bytes and one response of `resp`
//! bytes. In the default mode each side makes exactly one send and one
//! receive system call per transaction, as netperf does; the requester reads
//! the clock once per transaction (the end of one transaction is the start of
//! the next) and records the round trip in a [`Latency`].
//!
//! Burst mode (`-b N`) keeps N more requests in flight. TCP's responses
//! come back in order, so a FIFO of send times gives each one's latency.
//!
//! UDP_RR requests carry as many bytes of their sequence number as fit (up
//! to 8, at least 1) and the responder echoes them, so a late response is
//! never taken for the current one. A request with no response within the
//! receive timeout is counted lost and the test goes on. In burst mode the
//! tag finds the request a response answers, wherever it is in the window
//! (UDP may reorder), and a request older than the timeout is counted lost
//! and its place refilled, so that a loss costs one transaction, not the
//! burst (netperf 2.7's UDP_RR burst stalls once N requests are lost).
//!
//! `spin` mode makes the sockets non-blocking and polls them, to measure the
//! latency floor without the cost of sleeping and waking.

use std::{
    collections::VecDeque,
    io::{self, Read, Write},
    net::{Shutdown, TcpStream, UdpSocket},
    time::{Duration, Instant},
};

use crate::{
    EngineError, clock,
    error::{no_datagram, timed_out},
    latency::{Latency, LatencySummary},
    live::Live,
    stream::udp::{Link, transient},
    timer::StopFlag,
};

/// When the requester stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    Stopped,
    Transactions(u64),
}

/// The requester's settings.
#[derive(Clone, Copy, Debug)]
pub struct Requester {
    pub req: usize,
    pub resp: usize,
    /// Extra requests in flight.
    pub burst: u32,
    pub until: Until,
    /// Record each transaction's latency.
    pub timing: bool,
    pub spin: bool,
}

/// What the requester counted.
#[derive(Debug, Default, Clone)]
pub struct RrOutcome {
    pub transactions: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    /// UDP: transactions with no response in time.
    pub lost: u64,
    /// UDP: responses that arrived for an earlier, given-up request.
    pub stale: u64,
    pub elapsed: Duration,
    pub latency: Option<LatencySummary>,
    /// TCP_CRR and TCP_CC: the maximum segment size of the first
    /// connection (what netperf 2.7 reports for them).
    pub mss: Option<u32>,
}

/// What the responder counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct ResponderOutcome {
    pub transactions: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub elapsed: Duration,
}

/// Send all of `buf`; returns the number of calls.
fn send_all(s: &TcpStream, buf: &[u8], spin: bool) -> Result<u64, EngineError> {
    let mut off = 0;
    let mut calls = 0;
    while off < buf.len() {
        match (&*s).write(&buf[off..]) {
            Ok(n) => {
                off += n;
                calls += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if spin && timed_out(&e) => std::hint::spin_loop(),
            Err(e) => return Err(EngineError::io("send on the data connection", e)),
        }
    }
    Ok(calls)
}

/// Receive exactly `buf.len()` bytes. `Ok(None)` if the peer closed before
/// the first byte (a clean end between transactions); returns the calls.
fn recv_exact(s: &TcpStream, buf: &mut [u8], spin: bool) -> Result<Option<u64>, EngineError> {
    let mut off = 0;
    let mut calls = 0;
    while off < buf.len() {
        match (&*s).read(&mut buf[off..]) {
            Ok(0) if off == 0 => return Ok(None),
            Ok(0) => {
                return Err(EngineError::Invalid(
                    "the peer closed the data connection in the middle of a message".into(),
                ));
            }
            Ok(n) => {
                off += n;
                calls += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if spin && e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if timed_out(&e) => {
                return Err(EngineError::Timeout(
                    "the data connection went silent in the middle of a test".into(),
                ));
            }
            Err(e) => return Err(EngineError::io("receive on the data connection", e)),
        }
    }
    Ok(Some(calls))
}

fn closed_early() -> EngineError {
    EngineError::Invalid("the netserver closed the data connection during the test".into())
}

/// TCP requester (netperf's side of TCP_RR).
pub fn tcp_requester(
    conn: &TcpStream,
    p: &Requester,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    if p.spin {
        conn.set_nonblocking(true)
            .map_err(|e| EngineError::io("making the socket non-blocking", e))?;
    }
    let req = vec![b'r'; p.req.max(1)];
    let mut resp = vec![0u8; p.resp.max(1)];
    let mut lat = Latency::new();
    let mut out = RrOutcome::default();
    let start = Instant::now();
    let limit = match p.until {
        Until::Stopped => u64::MAX,
        Until::Transactions(n) => n,
    };
    let mut last = clock::now_ns();
    if p.burst == 0 {
        // One transaction at a time: send, receive, one clock read. The
        // burst loop below would do with a window of one, but its queue
        // costs 30 to 44 more instructions per transaction (callgrind), on
        // the path that must cost no more than netperf's.
        while out.transactions < limit && !stop.is_set() {
            out.send_calls += send_all(conn, &req, p.spin)?;
            match recv_exact(conn, &mut resp, p.spin)? {
                Some(calls) => out.recv_calls += calls,
                None => return Err(closed_early()),
            }
            out.transactions += 1;
            live.publish_transactions(out.transactions);
            if p.timing {
                let now = clock::now_ns();
                lat.record(now.wrapping_sub(last));
                last = now;
            }
        }
        out.bytes_sent = out.transactions * req.len() as u64;
        out.bytes_received = out.transactions * resp.len() as u64;
    } else {
        // Burst: keep `burst` more requests in flight; responses come back
        // in order, so a FIFO of send times gives each one's latency.
        let mut in_flight: VecDeque<u64> = VecDeque::with_capacity(p.burst as usize + 1);
        let mut requested = 0u64;
        loop {
            while in_flight.len() <= p.burst as usize && requested < limit && !stop.is_set() {
                out.send_calls += send_all(conn, &req, p.spin)?;
                requested += 1;
                in_flight.push_back(last);
            }
            let Some(sent_at) = in_flight.pop_front() else {
                break;
            };
            match recv_exact(conn, &mut resp, p.spin)? {
                Some(calls) => out.recv_calls += calls,
                None => return Err(closed_early()),
            }
            out.transactions += 1;
            live.publish_transactions(out.transactions);
            if p.timing {
                last = clock::now_ns();
                lat.record(last.wrapping_sub(sent_at));
            }
        }
        out.bytes_sent = requested * req.len() as u64;
        out.bytes_received = out.transactions * resp.len() as u64;
    }
    if p.spin {
        let _ = conn.set_nonblocking(false);
    }
    conn.shutdown(Shutdown::Write)
        .map_err(|e| EngineError::io("shutting down the data connection", e))?;
    // Wait for the responder's end-of-file, so that its count is final.
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut scratch = [0u8; 64];
    loop {
        match (&*conn).read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(EngineError::io("waiting for the netserver to close", e)),
        }
    }
    out.elapsed = start.elapsed();
    out.latency = lat.summary();
    Ok(out)
}

/// TCP responder (netserver's side of TCP_RR): answer each request until
/// the requester's end-of-file, then close our side.
pub fn tcp_responder(
    conn: &TcpStream,
    req: usize,
    resp: usize,
    spin: bool,
    live: &Live,
) -> Result<ResponderOutcome, EngineError> {
    if spin {
        conn.set_nonblocking(true)
            .map_err(|e| EngineError::io("making the socket non-blocking", e))?;
    }
    let mut reqbuf = vec![0u8; req.max(1)];
    let respbuf = vec![b'R'; resp.max(1)];
    let mut out = ResponderOutcome::default();
    let start = Instant::now();
    while let Some(calls) = recv_exact(conn, &mut reqbuf, spin)? {
        out.recv_calls += calls;
        out.bytes_received += reqbuf.len() as u64;
        out.send_calls += send_all(conn, &respbuf, spin)?;
        out.bytes_sent += respbuf.len() as u64;
        out.transactions += 1;
        live.publish(out.bytes_received, out.transactions);
    }
    out.recv_calls += 1; // the call that saw end-of-file
    out.elapsed = start.elapsed();
    if spin {
        let _ = conn.set_nonblocking(false);
    }
    let _ = conn.shutdown(Shutdown::Write);
    Ok(out)
}

/// Bytes of a UDP_RR message that carry the transaction's tag.
pub use proto::test::udp_rr_tag_len as tag_len;

/// Spin mode polls a non-blocking socket; otherwise receives wait at most
/// `timeout`.
fn prepare_udp(sock: &UdpSocket, spin: bool, timeout: Duration) -> Result<(), EngineError> {
    if spin {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making the socket non-blocking", e))
    } else {
        sock.set_read_timeout(Some(timeout))
            .map_err(|e| EngineError::io("setting the receive timeout", e))
    }
}

/// UDP requester (netperf's side of UDP_RR).
pub fn udp_requester(
    link: Link<'_>,
    p: &Requester,
    timeout: Duration,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    // The burst loop would do with a window of one, but it reads the clock
    // for every datagram and searches its window: 155 to 185 more
    // instructions per transaction (callgrind) on the default path.
    if p.burst > 0 {
        return udp_requester_burst(link, p, timeout, stop, live);
    }
    let sock = link.socket();
    let tag = tag_len(p.req, p.resp);
    let mut req = vec![b'r'; p.req.max(1)];
    let mut resp = vec![0u8; p.resp.max(1).max(tag)];
    prepare_udp(sock, p.spin, timeout)?;
    let mut lat = Latency::new();
    let mut out = RrOutcome::default();
    let start = Instant::now();
    let mut last = clock::now_ns();
    let mut seq = 0u64;
    'transactions: loop {
        if stop.is_set() {
            break;
        }
        if let Until::Transactions(n) = p.until
            && out.transactions + out.lost >= n
        {
            break;
        }
        let mark = seq.to_le_bytes();
        req[..tag].copy_from_slice(&mark[..tag]);
        seq += 1;
        let sent_at = last;
        loop {
            match link.send(&req) {
                Ok(n) => {
                    out.send_calls += 1;
                    out.bytes_sent += n as u64;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A full queue, a firewall or an ICMP error: this
                // transaction is lost.
                Err(e) if transient(&e) => {
                    out.lost += 1;
                    last = clock::now_ns();
                    continue 'transactions;
                }
                Err(e) => return Err(EngineError::io("UDP send", e)),
            }
        }
        let deadline = p.spin.then(|| Instant::now() + timeout);
        loop {
            match link.recv(&mut resp) {
                Ok(None) => out.recv_calls += 1,
                Ok(Some(n)) => {
                    out.recv_calls += 1;
                    if n >= tag && resp[..tag] == mark[..tag] {
                        out.bytes_received += n as u64;
                        break;
                    }
                    out.stale += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if p.spin && e.kind() == io::ErrorKind::WouldBlock => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        out.lost += 1;
                        last = clock::now_ns();
                        continue 'transactions;
                    }
                    std::hint::spin_loop();
                }
                Err(e) if no_datagram(&e) => {
                    out.lost += 1;
                    last = clock::now_ns();
                    continue 'transactions;
                }
                Err(e) => return Err(EngineError::io("UDP receive", e)),
            }
        }
        out.transactions += 1;
        live.publish_transactions(out.transactions);
        if p.timing {
            let now = clock::now_ns();
            lat.record(now.wrapping_sub(sent_at));
            last = now;
        }
    }
    out.elapsed = start.elapsed();
    out.latency = lat.summary();
    if p.spin {
        let _ = sock.set_nonblocking(false);
    }
    Ok(out)
}

/// UDP requester in burst mode: `burst + 1` requests in flight, each
/// response matched to its request by the tag it echoes.
fn udp_requester_burst(
    link: Link<'_>,
    p: &Requester,
    timeout: Duration,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    let tag = tag_len(p.req, p.resp);
    let window = p.burst as usize + 1;
    // How many sequence numbers the tag tells apart.
    let distinct = proto::test::udp_rr_distinct_tags(p.req, p.resp);
    if window as u64 > distinct {
        return Err(EngineError::Invalid(format!(
            "{window} UDP_RR transactions in flight cannot be told apart by a {tag}-byte tag"
        )));
    }
    let sock = link.socket();
    let mut req = vec![b'r'; p.req.max(1)];
    let mut resp = vec![0u8; p.resp.max(1).max(tag)];
    prepare_udp(sock, p.spin, timeout)?;
    let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let limit = match p.until {
        Until::Stopped => u64::MAX,
        Until::Transactions(n) => n,
    };
    // (sequence number, send time) of each request in flight, oldest first.
    let mut in_flight: VecDeque<(u64, u64)> = VecDeque::with_capacity(window);
    let mut lat = Latency::new();
    let mut out = RrOutcome::default();
    // The clock is read once per datagram received (for the latency and
    // the timeouts); a request refilled after it takes that as its send time.
    let start = clock::now_ns();
    let mut now = start;
    // The last request sent or response received: the test's end. Waiting
    // out the timeout of requests that will never be answered is not part
    // of it (at the end of a test a burst's last window is often short of a
    // few datagrams that a socket buffer dropped).
    let mut end = start;
    let mut seq = 0u64;
    loop {
        // The requests in flight must span fewer sequence numbers than the
        // tag tells apart (an unanswered one holds the span open until it
        // times out), so that no two of them carry the same tag.
        while in_flight.len() < window
            && seq < limit
            && in_flight
                .front()
                .is_none_or(|&(oldest, _)| seq - oldest < distinct)
            && !stop.is_set()
        {
            req[..tag].copy_from_slice(&seq.to_le_bytes()[..tag]);
            seq += 1;
            loop {
                match link.send(&req) {
                    Ok(n) => {
                        out.send_calls += 1;
                        out.bytes_sent += n as u64;
                        in_flight.push_back((seq - 1, now));
                        end = now;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // A full queue, a firewall or an ICMP error: this
                    // transaction is lost.
                    Err(e) if transient(&e) => out.lost += 1,
                    Err(e) => return Err(EngineError::io("UDP send", e)),
                }
                break;
            }
        }
        if in_flight.is_empty() {
            break;
        }
        match link.recv(&mut resp) {
            Ok(None) => out.recv_calls += 1,
            Ok(Some(n)) => {
                out.recv_calls += 1;
                now = clock::now_ns();
                let answered = (n >= tag)
                    .then(|| {
                        in_flight
                            .iter()
                            .position(|(s, _)| s.to_le_bytes()[..tag] == resp[..tag])
                    })
                    .flatten();
                match answered.and_then(|i| in_flight.remove(i)) {
                    Some((_, sent_at)) => {
                        end = now;
                        out.bytes_received += n as u64;
                        out.transactions += 1;
                        live.publish_transactions(out.transactions);
                        if p.timing {
                            lat.record(now.wrapping_sub(sent_at));
                        }
                    }
                    None => out.stale += 1,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if no_datagram(&e) => {
                if p.spin {
                    std::hint::spin_loop();
                }
                now = clock::now_ns();
            }
            Err(e) => return Err(EngineError::io("UDP receive", e)),
        }
        // Every request older than the timeout is lost; its place is free.
        while in_flight
            .front()
            .is_some_and(|&(_, t)| now.wrapping_sub(t) >= timeout_ns)
        {
            in_flight.pop_front();
            out.lost += 1;
        }
    }
    out.elapsed = Duration::from_nanos(end.wrapping_sub(start));
    out.latency = lat.summary();
    if p.spin {
        let _ = sock.set_nonblocking(false);
    }
    Ok(out)
}

/// UDP responder (netserver's side of UDP_RR): answer every request with a
/// response carrying its tag, until `stop` is raised (netperf is done).
pub fn udp_responder(
    link: Link<'_>,
    req: usize,
    resp: usize,
    spin: bool,
    stop: &StopFlag,
    live: &Live,
) -> Result<ResponderOutcome, EngineError> {
    let tag = tag_len(req, resp);
    // Room for a request larger than announced: it is still answered.
    let mut reqbuf = vec![0u8; req.max(tag).max(1) + 1];
    let mut respbuf = vec![b'R'; resp.max(1)];
    let sock = link.socket();
    if spin {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making the socket non-blocking", e))?;
    } else {
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    }
    let mut out = ResponderOutcome::default();
    let start = Instant::now();
    loop {
        match link.recv(&mut reqbuf) {
            // from someone else: not answered
            Ok(None) => {}
            Ok(Some(n)) => {
                out.recv_calls += 1;
                out.bytes_received += n as u64;
                let t = tag.min(n);
                respbuf[..t].copy_from_slice(&reqbuf[..t]);
                match link.send(&respbuf) {
                    Ok(m) => {
                        out.send_calls += 1;
                        out.bytes_sent += m as u64;
                        out.transactions += 1;
                        live.publish(out.bytes_received, out.transactions);
                    }
                    Err(e) if transient(&e) => {}
                    Err(e) => return Err(EngineError::io("UDP send", e)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if no_datagram(&e) => {
                if stop.is_set() {
                    break;
                }
                if spin {
                    std::hint::spin_loop();
                }
            }
            Err(e) => return Err(EngineError::io("UDP receive", e)),
        }
    }
    out.elapsed = start.elapsed();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tcp_pair as pair, udp_pair};
    use std::thread;

    fn params(until: Until) -> Requester {
        Requester {
            req: 64,
            resp: 1024,
            burst: 0,
            until,
            timing: true,
            spin: false,
        }
    }

    #[test]
    fn tcp_exact_transactions_and_bytes() {
        for (burst, spin) in [(0, false), (4, false), (0, true)] {
            let (c, s) = pair();
            let srv =
                thread::spawn(move || tcp_responder(&s, 64, 1024, spin, &Live::new()).unwrap());
            let mut p = params(Until::Transactions(2000));
            p.burst = burst;
            p.spin = spin;
            let o = tcp_requester(&c, &p, &StopFlag::new(), &Live::new()).unwrap();
            let r = srv.join().unwrap();
            assert_eq!(o.transactions, 2000);
            assert_eq!(r.transactions, 2000);
            assert_eq!(o.bytes_sent, 2000 * 64);
            assert_eq!(r.bytes_received, 2000 * 64);
            assert_eq!(o.bytes_received, 2000 * 1024);
            assert_eq!(r.bytes_sent, 2000 * 1024);
            let l = o.latency.unwrap();
            assert_eq!(l.count, 2000);
            assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max);
        }
    }

    #[test]
    fn one_send_and_one_receive_per_transaction() {
        let (c, s) = pair();
        let srv = thread::spawn(move || tcp_responder(&s, 1, 1, false, &Live::new()).unwrap());
        let mut p = params(Until::Transactions(1000));
        p.req = 1;
        p.resp = 1;
        let o = tcp_requester(&c, &p, &StopFlag::new(), &Live::new()).unwrap();
        let r = srv.join().unwrap();
        assert_eq!((o.send_calls, o.recv_calls), (1000, 1000));
        assert_eq!((r.send_calls, r.recv_calls), (1000, 1001));
    }

    fn udp_request(
        a: &UdpSocket,
        p: &Requester,
        timeout: Duration,
    ) -> Result<RrOutcome, EngineError> {
        udp_requester(
            Link::connected(a),
            p,
            timeout,
            &StopFlag::new(),
            &Live::new(),
        )
    }

    #[test]
    fn udp_counts_and_tags() {
        let (a, b) = udp_pair();
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let srv = thread::spawn(move || {
            udp_responder(Link::connected(&b), 1, 1, false, &s2, &Live::new()).unwrap()
        });
        let mut p = params(Until::Transactions(3000));
        p.req = 1;
        p.resp = 1;
        let o = udp_request(&a, &p, Duration::from_secs(1)).unwrap();
        stop.set();
        let r = srv.join().unwrap();
        assert_eq!(o.transactions + o.lost, 3000);
        assert_eq!(r.transactions, o.transactions + o.stale);
        assert_eq!(o.latency.unwrap().count, o.transactions);
    }

    /// Echoes every request but drops the responses to sequence numbers
    /// that `lose` picks, as a lossy network would.
    fn lossy_responder(
        b: UdpSocket,
        tag: usize,
        resp: usize,
        lose: fn(u64) -> bool,
        stop: StopFlag,
    ) -> u64 {
        b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut buf = [0u8; 2048];
        let mut answered = 0;
        while !stop.is_set() {
            let Ok(n) = b.recv(&mut buf) else { continue };
            let mut s = [0u8; 8];
            s[..tag].copy_from_slice(&buf[..tag.min(n)]);
            if !lose(u64::from_le_bytes(s)) {
                b.send(&buf[..resp]).unwrap();
                answered += 1;
            }
        }
        answered
    }

    #[test]
    fn udp_burst_counts_every_transaction_and_survives_loss() {
        // A window wide enough for the 50 unanswered requests, which hold
        // their places for the generous timeout (1 s: a responder starved
        // of CPU by other tests must not look lossy).
        for (burst, spin) in [(63, false), (63, true)] {
            let (a, b) = udp_pair();
            let stop = StopFlag::new();
            let s2 = stop.clone();
            // Every 100th request goes unanswered.
            let srv = thread::spawn(move || lossy_responder(b, 8, 64, |s| s % 100 == 99, s2));
            let mut p = params(Until::Transactions(5000));
            p.req = 16;
            p.resp = 64;
            p.burst = burst;
            p.spin = spin;
            let wall = Instant::now();
            let o = udp_request(&a, &p, Duration::from_secs(1)).unwrap();
            let wall = wall.elapsed();
            stop.set();
            let answered = srv.join().unwrap();
            // The last request (4999) is never answered: waiting out its
            // 1 s timeout is not part of the test (the answers to the
            // requests sent just before it may take a while on a busy
            // machine, hence only half of it).
            assert!(
                wall >= o.elapsed + Duration::from_millis(500),
                "{wall:?} {o:?}"
            );
            assert_eq!(o.lost, 50, "burst {burst}");
            assert_eq!(o.transactions, 4950, "burst {burst}");
            assert_eq!(answered, 4950);
            assert_eq!(o.send_calls, 5000);
            assert_eq!(o.bytes_received, 4950 * 64);
            assert_eq!(o.stale, 0);
            assert_eq!(o.latency.unwrap().count, 4950);
        }
    }

    /// 1-byte tags and request 0 lost: while it waits out its timeout, the
    /// other requests go on, but request 256 (the same tag) must wait until
    /// request 0 has timed out, or its response would be taken for request
    /// 0's.
    #[test]
    fn udp_burst_never_has_two_requests_with_one_tag_in_flight() {
        let (a, b) = udp_pair();
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let srv = thread::spawn(move || {
            b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let mut buf = [0u8; 16];
            let mut k = 0u64;
            let (mut first, mut again) = (None, None);
            while !s2.is_set() {
                let Ok(n) = b.recv(&mut buf) else { continue };
                match k {
                    0 => first = Some(Instant::now()),
                    256 => again = Some(Instant::now()),
                    _ => {}
                }
                if k != 0 {
                    b.send(&buf[..n]).unwrap();
                }
                k += 1;
            }
            again.unwrap() - first.unwrap()
        });
        let mut p = params(Until::Transactions(1000));
        p.req = 1;
        p.resp = 1;
        p.burst = 7;
        let timeout = Duration::from_millis(200);
        let o = udp_request(&a, &p, timeout).unwrap();
        stop.set();
        let gap = srv.join().unwrap();
        assert!(gap >= timeout - Duration::from_millis(5), "{gap:?}");
        assert_eq!((o.transactions, o.lost, o.stale), (999, 1, 0));
    }

    #[test]
    fn udp_burst_window_must_fit_the_tag() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut p = params(Until::Transactions(1));
        p.req = 1;
        p.resp = 1;
        p.burst = 256;
        let e = udp_request(&a, &p, Duration::from_millis(10)).unwrap_err();
        assert!(e.to_string().contains("1-byte tag"), "{e}");
    }

    #[test]
    fn udp_lost_response_does_not_hang() {
        // Nobody answers: every transaction times out and is counted lost.
        let (a, b) = udp_pair();
        let p = params(Until::Transactions(5));
        let start = Instant::now();
        let o = udp_request(&a, &p, Duration::from_millis(20)).unwrap();
        assert_eq!(o.lost, 5);
        assert_eq!(o.transactions, 0);
        assert!(start.elapsed() < Duration::from_secs(2));
        drop(b);
    }

    #[test]
    fn tags() {
        assert_eq!(tag_len(1, 1), 1);
        assert_eq!(tag_len(64, 1024), 8);
        assert_eq!(tag_len(4, 100), 4);
        assert_eq!(tag_len(0, 0), 1);
    }
}
