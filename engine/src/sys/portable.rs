//! The calls [`super::linux`] makes, where Linux's are not to be had: what
//! a platform lacks says so (`Unsupported`), and the batches of the UDP
//! fast paths make one call a datagram. The portability work fills this
//! in a platform at a time (each its own file, as `linux.rs` is).

#![allow(unsafe_code)]

use std::io;

use super::{Sock, TcpInfo};

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is Linux's; not available on {}", super::PLATFORM),
    )
}

/// TCP_INFO: not read here.
pub fn tcp_info(_sock: &impl Sock) -> io::Result<TcpInfo> {
    Err(unsupported("TCP_INFO"))
}

/// The send queue's unacknowledged bytes: not read here.
pub fn unacknowledged(_sock: &impl Sock) -> io::Result<u64> {
    Err(unsupported("SIOCOUTQ"))
}

/// sendfile(2): not used here (TCP_SENDFILE says so).
pub fn sendfile(
    _sock: &impl Sock,
    _file: &std::fs::File,
    _offset: &mut i64,
    _count: usize,
) -> io::Result<usize> {
    Err(unsupported("sendfile"))
}

/// Whether a message may hold several datagrams that the kernel cuts
/// ([`MsgBatch::set_segment`]): not here.
pub const SEGMENTED_SENDS: bool = false;

/// Linux's numbers for UDP_SEGMENT and UDP_GRO: setting them fails here,
/// and `--gso` says so.
pub const UDP_SEGMENT: i32 = 103;
pub const UDP_GRO: i32 = 104;

/// A batch of datagrams, sent and received one a call.
pub struct MsgBatch {
    data: Vec<u8>,
    slot: usize,
    n: usize,
    to: Option<std::net::SocketAddr>,
    lens: Vec<usize>,
    from: Vec<Option<std::net::SocketAddr>>,
    /// Each message's own destination ([`MsgBatch::replying`]).
    each: Vec<Option<std::net::SocketAddr>>,
    /// Each message's datagram size, where it holds several
    /// ([`MsgBatch::set_segment`]).
    segment: Vec<Option<u16>>,
}

impl std::fmt::Debug for MsgBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgBatch")
            .field("messages", &self.n)
            .field("slot", &self.slot)
            .finish()
    }
}

impl MsgBatch {
    fn alloc(n: usize, slot: usize, to: Option<std::net::SocketAddr>) -> MsgBatch {
        let (n, slot) = (n.max(1), slot.max(1));
        MsgBatch {
            data: vec![0u8; n * slot],
            slot,
            n,
            to,
            lens: vec![0; n],
            from: vec![None; n],
            each: Vec::new(),
            segment: vec![None; n],
        }
    }

    /// `n` slots to send, each to its own destination ([`MsgBatch::set_to`]).
    pub fn replying(n: usize, slot: usize) -> MsgBatch {
        let mut b = MsgBatch::alloc(n, slot, None);
        b.each = vec![None; b.n];
        b
    }

    /// Message `i`'s destination ([`MsgBatch::replying`]'s).
    pub fn set_to(&mut self, i: usize, to: std::net::SocketAddr) {
        if let Some(a) = self.each.get_mut(i) {
            *a = Some(to);
        }
    }

    /// No transmit timestamps here ([`tx_stamp_ids`]).
    pub fn set_tx_stamp(&mut self, _i: usize, _id: Option<u32>) {}

    /// Message `i` goes as datagrams of `size` bytes each (the last of
    /// what is left): here one send a datagram, there being no
    /// UDP_SEGMENT ([`SEGMENTED_SENDS`]).
    pub fn set_segment(&mut self, i: usize, size: Option<u16>) {
        if let Some(s) = self.segment.get_mut(i) {
            *s = size;
        }
    }

    pub fn sending(n: usize, slot: usize, to: Option<std::net::SocketAddr>) -> MsgBatch {
        MsgBatch::alloc(n, slot, to)
    }

    pub fn receiving(n: usize, slot: usize) -> MsgBatch {
        MsgBatch::alloc(n, slot, None)
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        let s = self.slot;
        self.data.get_mut(i * s..(i + 1) * s).unwrap_or(&mut [])
    }

