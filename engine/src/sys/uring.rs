//! io_uring (`--io-uring`), Linux's: the rings and their provided buffers,
//! behind a small safe surface for the stream drivers ([`crate::uring`]).
//! Sends go in batches (several in flight a flow, one system call for all
//! the thread's submissions and completions); receives are multishot, each
//! completion naming a buffer of a ring the kernel picks from, handed back
//! as soon as it is counted.

#![allow(unsafe_code)]

use std::{
    io,
    net::SocketAddr,
    sync::atomic::{AtomicU16, Ordering},
    time::Duration,
};

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use super::{RawSock as RawFd, Sock, raw};

/// One completion: what it was for (the `user_data` given), its result (a
/// count, or a negative errno), and whether a multishot receive goes on and
/// which buffer it filled.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub tag: u64,
    pub result: i32,
    pub more: bool,
    pub buffer: Option<u16>,
}

/// A ring of submissions and completions.
pub struct Ring {
    ring: IoUring,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish()
    }
}

impl Ring {
    /// A ring with room for `entries` submissions and `completions`
    /// completions (at least twice the submissions; a multishot receive
    /// posts a completion a provided buffer, so room for every buffer of
    /// the group keeps them from overflowing the queue).
    pub fn new(entries: u32, completions: u32) -> io::Result<Ring> {
        let entries = entries.clamp(8, 4096).next_power_of_two();
        let cq = completions.max(2 * entries).min(65536).next_power_of_two();
        let ring = IoUring::builder().setup_cqsize(cq).build(entries)?;
        Ok(Ring { ring })
    }

    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        // SAFETY (for every caller): the buffers an entry names outlive its
        // completion: they belong to the driver's state, which waits for
        // every completion (or drops the ring first) before it goes.
        loop {
            // SAFETY: see above.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return Ok(());
            }
            // the submission queue is full: hand it to the kernel
            self.ring.submit()?;
        }
    }

    /// A send of `len` bytes at `buf` on `fd` (to `to`, an unconnected UDP
    /// socket's peer).
    ///
    /// # Safety
    /// The `len` bytes at `buf` (and `to`) must stay valid and unchanged
    /// until this send's completion has been taken.
    pub unsafe fn send(
        &mut self,
        fd: RawFd,
        buf: *const u8,
        len: u32,
        to: Option<&SockAddr>,
        tag: u64,
    ) -> io::Result<()> {
        // SAFETY: the caller's, as this function's.
        unsafe { self.send_linked(fd, buf, len, to, tag, false) }
    }

    /// [`Ring::send`], linked to the next submission when `link` (which
    /// then runs only if this one succeeds, and is cancelled otherwise).
    ///
    /// # Safety
    /// As [`Ring::send`].
    pub unsafe fn send_linked(
        &mut self,
        fd: RawFd,
        buf: *const u8,
        len: u32,
        to: Option<&SockAddr>,
        tag: u64,
        link: bool,
    ) -> io::Result<()> {
        let mut op = opcode::Send::new(types::Fd(fd), buf, len).flags(libc::MSG_NOSIGNAL);
        if let Some(a) = to {
            op = op.dest_addr(a.ptr()).dest_addr_len(a.len);
        }
        let mut e = op.build().user_data(tag);
        if link {
            e = e.flags(squeue::Flags::IO_LINK);
        }
        self.push(e)
    }

    /// A one-shot receive of up to `len` bytes into `buf`.
    ///
    /// # Safety
    /// The `len` bytes at `buf` must stay valid, and not be read or written
    /// otherwise, until this receive's completion has been taken.
    pub unsafe fn recv(&mut self, fd: RawFd, buf: *mut u8, len: u32, tag: u64) -> io::Result<()> {
        self.push(
            opcode::Recv::new(types::Fd(fd), buf, len)
                .build()
                .user_data(tag),
        )
    }

    /// A multishot receive on a stream socket into the buffers of `group`.
    pub fn recv_multi(&mut self, fd: RawFd, group: &Buffers, tag: u64) -> io::Result<()> {
        self.push(
            opcode::RecvMulti::new(types::Fd(fd), group.gid)
                .build()
                .user_data(tag),
        )
    }

    /// A multishot recvmsg on a datagram socket into the buffers of
    /// `group`, each completion one datagram with its sender.
    pub fn recvmsg_multi(&mut self, fd: RawFd, group: &Buffers, tag: u64) -> io::Result<()> {
        self.push(
            opcode::RecvMsgMulti::new(types::Fd(fd), &raw const group.msghdr, group.gid)
                .build()
                .user_data(tag),
        )
    }

    /// Submit what was queued, and wait for at least `want` completions or
    /// `timeout`, whichever first; then take every completion there is.
    pub fn wait(&mut self, want: usize, timeout: Duration, out: &mut Vec<Done>) -> io::Result<()> {
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(want, &args) {
            Ok(_) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ETIME)
                    || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        out.extend(self.ring.completion().map(|c| Done {
            tag: c.user_data(),
            result: c.result(),
            more: cqueue::more(c.flags()),
            buffer: cqueue::buffer_select(c.flags()),
        }));
        Ok(())
    }
}

