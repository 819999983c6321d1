//! Socket options of data and control connections.

use std::{net::SocketAddr, time::Duration};

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
        // netperf 2.7 tries the algorithm and goes on with the default if
        // the host refuses it; the one in use is read back at the end.
        if let Some(cc) = &side.cong_control {
            let _ = sys::opt::set_congestion(sock, cc);
        }
        if keepalive {
            sock.set_keepalive(true)
                .context(|| "setting SO_KEEPALIVE".to_string())?;
        }
        if let Some(mss) = side.mss {
            sys::opt::set_mss(sock, i32::try_from(mss).unwrap_or(i32::MAX))
                .context(|| format!("setting TCP_MAXSEG to {mss}"))?;
        }
    }
    if side.dont_route {
        sys::opt::dont_route(sock).context(|| "setting SO_DONTROUTE".to_string())?;
    }
    if let Some(tos) = side.tos {
        sys::opt::set_tos(sock, family == Family::V6, i32::from(tos))
            .context(|| format!("setting IP TOS to {tos:#04x}"))?;
    }
    if let Some(p) = side.priority {
        sys::opt::priority(sock, p).context(|| {
            let why = if p > 6 {
                " (above 6 needs CAP_NET_ADMIN)"
            } else {
                ""
            };
            format!("setting SO_PRIORITY to {p}{why}")
        })?;
    }
    Ok(())
}

/// What netperf 2.7 sets on its own data socket only (`-- -C -G -g -q -f
/// -F`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalOpts {
    /// TCP_CORK.
    pub cork: bool,
    /// TCP_MAXSEG, before the connection.
    pub mss: Option<u32>,
    /// SO_DEBUG (needs CAP_NET_ADMIN; as in netperf 2.7, a refusal is not
    /// an error).
    pub so_debug: bool,
    /// SO_MAX_PACING_RATE, bytes per second.
    pub pacing: Option<u64>,
    /// IP_MTU_DISCOVER (IPV6_MTU_DISCOVER) = do: don't fragment.
    pub mtu_discover: bool,
    /// TCP_FASTOPEN_CONNECT: connect() sends the first data in the SYN.
    pub fastopen: bool,
}

/// Pace a TCP sender at `bits_per_second` (SO_MAX_PACING_RATE: the
/// kernel's pacing, fq's or TCP's own), as much as the option holds.
pub fn pace(sock: &impl sys::Sock, bits_per_second: u64) -> Result<(), EngineError> {
    let bytes = u32::try_from(bits_per_second / 8)
        .unwrap_or(u32::MAX)
        .max(1);
    sys::opt::max_pacing_rate(sock, bytes)
        .context(|| format!("setting SO_MAX_PACING_RATE to {bytes} bytes/s"))
}

/// Apply [`LocalOpts`] to a data socket before it connects.
pub fn apply_local(
    sock: &Socket,
    o: &LocalOpts,
    family: Family,
    protocol: Protocol,
) -> Result<(), EngineError> {
    if protocol == Protocol::Tcp {
        if let Some(mss) = o.mss {
            sys::opt::set_mss(sock, i32::try_from(mss).unwrap_or(i32::MAX))
                .context(|| format!("setting TCP_MAXSEG to {mss}"))?;
        }
        if o.cork {
            sys::opt::cork(sock, true).context(|| "setting TCP_CORK".to_string())?;
        }
        if o.fastopen {
            sys::opt::fastopen_connect(sock)
                .context(|| "setting TCP_FASTOPEN_CONNECT".to_string())?;
        }
    }
    if let Some(rate) = o.pacing {
        let r = u32::try_from(rate).unwrap_or(u32::MAX);
        sys::opt::max_pacing_rate(sock, r)
            .context(|| format!("setting SO_MAX_PACING_RATE to {rate}"))?;
    }
    if o.so_debug {
        let _ = sys::opt::debug(sock);
    }
    if o.mtu_discover {
        sys::opt::dont_fragment(sock, family == Family::V6)
            .context(|| "setting IP_MTU_DISCOVER".to_string())?;
    }
    Ok(())
}

