//! The server's side of TCP_STREAM (it receives) and TCP_MAERTS (it sends).

use std::{
    net::TcpStream,
    time::{Duration, Instant},
};

use engine::{
    buffer::{Placement, Ring},
    conventions::Conventions,
    handshake, sockopt,
    stream::{self, Outcome, Until, rx::Reader},
    timer::Timer,
};
use proto::{ErrorCode, ErrorMsg, Protocol, SideResults, TestEnd, TestKind, TestSpec};
use socket2::SockRef;

use super::{
    ctl::TestCtl,
    data::{Handed, bind_data, bound_port, run_flows_on_loops},
    proof::{Expect, accept_flows},
    setup::{GrantSides, Job, Prepared, Setup},
};
use crate::error::{aborted, failed};

/// How long a sender waits for the receiver to close after the last byte.
const LINGER: Duration = Duration::from_secs(30);
/// A receiving data connection silent this long is given up.
const SILENCE: Duration = Duration::from_secs(120);

pub(crate) fn prepare(
    setup: &Setup<'_>,
    handed: Option<Handed<TcpStream>>,
) -> Result<Prepared, ErrorMsg> {
    let (spec, cfg) = (setup.spec, setup.cfg);
    // its own data listener, or the streams the session's listener hands
    let listener = match handed {
        Some(_) => None,
        None => Some(bind_data(spec, setup.local, cfg, Protocol::Tcp)?),
    };
    let port = listener.as_ref().map(bound_port).transpose()?.unwrap_or(0);
    let (send_buf, recv_buf) = match &listener {
        Some(l) => sockopt::buffer_sizes(SockRef::from(l)),
        None => (
            spec.server.send_buf.unwrap_or(0),
            spec.server.recv_buf.unwrap_or(0),
        ),
    };
    // our side, resolved as netperf resolves its own: the rings as they
    // will be allocated, each buffer at the requested placement
    let side = &spec.server;
    let r = side.resolve(
        spec.kind,
        spec.family,
        (send_buf, recv_buf),
        cfg.limits.max_message,
    );
    let (send_size, recv_size) = (r.send_size, r.recv_size);
    let send_at = Placement::new(side.send_align, side.send_offset);
    let recv_at = Placement::new(side.recv_align, side.recv_offset);
    let send_ring = Ring::shape(send_size as usize, r.send_width as usize, send_at);
    let recv_ring = Ring::shape(recv_size as usize, r.recv_width as usize, recv_at);
    let widths = (r.send_width, r.recv_width);
    let cpus = engine::cpu::count();
    let memory = spec.buffer_memory(send_ring, recv_ring, cpus);
    // io_uring: a ring as each thread will have it, set up now, so that
    // what the kernel does not allow this process refuses the test before
    // it starts, not in its middle
    if let proto::Driver::Uring { threads } = spec.driver(cpus) {
        let per_thread = spec.flows.max(1).div_ceil(threads.max(1)) as usize;
        let sending = spec.kind == TestKind::TcpMaerts;
        let size = if sending { send_size } else { recv_size };
        engine::uring::probe(per_thread, sending, size as usize)
            .map_err(|e| ErrorMsg::new(ErrorCode::Resource, format!("netserver: {e}")))?;
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
    let rings = Rings {
        send: (send_size as usize, widths.0 as usize, send_at),
        recv: (recv_size as usize, widths.1 as usize, recv_at),
    };
    let job: Job = Box::new(move |ctl: &TestCtl| {
        let flows = spec.streams();
        let conns = match (listener, handed) {
            (Some(listener), _) => {
                let proof = Expect {
                    conv,
                    token: &token,
                    peer,
                    peer_port: spec.peer_data_port,
                };
                accept_flows(&listener, &proof, spec.flows, deadline, ctl, &log)?
            }
            (None, Some(h)) => h.take(&spec, flows, deadline, ctl)?,
            (None, None) => return Err(failed("netserver", "a test with no data connections")),
        };
        if spec.kind == TestKind::TcpMaerts || spec.iperf3.bidir {
            pace(&spec, &conns, &log);
        }
        run(&spec, conns, &rings, &conv, max_ms, ctl)
    });
    Ok(Prepared { grant, job, memory })
}

/// The rings a flow sends from and receives into: (size, width,
/// placement), as granted and counted.
struct Rings {
    send: (usize, usize, Placement),
    recv: (usize, usize, Placement),
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

/// Flows on the driver's threads (event loops, or io_uring): the kind's,
/// and with `--bidir` (iperf3's) as many again the other way, the kind's
/// first.
fn run_flows(
    spec: &TestSpec,
    mut conns: Vec<TcpStream>,
    rings: &Rings,
    until: &Until,
    conv: &Conventions,
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    let send = engine::evloop::Role::Send {
        size: rings.send.0,
        total: match until {
            Until::Bytes(n) => Some(n.div_ceil(u64::from(spec.flows.max(1)))),
            Until::Stopped => None,
        },
    };
    let recv = engine::evloop::Role::Recv { size: rings.recv.0 };
    let sends = spec.kind == TestKind::TcpMaerts;
    if !spec.iperf3.bidir {
        return run_flows_on_loops(spec, conns, if sends { send } else { recv }, conv, ctl);
    }
    let others = conns.split_off((spec.flows.max(1) as usize).min(conns.len()));
    let (first, second) = if sends { (send, recv) } else { (recv, send) };
    let (a, b) = std::thread::scope(|sc| {
        let b =
            engine::cpu::spawn_scoped(sc, || run_flows_on_loops(spec, others, second, conv, ctl));
        let a = run_flows_on_loops(spec, conns, first, conv, ctl);
        (a, b.join())
    });
    let b = b.map_err(|_| failed("data connections", "a thread panicked"))?;
    Ok(both_ways(a?, b?))
}

/// Two groups' results as one side's: every flow's counters, the first
/// group's first, the totals of both.
fn both_ways(a: SideResults, b: SideResults) -> SideResults {
    let flows = |r: &SideResults| -> Vec<proto::FlowCounters> {
        if r.flows.is_empty() {
            vec![proto::FlowCounters {
                bytes_sent: r.bytes_sent,
                bytes_received: r.bytes_received,
                send_calls: r.send_calls,
                recv_calls: r.recv_calls,
                transactions: r.transactions,
            }]
        } else {
            r.flows.clone()
        }
    };
    let mut out = SideResults::default();
    let elapsed = a.elapsed_ns.max(b.elapsed_ns);
    for c in flows(&a).iter().chain(flows(&b).iter()) {
        out.add_flow(c, elapsed);
    }
    out.tcp = a.tcp.or(b.tcp);
    (out.send_buf_end, out.recv_buf_end) = (a.send_buf_end, a.recv_buf_end);
    out.close_flows();
    out
}

/// What a flow's connection said about itself as it ended.
struct End {
    tcp: Option<proto::TcpStats>,
    bufs: (u32, u32),
    /// Bytes its receive path took as mapped pages.
    mapped: u64,
    /// Its ECN, where the test asked (`--ecn`).
    ecn: Option<Result<proto::ecn::TcpEcn, engine::EngineError>>,
}

/// A sending test asked for a rate (`--rate`, an iperf3 client's `-b` or
/// `--fq-rate`): each flow paced by the kernel at its share
/// (SO_MAX_PACING_RATE); where the kernel refuses, said in the log and the
/// test goes on unpaced.
fn pace(spec: &TestSpec, conns: &[TcpStream], log: &crate::log::Logger) {
    let Some(bps) = spec.flow_rate_bps() else {
        return;
    };
    for c in conns {
        if let Err(e) = sockopt::pace(c, bps) {
            log.warn_limited(
                "sockopt",
                &format!(
                    "{}: the rate asked ({bps} bits/s a flow) is not applied: {e}",
                    spec.kind
                ),
            );
            return;
        }
    }
}

fn run(
    spec: &TestSpec,
    conns: Vec<TcpStream>,
    rings: &Rings,
    conv: &Conventions,
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
    // (a sender that must not wait for its peer's end runs on the loops,
    // which can end without it)
    if spec.driver(engine::cpu::count()) != proto::Driver::Blocking
        || spec.iperf3.bidir
        || !conv.sender_waits_eof
    {
        return run_flows(spec, conns, rings, &until, conv, ctl);
    }
    let fill = &server_fill(spec);
    // Each flow closes its connection as soon as its loop ends (the sender
    // waits for that), after reading the connection's TCP_INFO.
    let per_flow = |conn: TcpStream| -> Result<(Outcome, End), ErrorMsg> {
        let live = &ctl.live;
        let mut mapped = 0;
        let outcome = if spec.kind == TestKind::TcpMaerts {
            let (size, width, at) = rings.send;
            let mut ring = Ring::placed(size, width, fill, at);
            stream::send(&conn, &mut ring, until, &ctl.stop, live, LINGER)
        } else {
            let _ = conn.set_read_timeout(Some(SILENCE));
            let (size, width, at) = rings.recv;
            let mut ring = Ring::placed(size, width, b"", at);
            Reader::new(spec.paths.rx, &conn).and_then(|mut reader| {
                let o = stream::tcp::receive_by(&conn, &mut ring, &mut reader, live, None);
                mapped = reader.mapped;
                o
            })
        };
        let end = End {
            tcp: sockopt::tcp_stats(&conn),
            bufs: sockopt::buffer_sizes(SockRef::from(&conn)),
            mapped,
            ecn: spec.ecn.map(|_| engine::ecn::tcp_report([&conn])),
        };
        drop(conn);
        match outcome {
            Ok(o) => Ok((o, end)),
            Err(_) if ctl.is_aborted() => Err(aborted()),
            Err(e) => Err(failed("data connection", e)),
        }
    };
    // the blocking driver: one flow, on the test's own thread
    let first = conns
        .into_iter()
        .next()
        .ok_or_else(|| ErrorMsg::new(ErrorCode::TestFailed, "no data connection"))?;
    let outcomes = [per_flow(first)];
    let mut results = SideResults::default();
    for r in outcomes {
        let (o, end) = r?;
        results.add_flow(&o.counters, engine::flow::nanos(o.elapsed));
        results.rx.mapped_bytes += end.mapped;
        if let Some(ecn) = end.ecn {
            let tcp = ecn.map_err(|e| failed("data connection", e))?;
            results
                .ecn
                .get_or_insert_with(Default::default)
                .tcp
                .get_or_insert_with(Default::default)
                .merge(&tcp);
        }
        if results.tcp.is_none() {
            results.tcp = end.tcp;
            (results.send_buf_end, results.recv_buf_end) = end.bufs;
        }
    }
    results.close_flows();
    Ok(results)
}
