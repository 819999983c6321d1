//! Many TCP_CRR (and TCP_CC) requesters per thread: each flow a
//! [`CrrRequest`] whose connections connect without blocking, from the
//! flow's own slice of the port range, one after another as one flow's
//! blocking loop opens them; a few threads whatever the number of flows.

use std::{
    io::{self, Read, Write},
    net::Shutdown,
    time::{Duration, Instant},
};

use mio::{Events, Interest, Poll, Token, net::TcpStream};

use super::{spread, wait};
use crate::{
    EngineError, clock,
    conventions::Closer,
    crr::{CrrRequester, Ports, fill_request, open},
    flow::{CrrRequest, Io},
    latency::Latency,
    live::Live,
    rr::RrOutcome,
    timer::StopFlag,
};

/// How to run them.
#[derive(Clone, Copy, Debug)]
pub struct CrrPlan<'a> {
    /// Threads (at least one, at most one per flow).
    pub threads: usize,
    /// CPUs to pin the threads to, in turn (empty: not pinned).
    pub cpus: &'a [u32],
    /// After the stop flag, how long the connections open may take.
    pub linger: Duration,
}

/// Run one requester a flow (each with its ports, count and flow number)
/// until all are done; each flow's outcome, in order. Each thread's
/// latency histogram is on the first flow it ran.
pub fn run(
    flows: Vec<CrrRequester>,
    plan: &CrrPlan<'_>,
    stop: &StopFlag,
    live: &Live,
) -> Result<Vec<RrOutcome>, EngineError> {
    let n = flows.len();
    let shares = spread(flows, plan.threads, plan.cpus, |share| {
        run_share(share, plan, stop, live)
    })?;
    super::in_order(n, shares, "a TCP_CRR flow")
}

/// Where a flow's connection is.
enum Conn {
    None,
    /// Connecting: writable once it is up (or failed).
    Connecting(TcpStream),
    Open(TcpStream),
    /// Our side shut (when the requester closes first), reading to the
    /// responder's end.
    Closing(TcpStream),
}

struct Flow {
    index: usize,
    p: CrrRequester,
    ports: Ports,
    machine: CrrRequest,
    request: Vec<u8>,
    conn: Conn,
    out: RrOutcome,
    /// When its last transaction ended (the next one's start).
    last_ns: u64,
    published: (u64, u64),
    done: bool,
}

fn run_share(
    share: Vec<(usize, CrrRequester)>,
    plan: &CrrPlan<'_>,
    stop: &StopFlag,
    live: &Live,
) -> Result<Vec<(usize, RrOutcome)>, EngineError> {
    let mut poll = Poll::new().map_err(|e| EngineError::io("creating an event loop", e))?;
    let start = Instant::now();
    let mut flows: Vec<Flow> = share
        .into_iter()
        .map(|(index, p)| Flow {
            index,
            ports: Ports::new(p.ports),
            machine: CrrRequest::new(p.conv.crr_preamble(), p.req, p.resp, p.until.limit()),
            request: fill_request(&p.token, p.flow, p.req, &p.conv),
            p,
            conn: Conn::None,
            out: RrOutcome::default(),
            last_ns: clock::now_ns(),
            published: (0, 0),
            done: false,
        })
        .collect();
    let timing = flows.first().is_some_and(|f| f.p.timing);
    let mut lat = Latency::new();
    let mut resp = vec![0u8; flows.iter().map(|f| f.p.resp).max().unwrap_or(0).max(64)];
    let mut events = Events::with_capacity(1024);
    let mut stopping_since: Option<Instant> = None;
    for (k, f) in flows.iter_mut().enumerate() {
        drive(f, k, &poll, &mut resp, timing, &mut lat)?;
    }
    let mut open = flows.iter().filter(|f| !f.done).count();
    while open > 0 {
        wait(
            &mut poll,
            &mut events,
            Duration::from_millis(20),
            "TCP_CRR connections",
        )?;
        let now = Instant::now();
        if stop.is_set() && stopping_since.is_none() {
            stopping_since = Some(now);
            // every flow learns it at once: the connection open finishes
            for (k, f) in flows.iter_mut().enumerate().filter(|(_, f)| !f.done) {
                f.machine.stop();
                drive(f, k, &poll, &mut resp, timing, &mut lat)?;
            }
        }
        for ev in events.iter() {
            let k = ev.token().0;
            if let Some(f) = flows.get_mut(k).filter(|f| !f.done) {
                drive(f, k, &poll, &mut resp, timing, &mut lat)?;
            }
        }
        for f in &mut flows {
            publish(f, live);
        }
        open = flows.iter().filter(|f| !f.done).count();
        if let Some(since) = stopping_since
            && open > 0
            && now.duration_since(since) > plan.linger
        {
            return Err(EngineError::Timeout(format!(
                "{open} TCP_CRR connections did not close within {} s of the end of the test",
                plan.linger.as_secs()
            )));
        }
    }
    let elapsed = start.elapsed();
    let mut lat = Some(lat).filter(|l| l.count() > 0);
    Ok(flows
        .into_iter()
        .map(|f| {
            let mut out = f.out;
            out.counters = f.machine.counters;
            out.elapsed = elapsed;
            if let Some(l) = lat.take() {
                out.latency = l.summary();
                out.histogram = Some(Box::new(l));
            }
            (f.index, out)
        })
        .collect())
}

