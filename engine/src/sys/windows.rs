//! Windows: sockets as SOCKETs, WSAPoll, Winsock's calls that std and
//! socket2 do not make, the CPU's times (GetSystemTimes), handles.

use std::{
    io,
    mem::MaybeUninit,
    os::windows::io::{AsRawSocket, AsSocket},
    time::Duration,
};

use windows_sys::Win32::Networking::WinSock as ws;

/// A socket, as this platform's calls take it: anything that has a SOCKET
/// (socket2's `SockRef` is made from one too).
pub trait Sock: AsSocket {}

impl<T: AsSocket + ?Sized> Sock for T {}

/// A socket borrowed, to wait on with others.
pub type BorrowedSock<'a> = std::os::windows::io::BorrowedSocket<'a>;
/// The raw SOCKET, as netperf 2.7's debug lines print a descriptor.
pub type RawSock = std::os::windows::io::RawSocket;

/// `s` borrowed.
pub fn borrowed(s: &impl Sock) -> BorrowedSock<'_> {
    s.as_socket()
}

/// `s`'s SOCKET.
pub fn raw(s: &impl Sock) -> RawSock {
    s.as_socket().as_raw_socket()
}

fn last_error() -> io::Error {
    // SAFETY: reads the calling thread's last Winsock error.
    io::Error::from_raw_os_error(unsafe { ws::WSAGetLastError() })
}

/// netperf's `-- -I` (write rather than send): Windows has no write(2) on
/// a socket; it is send(2).
pub fn write(sock: &impl Sock, buf: &[u8]) -> io::Result<usize> {
    socket2::SockRef::from(sock).send(buf)
}

/// Whether `sock` has something to read (data, an end, an error) right
/// now.
fn readable_now(sock: &impl Sock) -> io::Result<bool> {
    Ok(wait_readable(&[borrowed(sock)], Duration::ZERO)?
        .first()
        .copied()
        .unwrap_or(false))
}

/// What has arrived, up to `buf`'s length, without waiting for more
/// (`WouldBlock` when nothing has), on a socket that otherwise blocks:
/// Winsock has no MSG_DONTWAIT, so a poll says first whether a receive
/// would wait.
pub fn recv_nowait(sock: &impl Sock, buf: &mut [u8]) -> io::Result<usize> {
    if !readable_now(sock)? {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    socket2::SockRef::from(sock).recv(as_uninit(buf))
}

fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: u8 and MaybeUninit<u8> have one layout; the kernel only
    // writes initialised bytes into it.
    unsafe { &mut *(std::ptr::from_mut::<[u8]>(buf) as *mut [MaybeUninit<u8>]) }
}

/// recvfrom (with `MSG_PEEK` when `peek`): the datagram's length and its
/// sender, or `None` for the sender when there is none.
pub fn recv_from(
    sock: &impl Sock,
    buf: &mut [u8],
    peek: bool,
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    let s = socket2::SockRef::from(sock);
    let (n, from) = if peek {
        s.peek_from(as_uninit(buf))?
    } else {
        s.recv_from(as_uninit(buf))?
    };
    Ok((n, from.as_socket()))
}

