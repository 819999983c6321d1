//! The server's side of TCP_RR, UDP_RR, TCP_CRR and TCP_CC: it answers.

use std::{
    net::{TcpStream, UdpSocket},
    time::Instant,
};

use engine::{
    crr,
    flow::{Ended, nanos},
    handshake,
    live::Live,
    rr, sockopt,
};
use proto::{ErrorCode, ErrorMsg, SideResults, TestKind};
use socket2::SockRef;

use super::{
    ctl::TestCtl,
    data::{bind_data, bound_port, run_flows_on_loops, run_udp_flows_on_loops},
    proof::{Expect, accept_flows, udp_flow_sockets, udp_hello},
    setup::{GrantSides, Job, Prepared, Setup},
};
use crate::error::{aborted, failed};

pub(crate) fn prepare(setup: &Setup<'_>) -> Result<Prepared, ErrorMsg> {
    let (spec, cfg) = (setup.spec, setup.cfg);
    let protocol = spec.kind.protocol();
    let sock = bind_data(spec, setup.local, cfg, protocol)?;
    // TCP_CRR: a connection reaches accept once it has sent something (or
    // after a second of silence), so that the responder never waits on one
    // that has not (see engine's crr::responder).
    if spec.kind.is_connection_test()
        && setup.conv.crr_preamble() + spec.request_size as usize > 0
        && !spec.defer_accept
    {
        // (where the platform has no deferred accept, the responder waits
        // on the listener and the silent connections together)
        match sockopt::set_defer_accept(&sock, 1) {
            Err(e)
                if e.io_error()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::Unsupported) => {}
            r => r.map_err(|e| failed("data listener", e))?,
        }
    }
    let (send_buf, recv_buf) = sockopt::buffer_sizes(SockRef::from(&sock));
    let token = handshake::new_token().map_err(|e| failed("netserver", e))?;
    let grant = setup.grant(GrantSides {
        data_port: bound_port(&sock)?,
        token,
        bufs: (send_buf, recv_buf),
        sizes: (spec.response_size, spec.request_size),
        widths: (
            u32::from(!spec.kind.is_connection_test() || spec.response_size > 0),
            u32::from(!spec.kind.is_connection_test() || spec.request_size > 0),
        ),
    });
    let memory = spec.buffer_memory(
        proto::test::Ring::new(0, 0),
        proto::test::Ring::new(0, 0),
        engine::cpu::count(),
    );
    let answer = Answer {
        spec: spec.clone(),
        sock,
        token,
        conv: setup.conv,
        peer: setup.peer,
        deadline: Instant::now() + cfg.data_connect_timeout,
        log: cfg.logger.clone(),
        req: spec.request_size as usize,
        resp: spec.response_size as usize,
        bufs: (send_buf, recv_buf),
    };
    let job: Job = match spec.kind {
        TestKind::TcpRr => Box::new(move |ctl: &TestCtl| tcp_rr(answer, ctl)),
        TestKind::UdpRr | TestKind::UdpStamp => Box::new(move |ctl: &TestCtl| udp_rr(answer, ctl)),
        TestKind::TcpCrr | TestKind::TcpCc => Box::new(move |ctl: &TestCtl| tcp_crr(answer, ctl)),
        other => {
            return Err(ErrorMsg::new(
                ErrorCode::Unsupported,
                format!("{other} is not a request/response test"),
            ));
        }
    };
    Ok(Prepared { grant, job, memory })
}

/// What a request/response job answers with: the data socket, the test's
/// token and sizes, where its flows come from and by when.
struct Answer {
    spec: proto::TestSpec,
    sock: socket2::Socket,
    token: proto::Token,
    conv: engine::conventions::Conventions,
    peer: std::net::IpAddr,
    deadline: Instant,
    log: crate::log::Logger,
    req: usize,
    resp: usize,
    /// The data socket's buffers when it was set up.
    bufs: (u32, u32),
}

