//! The server's side of UDP_STREAM (it receives, counts exactly, and finds
//! out where the loss happened) and of netperf 2.7's UDP receive test (it
//! sends, to the one address that presented the test's token).

use std::{
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use engine::{
    buffer::{Placement, Ring},
    handshake, netstat, sockopt,
    stream::udp,
    timer::Timer,
};
use proto::{DropSource, ErrorMsg, Protocol, SideResults, TestEnd, TestKind};
use socket2::SockRef;

use super::{
    ctl::TestCtl,
    data::{Handed, bind_data, bound_port, run_udp_flows_counted, run_udp_flows_on_loops},
    proof::{Expect, udp_flow_sockets, udp_hello},
    setup::{GrantSides, Job, Prepared, Setup},
    stream::server_fill,
};
use crate::error::failed;

pub(crate) fn prepare(setup: &Setup<'_>) -> Result<Prepared, ErrorMsg> {
    let (spec, cfg, peer, conv) = (setup.spec, setup.cfg, setup.peer, setup.conv);
    let sock = bind_data(spec, setup.local, cfg, Protocol::Udp)?;
    let port = bound_port(&sock)?;
    let (send_buf, recv_buf) = sockopt::buffer_sizes(SockRef::from(&sock));
    if spec.kind == TestKind::UdpMaerts {
        return prepare_sender(setup, sock, port, (send_buf, recv_buf));
    }
    // netperf's data socket and ours have one address and port (`-- -P N`
    // on one host): its datagrams are taken by that address and port, as
    // netperf 2.7's are; a hello's echo would only come back to us.
    let shared = spec.peer_data_port == Some(port)
        && sock.local_addr().ok().and_then(|a| a.as_socket()) == Some(SocketAddr::new(peer, port));
    let conv = if shared {
        engine::conventions::Conventions {
            proof: engine::conventions::Proof::ControlPeer,
            ..conv
        }
    } else {
        conv
    };
    // netperf 2.7's netserver receives with calls of its socket buffer's
    // size; never less than the largest datagram.
    let recv_size = spec
        .server
        .resolve(
            spec.kind,
            spec.family,
            (send_buf, recv_buf),
            cfg.limits.max_message,
        )
        .recv_size;
    let token = handshake::new_token().map_err(|e| failed("netserver", e))?;
    let grant = setup.grant(GrantSides {
        data_port: port,
        token,
        bufs: (send_buf, recv_buf),
        sizes: (0, recv_size),
        // netperf 2.7 reports the client's send width for both ends
        widths: (spec.server.send_width.unwrap_or(0), 1),
    });
    let memory = spec.buffer_memory(
        proto::test::Ring::new(0, 0),
        proto::test::Ring::new(recv_size, 1),
        engine::cpu::count(),
    );
    let deadline = Instant::now() + cfg.data_connect_timeout;
    let inode = netstat::socket_inode(&sock);
    let connected = spec.connected_udp;
    let host_before = netstat::host_udp_counter("RcvbufErrors");
    if spec.driver(engine::cpu::count()) != proto::Driver::Blocking {
        let spec = spec.clone();
        let job: Job = Box::new(move |ctl: &TestCtl| {
            let sock: UdpSocket = sock.into();
            ctl.register(&sock);
            receive_flows(&spec, &sock, &token, peer, conv, deadline, ctl)
        });
        return Ok(Prepared { grant, job, memory });
    }
    let fast = spec.udp_fast;
    let uring = spec.paths.uring;
    let ecn = spec.ecn.filter(|e| e.count).map(|e| e.interval_ms);
    let peer_port = spec.peer_data_port;
    let job: Job = Box::new(move |ctl: &TestCtl| {
        let sock: UdpSocket = sock.into();
        ctl.register(&sock);
        let expect = Expect {
            conv,
            token: &token,
            peer,
            peer_port,
        };
        let link = udp_hello(&sock, &expect, connected, deadline, ctl)?;
        let mut buf = vec![0u8; proto::test::udp_receive_buffer(recv_size) as usize];
        let calls = udp::UdpCalls { fast, uring, ecn };
        let out = udp::receive(link, &mut buf, &token, &conv, ctl, &ctl.live, calls)
            .map_err(|e| failed("UDP data socket", e))?;
        // The socket's own drop counter, read after draining; the host's
        // counter only if that cannot be read.
        let (rcvbuf_drops, drops_source) = match inode.and_then(netstat::udp_socket_drops) {
            Some(d) if fast.segments > 1 => (d, DropSource::SocketCoalesced),
            Some(d) => (d, DropSource::Socket),
            None => match (host_before, netstat::host_udp_counter("RcvbufErrors")) {
                (Some(a), Some(b)) => (b.saturating_sub(a), DropSource::Host),
                _ => (0, DropSource::Unavailable),
            },
        };
        let (send_buf_end, recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&sock));
        Ok(SideResults {
            send_buf_end,
            recv_buf_end,
            ..out.results(rcvbuf_drops, drops_source)
        })
    });
    Ok(Prepared { grant, job, memory })
}