/// recvfrom of what has arrived, without waiting (`WouldBlock` when
/// nothing has).
pub fn recv_from_nowait(
    sock: &impl Sock,
    buf: &mut [u8],
) -> io::Result<(usize, Option<std::net::SocketAddr>)> {
    if !readable_now(sock)? {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    recv_from(sock, buf, false)
}

/// Wait until one of `socks` has something to read (data, a connection to
/// accept, an end or an error), at most `timeout`: which of them have, in
/// their order (all false when the time passed).
pub fn wait_readable(socks: &[BorrowedSock<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut fds: Vec<ws::WSAPOLLFD> = socks
        .iter()
        .map(|s| ws::WSAPOLLFD {
            fd: s.as_raw_socket() as ws::SOCKET,
            events: ws::POLLRDNORM,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the pointer and count describe `fds`, which outlives the call;
    // Winsock writes only their revents.
    let n = unsafe { ws::WSAPoll(fds.as_mut_ptr(), fds.len() as u32, ms) };
    if n < 0 {
        return Err(last_error());
    }
    Ok(fds.iter().map(|f| f.revents != 0).collect())
}

/// Socket activation is systemd's: not on Windows.
pub fn inherited_fd(_fd: i32) -> io::Result<std::os::windows::io::OwnedSocket> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "socket activation (LISTEN_FDS) is systemd's, not Windows'",
    ))
}

/// `setsockopt` of an `int` option.
pub fn set_int_option(sock: &impl Sock, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the
    // call.
    let rc = unsafe {
        ws::setsockopt(
            raw(sock) as ws::SOCKET,
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<i32>() as i32,
        )
    };
    if rc == 0 { Ok(()) } else { Err(last_error()) }
}

/// `getsockopt` of an `int` option.
pub fn get_int_option(sock: &impl Sock, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as i32;
    // SAFETY: the pointer and length describe `value`, which outlives the
    // call; Winsock writes at most `len` bytes.
    let rc = unsafe {
        ws::getsockopt(
            raw(sock) as ws::SOCKET,
            level,
            name,
            (&raw mut value).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(last_error())
    }
}

/// The rate of the CPU meter: GetSystemTimes counts in 100 ns units.
pub fn clock_ticks() -> i64 {
    10_000_000
}

/// Handles this process holds, and no limit to speak of (Windows has no
/// RLIMIT_NOFILE; sockets are handles).
pub fn descriptors() -> (Option<u64>, u64) {
    let mut n: u32 = 0;
    // SAFETY: writes one u32 of the current process's handle count.
    let ok = unsafe {
        windows_sys::Win32::System::Threading::GetProcessHandleCount(
            windows_sys::Win32::System::Threading::GetCurrentProcess(),
            &mut n,
        )
    };
    ((ok != 0).then_some(u64::from(n)), 16 * 1024 * 1024)
}

/// The CPU's times since boot (GetSystemTimes: the machine's, not each
/// CPU's), in 100 ns units: busy is user plus kernel less idle. Given as
/// that share for each of the machine's CPUs (so the utilisation is the
/// machine's, the busiest CPU unknown, and service demand counts every
/// CPU, as it must).
pub fn cpu_ticks() -> Option<Vec<crate::cpu::Ticks>> {
    let (mut idle, mut kernel, mut user) = (NO_TIME, NO_TIME, NO_TIME);
    // SAFETY: writes three FILETIMEs we own.
    let ok = unsafe {
        windows_sys::Win32::System::Threading::GetSystemTimes(&mut idle, &mut kernel, &mut user)
    };
    if ok == 0 {
        return None;
    }
    let (idle, kernel, user) = (ticks_100ns(idle), ticks_100ns(kernel), ticks_100ns(user));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Some(vec![
        crate::cpu::Ticks {
            user,
            system: kernel.saturating_sub(idle),
            idle,
            ..crate::cpu::Ticks::default()
        };
        cpus
    ])
}

/// The calling thread's CPU time so far, user and system (kernel), in
/// nanoseconds (GetThreadTimes).
pub fn thread_cpu_ns() -> Option<(u64, u64)> {
    let (mut created, mut exited, mut kernel, mut user) = (NO_TIME, NO_TIME, NO_TIME, NO_TIME);
    // SAFETY: the pseudo-handle of the calling thread, and four FILETIMEs
    // we own to write.
    let ok = unsafe {
        windows_sys::Win32::System::Threading::GetThreadTimes(
            windows_sys::Win32::System::Threading::GetCurrentThread(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    if ok == 0 {
        return None;
    }
    let ns = |t| ticks_100ns(t).saturating_mul(100);
    Some((ns(user), ns(kernel)))
}

/// A FILETIME for a call to write into.
const NO_TIME: windows_sys::Win32::Foundation::FILETIME =
    windows_sys::Win32::Foundation::FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };

/// A FILETIME's count of 100 ns units.
fn ticks_100ns(t: windows_sys::Win32::Foundation::FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}

/// The monotonic clock, nanoseconds: QueryPerformanceCounter.
pub fn monotonic_ns() -> u64 {
    use windows_sys::Win32::System::Performance::{
        QueryPerformanceCounter, QueryPerformanceFrequency,
    };
    static FREQ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let f = *FREQ.get_or_init(|| {
        let mut f = 0i64;
        // SAFETY: writes one i64 we own.
        unsafe { QueryPerformanceFrequency(&mut f) };
        u64::try_from(f).unwrap_or(1).max(1)
    });
    let mut c = 0i64;
    // SAFETY: writes one i64 we own.
    unsafe { QueryPerformanceCounter(&mut c) };
    let c = u64::try_from(c).unwrap_or(0);
    ((u128::from(c) * 1_000_000_000) / u128::from(f)) as u64
}

/// The socket's inode (Linux's /proc/net/udp keys): not on Windows.
pub fn socket_inode(_sock: &impl Sock) -> Option<u64> {
    None
}

/// Whether `e` says the kernel had no buffer for a send (WSAENOBUFS).
pub fn no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ws::WSAENOBUFS)
}

/// Whether `e` says the process (or the system) is out of sockets.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ws::WSAEMFILE)
}

/// Whether `e` says the whole system is out of sockets (Winsock says only
/// WSAEMFILE).
pub fn system_out_of_descriptors(_e: &io::Error) -> bool {
    false
}

/// The limits of open handles: none to speak of on Windows.
pub fn open_files_limit() -> (u64, u64) {
    (16 * 1024 * 1024, 16 * 1024 * 1024)
}

/// Nothing to raise on Windows: the limit.
pub fn set_open_files(_want: u64) -> u64 {
    open_files_limit().0
}

/// Whether a non-blocking connect's `e` says it is under way.
pub fn connect_in_progress(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(ws::WSAEINPROGRESS)
}

/// What a watched socket is, for the event loop's registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockKind {
    Stream,
    Listener,
    Datagram,
}

