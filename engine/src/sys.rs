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
