//! TCP_STREAM (we send) and TCP_MAERTS (the netserver sends).

use std::{
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, Result};
use engine::{
    buffer::SendRing,
    handshake, sockopt,
    stream::{self, Until},
    timer::StopFlag,
};
use proto::{ClientDone, Protocol, SideResults, TestKind};
use socket2::SockRef;

use super::{
    Context, Measurement, Prepared, bind_local_port, length_timer, pin, prepare, request,
    results_wait,
};
use crate::{
    cli::{Length, Plan},
    control::Dialect,
    interrupt,
};

/// How long a sender waits for the receiver to close after the last byte.
const LINGER: Duration = Duration::from_secs(60);

pub fn run_once(plan: &Plan, d: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    let Prepared {
        peer,
        spec,
        sock,
        lss,
        lsr,
        ..
    } = prepare(plan, d, Protocol::Tcp)?;
    let grant = request(plan, d, &spec)?;
    bind_local_port(plan, &sock, d.local().ip())?;
    let to = SocketAddr::new(peer.ip(), grant.data_port);
    sock.connect_timeout(&to.into(), Duration::from_secs(10))
        .with_context(|| format!("data connection to {to}"))?;
    let conn: TcpStream = sock.into();
    handshake::write_preamble(&conn, &grant.token, 0)?;
    pin(plan)?;

    let stop = StopFlag::new();
    let mut m = Measurement {
        local_addr: conn.local_addr().ok(),
        remote_addr: Some(to),
        local_send_buf: lss,
        local_recv_buf: lsr,
        remote_send_buf: grant.send_buf,
        remote_recv_buf: grant.recv_buf,
        remote_send_size: grant.send_size,
        remote_recv_size: grant.recv_size,
        ..Measurement::default()
    };
    let outcome = match plan.test {
        TestKind::TcpStream => {
            let size = plan
                .local
                .send_size
                .unwrap_or(if lss > 0 { lss } else { 4096 });
            let width = plan
                .send_width
                .map_or_else(|| SendRing::width_for(lss, size), |w| w as usize);
            let mut ring = SendRing::new(size as usize, width, &ctx.fill);
            m.local_send_size = size;
            let until = match plan.length {
                Length::Count(n) => Until::Bytes(n),
                Length::Seconds(_) => Until::Stopped,
            };
            let _timer = length_timer(plan, &stop)?;
            let _int = interrupt::stop_on_interrupt(&stop);
            let phase = ctx.begin(plan)?;
            let o = stream::send(&conn, &mut ring, until, &stop, &ctx.live, LINGER)?;
            (o, phase.end())
        }
        _ => {
            let size = plan
                .local
                .recv_size
                .unwrap_or(if lsr > 0 { lsr } else { 4096 });
            m.local_recv_size = size;
            let mut buf = vec![0u8; size as usize];
            let silence = match plan.length {
                Length::Seconds(s) if s > 0 => Duration::from_secs(s + 30),
                _ => Duration::from_secs(330),
            };
            conn.set_read_timeout(Some(silence))?;
            let phase = ctx.begin(plan)?;
            let o = stream::receive(&conn, &mut buf, &ctx.live)?;
            (o, phase.end())
        }
    };
    let (outcome, local_cpu) = outcome;
    m.elapsed = outcome.elapsed.as_secs_f64();
    m.mss = sockopt::mss(SockRef::from(&conn));
    let sending = plan.test == TestKind::TcpStream;
    m.local = SideResults {
        elapsed_ns: outcome.elapsed.as_nanos() as u64,
        bytes_sent: if sending { outcome.bytes } else { 0 },
        bytes_received: if sending { 0 } else { outcome.bytes },
        send_calls: if sending { outcome.calls } else { 0 },
        recv_calls: if sending { 0 } else { outcome.calls },
        tcp: sockopt::tcp_stats(&conn),
        cpu: local_cpu,
        ..SideResults::default()
    };
    (m.local.send_buf_end, m.local.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&conn));
    // Close before asking for results: a sending netserver waits for it.
    drop(conn);
    m.remote = d.finish(
        ClientDone {
            bytes_sent: m.local.bytes_sent,
            ..ClientDone::default()
        },
        results_wait(plan),
    )?;
    check_counts(plan.test, &m)?;
    Ok(m)
}

/// TCP is reliable: what one side sent, the other received, to the byte.
fn check_counts(kind: TestKind, m: &Measurement) -> Result<()> {
    let (sent, got) = match kind {
        TestKind::TcpStream => (m.local.bytes_sent, m.remote.bytes_received),
        _ => (m.remote.bytes_sent, m.local.bytes_received),
    };
    if sent != got {
        anyhow::bail!(
            "byte counts disagree: {sent} sent, {got} received (the data connection was disturbed)"
        );
    }
    Ok(())
}

/// The netserver binds data sockets to the control connection's address,
/// so a different data host cannot work; say so rather than hang.
pub(crate) fn check_data_host(host: &str, peer: SocketAddr) -> Result<()> {
    use std::net::ToSocketAddrs;
    let same = (host, 0)
        .to_socket_addrs()
        .map(|mut a| a.any(|a| a.ip() == peer.ip()))
        .unwrap_or(false);
    if !same {
        anyhow::bail!(
            "-- -H {host}: the netserver's data sockets are bound to the control connection's address ({}); connect the control connection there instead (-H)",
            peer.ip()
        );
    }
    Ok(())
}