/// A socket watched by a mio event loop while its calls are made on the
/// socket itself. mio on Windows watches only its own sockets, and asks
/// the kernel again only after one of its calls would block: so the loop
/// watches a second handle of the same socket, and `rearm` tells it when
/// a call on the first would have blocked.
#[derive(Debug)]
pub enum Watch {
    Stream(mio::net::TcpStream),
    Listener(mio::net::TcpListener),
    Datagram(mio::net::UdpSocket),
}

impl Watch {
    /// Watch `s` (a `kind` socket) for `interest` under `token`.
    pub fn new(
        registry: &mio::Registry,
        s: &impl Sock,
        kind: SockKind,
        token: mio::Token,
        interest: mio::Interest,
    ) -> io::Result<Watch> {
        let twin = socket2::SockRef::from(s).try_clone()?;
        twin.set_nonblocking(true)?;
        let mut w = match kind {
            SockKind::Stream => Watch::Stream(mio::net::TcpStream::from_std(twin.into())),
            SockKind::Listener => Watch::Listener(mio::net::TcpListener::from_std(twin.into())),
            SockKind::Datagram => Watch::Datagram(mio::net::UdpSocket::from_std(twin.into())),
        };
        match &mut w {
            Watch::Stream(x) => registry.register(x, token, interest)?,
            Watch::Listener(x) => registry.register(x, token, interest)?,
            Watch::Datagram(x) => registry.register(x, token, interest)?,
        }
        Ok(w)
    }

    /// How long a loop that peeked at bytes and left them there, waiting
    /// for the rest, waits before peeking again. On Windows the kernel is
    /// asked again only after a call would block, which a peek at bytes
    /// that came does not; asking while they are there would wake the
    /// loop at once, over and over. So the loop looks again a little later.
    pub const PEEK_AGAIN: Option<Duration> = Some(Duration::from_millis(10));

    /// A call on the socket would block: have the loop ask the kernel
    /// again (a would-block through mio's own handle does that; a
    /// listener's accepts go through it, see `accept`).
    pub fn rearm(&self) {
        let would_block = || Err::<(), io::Error>(io::ErrorKind::WouldBlock.into());
        let _ = match self {
            Watch::Stream(x) => x.try_io(would_block),
            Watch::Datagram(x) => x.try_io(would_block),
            Watch::Listener(_) => Ok(()),
        };
    }

    /// [`Watch::rearm`] if `blocked` says the wait is for the socket (not,
    /// say, for the clock: a wait the socket is always ready for would
    /// wake the loop at once).
    pub fn rearm_if(&self, blocked: impl FnOnce() -> bool) {
        if blocked() {
            self.rearm();
        }
    }

    /// Accept a connection on the watched listener `l` (through mio's
    /// handle, which asks the kernel again when none is waiting).
    pub fn accept(
        &self,
        l: &std::net::TcpListener,
    ) -> io::Result<(std::net::TcpStream, std::net::SocketAddr)> {
        match self {
            Watch::Listener(x) => x.accept().map(|(s, a)| (s.into(), a)),
            _ => l.accept(),
        }
    }

