//! TCP_RR over a blocking (or, spinning, non-blocking) socket: the
//! drivers of [`RrRequest`] and [`RrRespond`].
//!
//! Without a burst the requester sends the whole request, then receives
//! the whole response: one send and one receive call per transaction, one
//! clock read. With a burst, the flow's [`RrRequest::next`] says what to
//! do, and a [`Window`] keeps the send times.

use std::{
    io::{self, Read, Write},
    net::{Shutdown, TcpStream},
    time::{Duration, Instant},
};

use super::{Requester, RrOutcome, window::Window};
use crate::{
    EngineError, clock,
    error::timed_out,
    flow::{Ended, Io, RrRequest, RrRespond},
    latency::Latency,
    live::Live,
    timer::StopFlag,
};

/// One send call: the bytes it took, or `None` to try again (interrupted,
/// or a spinning socket's full buffer).
#[inline(always)]
fn send_once(s: &TcpStream, buf: &[u8], spin: bool) -> Result<Option<usize>, EngineError> {
    match (&*s).write(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) if spin && timed_out(&e) => {
            std::hint::spin_loop();
            Ok(None)
        }
        Err(e) => Err(EngineError::io("send on the data connection", e)),
    }
}

/// One receive call: the bytes it returned (0: the peer's end), or `None`
/// to try again.
#[inline(always)]
fn recv_once(s: &TcpStream, buf: &mut [u8], spin: bool) -> Result<Option<usize>, EngineError> {
    match (&*s).read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) if spin && e.kind() == io::ErrorKind::WouldBlock => {
            std::hint::spin_loop();
            Ok(None)
        }
        Err(e) if timed_out(&e) => Err(EngineError::Timeout(
            "the data connection went silent in the middle of a test".into(),
        )),
        Err(e) => Err(EngineError::io("receive on the data connection", e)),
    }
}

fn closed_early() -> EngineError {
    EngineError::Invalid("the netserver closed the data connection during the test".into())
}

fn mid_message() -> EngineError {
    EngineError::Invalid("the peer closed the data connection in the middle of a message".into())
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
    let mut flow = RrRequest::new(req.len(), resp.len(), p.burst, p.until.limit());
    let mut lat = Latency::new();
    let start = Instant::now();
    let mut last = clock::now_ns();
    if p.burst == 0 {
        // One transaction at a time: the whole request, the whole
        // response, one clock read. The windowed loop below would do, but
        // asking the flow before every call and keeping send times costs
        // 30 to 44 more instructions per transaction (callgrind), on the
        // path that must cost no more than netperf's.
        while flow.may_request() && !stop.is_set() {
            let (mut off, mut sends) = (0, 0);
            while let Some(rest) = req.get(off..).filter(|r| !r.is_empty()) {
                if let Some(n) = send_once(conn, rest, p.spin)? {
                    off += n;
                    sends += 1;
                }
            }
            let (mut off, mut recvs) = (0, 0);
            while let Some(rest) = resp.get_mut(off..).filter(|r| !r.is_empty()) {
                match recv_once(conn, rest, p.spin)? {
                    Some(0) => return Err(closed_early()),
                    Some(n) => {
                        off += n;
                        recvs += 1;
                    }
                    None => {}
                }
            }
            flow.whole(sends, recvs);
            live.publish_transactions(flow.counters.transactions);
            if p.timing {
                let now = clock::now_ns();
                lat.record(now.wrapping_sub(last));
                last = now;
            }
        }
    } else {
        // Burst: the flow keeps `burst` more requests in flight; responses
        // come back in order, so the oldest send time is the answered one's.
        let mut sent_at = Window::new(p.burst as usize + 1);
        loop {
            match flow.next() {
                Io::Send { offset, len } => {
                    if offset == 0 && stop.is_set() {
                        flow.stop();
                        continue;
                    }
                    let Some(buf) = req.get(offset..offset + len) else {
                        return Err(EngineError::Invalid("request window out of range".into()));
                    };
                    if let Some(n) = send_once(conn, buf, p.spin)? {
                        if offset == 0 {
                            sent_at.push(0, last);
                        }
                        flow.sent(n);
                    }
                }
                Io::Recv { offset, len } => {
                    let Some(buf) = resp.get_mut(offset..offset + len) else {
                        return Err(EngineError::Invalid("response window out of range".into()));
                    };
                    match recv_once(conn, buf, p.spin)? {
                        Some(0) => return Err(closed_early()),
                        Some(n) if flow.received(n) => {
                            live.publish_transactions(flow.counters.transactions);
                            let t0 = sent_at.pop_oldest().unwrap_or(last);
                            if p.timing {
                                last = clock::now_ns();
                                lat.record(last.wrapping_sub(t0));
                            }
                        }
                        Some(_) | None => {}
                    }
                }
                Io::Done | Io::Connect | Io::Close => break,
            }
        }
    }
    close_and_wait(conn, p.spin)?;
    Ok(RrOutcome {
        counters: flow.counters,
        elapsed: start.elapsed(),
        latency: lat.summary(),
        ..RrOutcome::default()
    })
}