/// Drive one flow until its connection would block, or the flow is done.
fn drive(
    f: &mut Flow,
    k: usize,
    poll: &Poll,
    resp: &mut [u8],
    timing: bool,
    lat: &mut Latency,
) -> Result<(), EngineError> {
    loop {
        match std::mem::replace(&mut f.conn, Conn::None) {
            Conn::None => match f.machine.next() {
                Io::Connect => {
                    // (mio's own stream: its calls tell the loop when they
                    // would block, as Windows' loop needs)
                    let mut sock = TcpStream::from_std(open(&f.p, &mut f.ports, true)?.into());
                    poll.registry()
                        .register(&mut sock, Token(k), Interest::READABLE | Interest::WRITABLE)
                        .map_err(|e| EngineError::io("registering a connection", e))?;
                    f.conn = Conn::Connecting(sock);
                }
                Io::Done => {
                    f.done = true;
                    return Ok(());
                }
                _ => return Err(EngineError::Invalid("TCP_CRR: no connection open".into())),
            },
            Conn::Connecting(c) => {
                if !connecting(f, c)? {
                    return Ok(());
                }
            }
            Conn::Open(c) => match f.machine.next() {
                Io::Send { offset, len } => {
                    let buf = f.request.get(offset..offset + len).unwrap_or_default();
                    match (&c).write(buf) {
                        Ok(n) => f.machine.sent(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            f.conn = Conn::Open(c);
                            return Ok(());
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(EngineError::io("sending a request", e)),
                    }
                    f.conn = Conn::Open(c);
                }
                Io::Recv { offset, len } => {
                    let buf = resp.get_mut(offset..offset + len).unwrap_or_default();
                    match (&c).read(buf) {
                        Ok(n) => f.machine.received(n).map_err(|_| {
                            EngineError::io(
                                "receiving a response",
                                io::ErrorKind::UnexpectedEof.into(),
                            )
                        })?,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            f.conn = Conn::Open(c);
                            return Ok(());
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(EngineError::io("receiving a response", e)),
                    }
                    f.conn = Conn::Open(c);
                }
                Io::Close => {
                    if f.p.conv.crr_closer == Closer::Requester {
                        c.shutdown(Shutdown::Write)
                            .map_err(|e| EngineError::io("closing a connection", e))?;
                    }
                    f.conn = Conn::Closing(c);
                }
                Io::Connect | Io::Done => {
                    return Err(EngineError::Invalid(
                        "TCP_CRR: a connection left open".into(),
                    ));
                }
            },
            Conn::Closing(c) => {
                if !closing(f, c, timing, lat)? {
                    return Ok(());
                }
            }
        }
    }
}

/// A connection being made, writable: connected (its MSS read once), or
/// failed; whether to go on (false: still connecting).
fn connecting(f: &mut Flow, c: TcpStream) -> Result<bool, EngineError> {
    if let Some(e) = c
        .take_error()
        .map_err(|e| EngineError::io("connecting", e))?
    {
        return Err(EngineError::io(format!("connect to {}", f.p.server), e));
    }
    match c.peer_addr() {
        Ok(_) => {
            if f.machine.counters.transactions == 0 && f.out.mss.is_none() {
                f.out.mss = crate::sockopt::mss(socket2::SockRef::from(&c));
            }
            f.machine.connected();
            f.conn = Conn::Open(c);
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotConnected => {
            f.conn = Conn::Connecting(c);
            Ok(false)
        }
        Err(e) => Err(EngineError::io(format!("connect to {}", f.p.server), e)),
    }
}

/// A connection read to its end (or its reset), then closed: the
/// transaction's end, timed where asked; whether to go on (false: it
/// would block).
fn closing(
    f: &mut Flow,
    c: TcpStream,
    timing: bool,
    lat: &mut Latency,
) -> Result<bool, EngineError> {
    let mut scratch = [0u8; 64];
    match (&c).read(&mut scratch) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        Ok(_) => {
            f.conn = Conn::Closing(c);
            return Ok(true);
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            f.conn = Conn::Closing(c);
            return Ok(false);
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
            f.conn = Conn::Closing(c);
            return Ok(true);
        }
        Err(e) => return Err(EngineError::io("closing a connection", e)),
    }
    // (closing the socket takes it off the event loop)
    drop(c);
    f.machine.closed();
    if timing {
        let now = clock::now_ns();
        lat.record(now.wrapping_sub(f.last_ns));
        f.last_ns = now;
    }
    Ok(true)
}

/// Add what a flow did since it last added to the run's live counters.
fn publish(f: &mut Flow, live: &Live) {
    let c = f.machine.counters;
    super::publish_flow(
        live,
        f.index,
        &mut f.published,
        c.bytes_received,
        c.transactions,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{conventions::Conventions, crr::responder, rr::Until};

    /// 64 flows of 20 connections each against one responder: each flow
    /// completes its count, the responder counts each flow's by the flow
    /// its connections name.
    #[test]
    fn many_flows_count_every_connection() {
        let l = crate::sockopt::new_socket(proto::Family::V4, proto::Protocol::Tcp).unwrap();
        l.bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        l.listen(1024).unwrap();
        let server = l.local_addr().unwrap().as_socket().unwrap();
        let token = crate::handshake::new_token().unwrap();
        let conv = Conventions::NATIVE;
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let srv = std::thread::spawn(move || {
            let lo = "127.0.0.1".parse().unwrap();
            responder(&l, &token, lo, &conv, 16, 32, 64, &s2, &Live::new()).map(|(_, _, per)| per)
        });
        let flows: Vec<CrrRequester> = (0..64u32)
            .map(|i| CrrRequester {
                server,
                local_ip: "127.0.0.1".parse().unwrap(),
                ports: (0, 0),
                token,
                req: 16,
                resp: 32,
                until: Until::Transactions(20),
                timing: true,
                side: proto::SideSpec::default(),
                local: crate::sockopt::LocalOpts::default(),
                conv,
                flow: i,
            })
            .collect();
        let plan = CrrPlan {
            threads: 2,
            cpus: &[],
            linger: Duration::from_secs(10),
        };
        let out = run(flows, &plan, &StopFlag::new(), &Live::new()).unwrap();
        stop.set();
        let answered = srv.join().unwrap().unwrap();
        let mut timed = 0;
        for (i, o) in out.iter().enumerate() {
            assert_eq!(o.counters.transactions, 20, "flow {i}");
            assert_eq!(o.counters.bytes_received, 20 * 32);
            timed += o.histogram.as_ref().map_or(0, |h| h.count());
            assert_eq!(answered.get(i).copied(), Some(20), "flow {i}");
        }
        assert_eq!(timed, 64 * 20);
        assert!(out[0].mss.is_some());
    }
}
