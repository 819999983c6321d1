//! UDP_STREAM: we send datagrams, the netserver counts them exactly.

use std::{
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use engine::{
    buffer::{Buffer, Placement, Ring},
    latency::Latency,
    netstat, sockopt,
    stream::udp::{self, Until},
    timer::StopFlag,
};
use proto::{ClientDone, DropSource, Family, Protocol, SideResults};

use super::{Context, Measurement, Prepared, length_timer, pin, prepare, request, results_wait};
use crate::{
    cli::{Length, Plan},
    control::Dialect,
    interrupt,
};

/// The send size: `-m`, or the send buffer's size capped at 65507, as
/// netperf; refused if it cannot go out as one datagram.
pub fn send_size(plan: &Plan, lss: u32, family: Family) -> Result<u32> {
    let size = plan
        .local
        .send_size
        .unwrap_or_else(|| udp::default_send_size(lss, family));
    let max = family.max_udp_payload();
    let fam = match family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    };
    if size == 0 || size > max {
        bail!(
            "-m: a UDP message of {size} bytes cannot be sent as one datagram over {fam} (1 to {max} bytes)"
        );
    }
    Ok(size)
}

/// Our UDP data socket's link to the netserver: connected with `-- -n`,
/// else sendto()/recvfrom(), as netperf 2.7.
pub(super) fn link<'a>(plan: &Plan, sock: &'a UdpSocket, to: SocketAddr) -> Result<udp::Link<'a>> {
    if plan.local_only.connected_udp {
        sock.connect(to)
            .with_context(|| format!("UDP data socket to {to}"))?;
        Ok(udp::Link::connected(sock))
    } else {
        Ok(udp::Link::to(sock, to))
    }
}

/// Bind the UDP data socket before the test is asked for, as netperf 2.7
/// does: as `-- -L`/`-P` ask, or to the wildcard on an ephemeral port. The
/// request names the port (netperf 2.7's netserver sends a UDP receive
/// test's datagrams there).
pub(super) fn bind_udp(p: &mut Prepared) -> Result<()> {
    let local = if p.bind {
        p.local
    } else {
        SocketAddr::new(unspecified(p.family), 0)
    };
    let _ = p.sock.set_reuse_address(p.bind);
    p.sock
        .bind(&local.into())
        .with_context(|| format!("-- -L/-P: cannot bind the UDP data socket to {local}"))?;
    p.spec.peer_data_port = p
        .sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.port());
    Ok(())
}

/// The UDP data socket (bound by [`bind_udp`]) and its local address.
pub(super) fn udp_socket(p: Prepared) -> Result<(UdpSocket, SocketAddr)> {
    let local = p
        .sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .unwrap_or(p.local);
    Ok((p.sock.into(), local))
}

