//! Linux's system calls: TCP_INFO, sendfile, sendmmsg/recvmmsg with
//! UDP_SEGMENT and UDP_GRO, MSG_ZEROCOPY and its error queue, glibc's
//! malloc_trim.

#![allow(unsafe_code)]

use std::io;

use super::{Sock, TcpInfo, raw, socket_addr};

/// `getsockopt(TCP_INFO)`: the kernel's struct, and how many of its bytes
/// the kernel wrote (an older kernel writes fewer fields).
fn raw_tcp_info(sock: &impl Sock) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, which outlives the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            raw(sock),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok((info, len as usize))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(TCP_INFO)`.
pub fn tcp_info(sock: &impl Sock) -> io::Result<TcpInfo> {
    let (info, _) = raw_tcp_info(sock)?;
    Ok(TcpInfo {
        total_retrans: info.tcpi_total_retrans,
        snd_mss: info.tcpi_snd_mss,
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        snd_cwnd: info.tcpi_snd_cwnd,
        pacing_rate: info.tcpi_pacing_rate,
        delivery_rate: info.tcpi_delivery_rate,
        bytes_in_flight: u64::from(
            (info.tcpi_unacked + info.tcpi_retrans)
                .saturating_sub(info.tcpi_sacked + info.tcpi_lost),
        ) * u64::from(info.tcpi_snd_mss),
    })
}

/// Bytes sent on a TCP socket and not yet acknowledged, or not yet sent
/// (SIOCOUTQ).
pub fn unacknowledged(sock: &impl Sock) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int to the pointer, which
    // outlives the call.
    let rc = unsafe { libc::ioctl(raw(sock), libc::TIOCOUTQ, &raw mut n) };
    if rc == 0 {
        Ok(u64::try_from(n).unwrap_or(0))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `sendfile(2)`: `count` bytes of `file` from `offset` to `sock`; the
/// kernel moves `offset` past what it sent.
pub fn sendfile(
    sock: &impl Sock,
    file: &std::fs::File,
    offset: &mut i64,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: `off` is a valid off_t the kernel may update; both descriptors
    // are open for the duration of the call.
    let n = unsafe {
        libc::sendfile(
            raw(sock),
            std::os::fd::AsRawFd::as_raw_fd(file),
            &mut off,
            count,
        )
    };
    *offset = off;
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Socket options of Linux's own, one call each (the portable layer says
/// it has none of them).
pub mod opt {
    pub use super::super::os_opt::*;
    use std::{io, time::Duration};

    use super::super::Sock;

    use super::super::set_int_option;

    /// TCP_FASTOPEN_CONNECT: connect() sends the first data in the SYN.
    pub fn fastopen_connect(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT, 1)
    }

    /// SO_MAX_PACING_RATE, bytes a second.
    pub fn max_pacing_rate(sock: &impl Sock, rate: u32) -> io::Result<()> {
        set_int_option(
            sock,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            rate as i32,
        )
    }

    /// IP_MTU_DISCOVER (IPV6_MTU_DISCOVER) = do: never fragment.
    pub fn dont_fragment(sock: &impl Sock, v6: bool) -> io::Result<()> {
        if v6 {
            set_int_option(
                sock,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_DO,
            )
        } else {
            set_int_option(
                sock,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
            )
        }
    }

    /// TCP_DEFER_ACCEPT on a listener, `secs` seconds.
    pub fn defer_accept(sock: &impl Sock, secs: i32) -> io::Result<()> {
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, secs)
    }

    /// IP_RECVERR (IPV6_RECVERR): a UDP socket reports transmit errors.
    pub fn recv_err(sock: &impl Sock, v6: bool) -> io::Result<()> {
        if v6 {
            set_int_option(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)
        } else {
            set_int_option(sock, libc::IPPROTO_IP, libc::IP_RECVERR, 1)
        }
    }

    /// The TOS byte (IPv4: IP_RECVTOS) and the traffic class (IPv6:
    /// IPV6_RECVTCLASS, and IP_RECVTOS for the IPv4 peers a dual-stack
    /// socket has) of each datagram received, in a control message.
    pub fn recv_codepoint(sock: &impl Sock, v6: bool) -> io::Result<()> {
        if v6 {
            set_int_option(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
            // (an IPv6-only socket may refuse the IPv4 one: it has no use)
            let _ = set_int_option(sock, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
            Ok(())
        } else {
            set_int_option(sock, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
        }
    }

    /// IP_RECVTTL / IPV6_RECVHOPLIMIT: each datagram's TTL or hop limit
    /// comes with it ([`super::recv_stamped`]).
    pub fn recv_ttl(sock: &impl Sock, v6: bool) -> io::Result<()> {
        if v6 {
            set_int_option(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1)?;
            let _ = set_int_option(sock, libc::IPPROTO_IP, libc::IP_RECVTTL, 1);
            Ok(())
        } else {
            set_int_option(sock, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)
        }
    }

    /// SO_TIMESTAMPNS: each datagram's arrival, as the kernel took it
    /// ([`super::MsgBatch::arrived`]).
    pub fn recv_timestamps(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
    }

    /// SO_TIMESTAMPING as a socket that asks the kernel when some of what
    /// it sends left needs it: software timestamps reported, each with its
    /// send's ID, without the packet ([`super::MsgBatch::set_tx_stamp`],
    /// [`super::tx_stamps`]).
    pub fn tx_timestamps(sock: &impl Sock) -> io::Result<()> {
        let flags = libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags as i32)
    }

    /// UDP_GRO on a receiving socket.
    pub fn udp_gro(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::SOL_UDP, super::UDP_GRO, 1)
    }

    /// UDP_SEGMENT (GSO) of `size` bytes on a sending socket.
    pub fn udp_segment(sock: &impl Sock, size: i32) -> io::Result<()> {
        set_int_option(sock, libc::SOL_UDP, super::UDP_SEGMENT, size)
    }

    /// SO_ZEROCOPY: sends may take MSG_ZEROCOPY.
    pub fn zerocopy(sock: &impl Sock) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, super::SO_ZEROCOPY, 1)
    }

    /// SO_PRIORITY.
    pub fn priority(sock: &impl Sock, p: u32) -> io::Result<()> {
        set_int_option(sock, libc::SOL_SOCKET, libc::SO_PRIORITY, p as i32)
    }

    /// TCP_CORK.
    pub fn cork(sock: &impl Sock, on: bool) -> io::Result<()> {
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_CORK, i32::from(on))
    }

    /// TCP_CONGESTION: set the algorithm by name.
    pub fn set_congestion(sock: &socket2::Socket, name: &str) -> io::Result<()> {
        sock.set_tcp_congestion(name.as_bytes())
    }

    /// TCP_CONGESTION: the algorithm's name as the kernel gives it.
    pub fn congestion(sock: &socket2::Socket) -> io::Result<Vec<u8>> {
        sock.tcp_congestion()
    }

    /// Pin the calling thread to one CPU: `Ok(false)` if there is no such
    /// CPU.
    pub fn pin_cpu(cpu: usize) -> io::Result<bool> {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_err() {
            return Ok(false);
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map(|()| true)
            .map_err(io::Error::from)
    }

    /// TCP_USER_TIMEOUT: unacknowledged data this long ends the connection.
    pub fn user_timeout(sock: &impl Sock, t: Duration) -> io::Result<()> {
        let ms = i32::try_from(t.as_millis()).unwrap_or(i32::MAX);
        set_int_option(sock, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)
    }
}

/// Whether a message may hold several datagrams that the kernel cuts
/// ([`MsgBatch::set_segment`]).
pub const SEGMENTED_SENDS: bool = true;

/// `SCM_TS_OPT_ID` (asm-generic/socket.h, Linux 6.13): a send's own ID for
/// its transmit timestamp.
const SCM_TS_OPT_ID: i32 = 81;

/// `SO_EE_ORIGIN_TIMESTAMPING` (linux/errqueue.h).
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;

/// The transmit timestamps the kernel has queued for `sock` (its error
/// queue, read without waiting, at most 1,024 a call): each send's ID
/// ([`MsgBatch::set_tx_stamp`]) and when it left, nanoseconds since the
/// Unix epoch (software: as the driver took it).
pub fn tx_stamps(sock: &impl Sock, out: &mut Vec<(u32, u64)>) -> io::Result<()> {
    for _ in 0..1024 {
        let mut ctrl = Control([0; 256]);
        // SAFETY: all-zero is a valid msghdr.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_control = ctrl.0.as_mut_ptr().cast();
        h.msg_controllen = std::mem::size_of::<Control>() as _;
        // SAFETY: the header names no data and this frame's control buffer
        // with its length; both outlive the call.
        let n = unsafe {
            libc::recvmsg(
                raw(sock),
                &raw mut h,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(())
            } else {
                Err(e)
            };
        }
        let (mut id, mut at) = (None, None);
        // SAFETY: CMSG_* walk the control buffer the kernel filled, within
        // msg_controllen; each datum is read unaligned at its size.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&h);
            while !c.is_null() {
                let (level, typ) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && typ == libc::SO_TIMESTAMPING {
                    // scm_timestamping: [software, (legacy), hardware]
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    at = u64::try_from(ts.tv_sec)
                        .ok()
                        .zip(u64::try_from(ts.tv_nsec).ok())
                        .filter(|&(s, n)| s > 0 || n > 0)
                        .map(|(s, n)| s.saturating_mul(1_000_000_000).saturating_add(n));
                } else if (level == libc::SOL_IP && typ == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && typ == libc::IPV6_RECVERR)
                {
                    let e: libc::sock_extended_err =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING {
                        id = Some(e.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&h, c);
            }
        }
        if let (Some(id), Some(at)) = (id, at) {
            out.push((id, at));
        }
    }
    Ok(())
}

/// Whether this kernel takes a send's own ID for its transmit timestamp
/// (SCM_TS_OPT_ID, Linux 6.13): one datagram sent to a socket of this
/// process on 127.0.0.1 asking it, and its timestamp read back.
pub fn tx_stamp_ids() -> bool {
    let probe = || -> io::Result<bool> {
        let to = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let from = std::net::UdpSocket::bind("127.0.0.1:0")?;
        opt::tx_timestamps(&from)?;
        let mut b = MsgBatch::sending(1, 1, Some(to.local_addr()?));
        b.set_tx_stamp(0, Some(0x5354_414D));
        let h = b.hdrs.first_mut().ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: the header points at the batch's own one-octet slot, its
        // address and its control messages; all outlive the call.
        if unsafe { libc::sendmsg(raw(&from), &raw const h.msg_hdr, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut got = Vec::new();
        for _ in 0..50 {
            tx_stamps(&from, &mut got)?;
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok(got.first().is_some_and(|&(id, _)| id == 0x5354_414D))
    };
    probe().unwrap_or(false)
}

/// `UDP_SEGMENT` and `UDP_GRO` (linux/udp.h), at level `SOL_UDP`.
pub const UDP_SEGMENT: i32 = 103;
pub const UDP_GRO: i32 = 104;

/// Room for the control messages a receive asks (UDP_GRO's segment size,
/// the codepoint IP_RECVTOS or IPV6_RECVTCLASS brings, the TTL or hop
/// limit, SO_TIMESTAMPNS's arrival, and SO_TIMESTAMPING's where a socket
/// also stamps what it sends) or a send gives (UDP_SEGMENT, a transmit
/// timestamp's request and its ID), aligned as a cmsghdr must be.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 256]);

/// `n` messages for sendmmsg(2) or recvmmsg(2), each over its own slot of
/// `slot` bytes in a buffer this owns. Every pointer the headers hold goes
/// into this batch's heap buffers, set once when it is made: a move of the
/// batch moves none of them, and a call only sets lengths.
pub struct MsgBatch {
    data: Vec<u8>,
    slot: usize,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    /// Each message's sender (receiving), or the one destination in the
    /// first (sending on an unconnected socket).
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<Control>,
    /// Each message's control messages to send: its datagram size
    /// (UDP_SEGMENT) and the ID of its transmit timestamp.
    sends: Vec<(Option<u16>, Option<u32>)>,
}

// SAFETY: the raw pointers in `hdrs` and `iovs` point only into this
// batch's own heap buffers; nothing else holds them.
unsafe impl Send for MsgBatch {}

impl std::fmt::Debug for MsgBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgBatch")
            .field("messages", &self.hdrs.len())
            .field("slot", &self.slot)
            .finish()
    }
}

impl MsgBatch {
    fn alloc(n: usize, slot: usize, addrs: usize, ctrl: usize) -> MsgBatch {
        let (n, slot) = (n.max(1), slot.max(1));
        // SAFETY: all-zero is a valid value of these plain C structs.
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut b = MsgBatch {
            data: vec![0u8; n * slot],
            slot,
            hdrs: vec![zero_hdr; n],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: slot,
                };
                n
            ],
            addrs: vec![zero_addr; addrs],
            ctrl: vec![Control([0; 256]); ctrl],
            sends: vec![(None, None); ctrl],
        };
        let base = b.data.as_mut_ptr();
        for (i, (h, iov)) in b.hdrs.iter_mut().zip(b.iovs.iter_mut()).enumerate() {
            // SAFETY: i * slot is within `data`, which has n * slot bytes.
            iov.iov_base = unsafe { base.add(i * slot) }.cast();
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        b
    }

    /// `n` slots of `slot` bytes to send, to `to` when the socket is not
    /// connected.
    pub fn sending(n: usize, slot: usize, to: Option<std::net::SocketAddr>) -> MsgBatch {
        let mut b = MsgBatch::alloc(n, slot, usize::from(to.is_some()), n);
        if let (Some(to), Some(a)) = (to, b.addrs.first_mut()) {
            let to = socket2::SockAddr::from(to);
            // SAFETY: SockAddr's storage is a sockaddr_storage of `len`
            // valid bytes.
            *a = unsafe { *to.as_ptr().cast() };
            let a: *mut libc::sockaddr_storage = a;
            for h in &mut b.hdrs {
                h.msg_hdr.msg_name = a.cast();
                h.msg_hdr.msg_namelen = to.len();
            }
        }
        b
    }

    /// `n` slots of `slot` bytes to send, each to its own destination
    /// ([`MsgBatch::set_to`]): a reflector's replies, to their senders.
    pub fn replying(n: usize, slot: usize) -> MsgBatch {
        // (no control message until one is set: msg_controllen 0)
        MsgBatch::each_own(n, slot)
    }

    /// `n` slots, each message with an address and a control buffer of
    /// its own.
    fn each_own(n: usize, slot: usize) -> MsgBatch {
        let mut b = MsgBatch::alloc(n, slot, n, n);
        for ((h, a), c) in b
            .hdrs
            .iter_mut()
            .zip(b.addrs.iter_mut())
            .zip(b.ctrl.iter_mut())
        {
            h.msg_hdr.msg_name = std::ptr::from_mut(a).cast();
            h.msg_hdr.msg_control = c.0.as_mut_ptr().cast();
        }
        b
    }

    /// Whether message `i` ([`MsgBatch::replying`]'s) goes as datagrams of
    /// `size` bytes each, the last of what is left (UDP_SEGMENT: one send
    /// through the stack, cut in the kernel or the NIC), or as one datagram
    /// (`None`).
    pub fn set_segment(&mut self, i: usize, size: Option<u16>) {
        if let Some(s) = self.sends.get_mut(i) {
            s.0 = size;
            self.write_control(i);
        }
    }

    /// Whether the kernel tells when message `i` left (its software
    /// transmit timestamp, on the socket's error queue under `id`:
    /// [`tx_stamps`]; the socket set up by [`opt::tx_timestamps`]).
    pub fn set_tx_stamp(&mut self, i: usize, id: Option<u32>) {
        if let Some(s) = self.sends.get_mut(i) {
            s.1 = id;
            self.write_control(i);
        }
    }

    /// Message `i`'s control messages, as [`MsgBatch::set_segment`] and
    /// [`MsgBatch::set_tx_stamp`] left them.
    fn write_control(&mut self, i: usize) {
        let (Some(h), Some(c), Some(&(size, id))) = (
            self.hdrs.get_mut(i),
            self.ctrl.get_mut(i),
            self.sends.get(i),
        ) else {
            return;
        };
        let space = |n: usize| {
            // SAFETY: CMSG_SPACE only computes.
            unsafe { libc::CMSG_SPACE(n as u32) as usize }
        };
        let len = size.map_or(0, |_| space(2)) + id.map_or(0, |_| 2 * space(4));
        h.msg_hdr.msg_control = c.0.as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = len as _;
        if len == 0 {
            return;
        }
        c.0.fill(0);
        // SAFETY: at most 24 + 2 * 24 octets, within the control buffer's
        // 256, which is aligned as a cmsghdr; the header points at it with
        // that length, and CMSG_FIRSTHDR/CMSG_NXTHDR/CMSG_DATA stay within
        // it.
        unsafe {
            let mut m = libc::CMSG_FIRSTHDR(&h.msg_hdr);
            if let Some(size) = size {
                (*m).cmsg_level = libc::SOL_UDP;
                (*m).cmsg_type = UDP_SEGMENT;
                (*m).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(m).cast::<u16>(), size);
                m = libc::CMSG_NXTHDR(&h.msg_hdr, m);
            }
            if let Some(id) = id {
                (*m).cmsg_level = libc::SOL_SOCKET;
                (*m).cmsg_type = libc::SO_TIMESTAMPING;
                (*m).cmsg_len = libc::CMSG_LEN(4) as _;
                std::ptr::write_unaligned(
                    libc::CMSG_DATA(m).cast::<u32>(),
                    libc::SOF_TIMESTAMPING_TX_SOFTWARE,
                );
                m = libc::CMSG_NXTHDR(&h.msg_hdr, m);
                (*m).cmsg_level = libc::SOL_SOCKET;
                (*m).cmsg_type = SCM_TS_OPT_ID;
                (*m).cmsg_len = libc::CMSG_LEN(4) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(m).cast::<u32>(), id);
            }
        }
    }

    /// Message `i`'s destination ([`MsgBatch::replying`]'s).
    pub fn set_to(&mut self, i: usize, to: std::net::SocketAddr) {
        let to = socket2::SockAddr::from(to);
        if let (Some(h), Some(a)) = (self.hdrs.get_mut(i), self.addrs.get_mut(i)) {
            // SAFETY: SockAddr's storage is a sockaddr_storage of `len`
            // valid bytes.
            *a = unsafe { *to.as_ptr().cast() };
            h.msg_hdr.msg_namelen = to.len();
        }
    }

    /// `n` slots of `slot` bytes to receive into, each with room for its
    /// sender's address and one control message.
    pub fn receiving(n: usize, slot: usize) -> MsgBatch {
        // (each receive sets the lengths it offers)
        MsgBatch::each_own(n, slot)
    }

    pub fn len(&self) -> usize {
        self.hdrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hdrs.is_empty()
    }

    /// Slot `i`, whole.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        let s = self.slot;
        self.data.get_mut(i * s..(i + 1) * s).unwrap_or(&mut [])
    }

    /// sendmmsg(2) of the first `lens.len()` slots, each of its length:
    /// how many messages the kernel took (their lengths: [`MsgBatch::sent`]).
    pub fn send(&mut self, sock: &impl Sock, lens: &[usize]) -> io::Result<usize> {
        let count = lens.len().min(self.hdrs.len());
        for (iov, &l) in self.iovs.iter_mut().zip(lens) {
            iov.iov_len = l.min(self.slot);
        }
        // SAFETY: the first `count` headers point at iovecs over this
        // batch's own slots (lengths within them) and at its own address;
        // all outlive the call.
        let n = unsafe { libc::sendmmsg(raw(sock), self.hdrs.as_mut_ptr(), count as _, 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// The first `lens.len()` slots, each of its length, sent through
    /// `ring` (`--io-uring`): a send of each in one submission, linked so
    /// that the first to fail cancels those after it (what went is a
    /// prefix, as sendmmsg's, so the datagrams' numbers stay in order);
    /// every completion waited for before the batch can be touched again.
    /// How many went (lengths: [`MsgBatch::sent`]), and the error of the
    /// one that failed.
    pub fn send_uring(
        &mut self,
        ring: &mut super::uring::Ring,
        sock: &impl Sock,
        lens: &[usize],
    ) -> io::Result<(usize, Vec<io::Error>)> {
        let count = lens.len().min(self.hdrs.len());
        for (iov, &l) in self.iovs.iter_mut().zip(lens) {
            iov.iov_len = l.min(self.slot);
        }
        // an unconnected socket's destination, as the headers name it
        let to = self
            .hdrs
            .first()
            .filter(|h| h.msg_hdr.msg_namelen > 0)
            .and(self.addrs.first())
            .and_then(|a| socket_addr(a, std::mem::size_of::<libc::sockaddr_storage>()))
            .map(super::uring::SockAddr::of);
        for (i, (h, iov)) in self.hdrs.iter_mut().zip(&self.iovs).take(count).enumerate() {
            h.msg_len = 0;
            // SAFETY: the iovec names this batch's own slot (its length
            // within it) and `to` lives on this frame; both outlive the
            // send: every completion is taken below before either can go or
            // the batch be touched again.
            unsafe {
                ring.send_linked(
                    raw(sock),
                    iov.iov_base.cast::<u8>(),
                    iov.iov_len as u32,
                    to.as_ref(),
                    i as u64,
                    i + 1 < count,
                )?;
            }
        }
        let mut done = Vec::with_capacity(count);
        let mut failed = vec![None; count];
        let mut got = 0;
        while got < count {
            done.clear();
            // (the sends are the kernel's until each completes: a wait
            // that fails for a moment is waited again)
            match ring.wait(count - got, std::time::Duration::from_secs(1), &mut done) {
                Ok(()) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
            for d in &done {
                got += 1;
                let i = d.tag as usize;
                match (self.hdrs.get_mut(i), d.result) {
                    (Some(h), n) if n >= 0 => h.msg_len = n as u32,
                    (_, n) => {
                        if let Some(f) = failed.get_mut(i) {
                            *f = Some(-n);
                        }
                    }
                }
            }
        }
        // what went is the prefix before the first failure; those after it
        // were cancelled (ECANCELED), not failed
        let went = failed.iter().position(Option::is_some).unwrap_or(count);
        let error = failed
            .get(went)
            .copied()
            .flatten()
            .filter(|&e| e != libc::ECANCELED)
            .map(io::Error::from_raw_os_error);
        Ok((went, error.into_iter().collect()))
    }

    /// Bytes message `i` of the last call moved.
    pub fn sent(&self, i: usize) -> usize {
        self.hdrs.get(i).map_or(0, |h| h.msg_len as usize)
    }

    /// recvmmsg(2) of up to `count` messages: it waits (up to the socket's
    /// receive timeout) for the first, and takes those already queued
    /// behind it. How many came.
    pub fn recv(&mut self, sock: &impl Sock, count: usize) -> io::Result<usize> {
        let count = count.min(self.hdrs.len());
        // the kernel wrote back the lengths of the last call's messages
        for h in self.hdrs.iter_mut().take(count) {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            h.msg_hdr.msg_controllen = std::mem::size_of::<Control>() as _;
        }
        // SAFETY: the first `count` headers point at iovecs over this
        // batch's own slots, and at its own address and control buffers,
        // with their lengths; all outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                raw(sock),
                self.hdrs.as_mut_ptr(),
                count as _,
                libc::MSG_WAITFORONE as _,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Message `i` of the last receive: its bytes, its sender, and, when
    /// the kernel coalesced datagrams (UDP_GRO), their size.
    pub fn received(&self, i: usize) -> (&[u8], Option<std::net::SocketAddr>, Option<usize>) {
        let Some(h) = self.hdrs.get(i) else {
            return (&[], None, None);
        };
        let len = (h.msg_len as usize).min(self.slot);
        let data = self
            .data
            .get(i * self.slot..i * self.slot + len)
            .unwrap_or(&[]);
        let from = self
            .addrs
            .get(i)
            .and_then(|a| socket_addr(a, h.msg_hdr.msg_namelen as usize));
        let mut gro = None;
        // SAFETY: the header's control pointer and length describe this
        // batch's control buffer as the kernel filled it; CMSG_* walk
        // within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let v: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    gro = usize::try_from(v).ok().filter(|&s| s > 0);
                }
                c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
            }
        }
        (data, from, gro)
    }

    /// The TOS byte (traffic class) message `i` of the last receive came
    /// with, where the socket asks for it ([`opt::recv_codepoint`]).
    pub fn tos(&self, i: usize) -> Option<u8> {
        self.hdrs.get(i).and_then(|h| tos_of(&h.msg_hdr))
    }

    /// The TTL (hop limit) message `i` of the last receive came with,
    /// where the socket asks for it ([`opt::recv_ttl`]).
    pub fn ttl(&self, i: usize) -> Option<u8> {
        self.hdrs.get(i).and_then(|h| ttl_of(&h.msg_hdr))
    }

    /// When the kernel received message `i` of the last receive,
    /// nanoseconds since the Unix epoch, where the socket asks for it
    /// ([`opt::recv_timestamps`]).
    pub fn arrived(&self, i: usize) -> Option<u64> {
        self.hdrs.get(i).and_then(|h| arrival_of(&h.msg_hdr))
    }
}

/// The TOS byte or traffic class among a received message's control
/// messages.
fn tos_of(h: &libc::msghdr) -> Option<u8> {
    let mut tos = None;
    // SAFETY: the header's control pointer and length describe a control
    // buffer as the kernel filled it; CMSG_* walk within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if level == libc::IPPROTO_IP && (kind == libc::IP_TOS || kind == libc::IP_RECVTOS) {
                // IPv4's is one byte
                tos = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c)));
            } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_TCLASS {
                let v: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                tos = Some((v & 0xff) as u8);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    tos
}

/// When the kernel took a datagram in (SCM_TIMESTAMPNS), nanoseconds since
/// the Unix epoch.
fn arrival_of(h: &libc::msghdr) -> Option<u64> {
    let mut at = None;
    // SAFETY: as tos_of's: CMSG_* walk the control buffer the kernel
    // filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                at = u64::try_from(ts.tv_sec)
                    .ok()
                    .zip(u64::try_from(ts.tv_nsec).ok())
                    .map(|(s, n)| s.saturating_mul(1_000_000_000).saturating_add(n));
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    at
}

/// The system clock's state as the kernel keeps it (adjtimex(2)):
/// whether it is synchronised to an external source, and its maximum
/// error, seconds.
pub fn clock_error() -> Option<(bool, f64)> {
    // SAFETY: all-zero is a valid timex; modes 0 reads and changes nothing
    // (adjtimex: glibc and musl both have it).
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: a pointer to a live timex.
    let state = unsafe { libc::adjtimex(&raw mut t) };
    if state < 0 {
        return None;
    }
    let synced = state != libc::TIME_ERROR && t.status & libc::STA_UNSYNC == 0;
    Some((synced, t.maxerror as f64 / 1e6))
}

/// Wait until `sock` is readable or `timeout` has passed: whether it is.
/// ppoll(2) keeps the nanoseconds, where SO_RCVTIMEO rounds up to the
/// kernel's tick (4 ms at HZ 250): a paced sender's next send is on time.
pub fn wait_one_readable(sock: &impl Sock, timeout: std::time::Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: raw(sock),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: one pollfd and a timespec, both live for the call; no
    // signal mask.
    let n = unsafe { libc::ppoll(&raw mut p, 1, &raw const ts, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}

/// The TTL (IPv4) or hop limit (IPv6) a datagram came with, from its
/// control messages ([`opt::recv_ttl`]).
fn ttl_of(h: &libc::msghdr) -> Option<u8> {
    let mut ttl = None;
    // SAFETY: as tos_of's: CMSG_* walk the control buffer the kernel
    // filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if (level == libc::IPPROTO_IP && kind == libc::IP_TTL)
                || (level == libc::IPPROTO_IPV6 && kind == libc::IPV6_HOPLIMIT)
            {
                let v: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                ttl = Some((v & 0xff) as u8);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    ttl
}

/// One datagram into `buf` with recvmsg(2): its length, its sender, and
/// the TOS byte (traffic class) it came with, where the socket asks for it
/// ([`opt::recv_codepoint`]).
pub fn recv_marked(
    sock: &impl Sock,
    buf: &mut [u8],
) -> io::Result<(usize, Option<std::net::SocketAddr>, Option<u8>)> {
    recv_stamped(sock, buf).map(|d| (d.len, d.from, d.tos))
}

/// One datagram with what its IP header said: its traffic class and TTL
/// or hop limit, where the socket asks for them ([`opt::recv_codepoint`],
/// [`opt::recv_ttl`]; a STAMP reflector's).
pub fn recv_stamped(sock: &impl Sock, buf: &mut [u8]) -> io::Result<super::Datagram> {
    // SAFETY: all-zero is a valid value of these plain C structs.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut ctrl = Control([0; 256]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_name = (&raw mut addr).cast();
    h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
    h.msg_iov = &raw mut iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl.0.as_mut_ptr().cast();
    h.msg_controllen = std::mem::size_of::<Control>() as _;
    // SAFETY: the header points at `buf`, `addr` and `ctrl` with their
    // lengths; all outlive the call.
    let n = unsafe { libc::recvmsg(raw(sock), &raw mut h, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(super::Datagram {
        len: n as usize,
        from: socket_addr(&addr, h.msg_namelen as usize),
        tos: tos_of(&h),
        ttl: ttl_of(&h),
        truncated: h.msg_flags & libc::MSG_TRUNC != 0,
        arrived: arrival_of(&h),
    })
}

/// TCP's ECN on a connection, from TCP_INFO: whether it was negotiated
/// (TCPI_OPT_ECN), packets delivered, and those delivered CE-marked.
pub fn tcp_ecn(sock: &impl Sock) -> io::Result<(bool, u64, u64)> {
    let (info, len) = raw_tcp_info(sock)?;
    // a kernel older than tcpi_delivered_ce (4.18) leaves them out
    if len < std::mem::offset_of!(libc::tcp_info, tcpi_delivered_ce) + 4 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel's TCP_INFO has no tcpi_delivered_ce (Linux 4.18 and later have)",
        ));
    }
    const TCPI_OPT_ECN: u8 = 8;
    Ok((
        info.tcpi_options & TCPI_OPT_ECN != 0,
        u64::from(info.tcpi_delivered),
        u64::from(info.tcpi_delivered_ce),
    ))
}

/// `SO_ZEROCOPY` (asm-generic/socket.h) and `SO_EE_ORIGIN_ZEROCOPY`
/// (linux/errqueue.h).
pub const SO_ZEROCOPY: i32 = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;

/// `send(2)` with `MSG_ZEROCOPY`: the kernel sends from `buf` itself and
/// says on the error queue when it is done with it (see [`zerocopy_done`]).
pub fn send_zerocopy(sock: &impl Sock, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`; the caller keeps the
    // memory unchanged until the kernel reports the send complete.
    let n = unsafe {
        libc::send(
            raw(sock),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_ZEROCOPY,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One entry of a socket's error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrQueue {
    Empty,
    /// `MSG_ZEROCOPY` sends `lo..=hi` are complete.
    ZeroCopyDone {
        lo: u32,
        hi: u32,
    },
    /// Something else (an ICMP error): not a completion.
    Other,
}

/// The next entry of the error queue, without waiting.
pub fn zerocopy_done(sock: &impl Sock) -> io::Result<ErrQueue> {
    let mut ctrl_big = Control([0; 256]);
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = ctrl_big.0.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&ctrl_big) as _;
    // SAFETY: the header describes our control buffer, which outlives the
    // call; there is no data buffer.
    let n = unsafe { libc::recvmsg(raw(sock), &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(ErrQueue::Empty),
            _ => Err(e),
        };
    }
    // SAFETY: CMSG_* walk within the msg_controllen the kernel set; the
    // extended error is plain data read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let level = (*c).cmsg_level;
            let ty = (*c).cmsg_type;
            if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
            {
                let e: libc::sock_extended_err =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if e.ee_errno == 0 && e.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                    return Ok(ErrQueue::ZeroCopyDone {
                        lo: e.ee_info,
                        hi: e.ee_data,
                    });
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(ErrQueue::Other)
}

/// Wait up to `ms` for the error queue (POLLERR): whether it was raised
/// (a socket error, or a hang-up, raises it too: the caller looks).
pub fn wait_error_queue(sock: &impl Sock, ms: i32) -> io::Result<bool> {
    let mut fds = [libc::pollfd {
        fd: raw(sock),
        events: 0,
        revents: 0,
    }];
    // SAFETY: one pollfd, ours, for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n > 0 && fds.first().is_some_and(|f| f.revents & libc::POLLERR != 0))
}

/// Make the allocator give back what a daemon frees: a test's buffers
/// (from 128 KiB up) are mapped on their own and unmapped when freed,
/// instead of glibc raising its threshold to the largest freed block and
/// keeping such blocks in its arenas (the top of a thread's arena is
/// never trimmed: 66 large tests left an idle daemon at 156 MB), and
/// threads share at most four arenas. Elsewhere (musl) nothing to do:
/// its allocator gives large blocks back.
pub fn give_memory_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

/// Give the C allocator's free memory back to the system (glibc's
/// malloc_trim: it keeps what freed threads used in its arenas for reuse,
/// which a daemon that is idle for hours holds for nothing). Elsewhere
/// (musl) nothing to do.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks and releases the allocator's free
    // memory; it takes no pointers of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `recv(2)` with `MSG_TRUNC` on a TCP socket: up to `len` bytes taken off
/// the receive queue and dropped, never copied (`--rx-discard`).
pub fn recv_discard(sock: &impl Sock, len: usize, nonblocking: bool) -> io::Result<usize> {
    let flags = libc::MSG_TRUNC | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: with MSG_TRUNC on a TCP socket the kernel writes nothing to
    // the buffer; a null pointer with a length is what it is given.
    let n = unsafe { libc::recv(raw(sock), std::ptr::null_mut(), len, flags) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `TCP_ZEROCOPY_RECEIVE` (linux/tcp.h).
const TCP_ZEROCOPY_RECEIVE: i32 = 35;

/// `struct tcp_zerocopy_receive` (linux/tcp.h), as of Linux 5.11 (the
/// copy buffer for the unaligned rest); older kernels read its first
/// fields.
#[repr(C)]
#[derive(Default)]
struct TcpZerocopyReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// What one zero-copy receive did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZcReceived {
    /// Bytes mapped as whole pages into the window.
    pub mapped: usize,
    /// Bytes copied into the copy buffer (the unaligned rest).
    pub copied: usize,
    /// Bytes at the head of the queue that could be neither: to be read
    /// with a plain receive.
    pub skip: usize,
}

/// A window of address space mapped onto a TCP socket, into which
/// `TCP_ZEROCOPY_RECEIVE` maps the pages of received data. The pages one
/// receive maps stay until the next (which unmaps them first) or until
/// the window is dropped.
pub struct RxMap {
    addr: std::ptr::NonNull<libc::c_void>,
    len: usize,
    /// A socket error the kernel reported with data: said at the next
    /// receive, after the data is counted.
    pending: Option<i32>,
}

// SAFETY: the window is plain address space of this process; nothing in it
// is tied to the thread that mapped it.
unsafe impl Send for RxMap {}

impl std::fmt::Debug for RxMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxMap").field("len", &self.len).finish()
    }
}

