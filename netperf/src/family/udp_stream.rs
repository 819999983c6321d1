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
use proto::{ClientDone, DropSource, Family, Protocol, SideResults, UdpFast};

use super::{Context, Measurement, Prepared, length_timer, pin, prepare, request, results_wait};
use crate::{
    cli::{Length, Plan},
    control::Control,
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

/// netperf's send ring: a socket buffer's worth of messages, plus one (or
/// `-W`); the netserver is told its width.
fn ring_width(plan: &Plan, p: &mut Prepared, size: u32) -> usize {
    let at = Placement::new(plan.local.send_align, plan.local.send_offset);
    let width = Ring::resolve(size, plan.local.send_width, p.lss, at).capped_width() as usize;
    if p.spec.server.send_width.is_none() {
        p.spec.server.send_width = Some(width as u32);
    }
    width
}

pub(super) fn unspecified(f: Family) -> std::net::IpAddr {
    match f {
        Family::V4 => std::net::Ipv4Addr::UNSPECIFIED.into(),
        Family::V6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

/// `--batch` and `--gso` for datagrams of `size` bytes: how many a call
/// moves, told to the netserver when it can take them. netperf 2.7's
/// netserver receives one a call whatever we send.
fn udp_fast(plan: &Plan, d: &Control, size: u32, family: Family) -> Result<UdpFast> {
    let segments = match plan.udp_gso {
        None => 1,
        Some(bytes) => {
            if bytes < size {
                bail!("--gso {bytes}: less than one datagram of -m {size} bytes a send");
            }
            // at most the kernel's segments a send, and one IP datagram's
            // worth of payload in all
            (bytes / size)
                .min(proto::test::MAX_UDP_SEGMENTS)
                .min((family.max_udp_payload() / size).max(1))
        }
    };
    let fast = UdpFast {
        batch: plan.udp_batch.max(1),
        segments,
    };
    if let Some(why) = fast
        .is_on()
        .then(|| d.caps().lacks(proto::Feature::UdpFast))
        .flatten()
    {
        bail!("{why}");
    }
    Ok(fast)
}

pub fn run_once(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let mut p = prepare(plan, d, Protocol::Udp)?;
    let family = p.family;
    sockopt::set_recv_err(&p.sock, family)?;
    let size = send_size(plan, p.lss, family)?;
    let fast = udp_fast(plan, d, size, family)?;
    p.spec.udp_fast = fast;
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let width = ring_width(plan, &mut p, size);
    let at = Placement::new(plan.local.send_align, plan.local.send_offset);
    let mut ring = Ring::placed(size as usize, width, &ctx.fill, at);
    let mut lat = ctx.stats.then(Latency::new);

    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let conv = p.conventions(d);
    let (sock, _) = udp_socket(p)?;
    let link = link(plan, &sock, to)?;
    udp::client_hello(
        link,
        &grant.token,
        &conv,
        Instant::now() + Duration::from_secs(10),
    )?;
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
            &conv,
            until,
            plan.rate_bps,
            &stop,
            &ctx.live,
            lat.as_mut(),
            fast,
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
        latency: lat.and_then(|l| l.summary()),
        send_errors: outcome.failed,
        ..sender_sizes(
            &grant,
            to,
            sock.local_addr().ok(),
            (lss, lsr, tos),
            size,
            width,
        )
    })
}

/// A UDP test of many flows: the prepared socket (flow 0's) and the other
/// flows' sockets, set up alike, after checking the netserver can run it.
pub(super) fn flow_sockets(plan: &Plan, d: &mut Control) -> Result<(Prepared, Vec<UdpSocket>)> {
    if let Some(why) = d.caps().lacks(proto::Feature::Flows) {
        bail!("{why}");
    }
    super::flows::raise_open_files(plan.flows);
    let p = prepare(plan, d, Protocol::Udp)?;
    let family = p.family;
    let mut socks: Vec<UdpSocket> = Vec::with_capacity(plan.flows as usize);
    for i in 1..plan.flows {
        let s = sockopt::new_socket(family, Protocol::Udp)?;
        sockopt::apply_side(&s, &plan.local, family, Protocol::Udp, plan.keepalive)
            .context("local data socket")?;
        sockopt::apply_local(&s, &super::local_opts(plan), family, Protocol::Udp)
            .context("local data socket")?;
        sockopt::set_recv_err(&s, family)?;
        let ip = if p.bind {
            p.local.ip()
        } else {
            unspecified(family)
        };
        let local = SocketAddr::new(ip, 0);
        s.bind(&local.into())
            .with_context(|| format!("UDP data socket of flow {i}: cannot bind to {local}"))?;
        socks.push(s.into());
    }
    sockopt::set_recv_err(&p.sock, family)?;
    Ok((p, socks))
}

/// Every flow's hello, naming it, answered before any flow starts.
pub(super) fn flow_hellos<'a>(
    plan: &Plan,
    socks: &'a [UdpSocket],
    to: SocketAddr,
    grant: &proto::Grant,
    d: &Control,
) -> Result<Vec<udp::Link<'a>>> {
    let links: Vec<udp::Link<'a>> = socks
        .iter()
        .map(|s| link(plan, s, to))
        .collect::<Result<_>>()?;
    for (i, l) in links.iter().enumerate() {
        udp::client_hello_flow(
            *l,
            &grant.token,
            &d.conventions(),
            i as u32,
            Instant::now() + Duration::from_secs(10),
        )?;
    }
    Ok(links)
}