/// Why this host's kernel ran another congestion control than `asked`,
/// and the remedy: root may choose any the kernel can load; anyone else
/// only those net.ipv4.tcp_allowed_congestion_control lists (said with the
/// list as it is).
pub fn cc_not_applied_here(asked: &str, root: bool) -> String {
    if root {
        return format!(
            "the kernel has no {asked} (its module is neither built in nor loadable: modprobe tcp_{asked}; net.ipv4.tcp_available_congestion_control lists those it has)"
        );
    }
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .map(|a| format!(" ({})", a.trim()))
        .unwrap_or_default();
    format!(
        "an unprivileged process may only choose from net.ipv4.tcp_allowed_congestion_control{allowed}: add {asked} to it on this host (sysctl -w net.ipv4.tcp_allowed_congestion_control=\"$(sysctl -n net.ipv4.tcp_allowed_congestion_control) {asked}\", its module loaded), or run as root"
    )
}

/// What a data socket does not have of what was asked of it, read back
/// from the socket after [`apply_side`] (and [`apply_local`], `local`): a
/// line each for a warning, naming the option and why. The kernel goes on
/// with its default congestion control where an unprivileged process asks
/// one outside net.ipv4.tcp_allowed_congestion_control, ignores SO_DEBUG
/// without CAP_NET_ADMIN, and caps socket buffers at net.core.wmem_max
/// and rmem_max; netperf 2.7 says nothing of it, so the figures read as
/// if it had.
pub fn not_applied(sock: &Socket, side: &SideSpec, local: Option<&LocalOpts>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(cc) = &side.cong_control
        && let Some(now) = congestion_control(SockRef::from(sock))
        && &now != cc
    {
        out.push(format!(
            "-K {cc}: the kernel refused it and runs {now}: {}",
            cc_not_applied_here(cc, sys::privileged())
        ));
    }
    if local.is_some_and(|l| l.so_debug) && matches!(sys::opt::debugging(sock), Ok(false)) {
        out.push(
            "-g: SO_DEBUG is not set: the kernel allows it only with CAP_NET_ADMIN".to_string(),
        );
    }
    let (send, recv) = buffer_sizes(SockRef::from(sock));
    for (asked, got, option, max) in [
        (side.send_buf, send, "SO_SNDBUF", "wmem_max"),
        (side.recv_buf, recv, "SO_RCVBUF", "rmem_max"),
    ] {
        if let Some(a) = asked
            && got < a
        {
            out.push(format!(
                "{option}: {a} asked, the kernel gives {got}: it caps what an unprivileged process asks at net.core.{max} (doubled)"
            ));
        }
    }
    out
}

/// TCP Fast Open on a listener, with room for `queue` pending requests.
pub fn set_fastopen_listener(sock: &Socket, queue: i32) -> Result<(), EngineError> {
    sys::opt::fastopen_listener(sock, queue).context(|| "setting TCP_FASTOPEN".to_string())
}

/// TCP_DEFER_ACCEPT on a listener: accept only once data arrived, or after
/// `secs` seconds (netperf 2.7's netserver uses 5).
pub fn set_defer_accept(sock: &Socket, secs: i32) -> Result<(), EngineError> {
    sys::opt::defer_accept(sock, secs).context(|| "setting TCP_DEFER_ACCEPT".to_string())
}

/// The TOS byte (traffic class) a socket holds.
pub fn tos(sock: &impl crate::sys::Sock, family: Family) -> Option<u32> {
    sys::opt::tos(sock, family == Family::V6)
        .ok()
        .and_then(|v| u32::try_from(v).ok())
}

/// An integer socket option as the kernel holds it (for tests and reports).
pub fn int_option(sock: &impl crate::sys::Sock, level: i32, name: i32) -> Option<i32> {
    sys::get_int_option(sock, level, name).ok()
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
    // (where the platform has no user timeout, keepalive alone notices)
    match sys::opt::user_timeout(&*sock, user_timeout) {
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
        r => r.context(|| "setting TCP_USER_TIMEOUT".to_string())?,
    }
    Ok(())
}

/// The congestion control algorithm of a TCP socket.
pub fn congestion_control(sock: SockRef<'_>) -> Option<String> {
    let v = sys::opt::congestion(&sock).ok()?;
    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
    Some(String::from_utf8_lossy(v.get(..end)?).into_owned())
}