    /// Send the first `lens.len()` slots, `lens[i]` bytes each, one a call:
    /// how many went before one would not.
    pub fn send(&mut self, sock: &impl Sock, lens: &[usize]) -> io::Result<usize> {
        let to = self.to.map(socket2::SockAddr::from);
        let s = socket2::SockRef::from(sock);
        for (i, &l) in lens.iter().enumerate().take(self.n) {
            let buf = self
                .data
                .get(i * self.slot..i * self.slot + l.min(self.slot))
                .unwrap_or(&[]);
            let each = self
                .each
                .get(i)
                .copied()
                .flatten()
                .map(socket2::SockAddr::from);
            // (a segment of 0 is none, as Linux reads it; an empty
            // message is one empty datagram)
            let seg = self
                .segment
                .get(i)
                .copied()
                .flatten()
                .filter(|&s| s > 0)
                .map_or(buf.len(), usize::from)
                .max(1);
            let mut n = 0;
            let pieces = buf.chunks(seg).chain(buf.is_empty().then_some(buf));
            for one in pieces {
                let sent = match (&each, &to) {
                    (Some(a), _) | (None, Some(a)) => s.send_to(one, a),
                    (None, None) => s.send(one),
                };
                match sent {
                    Ok(k) => n += k,
                    Err(e) if n == 0 => return if i == 0 { Err(e) } else { Ok(i) },
                    // part of the message went: it counts as sent
                    Err(_) => break,
                }
            }
            if let Some(s) = self.lens.get_mut(i) {
                *s = n;
            }
        }
        Ok(lens.len().min(self.n))
    }

    /// io_uring's batched sends: Linux's.
    pub fn send_uring(
        &mut self,
        _ring: &mut uring::Ring,
        _sock: &impl Sock,
        _lens: &[usize],
    ) -> io::Result<(usize, Vec<io::Error>)> {
        Err(unsupported("io_uring (--io-uring)"))
    }

    pub fn sent(&self, i: usize) -> usize {
        self.lens.get(i).copied().unwrap_or(0)
    }

    /// Receive up to `count` datagrams, one a call: the first waits as the
    /// socket does, the others are taken only if they are there.
    pub fn recv(&mut self, sock: &impl Sock, count: usize) -> io::Result<usize> {
        let count = count.min(self.n);
        for i in 0..count {
            let slot = self.slot;
            let buf = self
                .data
                .get_mut(i * slot..(i + 1) * slot)
                .unwrap_or(&mut []);
            let got = if i == 0 {
                super::recv_from(sock, buf, false)
            } else {
                super::recv_from_nowait(sock, buf)
            };
            let (n, from) = match got {
                Ok(r) => r,
                Err(e) => return if i == 0 { Err(e) } else { Ok(i) },
            };
            if let Some(l) = self.lens.get_mut(i) {
                *l = n;
            }
            if let Some(f) = self.from.get_mut(i) {
                *f = from;
            }
        }
        Ok(count)
    }

    /// The `i`th datagram received, its sender, and no coalescing.
    pub fn received(&self, i: usize) -> (&[u8], Option<std::net::SocketAddr>, Option<usize>) {
        let len = self.lens.get(i).copied().unwrap_or(0).min(self.slot);
        let data = self
            .data
            .get(i * self.slot..i * self.slot + len)
            .unwrap_or(&[]);
        (data, self.from.get(i).copied().flatten(), None)
    }

    /// No codepoint is read here ([`opt::recv_codepoint`] says so).
    pub fn tos(&self, _: usize) -> Option<u8> {
        None
    }

    /// No TTL is read here ([`opt::recv_ttl`] says so).
    pub fn ttl(&self, _: usize) -> Option<u8> {
        None
    }

    /// No arrival time is taken here ([`opt::recv_timestamps`] says so).
    pub fn arrived(&self, _: usize) -> Option<u64> {
        None
    }
}

/// Wait until `sock` is readable or `timeout` has passed: here, the next
/// receive waits (a read timeout of at least a millisecond), and this
/// says to try it.
pub fn wait_one_readable(
    sock: &std::net::UdpSocket,
    timeout: std::time::Duration,
) -> io::Result<bool> {
    sock.set_read_timeout(Some(timeout.max(std::time::Duration::from_millis(1))))?;
    Ok(true)
}

/// The system clock's synchronisation and error: not read here.
/// Transmit timestamps: none here ([`tx_stamp_ids`] says so).
pub fn tx_stamps(_sock: &impl Sock, _out: &mut Vec<(u32, u64)>) -> io::Result<()> {
    Ok(())
}

/// Whether a send's transmit time can be asked by its own ID: not here.
pub fn tx_stamp_ids() -> bool {
    false
}

pub fn clock_error() -> Option<(bool, f64)> {
    None
}

/// One datagram with the TTL and traffic class it came with: here, its
/// bytes and sender alone (neither header field is read).
pub fn recv_stamped(sock: &std::net::UdpSocket, buf: &mut [u8]) -> io::Result<super::Datagram> {
    let (len, from) = sock.recv_from(buf)?;
    Ok(super::Datagram {
        len,
        from: Some(from),
        tos: None,
        ttl: None,
        truncated: len > buf.len(),
        arrived: None,
    })
}

