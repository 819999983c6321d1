//! TCP_STREAM (we send) and TCP_MAERTS (the netserver sends).

use std::{
    fs::File, io::Write as _, net::TcpStream, os::unix::fs::OpenOptionsExt as _, time::Duration,
};

use anyhow::{Context as _, Result};
use engine::{
    buffer::{Placement, Ring},
    handshake,
    latency::Latency,
    sockopt,
    stream::{self, Until, tcp::SendCall},
    timer::StopFlag,
};
use proto::{ClientDone, Protocol, SideResults, TestKind};
use socket2::SockRef;

use super::{Context, Measurement, bind_local, length_timer, pin, prepare, request, results_wait};
use crate::{
    cli::{Length, Plan},
    control::Control,
    interrupt,
};

/// How long a sender waits for the receiver to close after the last byte.
const LINGER: Duration = Duration::from_secs(60);

pub fn run_once(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let mut p = prepare(plan, d, Protocol::Tcp)?;
    let sending = plan.test == TestKind::TcpStream;
    // Our send ring, sized before the request: netperf 2.7 tells the
    // netserver its send width.
    let send_size = plan
        .local
        .send_size
        .unwrap_or_else(|| proto::test::default_message_size(p.lss, u32::MAX));
    let at = Placement::new(plan.local.send_align, plan.local.send_offset);
    let send_width =
        Ring::resolve(send_size, plan.local.send_width, p.lss, at).capped_width() as usize;
    if sending && p.spec.server.send_width.is_none() {
        p.spec.server.send_width = Some(send_width as u32);
    }
    let grant = request(plan, d, &p.spec)?;
    bind_local(&p)?;
    let to = p.data_addr(&grant);
    let (lss, lsr, tos) = (p.lss, p.lsr, p.tos);
    p.sock
        .connect_timeout(&to.into(), Duration::from_secs(10))
        .with_context(|| format!("data connection to {to}"))?;
    let conn: TcpStream = p.sock.into();
    // TCP_MSS reports the segment size right after connect, as netperf 2.7
    let mss_at_connect = sockopt::mss(SockRef::from(&conn));
    handshake::present(&conn, &grant.token, 0, &d.conventions())?;
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
        remote_send_width: grant.send_width,
        remote_recv_width: grant.recv_width,
        local_tos: tos,
        ..Measurement::default()
    };
    let mut lat = ctx.stats.then(Latency::new);
    let outcome = match plan.test {
        TestKind::TcpStream => {
            let size = send_size;
            let at = Placement::new(plan.local.send_align, plan.local.send_offset);
            let mut ring = Ring::placed(size as usize, send_width, &ctx.fill, at);
            m.local_send_size = size;
            m.local_send_width = ring.width() as u32;
            let until = match plan.length {
                Length::Count(n) => Until::Bytes(n),
                Length::Seconds(_) => Until::Stopped,
            };
            let file = if plan.sendfile() {
                Some(sendfile_source(plan, &ring)?)
            } else {
                None
            };
            let _timer = length_timer(plan, &stop)?;
            let _int = interrupt::stop_on_interrupt(&stop);
            let phase = ctx.begin(plan)?;
            let o = match &file {
                Some(f) => stream::tcp::send_file(
                    &conn,
                    f,
                    size as usize,
                    ring.width(),
                    until,
                    &stop,
                    &ctx.live,
                    LINGER,
                    lat.as_mut(),
                )?,
                None => {
                    let how = if plan.zerocopy {
                        SendCall::ZeroCopy
                    } else if plan.local_only.use_write {
                        SendCall::Write
                    } else {
                        SendCall::Send
                    };
                    stream::tcp::send_with(
                        &conn,
                        &mut ring,
                        until,
                        &stop,
                        &ctx.live,
                        LINGER,
                        how,
                        lat.as_mut(),
                    )?
                }
            };
            (o, phase.end())
        }
        _ => {
            let size = plan
                .local
                .recv_size
                .unwrap_or_else(|| proto::test::default_message_size(lsr, u32::MAX));
            m.local_recv_size = size;
            let width = plan
                .local
                .recv_width
                .map_or_else(|| Ring::width_for(lsr, size), |w| w as usize);
            let at = Placement::new(plan.local.recv_align, plan.local.recv_offset);
            let mut ring = Ring::placed(size as usize, width, b"", at);
            m.local_recv_width = ring.width() as u32;
            let silence = match plan.length {
                Length::Seconds(s) if s > 0 => Duration::from_secs(s + 30),
                _ => Duration::from_secs(330),
            };
            conn.set_read_timeout(Some(silence))?;
            let phase = ctx.begin(plan)?;
            let o = stream::tcp::receive_ring(&conn, &mut ring, &ctx.live, lat.as_mut())?;
            (o, phase.end())
        }
    };
    let (outcome, local_cpu) = outcome;
    m.elapsed = outcome.elapsed.as_secs_f64();
    m.latency = lat.and_then(|l| l.summary());
    m.mss = if plan.name == crate::cli::TestName::TcpMss {
        mss_at_connect
    } else {
        sockopt::mss(SockRef::from(&conn))
    };
    m.local = SideResults {
        tcp: sockopt::tcp_stats(&conn),
        cpu: local_cpu,
        ..outcome.results()
    };
    (m.local.send_buf_end, m.local.recv_buf_end) = sockopt::buffer_sizes(SockRef::from(&conn));
    // Close before asking for results: a sending netserver waits for it.
    drop(conn);
    m.remote = d.finish(ClientDone::default(), results_wait(plan))?;
    check_counts(plan.test, &m, d.caps().exact_counts)?;
    Ok(m)
}

/// TCP_SENDFILE's file: the `-F` fill file, which must hold the whole ring
/// (as netperf 2.7 requires), or a temporary file of the ring's contents,
/// unlinked from the start.
fn sendfile_source(plan: &Plan, ring: &Ring) -> Result<File> {
    let need = (ring.size() * ring.width()) as u64;
    if let Some(path) = &plan.fill_file {
        let f = File::open(path).with_context(|| format!("-F {}", path.display()))?;
        let len = f.metadata()?.len();
        if len < need {
            anyhow::bail!(
                "-F {}: TCP_SENDFILE sends from the file itself, which must hold {} messages of {} bytes ({need} bytes); it has {len}",
                path.display(),
                ring.width(),
                ring.size()
            );
        }
        return Ok(f);
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(std::env::temp_dir())
        .context("TCP_SENDFILE: cannot make a temporary file")?;
    f.write_all(&ring.contents())
        .context("TCP_SENDFILE: cannot fill its temporary file")?;
    Ok(f)
}

/// TCP is reliable: what one side sent, the other received, to the byte.
/// netserver 2.7, as a sender, does not count the send its timer cut
/// short: what we received may exceed its count by less than one message
/// (the figure is ours, as netperf 2.7's).
fn check_counts(kind: TestKind, m: &Measurement, exact: bool) -> Result<()> {
    let (sent, got) = match kind {
        TestKind::TcpStream => (m.local.bytes_sent, m.remote.bytes_received),
        _ => (m.remote.bytes_sent, m.local.bytes_received),
    };
    let cut_short = !exact
        && kind == TestKind::TcpMaerts
        && got >= sent
        && got - sent < u64::from(m.remote_send_size.max(1));
    if sent != got && !cut_short {
        anyhow::bail!(
            "byte counts disagree: {sent} sent, {got} received (the data connection was disturbed)"
        );
    }
    Ok(())
}
