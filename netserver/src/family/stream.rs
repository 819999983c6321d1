//! The server's side of TCP_STREAM (it receives) and TCP_MAERTS (it sends).

use std::{
    net::TcpStream,
    thread,
    time::{Duration, Instant},
};

use engine::{
    buffer::{Placement, Ring},
    handshake,
    live::Live,
    sockopt,
    stream::{self, Outcome, Until},
    timer::Timer,
};
use proto::{ErrorCode, ErrorMsg, Grant, Protocol, SideResults, TestEnd, TestKind, TestSpec};
use socket2::SockRef;

use super::{
    Expect, GrantSides, Job, Setup, TestCtl, aborted, accept_flows, bind_data, bound_port, failed,
};

/// How long a sender waits for the receiver to close after the last byte.
const LINGER: Duration = Duration::from_secs(30);
/// A receiving data connection silent this long is given up.
const SILENCE: Duration = Duration::from_secs(120);

pub(crate) fn prepare(setup: &Setup<'_>) -> Result<(Grant, Job), ErrorMsg> {
    let (spec, cfg) = (setup.spec, setup.cfg);
    let listener = bind_data(spec, setup.local, cfg, Protocol::Tcp)?;
    let port = bound_port(&listener)?;
    let (send_buf, recv_buf) = sockopt::buffer_sizes(SockRef::from(&listener));
    let max = cfg.limits.max_message;
    let send_size = spec
        .server
        .send_size
        .unwrap_or_else(|| proto::test::default_message_size(send_buf, max));
    let recv_size = spec
        .server
        .recv_size
        .unwrap_or_else(|| proto::test::default_message_size(recv_buf, max));
    let widths = (
        send_width(spec, send_buf, send_size) as u32,
        recv_width(spec, recv_buf, recv_size) as u32,
    );
    // The buffers this test will really allocate, against the session's cap.
    let memory = spec.buffer_memory(
        proto::test::Ring {
            size: send_size,
            width: widths.0,
        },
        proto::test::Ring {
            size: recv_size,
            width: widths.1,
        },
    );
    if memory > cfg.limits.memory_per_session {
        return Err(ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!(
                "buffers: the test would need {memory} bytes of buffers on the server, more than its limit of {}",
                cfg.limits.memory_per_session
            ),
        ));
    }
    let token = handshake::new_token().map_err(|e| failed("netserver", e))?;
    let grant = setup.grant(GrantSides {
        data_port: port,
        token,
        bufs: (send_buf, recv_buf),
        sizes: (send_size, recv_size),
        widths,
    });
    let spec = spec.clone();
    let deadline = Instant::now() + cfg.data_connect_timeout;
    let log = cfg.logger.clone();
    let max_ms = cfg.limits.max_duration_ms;
    let (conv, peer) = (setup.conv, setup.peer);
    let job: Job = Box::new(move |ctl: &TestCtl| {
        let proof = Expect {
            conv,
            token: &token,
            peer,
        };
        let conns = accept_flows(&listener, &proof, spec.flows, deadline, ctl, &log)?;
        drop(listener);
        run(&spec, conns, send_size, recv_size, max_ms, ctl)
    });
    Ok((grant, job))
}

/// The send ring's width: what netperf asked (`-W`), or netperf's rule.
fn send_width(spec: &TestSpec, send_buf: u32, send_size: u32) -> usize {
    spec.server
        .send_width
        .map_or_else(|| Ring::width_for(send_buf, send_size), |w| w as usize)
}

/// The receive ring's width, by the same rule.
fn recv_width(spec: &TestSpec, recv_buf: u32, recv_size: u32) -> usize {
    spec.server
        .recv_width
        .map_or_else(|| Ring::width_for(recv_buf, recv_size), |w| w as usize)
}

/// What the server fills its send buffers with: netperf's pattern, or,
/// when netperf named a remote fill file (`-F ,file`), random bytes of its
/// own: a client never makes the server open a file.
pub(crate) fn server_fill(spec: &TestSpec) -> Vec<u8> {
    if !spec.remote_fill {
        return Vec::new();
    }
    let mut b = vec![0u8; 4096];
    let _ = getrandom::fill(&mut b);
    b
}