    /// What a loop watches a socket that `receives` and `sends` for: one
    /// that receives, for reading only (a socket is nearly always writable,
    /// and asking again for that would wake the loop at once, each time; a
    /// send that would block then waits for the next read or deadline).
    pub fn interest(receives: bool, sends: bool) -> mio::Interest {
        if receives || !sends {
            mio::Interest::READABLE
        } else {
            mio::Interest::WRITABLE
        }
    }

    /// Watch no more.
    pub fn deregister(&mut self, registry: &mio::Registry) {
        let _ = match self {
            Watch::Stream(x) => registry.deregister(x),
            Watch::Listener(x) => registry.deregister(x),
            Watch::Datagram(x) => registry.deregister(x),
        };
    }
}

/// Open `path` to append lines to (a log, a record); only a regular file
/// (its access is the directory's ACL's).
/// A new file (a state file's temporary copy): its protection is the
/// directory's ACL.
pub fn open_private_new(path: &std::path::Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

pub fn open_private_append(path: &std::path::Path) -> io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// A key file's mode when its group or others may read it: Windows keeps
/// ACLs, not modes; the key file's protection is its ACL's (doc/security.md).
pub fn open_to_others(_meta: &std::fs::Metadata) -> Option<u32> {
    None
}

/// Options every platform has under its own numbers.
pub mod os_opt {
    use std::io;

    use windows_sys::Win32::Networking::WinSock as ws;

    use super::{Sock, get_int_option, set_int_option};

    /// SO_DONTROUTE.
    pub fn dont_route(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, ws::SOL_SOCKET, ws::SO_DONTROUTE, 1)
    }

    /// SO_DEBUG.
    pub fn debug(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, ws::SOL_SOCKET, ws::SO_DEBUG, 1)
    }

    /// Whether SO_DEBUG is set.
    pub fn debugging(sock: &impl Sock) -> io::Result<bool> {
        get_int_option(sock, ws::SOL_SOCKET, ws::SO_DEBUG).map(|v| v != 0)
    }

    /// TCP_FASTOPEN on a listener (Windows takes it as on or off).
    pub fn fastopen_listener(sock: &impl Sock, queue: i32) -> io::Result<()> {
        set_int_option(
            sock,
            ws::IPPROTO_TCP,
            ws::TCP_FASTOPEN,
            i32::from(queue > 0),
        )
    }

    /// IP_TOS (IPV6_TCLASS): set the TOS byte (traffic class).
    pub fn set_tos(sock: &impl Sock, v6: bool, tos: i32) -> io::Result<()> {
        if v6 {
            set_int_option(sock, ws::IPPROTO_IPV6, ws::IPV6_TCLASS, tos)
        } else {
            set_int_option(sock, ws::IPPROTO_IP, ws::IP_TOS, tos)
        }
    }

    /// TCP_MAXSEG: clamp the segment size.
    pub fn set_mss(sock: &impl Sock, mss: i32) -> io::Result<()> {
        set_int_option(sock, ws::IPPROTO_TCP, ws::TCP_MAXSEG, mss)
    }

    /// TCP_MAXSEG as the connection has it.
    pub fn mss(sock: &impl Sock) -> io::Result<i32> {
        get_int_option(sock, ws::IPPROTO_TCP, ws::TCP_MAXSEG)
    }

    /// IP_TOS (IPV6_TCLASS) as the socket has it.
    pub fn tos(sock: &impl Sock, v6: bool) -> io::Result<i32> {
        if v6 {
            get_int_option(sock, ws::IPPROTO_IPV6, ws::IPV6_TCLASS)
        } else {
            get_int_option(sock, ws::IPPROTO_IP, ws::IP_TOS)
        }
    }

    /// SO_RCVLOWAT: Windows does not take it.
    pub fn rcvlowat(_sock: &impl Sock, _bytes: i32) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A blocking accept on `l`, which returns by `timeout` at the latest