/// UDP_STREAM of many flows: a socket per flow, each connected to its
/// flow's sender (see [`udp::server_hellos`]), received on the event
/// loops; each flow's datagrams and its socket's drops counted on their
/// own.
#[allow(clippy::too_many_arguments)]
fn receive_flows(
    spec: &proto::TestSpec,
    sock: &UdpSocket,
    token: &proto::Token,
    peer: std::net::IpAddr,
    conv: engine::conventions::Conventions,
    deadline: Instant,
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    let socks = udp_flow_sockets(spec, sock, token, peer, deadline, ctl)?;
    // each flow's socket's own drop counter, read once it is drained
    let inodes: Vec<Option<u64>> = socks.iter().map(netstat::socket_inode).collect();
    let role = engine::evloop::udp::UdpRole::Recv;
    let ends = run_udp_flows_on_loops(spec, socks, role, conv, token, ctl)?;
    let drops = netstat::udp_sockets_drops(&inodes);
    let outcomes = ends.into_iter().zip(drops).map(|(e, drops)| {
        let engine::evloop::udp::UdpFlowEnd::Received(out) = e else {
            return Err(failed("UDP flow", "ended as no receiver does"));
        };
        Ok(out.results(
            drops.unwrap_or(0),
            if drops.is_some() && spec.udp_fast.segments > 1 {
                DropSource::SocketCoalesced
            } else if drops.is_some() {
                DropSource::Socket
            } else {
                DropSource::Unavailable
            },
        ))
    });
    let mut all = SideResults::default();
    let mut udp_all = proto::UdpRecvStats {
        received: 0,
        out_of_order: 0,
        duplicates: 0,
        foreign: 0,
        rcvbuf_drops: 0,
        drops_source: DropSource::Socket,
        jitter_ns: 0,
    };
    let mut jitter = 0u64;
    let n = outcomes.len() as u64;
    for o in outcomes {
        let r = o?;
        all.add_flow(&r.totals(), r.elapsed_ns);
        if let Some(e) = &r.ecn {
            all.ecn.get_or_insert_with(Default::default).merge(e);
        }
        if let Some(u) = r.udp {
            udp_all.received += u.received;
            udp_all.out_of_order += u.out_of_order;
            udp_all.duplicates += u.duplicates;
            udp_all.foreign += u.foreign;
            udp_all.rcvbuf_drops += u.rcvbuf_drops;
            udp_all.drops_source = u.drops_source;
            jitter += u.jitter_ns;
        }
    }
    udp_all.jitter_ns = jitter / n.max(1);
    all.udp = Some(udp_all);
    all.close_flows();
    (all.send_buf_end, all.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(sock));
    Ok(all)
}

/// netperf 2.7's UDP receive test: we send datagrams to netperf, whose
/// hello (with the test's token, from the control connection's peer) told
/// us where.
fn prepare_sender(
    setup: &Setup<'_>,
    sock: socket2::Socket,
    port: u16,
    (send_buf, recv_buf): (u32, u32),
) -> Result<Prepared, ErrorMsg> {
    let (spec, cfg, peer, conv) = (setup.spec, setup.cfg, setup.peer, setup.conv);
    let r = spec.server.resolve(
        spec.kind,
        spec.family,
        (send_buf, recv_buf),
        cfg.limits.max_message,
    );
    let (send_size, width) = (r.send_size, r.send_width as usize);
    let at = Placement::new(spec.server.send_align, spec.server.send_offset);
    let ring = Ring::shape(send_size as usize, width, at);
    let memory = spec.buffer_memory(ring, ring, engine::cpu::count());
    let token = handshake::new_token().map_err(|e| failed("netserver", e))?;
    let grant = setup.grant(GrantSides {
        data_port: port,
        token,
        bufs: (send_buf, recv_buf),
        sizes: (send_size, 0),
        widths: (width as u32, 0),
    });
    let deadline = Instant::now() + cfg.data_connect_timeout;
    let max_ms = cfg.limits.max_duration_ms;
    let spec = spec.clone();
    let job: Job = Box::new(move |ctl: &TestCtl| {
        let sock: UdpSocket = sock.into();
        ctl.register(&sock);
        let expect = Expect {
            conv,
            token: &token,
            peer,
            peer_port: spec.peer_data_port,
        };
        // netperf 2.7 sends nothing first: its request named its data
        // port, at the control connection's peer address
        let link = match (conv.proof, spec.peer_data_port) {
            (engine::conventions::Proof::ControlPeer, Some(port)) => {
                udp::Link::to(&sock, std::net::SocketAddr::new(peer, port))
            }
            _ => udp_hello(&sock, &expect, spec.connected_udp, deadline, ctl)?,
        };
        let (until, millis) = match spec.end {
            TestEnd::Bytes(n) => (udp::Until::Bytes(n), max_ms),
            TestEnd::Time { millis: 0 } => (udp::Until::Stopped, max_ms),
            TestEnd::Time { millis } => (udp::Until::Stopped, millis.min(max_ms)),
            TestEnd::Transactions(_) => (udp::Until::Stopped, max_ms),
        };
        let _timer = Timer::start(Duration::from_millis(millis), ctl.stop.clone())
            .map_err(|e| failed("timer", e))?;
        let mut ring = Ring::placed(send_size as usize, width, &server_fill(&spec), at);
        let out = udp::send(
            link,
            &mut ring,
            udp::test_id(&token),
            &conv,
            until,
            spec.flow_rate_bps(),
            &ctl.stop,
            &ctl.live,
            None,
            proto::UdpFast::default(),
        )
        .map_err(|e| failed("UDP data socket", e))?;
        let (send_buf_end, recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&sock));
        Ok(SideResults {
            send_buf_end,
            recv_buf_end,
            ..out.results()
        })
    });
    Ok(Prepared { grant, job, memory })
}