/// What a UDP_STREAM sender's measurement says of sockets and sizes.
fn sender_sizes(
    grant: &proto::Grant,
    to: SocketAddr,
    local_addr: Option<SocketAddr>,
    (lss, lsr, tos): (u32, u32, Option<u32>),
    size: u32,
    width: usize,
) -> Measurement {
    Measurement {
        local_send_buf: lss,
        local_recv_buf: lsr,
        local_tos: tos,
        local_addr,
        remote_addr: Some(to),
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        local_send_size: size,
        local_send_width: width as u32,
        remote_send_width: grant.send_width,
        remote_recv_width: grant.recv_width,
        remote_recv_size: grant.recv_size,
        ..Measurement::default()
    }
}

/// UDP_STREAM `--flows N`: N sockets, each with its own hello (naming its
/// flow) and its own share of the count and the rate, sending together on
/// a thread each; the netserver receives each flow on a socket of its own
/// and counts it exactly, so each flow's loss is what it sent less what
/// arrived.
pub fn run_flows(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let n = plan.flows;
    let (mut p, mut socks) = flow_sockets(plan, d)?;
    p.spec.flows = n;
    let size = send_size(plan, p.lss, p.family)?;
    let fast = udp_fast(plan, d, size, p.family)?;
    p.spec.udp_fast = fast;
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    let width = ring_width(plan, &mut p, size);
    let grant = request(plan, d, &p.spec)?;
    let to = p.data_addr(&grant);
    let (first, _) = udp_socket(p)?;
    socks.insert(0, first);
    let links = flow_hellos(plan, &socks, to, &grant, d)?;
    pin(plan)?;
    let stop = StopFlag::new();
    let _timer = length_timer(plan, &stop)?;
    let conv = d.conventions();
    let id = udp::test_id(&grant.token);
    let rate = plan.rate_bps.map(|r| (r / u64::from(n)).max(1));
    let at = Placement::new(plan.local.send_align, plan.local.send_offset);
    let (outcomes, local_cpu) = {
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let outcomes = engine::flow::together(
            links.len(),
            |i| -> Result<udp::SendOutcome> {
                // a count in whole datagrams, as one flow sends it, shared
                // out among the flows
                let until = match plan.length {
                    Length::Count(total) => {
                        let datagrams = total.div_ceil(u64::from(size));
                        Until::Bytes(super::flows::share(datagrams, n, i) * u64::from(size))
                    }
                    Length::Seconds(_) => Until::Stopped,
                };
                super::pin_flow(plan, i)?;
                let l = links
                    .get(i)
                    .copied()
                    .ok_or_else(|| anyhow::anyhow!("flow {i}"))?;
                let mut ring = Ring::placed(size as usize, width, &ctx.fill, at);
                Ok(udp::send(
                    l,
                    &mut ring,
                    id,
                    &conv,
                    until,
                    rate,
                    &stop,
                    ctx.live.flow(i).unwrap_or(&ctx.live),
                    None,
                    fast,
                )?)
            },
            || anyhow::anyhow!("a flow thread panicked"),
        );
        (outcomes, phase.end())
    };
    let mut local = SideResults::default();
    let mut failed = 0;
    let mut elapsed = Duration::ZERO;
    for o in outcomes {
        let o = o?;
        failed += o.failed;
        elapsed = elapsed.max(o.elapsed);
        local.add_flow(&o.results().totals(), engine::flow::nanos(o.elapsed));
    }
    local.send_errors = failed;
    local.close_flows();
    local.cpu = local_cpu;
    let sent: u64 = local.flows.iter().map(|f| f.send_calls).sum();
    let remote = d.finish(
        ClientDone {
            datagrams_sent: sent,
        },
        results_wait(plan),
    )?;
    if remote.flows.len() != local.flows.len() {
        bail!(
            "the netserver reported {} flows, we ran {}",
            remote.flows.len(),
            local.flows.len()
        );
    }
    for (i, (a, b)) in local.flows.iter().zip(&remote.flows).enumerate() {
        if b.recv_calls > a.send_calls {
            bail!(
                "flow {i}: the netserver counted {} datagrams, we sent {}",
                b.recv_calls,
                a.send_calls
            );
        }
    }
    let ends = socks
        .iter()
        .map(|s| super::flows::FlowEnd {
            local_port: s.local_addr().map_or(0, |a| a.port()),
            retransmits: None,
        })
        .collect();
    Ok(Measurement {
        elapsed: elapsed.as_secs_f64(),
        local,
        remote,
        send_errors: failed,
        flows: ends,
        ..sender_sizes(
            &grant,
            to,
            socks.first().and_then(|s| s.local_addr().ok()),
            (lss, lsr, tos),
            size,
            width,
        )
    })
}

/// Our UDP data socket's hello, by the dialect's conventions, answered
/// within 10 s.
pub(crate) fn hello(link: udp::Link<'_>, grant: &proto::Grant, d: &Control) -> Result<()> {
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
pub fn run_maerts(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
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
            UdpFast::default(),
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
