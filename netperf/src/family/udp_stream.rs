//! UDP_STREAM: we send datagrams, the netserver counts them exactly.

use std::{
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use engine::{
    sockopt,
    stream::udp::{self, Until},
    timer::{StopFlag, Timer},
};
use proto::{ClientDone, Family, Protocol, SideResults};
use socket2::SockRef;

use super::{Context, Measurement, results_wait, spec_for, stream::check_data_host};
use crate::{
    cli::{Length, Plan},
    control::Dialect,
    interrupt,
};

/// netperf's cap on a default UDP send size (its UDP_LENGTH_MAX).
const DEFAULT_MAX: u32 = 65_507;

/// The send size: `-m`, or the send buffer's size capped at 65507, as
/// netperf; refused if it cannot go out as one datagram.
pub fn send_size(plan: &Plan, lss: u32, family: Family) -> Result<u32> {
    let size = plan
        .local
        .send_size
        .unwrap_or(if lss > 0 { lss.min(DEFAULT_MAX) } else { 4096 });
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

pub fn run_once(plan: &Plan, d: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    let peer = d.peer();
    let family = sockopt::family_of(&peer);
    let spec = spec_for(plan, family)?;
    if let Some(h) = &plan.data_host {
        check_data_host(h, peer)?;
    }
    let sock = sockopt::new_socket(family, Protocol::Udp)?;
    sockopt::apply_side(&sock, &plan.local, family, Protocol::Udp, false)
        .context("local data socket")?;
    sockopt::set_recv_err(&sock, family)?;
    let (lss, lsr) = sockopt::buffer_sizes(SockRef::from(&sock));
    let size = send_size(plan, lss, family)?;

    let grant = d.setup(&spec)?;
    if plan.wait_secs > 0 {
        std::thread::sleep(Duration::from_secs(plan.wait_secs));
    }
    if let Some(p) = plan.local_data_port.filter(|&p| p != 0) {
        let _ = sock.set_reuse_address(true);
        sock.bind(&SocketAddr::new(d.local().ip(), p).into())
            .with_context(|| format!("-P: cannot bind the data socket to port {p}"))?;
    }
    let to = SocketAddr::new(peer.ip(), grant.data_port);
    sock.connect(&to.into())
        .with_context(|| format!("UDP data socket to {to}"))?;
    let sock: UdpSocket = sock.into();
    udp::client_hello(
        &sock,
        &grant.token,
        Instant::now() + Duration::from_secs(10),
    )?;
    if let Some(cpu) = plan.local.cpu_bind {
        sockopt::pin_current_thread(cpu)?;
    }

    let stop = StopFlag::new();
    let (until, _timer) = match plan.length {
        Length::Count(n) => (Until::Datagrams(n), None),
        Length::Seconds(0) => (Until::Stopped, None),
        Length::Seconds(s) => (
            Until::Stopped,
            Some(Timer::start(Duration::from_secs(s), stop.clone())?),
        ),
    };
    let (outcome, local_cpu) = {
        let _int = interrupt::stop_on_interrupt(&stop);
        let phase = ctx.begin(plan)?;
        let o = udp::send(
            &sock,
            size as usize,
            udp::test_id(&grant.token),
            &ctx.fill,
            until,
            plan.rate_bps,
            &stop,
            &ctx.live,
        )?;
        (o, phase.end())
    };
    let remote = d.finish(
        ClientDone {
            bytes_sent: outcome.bytes,
            datagrams_sent: outcome.sent,
            transactions: 0,
        },
        results_wait(plan),
    )?;
    Ok(Measurement {
        elapsed: outcome.elapsed.as_secs_f64(),
        local: SideResults {
            elapsed_ns: outcome.elapsed.as_nanos() as u64,
            bytes_sent: outcome.bytes,
            send_calls: outcome.sent,
            cpu: local_cpu,
            ..SideResults::default()
        },
        remote,
        local_send_buf: lss,
        local_recv_buf: lsr,
        local_addr: sock.local_addr().ok(),
        remote_addr: Some(to),
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        local_send_size: size,
        remote_recv_size: grant.recv_size,
        send_errors: outcome.failed,
        ..Measurement::default()
    })
}
