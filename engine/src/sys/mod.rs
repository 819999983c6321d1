//! The platform's calls behind one interface, one file a platform: what
//! every Unix has in [`unix`], Windows' in `windows`; Linux's own calls
//! in `linux` (TCP_INFO, sendfile, sendmmsg/recvmmsg with UDP_SEGMENT and
//! UDP_GRO, MSG_ZEROCOPY, TCP_ZEROCOPY_RECEIVE, io_uring), and elsewhere
//! `portable` gives the same calls, each doing what the platform can (one
//! datagram a call) or saying, in one line naming it, that it cannot.
//! Sockets are passed as [`Sock`]: a descriptor on Unix, a SOCKET on
//! Windows. This is the crate's only unsafe code.

#![allow(unsafe_code)]

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;
#[cfg(all(unix, not(target_os = "linux")))]
mod bsd;
#[cfg(target_os = "linux")]
pub mod uring;
#[cfg(all(unix, not(target_os = "linux")))]
pub use bsd::*;
#[cfg(not(target_os = "linux"))]
mod portable;
#[cfg(not(target_os = "linux"))]
pub use portable::*;

/// This platform, as a user names it.
pub const PLATFORM: &str = if cfg!(target_os = "linux") {
    "Linux"
} else if cfg!(target_os = "macos") {
    "macOS"
} else if cfg!(target_os = "freebsd") {
    "FreeBSD"
} else if cfg!(windows) {
    "Windows"
} else {
    "this system"
};

/// One datagram as a receive read it: its length, its sender, and what its
/// IP header said where the socket asks and the platform tells (traffic
/// class, TTL or hop limit); whether it was longer than the buffer; when
/// the kernel received it (nanoseconds since the Unix epoch), where the
/// socket asks (`opt::recv_timestamps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub len: usize,
    pub from: Option<std::net::SocketAddr>,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
    pub truncated: bool,
    pub arrived: Option<u64>,
}

/// A receive that found nothing yet (its timeout passed, a signal came):
/// try again.
pub fn nothing_yet(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// What a host is, for comparing two runs: the type is the control
/// protocol's (the netserver tells its own, `ServerMsg::Facts`).
pub use proto::facts::HostFacts;

/// An option of Linux's own, asked for where this is not Linux: `Some`
/// line naming the option and the platform (`None` on Linux).
pub fn lacks(option: &str) -> Option<String> {
    (!cfg!(target_os = "linux"))
        .then(|| format!("{option}: Linux's only; not available on {PLATFORM}"))
}

/// What TCP_INFO says of a connection, as the results carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub total_retrans: u32,
    pub snd_mss: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    /// Bytes a second: the pacing rate (u64::MAX: none) and the rate the
    /// kernel last measured data delivered at.
    pub pacing_rate: u64,
    pub delivery_rate: u64,
    /// Bytes sent and not yet acknowledged (the kernel's packets in flight,
    /// in segments of the send MSS).
    pub bytes_in_flight: u64,
}