/// A socket address as the kernel takes it.
#[derive(Clone, Copy)]
pub struct SockAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl std::fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SockAddr").field("len", &self.len).finish()
    }
}

impl SockAddr {
    pub fn of(a: SocketAddr) -> SockAddr {
        let s = socket2::SockAddr::from(a);
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = (s.len() as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: both are at least `len` bytes; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                s.as_ptr().cast::<u8>(),
                (&raw mut storage).cast::<u8>(),
                len,
            );
        }
        SockAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn ptr(&self) -> *const libc::sockaddr {
        (&raw const self.storage).cast()
    }
}

/// A group of provided buffers: `count` buffers of `size` bytes in one
/// block, and the ring through which the kernel takes them and we give
/// them back. The [`Ring`] it is registered with must go first (it is
/// unregistered with it): keep both in [`Io`].
pub struct Buffers {
    gid: u16,
    count: u16,
    size: usize,
    data: Vec<u8>,
    /// The ring of entries, page-aligned (mmap'd), `count` of them.
    entries: std::ptr::NonNull<io_uring::types::BufRingEntry>,
    map_len: usize,
    /// Our count of entries given (the ring's tail).
    tail: u16,
    /// For recvmsg: the header shape the kernel lays each datagram out by.
    msghdr: libc::msghdr,
}

// SAFETY: the buffers and the entries are plain memory of this process;
// the ring they are registered with is used from the thread that owns both.
unsafe impl Send for Buffers {}

impl std::fmt::Debug for Buffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffers")
            .field("count", &self.count)
            .field("size", &self.size)
            .finish()
    }
}

impl Buffers {
    /// `count` (a power of two, at most 32768) buffers of `size` bytes,
    /// registered with `ring` as group `gid`, all given to the kernel.
    pub fn new(ring: &Ring, gid: u16, count: u16, size: usize) -> io::Result<Buffers> {
        let count = count.clamp(1, 32768).next_power_of_two();
        let map_len = (usize::from(count) * std::mem::size_of::<io_uring::types::BufRingEntry>())
            .next_multiple_of(super::page_size());
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let entries = std::ptr::NonNull::new(p.cast::<io_uring::types::BufRingEntry>())
            .ok_or_else(|| io::Error::other("mmap gave null"))?;
        // SAFETY: all-zero is a valid msghdr.
        let mut msghdr: libc::msghdr = unsafe { std::mem::zeroed() };
        msghdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let mut b = Buffers {
            gid,
            count,
            size: size.max(1),
            data: vec![0u8; usize::from(count) * size.max(1)],
            entries,
            map_len,
            tail: 0,
            msghdr,
        };
        // SAFETY: the entries are page-aligned, `count` of them; the kernel
        // pins their pages until the ring goes, which goes first (see Io).
        unsafe {
            ring.ring.submitter().register_buf_ring_with_flags(
                entries.as_ptr() as u64,
                count,
                gid,
                0,
            )?;
        }
        for bid in 0..count {
            b.put(bid);
        }
        b.publish();
        Ok(b)
    }

    /// Queue buffer `bid` for the kernel (visible once [`publish`]ed).
    fn put(&mut self, bid: u16) {
        let mask = self.count - 1;
        let slot = usize::from(self.tail & mask);
        let addr = self
            .data
            .as_mut_ptr()
            .wrapping_add(usize::from(bid) * self.size) as u64;
        // SAFETY: slot < count: within the mapped entries, which only we
        // write (the kernel reads those below the tail we publish).
        let e = unsafe { &mut *self.entries.as_ptr().add(slot) };
        e.set_addr(addr);
        e.set_len(u32::try_from(self.size).unwrap_or(u32::MAX));
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Let the kernel see the buffers queued.
    fn publish(&self) {
        // SAFETY: the tail is the first entry's last field, a u16 the
        // kernel reads; an atomic store with release order publishes the
        // entries written before it.
        unsafe {
            let tail = io_uring::types::BufRingEntry::tail(self.entries.as_ptr()) as *mut u16;
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }

    /// The first `len` bytes of buffer `bid`, as a completion filled it.
    pub fn get(&self, bid: u16, len: usize) -> &[u8] {
        let from = usize::from(bid) * self.size;
        self.data
            .get(from..from + len.min(self.size))
            .unwrap_or_default()
    }

    /// Give buffer `bid` back to the kernel.
    pub fn give_back(&mut self, bid: u16) {
        if bid < self.count {
            self.put(bid);
            self.publish();
        }
    }

    /// A datagram in buffer `bid` (a recvmsg completion of `len` bytes):
    /// its payload and its sender. The kernel lays it out as a header
    /// (struct io_uring_recvmsg_out), the sender's address in the room the
    /// msghdr gave, no control data, then the payload.
    pub fn datagram(&self, bid: u16, len: usize) -> Option<(&[u8], Option<SocketAddr>)> {
        const HEADER: usize = 16;
        let room = std::mem::size_of::<libc::sockaddr_storage>();
        let b = self.get(bid, len);
        let word = |at: usize| {
            b.get(at..at + 4)
                .and_then(|w| <[u8; 4]>::try_from(w).ok())
                .map(u32::from_ne_bytes)
        };
        let (namelen, payloadlen) = (word(0)? as usize, word(8)? as usize);
        let name = b.get(HEADER..HEADER + namelen.min(room))?;
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: `name` fits the storage; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                name.as_ptr(),
                (&raw mut storage).cast::<u8>(),
                name.len(),
            );
        }
        let at = HEADER + room;
        let payload = b.get(at..(at + payloadlen).min(b.len()))?;
        Some((payload, super::socket_addr(&storage, name.len())))
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: our mapping, of this length; the ring that read it went
        // first (Io's field order), and the kernel's pins went with it.
        unsafe {
            libc::munmap(self.entries.as_ptr().cast(), self.map_len);
        }
    }
}