impl RxMap {
    /// Map a window of `len` bytes (rounded up to pages) onto `sock`.
    pub fn new(sock: &impl Sock, len: usize) -> io::Result<RxMap> {
        let page = page_size();
        let len = len.max(page).div_ceil(page) * page;
        // SAFETY: a new shared, read-only mapping of the socket; the kernel
        // picks the address; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                raw(sock),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr = std::ptr::NonNull::new(p).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(RxMap {
            addr,
            len,
            pending: None,
        })
    }

    /// Map what has arrived on `sock` into the window (whole pages), and
    /// copy into `copy` what comes before the next whole page when that is
    /// all there is (at most `copy`'s length). `Ok` with nothing mapped,
    /// copied or to skip: nothing has arrived; `UnexpectedEof`: the peer
    /// closed its side and everything was taken.
    pub fn receive(&mut self, sock: &impl Sock, copy: &mut [u8]) -> io::Result<ZcReceived> {
        if let Some(e) = self.pending.take() {
            return Err(io::Error::from_raw_os_error(e));
        }
        let mut zc = TcpZerocopyReceive {
            address: self.addr.as_ptr() as u64,
            length: u32::try_from(self.len).unwrap_or(u32::MAX),
            copybuf_address: copy.as_mut_ptr() as u64,
            copybuf_len: i32::try_from(copy.len()).unwrap_or(i32::MAX),
            ..TcpZerocopyReceive::default()
        };
        let mut len = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        // SAFETY: `zc` names our window (mapped on this socket, `length`
        // bytes) and `copy` (its length); the kernel maps pages into the
        // one and writes at most `copybuf_len` bytes into the other, and
        // writes the struct within `len`.
        let rc = unsafe {
            libc::getsockopt(
                raw(sock),
                libc::IPPROTO_TCP,
                TCP_ZEROCOPY_RECEIVE,
                (&raw mut zc).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // nothing left, and the peer's end has come
            if e.raw_os_error() == Some(libc::EIO) {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            return Err(e);
        }
        let got = ZcReceived {
            mapped: zc.length as usize,
            copied: usize::try_from(zc.copybuf_len).unwrap_or(0),
            skip: zc.recv_skip_hint as usize,
        };
        if zc.err != 0 {
            // the data that came with it is counted first
            if got.mapped + got.copied == 0 {
                return Err(io::Error::from_raw_os_error(zc.err.abs()));
            }
            self.pending = Some(zc.err.abs());
        }
        Ok(got)
    }
}

impl Drop for RxMap {
    fn drop(&mut self) {
        // SAFETY: the window is ours, mapped in `new` with this length;
        // nothing refers to its pages once it goes.
        unsafe {
            libc::munmap(self.addr.as_ptr(), self.len);
        }
    }
}

/// The size of a page.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// A file with no name, gone when closed (O_TMPFILE), for TCP_SENDFILE.
pub fn anonymous_file() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(std::env::temp_dir())
}