/// recvmsg(2) with the codepoint: not built here.
pub fn recv_marked(
    _sock: &impl Sock,
    _buf: &mut [u8],
) -> io::Result<(usize, Option<std::net::SocketAddr>, Option<u8>)> {
    Err(unsupported("IP_RECVTOS (--ecn's count of codepoints)"))
}

/// TCP's ECN from TCP_INFO: not read here.
pub fn tcp_ecn(_sock: &impl Sock) -> io::Result<(bool, u64, u64)> {
    Err(unsupported("TCP_INFO's ECN counters (--ecn)"))
}

pub fn send_zerocopy(_sock: &impl Sock, _buf: &[u8]) -> io::Result<usize> {
    Err(unsupported("MSG_ZEROCOPY"))
}

/// One entry of a socket's error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrQueue {
    Empty,
    ZeroCopyDone { lo: u32, hi: u32 },
    Other,
}

pub fn zerocopy_done(_sock: &impl Sock) -> io::Result<ErrQueue> {
    Err(unsupported("MSG_ZEROCOPY"))
}

pub fn wait_error_queue(_sock: &impl Sock, _ms: i32) -> io::Result<bool> {
    Err(unsupported("MSG_ZEROCOPY"))
}

/// A file with no name for TCP_SENDFILE, which is Linux's: made here only
/// to say so when it sends.
pub fn anonymous_file() -> io::Result<std::fs::File> {
    Err(unsupported("sendfile (TCP_SENDFILE)"))
}

/// Nothing to give back here.
pub fn trim_heap() {}

/// Nothing to set here: the allocator gives large blocks back itself.
pub fn give_memory_back() {}

/// Linux's own socket options: none here, each says so.
pub mod opt {
    pub use super::super::os_opt::*;
    use std::{io, time::Duration};

    use super::super::Sock;

    use super::unsupported;

    /// Each datagram's TTL: not read here (a STAMP reflector says 255,
    /// as TWAMP's does where it cannot read it).
    pub fn recv_ttl(_: &impl Sock, _: bool) -> io::Result<()> {
        Err(unsupported("IP_RECVTTL"))
    }

    /// Each datagram's arrival from the kernel: not taken here.
    pub fn recv_timestamps(_: &impl Sock) -> io::Result<()> {
        Err(unsupported("SO_TIMESTAMPNS"))
    }

    pub fn fastopen_connect(_: &impl Sock) -> io::Result<()> {
        Err(unsupported("TCP_FASTOPEN_CONNECT"))
    }
    pub fn max_pacing_rate(_: &impl Sock, _: u32) -> io::Result<()> {
        Err(unsupported("SO_MAX_PACING_RATE"))
    }
    pub fn dont_fragment(_: &impl Sock, _: bool) -> io::Result<()> {
        Err(unsupported("IP_MTU_DISCOVER"))
    }
    pub fn defer_accept(_: &impl Sock, _: i32) -> io::Result<()> {
        Err(unsupported("TCP_DEFER_ACCEPT"))
    }
    /// IP_RECVERR is Linux's way to have transmit errors reported on a
    /// UDP socket; elsewhere a connected UDP socket reports them as it is
    /// (ECONNREFUSED, WSAECONNRESET): nothing to set.
    pub fn recv_err(_: &impl Sock, _: bool) -> io::Result<()> {
        Ok(())
    }
    pub fn zerocopy(_: &impl Sock) -> io::Result<()> {
        Err(unsupported("SO_ZEROCOPY (--zerocopy)"))
    }
    pub fn recv_codepoint(_: &impl Sock, _: bool) -> io::Result<()> {
        Err(unsupported("IP_RECVTOS (--ecn's count of codepoints)"))
    }
    pub fn udp_gro(_: &impl Sock) -> io::Result<()> {
        Err(unsupported("UDP_GRO"))
    }
    pub fn tx_timestamps(_: &impl Sock) -> io::Result<()> {
        Err(unsupported("SO_TIMESTAMPING's transmit timestamps"))
    }
    pub fn udp_segment(_: &impl Sock, _: i32) -> io::Result<()> {
        Err(unsupported("UDP_SEGMENT"))
    }
    pub fn priority(_: &impl Sock, _: u32) -> io::Result<()> {
        Err(unsupported("SO_PRIORITY"))
    }
    pub fn cork(_: &impl Sock, _: bool) -> io::Result<()> {
        Err(unsupported("TCP_CORK"))
    }
    pub fn user_timeout(_: &impl Sock, _: Duration) -> io::Result<()> {
        Err(unsupported("TCP_USER_TIMEOUT"))
    }
    pub fn set_congestion(_: &socket2::Socket, _: &str) -> io::Result<()> {
        Err(unsupported("TCP_CONGESTION"))
    }
    pub fn congestion(_: &socket2::Socket) -> io::Result<Vec<u8>> {
        Err(unsupported("TCP_CONGESTION"))
    }
    pub fn pin_cpu(_: usize) -> io::Result<bool> {
        Err(unsupported("binding a thread to a CPU"))
    }
}