/// A ring and the memory its operations use, in the order they must go:
/// the ring first (its operations read and write that memory until it is
/// gone). It owns a send buffer (a stream sender's bytes, never written
/// once made), a scratch slot a flow for one-shot reads, and a group of
/// provided buffers for multishot receives.
#[derive(Debug)]
pub struct Io {
    ring: Ring,
    bufs: Option<Buffers>,
    out: crate::buffer::Buffer,
    scratch: Vec<u8>,
}

/// A scratch slot's size.
pub const SCRATCH: usize = 512;

impl Io {
    /// A ring of `entries`; a group of `count` buffers of `size` bytes when
    /// `count` is not 0; a send buffer of `send` bytes (page-aligned);
    /// `slots` scratch slots.
    pub fn new(entries: u32, count: u16, size: usize, send: usize, slots: usize) -> io::Result<Io> {
        let ring = Ring::new(entries, entries + u32::from(count))?;
        let bufs = if count > 0 {
            Some(Buffers::new(&ring, 0, count, size)?)
        } else {
            None
        };
        Ok(Io {
            ring,
            bufs,
            out: crate::buffer::Buffer::new(
                send.max(1),
                crate::buffer::Placement::new(proto::test::PAGE_ALIGN, 0),
            ),
            scratch: vec![0u8; SCRATCH * slots.max(1)],
        })
    }

    /// A send of the first `len` bytes of the send buffer on `fd`.
    pub fn send(&mut self, fd: RawFd, len: usize, tag: u64) -> io::Result<()> {
        let b = self.out.as_slice();
        let len = len.min(b.len());
        // SAFETY: the send buffer is ours, never written, and goes after
        // the ring (field order).
        unsafe {
            self.ring.send(
                fd,
                b.as_ptr(),
                u32::try_from(len).unwrap_or(u32::MAX),
                None,
                tag,
            )
        }
    }

    /// A one-shot read on `fd` into scratch slot `slot` (its bytes are not
    /// looked at): one in flight a slot.
    pub fn read_scratch(&mut self, fd: RawFd, slot: usize, tag: u64) -> io::Result<()> {
        let part = self
            .scratch
            .chunks_mut(SCRATCH)
            .nth(slot)
            .ok_or_else(|| io::Error::other("no scratch slot"))?;
        // SAFETY: the slot is ours, goes after the ring, and has one read
        // in flight at a time (the caller's rule).
        unsafe { self.ring.recv(fd, part.as_mut_ptr(), SCRATCH as u32, tag) }
    }

    /// A multishot receive on a stream socket into the buffer group.
    pub fn recv_multi(&mut self, fd: RawFd, tag: u64) -> io::Result<()> {
        let b = self
            .bufs
            .as_ref()
            .ok_or_else(|| io::Error::other("no buffers"))?;
        self.ring.recv_multi(fd, b, tag)
    }

    /// A multishot recvmsg on a datagram socket into the buffer group.
    pub fn recvmsg_multi(&mut self, fd: RawFd, tag: u64) -> io::Result<()> {
        let b = self
            .bufs
            .as_ref()
            .ok_or_else(|| io::Error::other("no buffers"))?;
        self.ring.recvmsg_multi(fd, b, tag)
    }

    /// See [`Ring::wait`].
    pub fn wait(&mut self, want: usize, timeout: Duration, out: &mut Vec<Done>) -> io::Result<()> {
        self.ring.wait(want, timeout, out)
    }

    /// The buffer group.
    pub fn buffers(&mut self) -> Option<&mut Buffers> {
        self.bufs.as_mut()
    }

    /// The ring itself (for a batch's sends).
    pub fn ring(&mut self) -> &mut Ring {
        &mut self.ring
    }
}

/// The descriptor of a socket, for the ring.
pub fn fd_of(s: &impl Sock) -> RawFd {
    raw(s)
}
