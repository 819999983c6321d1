//! UDP_STREAM: we send datagrams, the netserver counts them exactly.

use std::{
    net::{SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use engine::{
    sockopt,
    stream::udp::{self, Until},
    timer::StopFlag,
};
use proto::{ClientDone, Family, Protocol, SideResults};

use super::{
    Context, Measurement, Prepared, bind_local_port, length_timer, pin, prepare, request,
    results_wait,
};
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
    let Prepared {
        peer,
        family,
        spec,
        sock,
        lss,
        lsr,
    } = prepare(plan, d, Protocol::Udp)?;
    sockopt::set_recv_err(&sock, family)?;
    let size = send_size(plan, lss, family)?;

    let grant = request(plan, d, &spec)?;
    bind_local_port(plan, &sock, d.local().ip())?;
    let to = SocketAddr::new(peer.ip(), grant.data_port);
    sock.connect(&to.into())
        .with_context(|| format!("UDP data socket to {to}"))?;
    let sock: UdpSocket = sock.into();
    udp::client_hello(
        &sock,
        &grant.token,
        Instant::now() + Duration::from_secs(10),
    )?;
    pin(plan)?;

    let stop = StopFlag::new();
    let until = match plan.length {
        Length::Count(n) => Until::Datagrams(n),
        Length::Seconds(_) => Until::Stopped,
    };
    let _timer = length_timer(plan, &stop)?;
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