/// `MSG_TRUNC` on TCP is Linux's: `--rx-discard` says so.
pub fn recv_discard(_sock: &impl Sock, _len: usize, _nonblocking: bool) -> io::Result<usize> {
    Err(unsupported("recv with MSG_TRUNC on TCP (--rx-discard)"))
}

/// What one zero-copy receive did (Linux's TCP_ZEROCOPY_RECEIVE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZcReceived {
    pub mapped: usize,
    pub copied: usize,
    pub skip: usize,
}

/// Linux's zero-copy receive window: not to be had here.
#[derive(Debug)]
pub struct RxMap(());

impl RxMap {
    pub fn new(_sock: &impl Sock, _len: usize) -> io::Result<RxMap> {
        Err(unsupported("TCP_ZEROCOPY_RECEIVE (--rx-zerocopy)"))
    }

    pub fn receive(&mut self, _sock: &impl Sock, _copy: &mut [u8]) -> io::Result<ZcReceived> {
        Err(unsupported("TCP_ZEROCOPY_RECEIVE (--rx-zerocopy)"))
    }
}

/// The size of a page.
pub fn page_size() -> usize {
    4096
}

/// What this host is: what is portable of it (its platform and CPUs);
/// the rest only Linux's reader tells.
pub fn host_facts(_local: Option<std::net::IpAddr>) -> super::HostFacts {
    super::HostFacts {
        platform: super::PLATFORM.into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        ..super::HostFacts::default()
    }
}

/// io_uring is Linux's: `--io-uring` says so where the ring is set up.
pub mod uring {
    use std::{io, time::Duration};

    use super::super::{RawSock as RawFd, Sock, raw};

    fn unsupported() -> io::Error {
        super::unsupported("io_uring (--io-uring)")
    }

    /// One completion (see the Linux layer).
    #[derive(Clone, Copy, Debug)]
    pub struct Done {
        pub tag: u64,
        pub result: i32,
        pub more: bool,
        pub buffer: Option<u16>,
    }

    /// A ring: never made here.
    #[derive(Debug)]
    pub struct Ring(());

    /// A buffer group: never made here.
    #[derive(Debug)]
    pub struct Buffers(());

    impl Buffers {
        pub fn give_back(&mut self, _bid: u16) {}

        pub fn datagram(
            &self,
            _bid: u16,
            _len: usize,
        ) -> Option<(&[u8], Option<std::net::SocketAddr>)> {
            None
        }
    }

    /// A ring and its memory: never made here.
    #[derive(Debug)]
    pub struct Io {
        ring: Ring,
    }

    impl Io {
        pub fn new(_: u32, _: u16, _: usize, _: usize, _: usize) -> io::Result<Io> {
            Err(unsupported())
        }

        pub fn send(&mut self, _: RawFd, _: usize, _: u64) -> io::Result<()> {
            Err(unsupported())
        }

        pub fn read_scratch(&mut self, _: RawFd, _: usize, _: u64) -> io::Result<()> {
            Err(unsupported())
        }

        pub fn recv_multi(&mut self, _: RawFd, _: u64) -> io::Result<()> {
            Err(unsupported())
        }

        pub fn recvmsg_multi(&mut self, _: RawFd, _: u64) -> io::Result<()> {
            Err(unsupported())
        }

        pub fn wait(&mut self, _: usize, _: Duration, _: &mut Vec<Done>) -> io::Result<()> {
            Err(unsupported())
        }

        pub fn buffers(&mut self) -> Option<&mut Buffers> {
            None
        }

        pub fn ring(&mut self) -> &mut Ring {
            &mut self.ring
        }
    }

    /// The descriptor of a socket, for the ring.
    pub fn fd_of(s: &impl Sock) -> RawFd {
        raw(s)
    }
}

/// What socket buffers may grow to here: Linux's defaults stand in (the
/// figures only size the server's share of socket memory).
pub fn kernel_buffers() -> proto::KernelBuffers {
    proto::KernelBuffers::default()
}

/// No host-wide limit of TCP memory is known here.
pub fn tcp_memory_limit() -> Option<u64> {
    None
}