/// Every CPU's counters now, from /proc/stat (netperf's "procstat").
pub fn cpu_ticks() -> Option<Vec<crate::cpu::Ticks>> {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .map(|s| crate::cpu::parse(&s).cpus)
}

/// The calling thread's CPU time so far, user and system, in
/// nanoseconds (getrusage RUSAGE_THREAD).
pub fn thread_cpu_ns() -> Option<(u64, u64)> {
    super::unix::rusage_ns(nix::sys::resource::UsageWho::RUSAGE_THREAD)
}

/// The socket's inode: its key in /proc/net/udp.
pub fn socket_inode(sock: &impl Sock) -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes one stat into the storage given.
    if unsafe { libc::fstat(raw(sock), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it wrote the whole struct.
    Some(unsafe { st.assume_init() }.st_ino)
}

/// What this host lets socket buffers grow to, and what they start with
/// (net.core.wmem_max, rmem_max and their defaults, net.ipv4.tcp_wmem's
/// last and tcp_rmem's second); Linux's defaults where a file cannot be
/// read.
pub fn kernel_buffers() -> proto::KernelBuffers {
    let read = |path: &str, field: usize| -> Option<u32> {
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .nth(field)?
            .parse()
            .ok()
    };
    let d = proto::KernelBuffers::default();
    proto::KernelBuffers {
        wmem_max: read("/proc/sys/net/core/wmem_max", 0).unwrap_or(d.wmem_max),
        rmem_max: read("/proc/sys/net/core/rmem_max", 0).unwrap_or(d.rmem_max),
        tcp_wmem_max: read("/proc/sys/net/ipv4/tcp_wmem", 2).unwrap_or(d.tcp_wmem_max),
        tcp_rmem_default: read("/proc/sys/net/ipv4/tcp_rmem", 1).unwrap_or(d.tcp_rmem_default),
        wmem_default: read("/proc/sys/net/core/wmem_default", 0).unwrap_or(d.wmem_default),
        rmem_default: read("/proc/sys/net/core/rmem_default", 0).unwrap_or(d.rmem_default),
    }
}

/// The memory all TCP sockets of this host may hold before the kernel
/// refuses them more (the last of net.ipv4.tcp_mem, in pages), in bytes.
pub fn tcp_memory_limit() -> Option<u64> {
    let pages: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem")
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()?;
    Some(pages.saturating_mul(page_size() as u64))
}

/// What this host is (see [`super::HostFacts`]), `local` the address its
/// traffic leaves from (its interface's MTU and speed).
pub fn host_facts(local: Option<std::net::IpAddr>) -> super::HostFacts {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|s| !s.is_empty())
    };
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_string())
    });
    let interface = local.and_then(interface_of);
    let net = |f: &str| {
        interface
            .as_ref()
            .and_then(|i| read(&format!("/sys/class/net/{i}/{f}")))
    };
    super::HostFacts {
        platform: super::PLATFORM.into(),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        mtu: net("mtu").and_then(|m| m.parse().ok()),
        // (a virtual interface says -1, or nothing)
        speed_mbps: net("speed").and_then(|m| m.parse().ok()),
        tso: interface.as_deref().and_then(|i| offload(i, ETHTOOL_GTSO)),
        gso: interface.as_deref().and_then(|i| offload(i, ETHTOOL_GGSO)),
        gro: interface.as_deref().and_then(|i| offload(i, ETHTOOL_GGRO)),
        interface,
        congestion_control: read("/proc/sys/net/ipv4/tcp_congestion_control"),
        tcp_rmem: read("/proc/sys/net/ipv4/tcp_rmem"),
        tcp_wmem: read("/proc/sys/net/ipv4/tcp_wmem"),
        rmem_max: read("/proc/sys/net/core/rmem_max"),
        wmem_max: read("/proc/sys/net/core/wmem_max"),
    }
}