/// TCP_RR: the flows accepted, then answered (many on the event loops).
fn tcp_rr(a: Answer, ctl: &TestCtl) -> Result<SideResults, ErrorMsg> {
    let Answer {
        spec,
        sock,
        token,
        conv,
        peer,
        deadline,
        log,
        req,
        resp,
        ..
    } = a;
    let expect = Expect {
        conv,
        token: &token,
        peer,
        peer_port: spec.peer_data_port,
    };
    let conns = accept_flows(&sock, &expect, spec.flows, deadline, ctl, &log)?;
    drop(sock);
    if spec.driver(engine::cpu::count()) != proto::Driver::Blocking {
        let role = engine::evloop::Role::Respond {
            req,
            resp,
            burst: spec.burst,
        };
        return run_flows_on_loops(&spec, conns, role, &conv, ctl);
    }
    // the lone flow, on the test's own thread
    let outcomes: Vec<Result<FlowEnd, ErrorMsg>> = engine::flow::together(
        conns.len(),
        |i| {
            let c: &TcpStream = conns
                .get(i)
                .ok_or_else(|| failed("data connection", "no such flow"))?;
            let r = rr::tcp_responder(c, req, resp, spec.spin, &ctl.live);
            let bufs = sockopt::buffer_sizes(SockRef::from(c));
            let tcp = sockopt::tcp_stats(c);
            match r {
                Ok(o) => Ok((o, bufs, tcp)),
                Err(_) if ctl.is_aborted() => Err(aborted()),
                Err(e) => Err(failed("data connection", e)),
            }
        },
        || ErrorMsg::new(ErrorCode::TestFailed, "a flow's thread panicked"),
    );
    drop(conns);
    let mut results = SideResults::default();
    for o in outcomes {
        let (o, bufs, tcp) = o?;
        add(&mut results, &o);
        (results.send_buf_end, results.recv_buf_end) = bufs;
        if results.tcp.is_none() {
            results.tcp = tcp;
        }
    }
    results.close_flows();
    Ok(results)
}

/// UDP_RR: the flows' hellos, then their requests answered.
fn udp_rr(a: Answer, ctl: &TestCtl) -> Result<SideResults, ErrorMsg> {
    let Answer {
        spec,
        sock,
        token,
        conv,
        peer,
        deadline,
        req,
        resp,
        ..
    } = a;
    let sock: UdpSocket = sock.into();
    ctl.register(&sock);
    let expect = Expect {
        conv,
        token: &token,
        peer,
        peer_port: spec.peer_data_port,
    };
    let mut results = SideResults::default();
    if spec.driver(engine::cpu::count()) != proto::Driver::Blocking {
        // a socket per flow, answered on the event loops
        let socks = udp_flow_sockets(&spec, &sock, &token, peer, deadline, ctl)?;
        let role = engine::evloop::udp::UdpRole::Respond { req, resp };
        for e in run_udp_flows_on_loops(&spec, socks, role, conv, &token, ctl)? {
            match e {
                engine::evloop::udp::UdpFlowEnd::Answered(o) => add(&mut results, &o),
                _ => return Err(failed("UDP flow", "ended as no responder does")),
            }
        }
    } else {
        let link = udp_hello(&sock, &expect, spec.connected_udp, deadline, ctl)?;
        // --ecn: the codepoint of every request, counted as it arrives
        let ecn = spec
            .ecn
            .filter(|e| e.count)
            .map(|e| std::cell::RefCell::new(engine::ecn::EcnTally::new(e.interval_ms)));
        let link = match &ecn {
            Some(tally) => {
                engine::ecn::ask_codepoints(&sock).map_err(|e| failed("UDP data socket", e))?;
                link.counting(tally)
            }
            None => link,
        };
        let o = if spec.kind == TestKind::UdpStamp {
            let clock = rr::stamp::skewed(test_skew_ppm(), engine::clock::now_ns());
            rr::stamp_responder(link, &clock, &ctl.stop, &ctl.live)
        } else {
            rr::udp_responder(link, &conv, req, resp, spec.spin, &ctl.stop, &ctl.live)
        }
        .map_err(|e| failed("UDP data socket", e))?;
        add(&mut results, &o);
        results.ecn = ecn.map(|t| t.borrow().report());
    }
    results.close_flows();
    (results.send_buf_end, results.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&sock));
    Ok(results)
}

