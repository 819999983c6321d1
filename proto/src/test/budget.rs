//! What the estimates count against: the kernel's buffer bounds, a
//! socket's memory, the driver, a ring's bytes.

use super::*;

/// What the kernel lets a socket's buffers grow to, read by the server
/// from its host (engine::sys::kernel_buffers): the bounds of SO_SNDBUF
/// and SO_RCVBUF (which the kernel doubles), the most TCP's autotuning
/// gives a send buffer, and the buffers a socket starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelBuffers {
    pub wmem_max: u32,
    pub rmem_max: u32,
    /// net.ipv4.tcp_wmem's last: a send queue's most.
    pub tcp_wmem_max: u32,
    /// net.ipv4.tcp_rmem's second: a receive buffer's size at the start.
    pub tcp_rmem_default: u32,
    /// net.core.wmem_default and rmem_default: a UDP socket's buffers.
    pub wmem_default: u32,
    pub rmem_default: u32,
}

impl Default for KernelBuffers {
    /// Linux's defaults.
    fn default() -> Self {
        KernelBuffers {
            wmem_max: 212_992,
            rmem_max: 212_992,
            tcp_wmem_max: 4 << 20,
            tcp_rmem_default: 131_072,
            wmem_default: 212_992,
            rmem_default: 212_992,
        }
    }
}

/// The smallest socket buffer the server sets when it holds a test's
/// buffers to its share of socket memory (the kernel doubles it).
pub const MIN_HELD_BUFFER: u32 = 16 * 1024;

/// How the server's socket buffers fit a test's share of the kernel's
/// socket memory ([`TestSpec::socket_memory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketMemory {
    /// What the test's sockets can hold at most, as they will be set.
    pub bytes: u64,
    /// SO_SNDBUF and SO_RCVBUF the server sets where the client asked for
    /// none, to fit the share (`None`: the kernel's autotuning fits).
    pub send_buf: Option<u32>,
    pub recv_buf: Option<u32>,
}

/// How a test's data path runs ([`TestSpec::driver`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Driver {
    /// One flow on the test's own thread, in blocking calls.
    #[default]
    Blocking,
    /// Every flow on event loops, `threads` of them (a flow a thread for
    /// TCP streams up to [`STREAM_THREADS`]).
    Loops { threads: u32 },
    /// io_uring rings, a thread each.
    Uring { threads: u32 },
}

/// Unproven data connections a test's waiting room keeps at once beside
/// the flows still to come (TCP_CRR: a thread's), the oldest closed for a
/// new one.
pub const DATA_WAITING: u64 = 32;

/// The buffer a UDP receiver allocates for a receive size: no datagram
/// (nor a coalesced message) is larger than 64 KiB, however large the
/// socket buffer whose size netperf 2.7's netserver receives with.
pub fn udp_receive_buffer(recv_size: u32) -> u32 {
    recv_size.clamp(1, UDP_SLOT)
}

/// What a flow on an event loop holds besides its thread's buffers (its
/// state machine and its slot), rounded up.
pub const FLOW_STATE_BYTES: u64 = 512;

/// Most bytes one ring of buffers holds, whatever its width.
pub const MAX_RING_BYTES: usize = 4 * 1024 * 1024;

/// A ring of `width` buffers of `size` bytes, each starting at a multiple
/// of `align` plus `offset` (netperf's `-a`/`-A` and `-o`/`-O`): the shape
/// both ends allocate (engine's `Ring`, one block for all its buffers) and
/// the one the memory estimate counts, placement included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    pub size: u32,
    pub width: u32,
    pub align: u32,
    pub offset: u32,
}

impl Ring {
    /// netperf's default placement: 8-byte aligned, no offset.
    pub fn new(size: u32, width: u32) -> Ring {
        Ring::placed(size, width, 8, 0)
    }

    pub fn placed(size: u32, width: u32, align: u32, offset: u32) -> Ring {
        Ring {
            size,
            width,
            align,
            offset,
        }
    }

    /// From one buffer's start to the next: the size (at least 1) rounded
    /// up to the alignment, so that every buffer starts at the same place
    /// modulo the alignment.
    pub fn stride(self) -> u64 {
        u64::from(self.size.max(1)).next_multiple_of(u64::from(self.align.max(1)))
    }

    /// The block's bytes before its first buffer at most: up to an
    /// alignment to reach an aligned address, then the offset.
    pub fn lead(self) -> u64 {
        u64::from(self.align.max(1)) - 1 + u64::from(self.offset)
    }

    /// The width it really gets: as asked (at least one), and no more than
    /// fit in [`MAX_RING_BYTES`] with the block's lead counted.
    pub fn capped_width(self) -> u32 {
        let room = (MAX_RING_BYTES as u64).saturating_sub(self.lead()) / self.stride();
        let room = u32::try_from(room).unwrap_or(u32::MAX);
        self.width.max(1).min(room.max(1))
    }

    /// netperf's ring width for a socket buffer and message size: the
    /// buffer's worth of messages, plus one, at least two.
    pub fn width_for(sock_buf: u32, msg: u32) -> u32 {
        (sock_buf / msg.max(1)).saturating_add(1).max(2)
    }

    /// Bytes it allocates: one block with its lead and every buffer. Never
    /// more than [`MAX_RING_BYTES`] unless a single buffer with its
    /// placement is larger.
    pub fn bytes(self) -> u64 {
        self.lead() + u64::from(self.capped_width()) * self.stride()
    }
}
