//! Socket options of data and control connections.

use std::{net::SocketAddr, os::fd::AsFd, time::Duration};

use proto::{Family, Protocol, SideSpec, TcpStats};
use socket2::{Domain, SockRef, Socket, TcpKeepalive, Type};

use crate::{EngineError, error::IoContext, sys};

/// A new socket for `family` and `protocol`.
pub fn new_socket(family: Family, protocol: Protocol) -> Result<Socket, EngineError> {
    let domain = match family {
        Family::V4 => Domain::IPV4,
        Family::V6 => Domain::IPV6,
    };
    let (ty, p) = match protocol {
        Protocol::Tcp => (Type::STREAM, socket2::Protocol::TCP),
        Protocol::Udp => (Type::DGRAM, socket2::Protocol::UDP),
    };
    Socket::new(domain, ty, Some(p)).context(|| "socket()".to_string())
}

pub fn family_of(addr: &SocketAddr) -> Family {
    match addr {
        SocketAddr::V4(_) => Family::V4,
        SocketAddr::V6(_) => Family::V6,
    }
}

/// Request socket buffer sizes. The kernel may grant more (Linux doubles the
/// request) or less (capped by rmem_max/wmem_max).
pub fn set_buffers(sock: &Socket, send: Option<u32>, recv: Option<u32>) -> Result<(), EngineError> {
    if let Some(n) = send {
        sock.set_send_buffer_size(n as usize)
            .context(|| format!("setting SO_SNDBUF to {n}"))?;
    }
    if let Some(n) = recv {
        sock.set_recv_buffer_size(n as usize)
            .context(|| format!("setting SO_RCVBUF to {n}"))?;
    }
    Ok(())
}

/// The socket buffer sizes in force: (send, receive).
pub fn buffer_sizes(sock: SockRef<'_>) -> (u32, u32) {
    let s = sock.send_buffer_size().unwrap_or(0);
    let r = sock.recv_buffer_size().unwrap_or(0);
    (clamp_u32(s), clamp_u32(r))
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Apply one side's options to a data socket, before it connects or
/// listens (buffer sizes decide the TCP window scale at connection time).
pub fn apply_side(
    sock: &Socket,
    side: &SideSpec,
    family: Family,
    protocol: Protocol,
    keepalive: bool,
) -> Result<(), EngineError> {
    set_buffers(sock, side.send_buf, side.recv_buf)?;
    if protocol == Protocol::Tcp {
        if side.nodelay {
            sock.set_tcp_nodelay(true)
                .context(|| "setting TCP_NODELAY".to_string())?;
        }
        if let Some(cc) = &side.cong_control {
            sock.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
                EngineError::Invalid(format!(
                    "congestion control '{cc}' is not available here ({e}); see /proc/sys/net/ipv4/tcp_allowed_congestion_control"
                ))
            })?;
        }
        if keepalive {
            sock.set_keepalive(true)
                .context(|| "setting SO_KEEPALIVE".to_string())?;
        }
    }
    if let Some(tos) = side.tos {
        match family {
            Family::V4 => sock.set_tos_v4(u32::from(tos)),
            Family::V6 => sock.set_tclass_v6(u32::from(tos)),
        }
        .context(|| format!("setting IP TOS to {tos:#04x}"))?;
    }
    if let Some(p) = side.priority {
        sock.set_priority(p)
            .context(|| format!("setting SO_PRIORITY to {p}"))?;
    }
    Ok(())
}

/// Keepalive and user timeout for long-lived connections (control and data),
/// so that a peer that vanishes is noticed.
pub fn set_liveness(sock: SockRef<'_>, user_timeout: Duration) -> Result<(), EngineError> {
    let ka = TcpKeepalive::new()
        .with_time(Duration::from_secs(30))
        .with_interval(Duration::from_secs(10))
        .with_retries(3);
    sock.set_tcp_keepalive(&ka)
        .context(|| "setting TCP keepalive".to_string())?;
    sock.set_tcp_user_timeout(Some(user_timeout))
        .context(|| "setting TCP_USER_TIMEOUT".to_string())?;
    Ok(())
}

/// The congestion control algorithm of a TCP socket.
pub fn congestion_control(sock: SockRef<'_>) -> Option<String> {
    let v = sock.tcp_congestion().ok()?;
    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
    Some(String::from_utf8_lossy(&v[..end]).into_owned())
}

/// TCP_INFO figures of a connection.
pub fn tcp_stats(sock: &impl AsFd) -> Option<TcpStats> {
    let info = sys::tcp_info(&sock.as_fd()).ok()?;
    Some(TcpStats {
        retransmits: u64::from(info.tcpi_total_retrans),
        mss: info.tcpi_snd_mss,
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        cwnd: info.tcpi_snd_cwnd,
        cong_control: congestion_control(SockRef::from(sock)).unwrap_or_default(),
    })
}

/// Have a UDP socket report transmit errors (ENOBUFS from a full queue,
/// ICMP errors) on send, as netperf does, instead of dropping silently.
pub fn set_recv_err(sock: &impl AsFd, family: Family) -> Result<(), EngineError> {
    use nix::sys::socket::{setsockopt, sockopt};
    match family {
        Family::V4 => setsockopt(sock, sockopt::Ipv4RecvErr, &true),
        Family::V6 => setsockopt(sock, sockopt::Ipv6RecvErr, &true),
    }
    .map_err(|e| EngineError::io("setting IP_RECVERR", e.into()))
}

/// TCP_MAXSEG of a connected TCP socket.
pub fn mss(sock: SockRef<'_>) -> Option<u32> {
    sock.tcp_mss().ok()
}

/// Pin the calling thread to one CPU (netperf's `-T`).
pub fn pin_current_thread(cpu: u32) -> Result<(), EngineError> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu as usize)
        .map_err(|_| EngineError::Invalid(format!("CPU {cpu} does not exist")))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| EngineError::Invalid(format!("cannot bind to CPU {cpu}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_granted_and_reported() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        set_buffers(&s, Some(65536), Some(65536)).unwrap();
        let (snd, rcv) = buffer_sizes(SockRef::from(&s));
        // Linux doubles the request (unless capped by wmem_max/rmem_max).
        assert!(snd >= 4096 && rcv >= 4096, "{snd} {rcv}");
    }

    #[test]
    fn unknown_congestion_control_names_itself() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        let side = SideSpec {
            cong_control: Some("nosuchcc".into()),
            ..Default::default()
        };
        let e = apply_side(&s, &side, Family::V4, Protocol::Tcp, false).unwrap_err();
        assert!(e.to_string().contains("nosuchcc"), "{e}");
    }

    #[test]
    fn congestion_control_is_readable() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        let cc = congestion_control(SockRef::from(&s)).unwrap();
        assert!(!cc.is_empty());
    }
}
