//! Thin wrappers of the system calls that std, socket2 and nix do not cover.
//! This is the crate's only unsafe code.

#![allow(unsafe_code)]

use std::{io, os::fd::AsRawFd};

/// `getsockopt(TCP_INFO)`.
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, which outlives the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(info)
    } else {
        Err(io::Error::last_os_error())
    }
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

/// `sendfile(2)`: `count` bytes of `file` from `offset` to `sock`; the
/// kernel moves `offset` past what it sent.
pub fn sendfile(
    sock: &impl AsRawFd,
    file: &impl AsRawFd,
    offset: &mut i64,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: `off` is a valid off_t the kernel may update; both descriptors
    // are open for the duration of the call.
    let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
    *offset = off;
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
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