/// A test's skew of this netserver's clock in its one-way delay probes'
/// answers, parts per million (`RSNETPERF_TEST_SKEW_PPM`, at most 1,000
/// either way): for the tests that show the client removes a drift
/// between two hosts' clocks. 0 unless set, and always 0 in a build
/// without the `test-hooks` feature (every build but the tests').
#[cfg(feature = "test-hooks")]
fn test_skew_ppm() -> f64 {
    std::env::var("RSNETPERF_TEST_SKEW_PPM")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|p| p.is_finite() && p.abs() <= 1000.0)
        .unwrap_or(0.0)
}

#[cfg(not(feature = "test-hooks"))]
fn test_skew_ppm() -> f64 {
    0.0
}

/// TCP_CRR and TCP_CC: connections accepted and answered on a thread per
/// CPU (one for one flow).
fn tcp_crr(a: Answer, ctl: &TestCtl) -> Result<SideResults, ErrorMsg> {
    let Answer {
        spec,
        sock,
        token,
        conv,
        peer,
        log,
        req,
        resp,
        bufs: (send_buf, recv_buf),
        ..
    } = a;
    ctl.register_listener(&sock);
    // as many answering threads as CPUs, for many flows; one for one
    let threads = match spec.driver(engine::cpu::count()) {
        proto::Driver::Loops { threads } | proto::Driver::Uring { threads } => threads as usize,
        proto::Driver::Blocking => 1,
    };
    let flows = spec.flows.max(1) as usize;
    // a lone answering thread counts into the test's live counters (for
    // interim reports); several would overwrite each other's there
    let own = Live::new();
    let live = if threads == 1 { &ctl.live } else { &own };
    let answered = engine::flow::together(
        threads,
        |_| {
            crr::responder(
                &sock, &token, peer, &conv, req, resp, flows, &ctl.stop, live,
            )
            .map_err(|e| {
                if ctl.is_aborted() {
                    aborted()
                } else {
                    failed("data listener", e)
                }
            })
        },
        || failed("data listener", "a responder thread panicked"),
    );
    let mut total = Ended::default();
    let mut refused = 0;
    let mut per_flow = vec![0u64; flows];
    for a in answered {
        let (o, r, f) = a?;
        total.counters = total.counters.plus(o.counters);
        total.elapsed = total.elapsed.max(o.elapsed);
        refused += r;
        for (t, n) in per_flow.iter_mut().zip(f) {
            *t += n;
        }
    }
    ctl.saw_foreign(refused, true);
    if refused > 0 {
        log.warn_limited(
            "bad-token",
            &format!(
                "{}: closed {refused} connection{} that did not present the test's token",
                spec.kind,
                if refused == 1 { "" } else { "s" }
            ),
        );
    }
    let mut results = SideResults::default();
    if flows > 1 {
        // each flow's transactions, and what they moved
        for t in &per_flow {
            let c = proto::FlowCounters {
                transactions: *t,
                bytes_received: t * req as u64,
                bytes_sent: t * resp as u64,
                recv_calls: 0,
                send_calls: 0,
            };
            results.add_flow(&c, nanos(total.elapsed));
        }
        results.set_totals(&total.counters);
    } else {
        add(&mut results, &total);
    }
    results.close_flows();
    (results.send_buf_end, results.recv_buf_end) = (send_buf, recv_buf);
    Ok(results)
}

/// A flow's counts, its socket buffer sizes and TCP_INFO at the end.
type FlowEnd = (Ended, (u32, u32), Option<proto::TcpStats>);

fn add(r: &mut SideResults, o: &Ended) {
    r.add_flow(&o.counters, nanos(o.elapsed));
}