/// ethtool's legacy requests for one offload's state (linux/ethtool.h):
/// still answered by every driver, and one `u32` each way.
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;

/// Whether offload `cmd` is on at interface `name` (SIOCETHTOOL, as
/// `ethtool -k` reads it); `None` where the interface or the driver does
/// not say.
fn offload(name: &str, cmd: u32) -> Option<bool> {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd, data: 0 };
    // SAFETY: an all-zero ifreq is valid (a name and a union of plain
    // data)
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, b) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *b as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&raw mut value).cast();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).ok()?;
    // (the request's type is glibc's c_ulong, musl's c_int: the number fits
    // either)
    #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
    let request = libc::SIOCETHTOOL as _;
    // SAFETY: SIOCETHTOOL reads the request's name and writes at most the
    // ethtool_value its data points to, which lives until the call ends
    let rc = unsafe { libc::ioctl(raw(&sock), request, &raw mut req) };
    (rc == 0).then_some(value.data != 0)
}

/// The interface holding `ip`.
fn interface_of(ip: std::net::IpAddr) -> Option<String> {
    let ip = ip.to_canonical();
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let addr = a.address?;
        let holds = match ip {
            std::net::IpAddr::V4(v4) => addr.as_sockaddr_in().is_some_and(|s| s.ip() == v4),
            std::net::IpAddr::V6(v6) => addr.as_sockaddr_in6().is_some_and(|s| s.ip() == v6),
        };
        holds.then_some(a.interface_name)
    })
}
