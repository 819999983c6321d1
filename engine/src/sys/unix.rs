//! What every Unix has: sockets as descriptors, poll(2), the socket
//! calls std does not make, descriptors and their limit, the tick rate.

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
    time::Duration,
};

/// A socket, as this platform's calls take it: anything that has a
/// descriptor (socket2's `SockRef` is made from one too).
pub trait Sock: AsFd {}

impl<T: AsFd + ?Sized> Sock for T {}

/// A socket borrowed, to wait on with others.
pub type BorrowedSock<'a> = std::os::fd::BorrowedFd<'a>;
/// The raw descriptor, as io_uring and netperf 2.7's debug lines take it.
pub type RawSock = std::os::fd::RawFd;

/// `s` borrowed.
pub fn borrowed(s: &impl Sock) -> BorrowedSock<'_> {
    s.as_fd()
}

/// `s`'s descriptor.
pub fn raw(s: &impl Sock) -> RawSock {
    s.as_fd().as_raw_fd()
}

/// `write(2)` on a socket (netperf's `-- -I`: write rather than send).
pub fn write(sock: &impl Sock, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe { libc::write(raw(sock), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recv(2)` with `MSG_DONTWAIT`: what has arrived, up to `buf`'s length,
/// without waiting for more (`WouldBlock` when nothing has), on a socket
/// that otherwise blocks.
pub fn recv_nowait(sock: &impl Sock, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe {
        libc::recv(
            raw(sock),
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
    sock: &impl Sock,
    buf: &mut [u8],
    peek: bool,
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    recv_from_with(sock, buf, if peek { libc::MSG_PEEK } else { 0 })
}

/// `recvfrom(2)` with `flags`.
pub(crate) fn recv_from_with(
    sock: &impl Sock,
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
            raw(sock),
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

/// recvfrom of what has arrived, without waiting (`WouldBlock` when
/// nothing has).
pub fn recv_from_nowait(
    sock: &impl Sock,
    buf: &mut [u8],
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    recv_from_with(sock, buf, libc::MSG_DONTWAIT)
}

/// The monotonic clock, nanoseconds (CLOCK_MONOTONIC: one vDSO call).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Whether `e` says the kernel had no buffer for a send (ENOBUFS).
pub fn no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Whether `e` says the process (or the system) is out of descriptors.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether `e` says the whole system is out of descriptors (ENFILE).
pub fn system_out_of_descriptors(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENFILE)
}

/// The soft and hard limits of open descriptors (RLIMIT_NOFILE).
/// Whether this process runs as root (may choose any congestion control
/// whose module the kernel can load).
pub fn privileged() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn open_files_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return (1024, 1024);
    }
    // (rlim_t is u64 here, i64 on FreeBSD)
    #[allow(clippy::unnecessary_cast)]
    (lim.rlim_cur as u64, lim.rlim_max as u64)
}

/// Raise the soft limit of open descriptors to `want` (at most the hard
/// limit): the limit then.
pub fn set_open_files(want: u64) -> u64 {
    let (soft, hard) = open_files_limit();
    let want = want.min(hard);
    if want <= soft {
        return soft;
    }
    #[allow(clippy::unnecessary_cast)]
    let lim = libc::rlimit {
        rlim_cur: want as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one rlimit we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        want
    } else {
        soft
    }
}

/// Whether a non-blocking connect's `e` says it is under way.
pub fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

/// What a watched socket is, for the event loop's registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockKind {
    Stream,
    Listener,
    Datagram,
}

/// A socket watched by a mio event loop while its calls are made on the
/// socket itself. On Unix the loop watches the descriptor (mio's
/// `SourceFd`) and a would-block needs nothing more; on Windows the loop
/// must be told after a call would block (see `rearm`).
#[derive(Debug)]
pub struct Watch(RawSock);

impl Watch {
    /// Watch `s` for `interest` under `token`.
    pub fn new(
        registry: &mio::Registry,
        s: &impl Sock,
        _kind: SockKind,
        token: mio::Token,
        interest: mio::Interest,
    ) -> io::Result<Watch> {
        let fd = raw(s);
        registry.register(&mut mio::unix::SourceFd(&fd), token, interest)?;
        Ok(Watch(fd))
    }

    /// How long a loop that peeked at bytes and left them there, waiting
    /// for the rest, waits before peeking again: not at all on Unix, where
    /// epoll wakes the loop when more bytes come.
    pub const PEEK_AGAIN: Option<Duration> = None;

    /// A call on the socket would block: have the loop say when it will
    /// not (nothing to do on Unix: epoll says so by itself).
    #[inline]
    pub fn rearm(&self) {}

    /// [`Watch::rearm`] if `blocked` says the wait is for the socket (not,
    /// say, for the clock); on Unix not even asked.
    #[inline]
    pub fn rearm_if(&self, _blocked: impl FnOnce() -> bool) {}

    /// Accept a connection on the watched listener `l`.
    pub fn accept(
        &self,
        l: &std::net::TcpListener,
    ) -> io::Result<(std::net::TcpStream, std::net::SocketAddr)> {
        l.accept()
    }

    /// Watch no more.
    pub fn deregister(&mut self, registry: &mio::Registry) {
        let _ = registry.deregister(&mut mio::unix::SourceFd(&self.0));
    }

    /// What a loop watches a socket that `receives` and `sends` for:
    /// both, on Unix (epoll wakes on changes only, so a writable socket
    /// costs nothing).
    pub fn interest(_receives: bool, _sends: bool) -> mio::Interest {
        mio::Interest::READABLE | mio::Interest::WRITABLE
    }
}

/// Open `path` to append lines to (a log, a record): created mode 0600,
/// never through a symbolic link, and only a regular file (a FIFO, a
/// device or a directory is refused, and opening never waits for a
/// reader).
/// A new file of the daemon's own (mode 0600), never through a symbolic
/// link and never one that exists already (a state file's temporary copy).
pub fn open_private_new(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

pub fn open_private_append(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(
                e.kind(),
                "it is a symbolic link (refused: name the file it points to)",
            ),
            Some(libc::ENXIO) => io::Error::new(e.kind(), "not a regular file"),
            _ => e,
        })?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    // writes may wait for the disk (on the log's own thread)
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: fcntl on a descriptor we own, with integer flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

/// A key file's mode when its group or others may read it (to refuse it).
pub fn open_to_others(meta: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = meta.permissions().mode();
    (mode & 0o044 != 0).then_some(mode)
}

/// Options every platform has under its own numbers.
pub mod os_opt {
    use std::io;

    use super::{Sock, get_int_option, set_int_option};

    /// SO_DONTROUTE.
    pub fn dont_route(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_DONTROUTE, 1)
    }

    /// SO_DEBUG.
    pub fn debug(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_DEBUG, 1)
    }

    /// Whether SO_DEBUG is set.
    pub fn debugging(sock: &impl Sock) -> io::Result<bool> {
        get_int_option(sock, libc::SOL_SOCKET, libc::SO_DEBUG).map(|v| v != 0)
    }

    /// TCP_FASTOPEN on a listener, with a queue of `queue`.
    pub fn fastopen_listener(sock: &impl Sock, queue: i32) -> io::Result<()> {
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_FASTOPEN, queue)
    }

    /// IP_TOS (IPV6_TCLASS): set the TOS byte (traffic class).
    pub fn set_tos(sock: &impl Sock, v6: bool, tos: i32) -> io::Result<()> {
        if v6 {
            set_int_option(sock, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos)
        } else {
            set_int_option(sock, libc::IPPROTO_IP, libc::IP_TOS, tos)
        }
    }

    /// TCP_MAXSEG: clamp the segment size.
    pub fn set_mss(sock: &impl Sock, mss: i32) -> io::Result<()> {
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss)
    }

    /// TCP_MAXSEG as the connection has it.
    pub fn mss(sock: &impl Sock) -> io::Result<i32> {
        get_int_option(sock, libc::IPPROTO_TCP, libc::TCP_MAXSEG)
    }

    /// IP_TOS (IPV6_TCLASS) as the socket has it.
    pub fn tos(sock: &impl Sock, v6: bool) -> io::Result<i32> {
        if v6 {
            get_int_option(sock, libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            get_int_option(sock, libc::IPPROTO_IP, libc::IP_TOS)
        }
    }

    /// SO_RCVLOWAT: a receive waits for this many bytes.
    pub fn rcvlowat(sock: &impl Sock, bytes: i32) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT, bytes)
    }
}

/// Wait until one of `socks` has something to read (data, a connection to
/// accept, an end or an error), at most `timeout`: which of them have, in
/// their order (all false when the time passed).
pub fn wait_readable(socks: &[BorrowedSock<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
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
pub fn set_int_option(sock: &impl Sock, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            raw(sock),
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
pub fn get_int_option(sock: &impl Sock, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `value`, which outlives the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe { libc::getsockopt(raw(sock), level, name, (&raw mut value).cast(), &mut len) };
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

/// A blocking accept on `l`, which returns by `timeout` at the latest
/// (WouldBlock) or when the listener is shut down: on Unix the listener's
/// SO_RCVTIMEO (which its owner set to `timeout`) and a shutdown both end
/// the accept itself, so it is one system call.
#[inline]
pub fn accept_within(
    l: &std::net::TcpListener,
    _timeout: Duration,
) -> io::Result<(std::net::TcpStream, std::net::SocketAddr)> {
    l.accept()
}

/// What the process was asked by a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP: reopen the files logrotate moved.
    Reopen,
}

impl std::fmt::Display for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Asked::Interrupt => "SIGINT",
            Asked::Terminate => "SIGTERM",
            Asked::Reopen => "SIGHUP",
        })
    }
}

/// Signals taken by one thread with sigwait: every other thread inherits
/// them blocked, so no handler runs at an awkward moment.
#[derive(Debug)]
pub struct Signals(nix::sys::signal::SigSet);

impl Signals {
    /// Block `asked` in this thread (and the threads it starts from now
    /// on): call before any other thread starts.
    pub fn block(asked: &[Asked]) -> io::Result<Signals> {
        use nix::sys::signal::{SigSet, Signal};
        let mut set = SigSet::empty();
        for a in asked {
            set.add(match a {
                Asked::Interrupt => Signal::SIGINT,
                Asked::Terminate => Signal::SIGTERM,
                Asked::Reopen => Signal::SIGHUP,
            });
        }
        set.thread_block().map_err(io::Error::from)?;
        Ok(Signals(set))
    }

    /// The next signal (on the thread that takes them).
    pub fn wait(&self) -> io::Result<Asked> {
        use nix::sys::signal::Signal;
        match self.0.wait().map_err(io::Error::from)? {
            Signal::SIGINT => Ok(Asked::Interrupt),
            Signal::SIGHUP => Ok(Asked::Reopen),
            _ => Ok(Asked::Terminate),
        }
    }
}

/// Detach as a daemon: fork, new session, cwd /, stdio to /dev/null. Call
/// before any thread starts.
pub fn detach() -> io::Result<()> {
    // SAFETY: the caller's rule: no other thread exists, so the child is a
    // whole copy of this process.
    match unsafe { libc::fork() } {
        -1 => return Err(io::Error::last_os_error()),
        0 => {}
        // the parent goes at once, its output already flushed
        // SAFETY: _exit ends the process without running anything more.
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: setsid takes no pointers.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..3 {
        // SAFETY: dup2 onto the standard descriptors, which we own.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A socket this process was handed: a listener or a connection.
#[derive(Debug)]
pub enum Handed {
    Listener(std::net::TcpListener),
    Stream(std::net::TcpStream),
}

/// The TCP listeners systemd's socket activation passed (`LISTEN_PID` is
/// ours, `LISTEN_FDS` of them from descriptor 3), or `None` without it.
pub fn activated_listeners() -> io::Result<Option<Vec<std::net::TcpListener>>> {
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        == Some(std::process::id());
    let Some(n) = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|_| ours)
    else {
        return Ok(None);
    };
    let mut listeners = Vec::new();
    for fd in 3..3 + n.clamp(0, 64) {
        let s =
            socket2::Socket::from(inherited_fd(fd).map_err(|e| {
                io::Error::new(e.kind(), format!("LISTEN_FDS: descriptor {fd}: {e}"))
            })?);
        if !is_tcp(&s, Some(true)) {
            return Err(io::Error::other(format!(
                "LISTEN_FDS: descriptor {fd} is not a listening TCP socket (netserver.socket needs ListenStream=)"
            )));
        }
        s.set_cloexec(true)?;
        listeners.push(std::net::TcpListener::from(s));
    }
    Ok(Some(listeners))
}

/// A TCP socket (a listener when `listening` says so): an internet
/// address, a stream, SO_ACCEPTCONN as asked.
fn is_tcp(s: &socket2::Socket, listening: Option<bool>) -> bool {
    let inet = s.local_addr().ok().and_then(|a| a.as_socket()).is_some();
    inet && s.r#type().ok() == Some(socket2::Type::STREAM)
        && listening.is_none_or(|l| is_listener(s) == l)
}

fn is_listener(s: &socket2::Socket) -> bool {
    get_int_option(s, libc::SOL_SOCKET, libc::SO_ACCEPTCONN).unwrap_or(0) != 0
}

/// inetd's handing: standard input is a TCP socket (a connection, or a
/// listener), not a pipe, a terminal or a Unix socket; `None` otherwise.
pub fn stdin_socket() -> io::Result<Option<Handed>> {
    let stdin = io::stdin();
    let s = socket2::SockRef::from(&stdin);
    if !is_tcp(&s, None) {
        return Ok(None);
    }
    let owned = stdin.as_fd().try_clone_to_owned()?;
    Ok(Some(if is_listener(&s) {
        Handed::Listener(owned.into())
    } else {
        Handed::Stream(owned.into())
    }))
}

/// `who`'s CPU time, user and system, in nanoseconds.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
pub(crate) fn rusage_ns(who: nix::sys::resource::UsageWho) -> Option<(u64, u64)> {
    let u = nix::sys::resource::getrusage(who).ok()?;
    let ns = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec())
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(
                u64::try_from(t.tv_usec())
                    .unwrap_or(0)
                    .saturating_mul(1_000),
            )
    };
    Some((ns(u.user_time()), ns(u.system_time())))
}
