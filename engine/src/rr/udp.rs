//! UDP_RR: tagged requests and their echoes, over a connected socket or
//! to an address ([`Link`]).

use std::{
    io,
    net::UdpSocket,
    time::{Duration, Instant},
};

use super::{Requester, RrOutcome, Until, window::Window};
use crate::{
    EngineError, clock,
    conventions::{Conventions, UdpEnd},
    error::no_datagram,
    flow::Ended,
    latency::Latency,
    live::Live,
    stream::udp::{Link, end_datagrams, transient},
    timer::StopFlag,
};

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

/// UDP requester (netperf's side of UDP_RR). The conventions say whether
/// messages carry tags (without, a response answers the oldest request in
/// flight) and how the responder learns that we are done.
pub fn udp_requester(
    link: Link<'_>,
    p: &Requester,
    conv: &Conventions,
    timeout: Duration,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    let tag = conv.udp_rr_tag_len(p.req, p.resp);
    // The burst loop would do with a window of one, but it reads the clock
    // for every datagram and searches its window: 155 to 185 more
    // instructions per transaction (callgrind) on the default path.
    let r = if p.burst > 0 {
        udp_requester_burst(link, p, tag, timeout, stop, live)
    } else {
        udp_requester_one(link, p, tag, timeout, stop, live)
    };
    end_datagrams(link, conv);
    r
}