/// TCP_INFO figures of a connection.
/// TCP_INFO of a connection now, for an interim report.
pub fn tcp_sample(sock: &impl crate::sys::Sock) -> Option<proto::TcpSample> {
    let info = sys::tcp_info(sock).ok()?;
    Some(proto::TcpSample {
        rtt_us: info.rtt_us,
        rttvar_us: info.rttvar_us,
        cwnd: info.snd_cwnd,
        retransmits: u64::from(info.total_retrans),
        delivery_rate: info.delivery_rate,
        pacing_rate: (info.pacing_rate != u64::MAX).then_some(info.pacing_rate),
        bytes_in_flight: info.bytes_in_flight,
    })
}

pub fn tcp_stats(sock: &impl crate::sys::Sock) -> Option<TcpStats> {
    let info = sys::tcp_info(sock).ok()?;
    Some(TcpStats {
        retransmits: u64::from(info.total_retrans),
        mss: info.snd_mss,
        rtt_us: info.rtt_us,
        rttvar_us: info.rttvar_us,
        cwnd: info.snd_cwnd,
        cong_control: congestion_control(SockRef::from(sock)).unwrap_or_default(),
    })
}

/// Have a UDP socket report transmit errors (ENOBUFS from a full queue,
/// ICMP errors) on send, as netperf does, instead of dropping silently.
pub fn set_recv_err(sock: &impl crate::sys::Sock, family: Family) -> Result<(), EngineError> {
    sys::opt::recv_err(sock, family == Family::V6)
        .map_err(|e| EngineError::io("setting IP_RECVERR", e))
}

/// TCP_MAXSEG of a connected TCP socket.
pub fn mss(sock: SockRef<'_>) -> Option<u32> {
    sys::opt::mss(&*sock)
        .ok()
        .and_then(|v| u32::try_from(v).ok())
}

/// Pin the calling thread to one CPU (netperf's `-T`).
pub fn pin_current_thread(cpu: u32) -> Result<(), EngineError> {
    match sys::opt::pin_cpu(cpu as usize) {
        Ok(true) => Ok(()),
        Ok(false) => Err(EngineError::Invalid(format!("CPU {cpu} does not exist"))),
        Err(e) => Err(EngineError::Invalid(format!(
            "cannot bind to CPU {cpu}: {e}"
        ))),
    }
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
    fn unknown_congestion_control_leaves_the_default() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        let before = congestion_control(SockRef::from(&s)).unwrap();
        let side = SideSpec {
            cong_control: Some("nosuchcc".into()),
            ..Default::default()
        };
        apply_side(&s, &side, Family::V4, Protocol::Tcp, false).unwrap();
        assert_eq!(congestion_control(SockRef::from(&s)).unwrap(), before);
    }

    #[test]
    fn local_options_reach_the_socket() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        let o = LocalOpts {
            cork: true,
            mss: Some(1000),
            pacing: Some(1_000_000),
            mtu_discover: true,
            ..Default::default()
        };
        apply_local(&s, &o, Family::V4, Protocol::Tcp).unwrap();
        assert_eq!(int_option(&s, libc::IPPROTO_TCP, libc::TCP_CORK), Some(1));
        assert_eq!(
            int_option(&s, libc::IPPROTO_TCP, libc::TCP_MAXSEG),
            Some(1000)
        );
        assert_eq!(
            int_option(&s, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE),
            Some(1_000_000)
        );
        assert_eq!(
            int_option(&s, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER),
            Some(libc::IP_PMTUDISC_DO)
        );
        let side = SideSpec {
            dont_route: true,
            ..Default::default()
        };
        apply_side(&s, &side, Family::V4, Protocol::Tcp, false).unwrap();
        assert_eq!(
            int_option(&s, libc::SOL_SOCKET, libc::SO_DONTROUTE),
            Some(1)
        );
    }

    #[test]
    fn congestion_control_is_readable() {
        let s = new_socket(Family::V4, Protocol::Tcp).unwrap();
        let cc = congestion_control(SockRef::from(&s)).unwrap();
        assert!(!cc.is_empty());
    }
}