/// Many flows: all on event loops, a thread per CPU at most.
fn run_flows(
    spec: &TestSpec,
    conns: Vec<TcpStream>,
    send_size: u32,
    recv_size: u32,
    until: &Until,
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    let role = if spec.kind == TestKind::TcpMaerts {
        engine::evloop::Role::Send {
            size: send_size as usize,
            total: match until {
                Until::Bytes(n) => Some(n.div_ceil(u64::from(spec.flows.max(1)))),
                Until::Stopped => None,
            },
        }
    } else {
        engine::evloop::Role::Recv {
            size: recv_size as usize,
        }
    };
    super::run_flows_on_loops(spec, conns, role, ctl)
}

/// What a flow's connection said about itself as it ended.
struct End {
    tcp: Option<proto::TcpStats>,
    bufs: (u32, u32),
}

fn run(
    spec: &TestSpec,
    conns: Vec<TcpStream>,
    send_size: u32,
    recv_size: u32,
    max_ms: u64,
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    // A timed test ends by the server's clock only when the server sends.
    let _timer = match (spec.kind, spec.end) {
        (TestKind::TcpMaerts, TestEnd::Time { millis }) => {
            let millis = if millis == 0 {
                max_ms
            } else {
                millis.min(max_ms)
            };
            // with a window, the traffic runs its warmup and cooldown too
            let millis = spec.window.map_or(millis, |w| {
                engine::flow::nanos(w.total(Duration::from_millis(millis))) / 1_000_000
            });
            Some(
                Timer::start(Duration::from_millis(millis), ctl.stop.clone())
                    .map_err(|e| failed("timer", e))?,
            )
        }
        _ => None,
    };
    let until = match spec.end {
        TestEnd::Bytes(n) => Until::Bytes(n),
        _ => Until::Stopped,
    };
    if conns.len() > 1 || spec.window.is_some() {
        return run_flows(spec, conns, send_size, recv_size, &until, ctl);
    }
    let fill = &server_fill(spec);
    // Each flow closes its connection as soon as its loop ends (the sender
    // waits for that), after reading the connection's TCP_INFO.
    let per_flow = |conn: TcpStream| -> Result<(Outcome, End), ErrorMsg> {
        let live = Live::new();
        let outcome = if spec.kind == TestKind::TcpMaerts {
            let width = send_width(
                spec,
                sockopt::buffer_sizes(SockRef::from(&conn)).0,
                send_size,
            );
            let at = Placement::new(spec.server.send_align, spec.server.send_offset);
            let mut ring = Ring::placed(send_size as usize, width, fill, at);
            stream::send(&conn, &mut ring, until, &ctl.stop, &live, LINGER)
        } else {
            let _ = conn.set_read_timeout(Some(SILENCE));
            let width = recv_width(
                spec,
                sockopt::buffer_sizes(SockRef::from(&conn)).1,
                recv_size,
            );
            let at = Placement::new(spec.server.recv_align, spec.server.recv_offset);
            let mut ring = Ring::placed(recv_size as usize, width, b"", at);
            stream::tcp::receive_ring(&conn, &mut ring, &live, None)
        };
        let end = End {
            tcp: sockopt::tcp_stats(&conn),
            bufs: sockopt::buffer_sizes(SockRef::from(&conn)),
        };
        drop(conn);
        match outcome {
            Ok(o) => Ok((o, end)),
            Err(_) if ctl.is_aborted() => Err(aborted()),
            Err(e) => Err(failed("data connection", e)),
        }
    };
    let mut conns = conns.into_iter();
    let first = conns
        .next()
        .ok_or_else(|| ErrorMsg::new(ErrorCode::TestFailed, "no data connection"))?;
    let outcomes: Vec<Result<(Outcome, End), ErrorMsg>> = thread::scope(|s| {
        let others: Vec<_> = conns.map(|c| s.spawn(move || per_flow(c))).collect();
        let mut all = vec![per_flow(first)];
        for h in others {
            all.push(h.join().unwrap_or_else(|_| {
                Err(ErrorMsg::new(
                    ErrorCode::TestFailed,
                    "a flow's thread panicked",
                ))
            }));
        }
        all
    });
    let mut results = SideResults::default();
    for r in outcomes {
        let (o, end) = r?;
        results.add_flow(&o.counters, engine::flow::nanos(o.elapsed));
        if results.tcp.is_none() {
            results.tcp = end.tcp;
            (results.send_buf_end, results.recv_buf_end) = end.bufs;
        }
    }
    results.close_flows();
    Ok(results)
}