/// One request in flight at a time.
fn udp_requester_one(
    link: Link<'_>,
    p: &Requester,
    tag: usize,
    timeout: Duration,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    let sock = link.socket();
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
            && out.counters.transactions + out.lost >= n
        {
            break;
        }
        let mark = seq.to_le_bytes();
        let mark = mark.get(..tag).unwrap_or_default();
        if let Some(t) = req.get_mut(..tag) {
            t.copy_from_slice(mark);
        }
        seq += 1;
        let sent_at = last;
        if !send_request(&link, &req, &mut out)? {
            out.lost += 1;
            last = clock::now_ns();
            continue;
        }
        let deadline = p.spin.then(|| Instant::now() + timeout);
        // Others' datagrams must not keep restarting the receive timeout:
        // from the first of them, the transaction has `timeout` left.
        let mut give_up: Option<Instant> = None;
        loop {
            match link.recv(&mut resp) {
                Ok(None) => {
                    out.counters.recv_calls += 1;
                    let now = Instant::now();
                    if now >= *give_up.get_or_insert(now + timeout) {
                        out.lost += 1;
                        last = clock::now_ns();
                        continue 'transactions;
                    }
                }
                Ok(Some(n)) => {
                    out.counters.recv_calls += 1;
                    if n >= tag && resp.get(..tag) == Some(mark) {
                        out.counters.bytes_received += n as u64;
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
        out.counters.transactions += 1;
        live.publish_transactions(out.counters.transactions);
        if p.timing {
            let now = clock::now_ns();
            lat.record(now.wrapping_sub(sent_at));
            last = now;
        }
    }
    out.elapsed = start.elapsed();
    out.latency = lat.summary();
    if out.latency.is_some() {
        out.histogram = Some(Box::new(lat));
    }
    if p.spin {
        let _ = sock.set_nonblocking(false);
    }
    Ok(out)
}

/// One request sent (again where a signal interrupted the call); false
/// where the kernel refused it for a passing reason (a full queue, a
/// firewall, an ICMP error): its transaction is lost.
#[inline]
fn send_request(link: &Link<'_>, req: &[u8], out: &mut RrOutcome) -> Result<bool, EngineError> {
    loop {
        match link.send(req) {
            Ok(n) => {
                out.counters.send_calls += 1;
                out.counters.bytes_sent += n as u64;
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if transient(&e) => return Ok(false),
            Err(e) => return Err(EngineError::io("UDP send", e)),
        }
    }
}

/// UDP requester in burst mode: `burst + 1` requests in flight, each
/// response matched to its request by the tag it echoes.
fn udp_requester_burst(
    link: Link<'_>,
    p: &Requester,
    tag: usize,
    timeout: Duration,
    stop: &StopFlag,
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    let window = p.burst as usize + 1;
    // How many sequence numbers the tag tells apart (without tags, a
    // response is taken for the oldest request's).
    let distinct = if tag == 0 {
        u64::MAX
    } else {
        proto::test::udp_rr_distinct_tags(p.req, p.resp)
    };
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
    let mut in_flight = Window::new(window);
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
        // No two requests in flight may carry the same tag.
        while seq < limit && in_flight.may_send(seq, distinct) && !stop.is_set() {
            if let (Some(t), Some(s)) = (req.get_mut(..tag), seq.to_le_bytes().get(..tag)) {
                t.copy_from_slice(s);
            }
            seq += 1;
            loop {
                match link.send(&req) {
                    Ok(n) => {
                        out.counters.send_calls += 1;
                        out.counters.bytes_sent += n as u64;
                        in_flight.push(seq - 1, now);
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
            Ok(None) => out.counters.recv_calls += 1,
            Ok(Some(n)) => {
                out.counters.recv_calls += 1;
                now = clock::now_ns();
                let answered = resp.get(..tag).filter(|_| n >= tag);
                match answered.and_then(|t| in_flight.answer(t)) {
                    Some(sent_at) => {
                        end = now;
                        out.counters.bytes_received += n as u64;
                        out.counters.transactions += 1;
                        live.publish_transactions(out.counters.transactions);
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
        out.lost += in_flight.expire(now, timeout_ns);
    }
    out.elapsed = Duration::from_nanos(end.wrapping_sub(start));
    out.latency = lat.summary();
    if out.latency.is_some() {
        out.histogram = Some(Box::new(lat));
    }
    if p.spin {
        let _ = sock.set_nonblocking(false);
    }
    Ok(out)
}

/// UDP responder (netserver's side of UDP_RR): answer every request with a
/// response carrying its tag (when the conventions tag them), until `stop`
/// is raised (netperf is done) or, by netperf 2.7's conventions, an empty
/// datagram arrives.
pub fn udp_responder(
    link: Link<'_>,
    conv: &Conventions,
    req: usize,
    resp: usize,
    spin: bool,
    stop: &StopFlag,
    live: &Live,
) -> Result<Ended, EngineError> {
    let tag = conv.udp_rr_tag_len(req, resp);
    let empty_ends = matches!(conv.udp_end, UdpEnd::EmptyDatagrams(_));
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
    let mut out = Ended::default();
    let start = Instant::now();
    loop {
        match link.recv(&mut reqbuf) {
            // from someone else: not answered, but a flood of them must
            // not keep the test from ending
            Ok(None) => {
                if stop.is_set() {
                    break;
                }
            }
            Ok(Some(0)) if empty_ends => break,
            Ok(Some(n)) => {
                out.counters.recv_calls += 1;
                out.counters.bytes_received += n as u64;
                let t = tag.min(n);
                if let (Some(to), Some(from)) = (respbuf.get_mut(..t), reqbuf.get(..t)) {
                    to.copy_from_slice(from);
                }
                match link.send(&respbuf) {
                    Ok(m) => {
                        out.counters.send_calls += 1;
                        out.counters.bytes_sent += m as u64;
                        out.counters.transactions += 1;
                        live.publish(out.counters.bytes_received, out.counters.recv_calls);
                        live.publish_transactions(out.counters.transactions);
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
    use crate::{
        rr::{params, tag_len},
        testing::udp_pair,
    };
    use std::{net::UdpSocket, thread};

    fn udp_request(
        a: &UdpSocket,
        p: &Requester,
        timeout: Duration,
    ) -> Result<RrOutcome, EngineError> {
        udp_requester(
            Link::connected(a),
            p,
            &Conventions::NATIVE,
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
            udp_responder(
                Link::connected(&b),
                &Conventions::NATIVE,
                1,
                1,
                false,
                &s2,
                &Live::new(),
            )
            .unwrap()
        });
        let mut p = params(Until::Transactions(3000));
        p.req = 1;
        p.resp = 1;
        let o = udp_request(&a, &p, Duration::from_secs(1)).unwrap();
        stop.set();
        let r = srv.join().unwrap();
        assert_eq!(o.counters.transactions + o.lost, 3000);
        assert_eq!(r.counters.transactions, o.counters.transactions + o.stale);
        assert_eq!(o.latency.unwrap().count, o.counters.transactions);
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
            assert_eq!(o.counters.transactions, 4950, "burst {burst}");
            assert_eq!(answered, 4950);
            assert_eq!(o.counters.send_calls, 5000);
            assert_eq!(o.counters.bytes_received, 4950 * 64);
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
        assert_eq!((o.counters.transactions, o.lost, o.stale), (999, 1, 0));
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
        assert_eq!(o.counters.transactions, 0);
        assert!(start.elapsed() < Duration::from_secs(2));
        drop(b);
    }

    /// netperf 2.7's conventions: the request goes as it is (no tag), a
    /// response answers the oldest request, and the requester's empty
    /// datagrams end the responder, with no stop flag raised.
    #[test]
    fn netperf2_udp_rr_is_untagged_and_ends_with_empty_datagrams() {
        let conv = Conventions::NETPERF2;
        for burst in [0, 4] {
            let (a, b) = udp_pair();
            let never = StopFlag::new();
            let srv = thread::spawn(move || {
                udp_responder(
                    Link::connected(&b),
                    &conv,
                    16,
                    32,
                    false,
                    &never,
                    &Live::new(),
                )
                .unwrap()
            });
            // what the responder sees: a peer that records the bytes
            let mut p = params(Until::Transactions(500));
            (p.req, p.resp, p.burst) = (16, 32, burst);
            let o = udp_requester(
                Link::connected(&a),
                &p,
                &conv,
                Duration::from_secs(1),
                &StopFlag::new(),
                &Live::new(),
            )
            .unwrap();
            let r = srv.join().unwrap();
            assert_eq!(o.counters.transactions + o.lost, 500, "burst {burst}");
            assert_eq!(r.counters.transactions, 500);
            assert_eq!(r.counters.bytes_received, 500 * 16);
            assert_eq!(o.stale, 0);
        }
        // the request's bytes are untouched by a tag
        let (a, b) = udp_pair();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut p = params(Until::Transactions(1));
        (p.req, p.resp) = (8, 8);
        let t = thread::spawn(move || {
            udp_requester(
                Link::connected(&a),
                &p,
                &conv,
                Duration::from_millis(50),
                &StopFlag::new(),
                &Live::new(),
            )
        });
        let mut buf = [0u8; 16];
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"rrrrrrrr");
        let _ = t.join();
    }

    #[test]
    fn tags() {
        assert_eq!(tag_len(1, 1), 1);
        assert_eq!(tag_len(64, 1024), 8);
        assert_eq!(tag_len(4, 100), 4);
        assert_eq!(tag_len(0, 0), 1);
    }
}
