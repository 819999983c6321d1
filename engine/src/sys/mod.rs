//! Thin wrappers of the system calls that std, socket2 and nix do not cover,
//! one file a platform: what every Unix has is here, [`linux`]'s the rest
//! (TCP_INFO, sendfile, sendmmsg/recvmmsg with UDP_SEGMENT and UDP_GRO,
//! MSG_ZEROCOPY), and elsewhere `portable` gives the same calls, each
//! doing what the platform can (one datagram a call) or saying it cannot.
//! This is the crate's only unsafe code.

#![allow(unsafe_code)]

use std::{io, os::fd::AsRawFd, time::Duration};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub mod uring;
#[cfg(target_os = "linux")]
pub use linux::*;
#[cfg(not(target_os = "linux"))]
mod portable;
#[cfg(not(target_os = "linux"))]
pub use portable::*;

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

/// `write(2)` on a socket (netperf's `-- -I`: write rather than send).
pub fn write(sock: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe { libc::write(sock.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recv(2)` with `MSG_DONTWAIT`: what has arrived, up to `buf`'s length,
/// without waiting for more (`WouldBlock` when nothing has), on a socket
/// that otherwise blocks.
pub fn recv_nowait(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recvfrom(2)` (with `MSG_PEEK` when `peek`): the datagram's length and
/// its sender, or `None` for the sender when the kernel gives no address, as
/// it does on a UDP socket that `shutdown` woke. std's `recv_from` panics
/// there (it asserts on the address length), so the data path uses this.
pub fn recv_from(
    sock: &impl AsRawFd,
    buf: &mut [u8],
    peek: bool,
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    recv_from_with(sock, buf, if peek { libc::MSG_PEEK } else { 0 })
}

/// `recvfrom(2)` with `flags`.
pub(crate) fn recv_from_with(
    sock: &impl AsRawFd,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the buffer pointer and length describe `buf`, the address
    // pointer and length describe `storage`; both outlive the call and the
    // kernel writes within the lengths given.
    let n = unsafe {
        libc::recvfrom(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags,
            (&raw mut storage).cast(),
            &mut len,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((n as usize, socket_addr(&storage, len as usize)))
}

/// The address in `storage`, of `len` bytes as the kernel wrote it.
pub(crate) fn socket_addr(
    storage: &libc::sockaddr_storage,
    len: usize,
) -> Option<std::net::SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // the kernel wrote all of it.
            let a: libc::sockaddr_in = unsafe { *std::ptr::from_ref(storage).cast() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(std::net::SocketAddr::from((ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let a: libc::sockaddr_in6 = unsafe { *std::ptr::from_ref(storage).cast() };
            Some(std::net::SocketAddr::V6(std::net::SocketAddrV6::new(
                std::net::Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Wait until one of `socks` has something to read (data, a connection to
/// accept, an end or an error), at most `timeout`: which of them have, in
/// their order (all false when the time passed).
pub fn wait_readable(
    socks: &[std::os::fd::BorrowedFd<'_>],
    timeout: Duration,
) -> io::Result<Vec<bool>> {
    let mut fds: Vec<libc::pollfd> = socks
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the pointer and count describe `fds`, which outlives the call;
    // the kernel writes only their revents.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(fds.iter().map(|f| f.revents != 0).collect())
}

/// A descriptor this process inherited open (systemd's socket activation
/// passes listeners from fd 3), owned from now on. Call once per
/// descriptor, at start, before anything else could own it.
pub fn inherited_fd(fd: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (checked above) and, by the caller's
    // contract, owned by nothing else in this process.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` of an `int` option.
pub fn set_int_option(sock: &impl AsRawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt` of an `int` option.
pub fn get_int_option(sock: &impl AsRawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `value`, which outlives the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&raw mut value).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `sysconf(_SC_CLK_TCK)`: the rate of the kernel's tick counters.
pub fn clock_ticks() -> i64 {
    // SAFETY: sysconf only reads a configuration value.
    i64::from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as i32)
}

/// Descriptors this process holds (`None` when they cannot be counted:
/// reading the list takes a descriptor too), and how many it may hold
/// (its soft RLIMIT_NOFILE): for the netserver's metrics.
pub fn descriptors() -> (Option<u64>, u64) {
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    // (the directory's own descriptor, open while it is read, is not counted)
    let open = std::fs::read_dir(dir)
        .ok()
        .map(|d| d.count().saturating_sub(1) as u64);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    // (rlim_t is u64 here, i64 on FreeBSD)
    #[allow(clippy::unnecessary_cast)]
    let max = if r == 0 { lim.rlim_cur as u64 } else { 0 };
    (open, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn recv_from_names_the_sender_and_survives_a_shutdown() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"abc", a.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = recv_from(&a, &mut buf, true).unwrap();
        assert_eq!((n, from), (3, Some(b.local_addr().unwrap())));
        let (n, from) = recv_from(&a, &mut buf, false).unwrap();
        assert_eq!((n, from), (3, Some(b.local_addr().unwrap())));
        // What an abort does to wake a blocked receiver: the kernel then
        // returns 0 with no address, where std's recv_from panics.
        let _ = socket2::SockRef::from(&a).shutdown(std::net::Shutdown::Both);
        assert_eq!(recv_from(&a, &mut buf, false).unwrap(), (0, None));
    }
}