/// (WouldBlock): Winsock's accept heeds neither SO_RCVTIMEO nor a shutdown
/// of the listener, so a poll waits first, and the accept itself does not
/// wait (another thread on the listener may have taken the connection);
/// the connection is blocking, as a Unix accept's is.
pub fn accept_within(
    l: &std::net::TcpListener,
    timeout: Duration,
) -> io::Result<(std::net::TcpStream, std::net::SocketAddr)> {
    if !wait_readable(&[borrowed(l)], timeout)?
        .first()
        .copied()
        .unwrap_or(false)
    {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    l.set_nonblocking(true)?;
    let (s, a) = l.accept()?;
    s.set_nonblocking(false)?;
    Ok((s, a))
}

/// What the process was asked, by the console (Ctrl-C, Ctrl-Break, the
/// window closing) or the service manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-Break, the console closing, a logoff or shutdown, the service
    /// manager's stop.
    Terminate,
    /// Reopen the log files (Unix's SIGHUP; never asked on Windows).
    Reopen,
}

impl std::fmt::Display for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Asked::Interrupt => "Ctrl-C",
            Asked::Terminate => "stop request",
            Asked::Reopen => "reopen request",
        })
    }
}

/// Where the console's events (and the service manager's stop) go, and
/// where the one thread that takes them finds them; made at first use, by
/// whichever comes first.
type Events = (
    std::sync::Mutex<std::sync::mpsc::Sender<Asked>>,
    std::sync::Mutex<Option<std::sync::mpsc::Receiver<Asked>>>,
);

fn events() -> &'static Events {
    static EVENTS: std::sync::OnceLock<Events> = std::sync::OnceLock::new();
    EVENTS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        (std::sync::Mutex::new(tx), std::sync::Mutex::new(Some(rx)))
    })
}

unsafe extern "system" fn on_console(ctrl: u32) -> windows_sys::core::BOOL {
    use windows_sys::Win32::System::Console::{CTRL_C_EVENT, CTRL_LOGOFF_EVENT};
    let asked = match ctrl {
        CTRL_C_EVENT => Asked::Interrupt,
        // a user logging off is no reason for a daemon (a service above
        // all) to stop: not handled, and Windows goes on as it would
        CTRL_LOGOFF_EVENT => return 0,
        _ => Asked::Terminate,
    };
    // handled: the process goes on to shut down in order
    i32::from(Signals::ask(asked))
}

/// The console's Ctrl-C and stop events, taken on one thread.
#[derive(Debug)]
pub struct Signals(());

impl Signals {
    /// Take the console's events from now on (`asked` is Unix's choice of
    /// signals: the console sends what it sends).
    pub fn block(_asked: &[Asked]) -> io::Result<Signals> {
        events();
        // SAFETY: registers a handler of the right signature, which lives
        // as long as the process.
        if unsafe {
            windows_sys::Win32::System::Console::SetConsoleCtrlHandler(Some(on_console), 1)
        } == 0
        {
            return Err(last_error());
        }
        Ok(Signals(()))
    }

    /// The next event (a stop asked before the events were blocked waits
    /// here too).
    pub fn wait(&self) -> io::Result<Asked> {
        let (_, taken) = events();
        let rx = taken
            .lock()
            .ok()
            .and_then(|mut t| t.take())
            .ok_or_else(|| io::Error::other("console events are taken by another thread"))?;
        let got = rx
            .recv()
            .map_err(|_| io::Error::other("console events ended"));
        if let Ok(mut t) = taken.lock() {
            *t = Some(rx);
        }
        got
    }

    /// Ask as the console would (the service manager's stop): whether it
    /// went to be taken.
    pub fn ask(asked: Asked) -> bool {
        events().0.lock().is_ok_and(|tx| tx.send(asked).is_ok())
    }
}

/// Windows has no detaching: a netserver runs in the foreground, or as a
/// service.
pub fn detach() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "Windows has no detaching (fork); run netserver -D in the foreground, or install it as a service (netserver --install-service)",
    ))
}

/// A socket this process was handed: none on Windows.
#[derive(Debug)]
pub enum Handed {
    Listener(std::net::TcpListener),
    Stream(std::net::TcpStream),
}

/// systemd's socket activation: not on Windows.
pub fn activated_listeners() -> io::Result<Option<Vec<std::net::TcpListener>>> {
    Ok(None)
}

/// inetd: not on Windows.
pub fn stdin_socket() -> io::Result<Option<Handed>> {
    Ok(None)
}

/// Whether this process runs as root: no such thing here (congestion
/// control is Linux's option).
pub fn privileged() -> bool {
    false
}