/// The requester's end: our side shut, then the responder's end-of-file
/// awaited, so that its count is final.
fn close_and_wait(conn: &TcpStream, spin: bool) -> Result<(), EngineError> {
    if spin {
        let _ = conn.set_nonblocking(false);
    }
    conn.shutdown(Shutdown::Write)
        .map_err(|e| EngineError::io("shutting down the data connection", e))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut scratch = [0u8; 64];
    loop {
        match (&*conn).read(&mut scratch) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(EngineError::io("waiting for the netserver to close", e)),
        }
    }
}

/// TCP responder (netserver's side of TCP_RR): answer each request until
/// the requester's end-of-file, then close our side.
pub fn tcp_responder(
    conn: &TcpStream,
    req: usize,
    resp: usize,
    spin: bool,
    live: &Live,
) -> Result<Ended, EngineError> {
    if spin {
        conn.set_nonblocking(true)
            .map_err(|e| EngineError::io("making the socket non-blocking", e))?;
    }
    let mut reqbuf = vec![0u8; req.max(1)];
    let respbuf = vec![b'R'; resp.max(1)];
    let mut flow = RrRespond::new(reqbuf.len(), respbuf.len());
    let start = Instant::now();
    loop {
        match flow.next() {
            Io::Recv { offset, len } => {
                let Some(buf) = reqbuf.get_mut(offset..offset + len) else {
                    return Err(EngineError::Invalid("request out of range".into()));
                };
                if let Some(n) = recv_once(conn, buf, spin)? {
                    flow.received(n).map_err(|_| mid_message())?;
                }
            }
            Io::Send { offset, len } => {
                let Some(buf) = respbuf.get(offset..offset + len) else {
                    return Err(EngineError::Invalid("response out of range".into()));
                };
                if let Some(n) = send_once(conn, buf, spin)?
                    && flow.sent(n)
                {
                    let c = &flow.counters;
                    live.publish(c.bytes_received, c.recv_calls);
                    live.publish_transactions(c.transactions);
                }
            }
            Io::Done | Io::Connect | Io::Close => break,
        }
    }
    let elapsed = start.elapsed();
    if spin {
        let _ = conn.set_nonblocking(false);
    }
    let _ = conn.shutdown(Shutdown::Write);
    Ok(Ended {
        counters: flow.counters,
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        rr::{Until, params},
        testing::tcp_pair as pair,
    };
    use std::thread;

    #[test]
    fn tcp_exact_transactions_and_bytes() {
        for (burst, spin) in [(0, false), (4, false), (0, true), (4, true)] {
            let (c, s) = pair();
            let srv =
                thread::spawn(move || tcp_responder(&s, 64, 1024, spin, &Live::new()).unwrap());
            let mut p = params(Until::Transactions(2000));
            p.burst = burst;
            p.spin = spin;
            let o = tcp_requester(&c, &p, &StopFlag::new(), &Live::new()).unwrap();
            let r = srv.join().unwrap().counters;
            let o_ = o.counters;
            assert_eq!(o_.transactions, 2000);
            assert_eq!(r.transactions, 2000);
            assert_eq!(o_.bytes_sent, 2000 * 64);
            assert_eq!(r.bytes_received, 2000 * 64);
            assert_eq!(o_.bytes_received, 2000 * 1024);
            assert_eq!(r.bytes_sent, 2000 * 1024);
            let l = o.latency.unwrap();
            assert_eq!(l.count, 2000);
            assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max);
        }
    }

    #[test]
    fn one_send_and_one_receive_per_transaction() {
        for burst in [0, 3] {
            let (c, s) = pair();
            let srv = thread::spawn(move || tcp_responder(&s, 1, 1, false, &Live::new()).unwrap());
            let mut p = params(Until::Transactions(1000));
            p.req = 1;
            p.resp = 1;
            p.burst = burst;
            let o = tcp_requester(&c, &p, &StopFlag::new(), &Live::new())
                .unwrap()
                .counters;
            let r = srv.join().unwrap().counters;
            assert_eq!((o.send_calls, o.recv_calls), (1000, 1000), "burst {burst}");
            assert_eq!((r.send_calls, r.recv_calls), (1000, 1001));
        }
    }

    #[test]
    fn a_stopped_burst_answers_what_is_in_flight() {
        let (c, s) = pair();
        let srv = thread::spawn(move || tcp_responder(&s, 8, 8, false, &Live::new()).unwrap());
        let mut p = params(Until::Stopped);
        (p.req, p.resp, p.burst) = (8, 8, 7);
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            s2.set();
        });
        let o = tcp_requester(&c, &p, &stop, &Live::new()).unwrap();
        t.join().unwrap();
        let r = srv.join().unwrap();
        assert!(o.counters.transactions > 0);
        assert_eq!(o.counters.transactions, r.counters.transactions);
        assert_eq!(o.counters.bytes_sent, r.counters.bytes_received);
    }
}