/// iperf3's UDP streams, handed over connected and answered by the
/// listener of its port: the server receives on each (`UDP_STREAM`),
/// sends on each at the client's rate (`-R`), or with `--bidir` both, the
/// receiving ones first, until the client's TEST_END (or, sending, its
/// count of bytes).
pub(crate) fn prepare_handed(
    setup: &Setup<'_>,
    handed: Handed<UdpSocket>,
) -> Result<Prepared, ErrorMsg> {
    let (spec, cfg, conv) = (setup.spec, setup.cfg, setup.conv);
    let size = spec
        .server
        .send_size
        .or(spec.server.recv_size)
        .unwrap_or(1460)
        .clamp(1, spec.family.max_udp_payload());
    let token = handshake::new_token().map_err(|e| failed("netserver", e))?;
    let grant = setup.grant(GrantSides {
        data_port: 0,
        token,
        bufs: (0, 0),
        sizes: (size, size),
        widths: (1, 1),
    });
    let ring = proto::test::Ring::new(size, 1);
    let memory = spec
        .buffer_memory(ring, ring, engine::cpu::count())
        .saturating_mul(if spec.iperf3.bidir { 2 } else { 1 });
    let deadline = Instant::now() + cfg.data_connect_timeout;
    let spec = spec.clone();
    let job: Job = Box::new(move |ctl: &TestCtl| {
        let flows = spec.flows.max(1) as usize;
        let mut socks = handed.take(&spec, spec.streams(), deadline, ctl)?;
        let receives = spec.kind == TestKind::UdpStream;
        // the receiving group first (iperf3's order)
        let (recv, send) = if spec.iperf3.bidir {
            let send = socks.split_off(flows);
            (socks, send)
        } else if receives {
            (socks, Vec::new())
        } else {
            (Vec::new(), socks)
        };
        let count = match spec.end {
            TestEnd::Bytes(n) => Some(n.div_ceil(flows as u64)),
            _ => None,
        };
        let send_role = engine::evloop::udp::UdpRole::Send {
            size: size as usize,
            rate_bps: spec.flow_rate_bps(),
            id: udp::test_id(&token),
        };
        let recv_role = engine::evloop::udp::UdpRole::Recv;
        let (r, s) = std::thread::scope(|sc| {
            let s = (!send.is_empty()).then(|| {
                engine::cpu::spawn_scoped(sc, || {
                    run_udp_flows_counted(&spec, send, count, send_role, conv, &token, ctl)
                })
            });
            let r = (!recv.is_empty())
                .then(|| run_udp_flows_on_loops(&spec, recv, recv_role, conv, &token, ctl));
            (r, s.map(|h| h.join()))
        });
        let mut ends = r.transpose()?.unwrap_or_default();
        if let Some(s) = s {
            ends.extend(s.map_err(|_| failed("UDP streams", "a thread panicked"))??);
        }
        Ok(handed_results(ends))
    });
    Ok(Prepared { grant, job, memory })
}

/// Every handed stream's figures, in order, as one side's results.
fn handed_results(ends: Vec<engine::evloop::udp::UdpFlowEnd>) -> SideResults {
    use engine::evloop::udp::UdpFlowEnd;
    let mut all = SideResults::default();
    let mut udp: Option<proto::UdpRecvStats> = None;
    for e in ends {
        let r = match e {
            UdpFlowEnd::Received(out) => {
                let r = out.results(0, DropSource::Unavailable);
                if let Some(u) = r.udp.clone() {
                    match &mut udp {
                        None => udp = Some(u),
                        Some(a) => {
                            a.received += u.received;
                            a.out_of_order += u.out_of_order;
                            a.duplicates += u.duplicates;
                            a.jitter_ns = a.jitter_ns.max(u.jitter_ns);
                        }
                    }
                }
                r
            }
            UdpFlowEnd::Sent(out) => out.results(),
            _ => SideResults::default(),
        };
        all.add_flow(&r.totals(), r.elapsed_ns);
    }
    all.udp = udp;
    all.close_flows();
    all
}