fn unspecified(f: Family) -> std::net::IpAddr {
    match f {
        Family::V4 => std::net::Ipv4Addr::UNSPECIFIED.into(),
        Family::V6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

pub fn run_once(plan: &Plan, d: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    let mut p = prepare(plan, d, Protocol::Udp)?;
    let family = p.family;
    sockopt::set_recv_err(&p.sock, family)?;
    let size = send_size(plan, p.lss, family)?;
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    // netperf's ring: a socket buffer's worth of messages, plus one; the
    // netserver is told its width.
    let width = Ring::capped_width(
        size as usize,
        plan.local
            .send_width
            .map_or_else(|| Ring::width_for(lss, size), |w| w as usize),
    );
    if p.spec.server.send_width.is_none() {
        p.spec.server.send_width = Some(width as u32);
    }
    let at = Placement::new(plan.local.send_align, plan.local.send_offset);
    let mut ring = Ring::placed(size as usize, width, &ctx.fill, at);
    let mut lat = ctx.stats.then(Latency::new);

    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (sock, _) = udp_socket(p)?;
    let link = link(plan, &sock, to)?;
    hello(link, &grant, d)?;
    pin(plan)?;

    let stop = StopFlag::new();
    let until = match plan.length {
        Length::Count(n) => Until::Bytes(n),
        Length::Seconds(_) => Until::Stopped,
    };
    let _timer = length_timer(plan, &stop)?;
    let (outcome, local_cpu) = {
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let o = udp::send(
            link,
            &mut ring,
            udp::test_id(&grant.token),
            &d.conventions(),
            until,
            plan.rate_bps,
            &stop,
            &ctx.live,
            lat.as_mut(),
        )?;
        (o, phase.end())
    };
    let remote = d.finish(
        ClientDone {
            datagrams_sent: outcome.sent,
        },
        results_wait(plan),
    )?;
    Ok(Measurement {
        elapsed: outcome.elapsed.as_secs_f64(),
        local: SideResults {
            cpu: local_cpu,
            ..outcome.results()
        },
        remote,
        local_send_buf: lss,
        local_recv_buf: lsr,
        local_tos: tos,
        local_addr: sock.local_addr().ok(),
        remote_addr: Some(to),
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        local_send_size: size,
        local_send_width: width as u32,
        remote_send_width: grant.send_width,
        remote_recv_width: grant.recv_width,
        latency: lat.and_then(|l| l.summary()),
        remote_recv_size: grant.recv_size,
        send_errors: outcome.failed,
        ..Measurement::default()
    })
}

/// Our UDP data socket's hello, by the dialect's conventions, answered
/// within 10 s.
pub(crate) fn hello(link: udp::Link<'_>, grant: &proto::Grant, d: &dyn Dialect) -> Result<()> {
    udp::client_hello(
        link,
        &grant.token,
        &d.conventions(),
        Instant::now() + Duration::from_secs(10),
    )?;
    Ok(())
}

/// When our receiver of netperf 2.7's UDP receive test is done: once our
/// test time is up (the netserver's sender stops on its own clock) and
/// nothing has arrived for a moment, or once as many bytes as asked have.
#[derive(Debug)]
struct Receiving {
    stop: StopFlag,
    expected: Option<u64>,
}

impl udp::Drain for Receiving {
    fn expected(&self) -> Option<u64> {
        match self.expected {
            Some(n) => Some(n),
            None => self.stop.is_set().then_some(u64::MAX),
        }
    }

    fn aborted(&self) -> bool {
        false
    }
}

/// netperf 2.7's UDP receive test (OMNI `-d recv -T udp`, TCP_MAERTS
/// `-- -T udp`): the netserver sends, we count exactly what arrives.
pub fn run_maerts(plan: &Plan, d: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    let p = prepare(plan, d, Protocol::Udp)?;
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (sock, _) = udp_socket(p)?;
    let link = link(plan, &sock, to)?;
    let inode = netstat::socket_inode(&sock);
    hello(link, &grant, d)?;
    pin(plan)?;
    let size = plan.local.recv_size.unwrap_or(grant.send_size).max(1);
    let stop = StopFlag::new();
    let expected = match plan.length {
        // what the netserver sends to reach the byte count: whole datagrams
        Length::Count(n) => Some(n.div_ceil(u64::from(grant.send_size.max(1)))),
        Length::Seconds(_) => None,
    };
    let drain = Receiving {
        stop: stop.clone(),
        expected,
    };
    let _timer = length_timer(plan, &stop)?;
    let (out, local_cpu) = {
        // Ctrl-C ends our part as the timer would.
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let mut buf = Buffer::new(
            size as usize,
            Placement::new(plan.local.recv_align, plan.local.recv_offset),
        );
        let o = udp::receive(
            link,
            buf.as_mut_slice(),
            &grant.token,
            &d.conventions(),
            &drain,
            &ctx.live,
        )?;
        (o, phase.end())
    };
    let rcvbuf_drops = inode.and_then(netstat::udp_socket_drops);
    let remote = d.finish(ClientDone::default(), results_wait(plan))?;
    Ok(Measurement {
        elapsed: out.elapsed.as_secs_f64(),
        local: SideResults {
            cpu: local_cpu,
            ..out.results(
                rcvbuf_drops.unwrap_or(0),
                if rcvbuf_drops.is_some() {
                    DropSource::Socket
                } else {
                    DropSource::Unavailable
                },
            )
        },
        remote,
        local_send_buf: lss,
        local_recv_buf: lsr,
        local_tos: tos,
        local_addr: sock.local_addr().ok(),
        remote_addr: Some(to),
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        remote_send_size: grant.send_size,
        remote_send_width: grant.send_width,
        remote_recv_width: grant.recv_width,
        local_recv_size: size,
        local_recv_width: 1,
        ..Measurement::default()
    })
}
