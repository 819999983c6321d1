//! The one resolver of a side's message sizes and ring widths, used by
//! both ends ([`SideSpec::resolve`]).

use super::*;

/// One side's message sizes and ring widths, as that side uses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub send_size: u32,
    pub recv_size: u32,
    pub send_width: u32,
    pub recv_width: u32,
}

impl SideSpec {
    /// This side's message sizes and rings for a stream test of `kind`,
    /// given its socket buffers (send, receive): what was asked, else
    /// netperf 2.7's defaults (a TCP message of the socket buffer's size, a
    /// UDP one of the send buffer's up to a datagram, a UDP receive of the
    /// buffer's size and at least a datagram), each ring as wide as the
    /// socket buffer holds messages (or `-W`), within the memory cap with
    /// its placement counted. Both ends resolve their own side with it, and
    /// the netserver grants what it resolved.
    pub fn resolve(
        &self,
        kind: TestKind,
        family: Family,
        (send_buf, recv_buf): (u32, u32),
        max_message: u32,
    ) -> Resolved {
        let (send_size, recv_size) = match kind.protocol() {
            Protocol::Tcp => (
                self.send_size
                    .unwrap_or_else(|| default_message_size(send_buf, max_message)),
                self.recv_size
                    .unwrap_or_else(|| default_message_size(recv_buf, max_message)),
            ),
            Protocol::Udp => (
                // (netperf 2.7's UDP_LENGTH_MAX, 65507, over IPv6 too)
                self.send_size.unwrap_or(if send_buf > 0 {
                    send_buf.min(65_507).min(family.max_udp_payload())
                } else {
                    4096
                }),
                self.recv_size
                    .unwrap_or_else(|| recv_buf.max(family.max_udp_payload())),
            ),
        };
        let width = |size: u32, asked: Option<u32>, buf: u32, align: u32, offset: u32| {
            Ring::placed(
                size,
                asked.unwrap_or_else(|| Ring::width_for(buf, size)),
                align,
                offset,
            )
            .capped_width()
        };
        Resolved {
            send_size,
            recv_size,
            send_width: width(
                send_size,
                self.send_width,
                send_buf,
                self.send_align,
                self.send_offset,
            ),
            recv_width: match kind.protocol() {
                // one buffer, whatever is asked
                Protocol::Udp => 1,
                Protocol::Tcp => width(
                    recv_size,
                    self.recv_width,
                    recv_buf,
                    self.recv_align,
                    self.recv_offset,
                ),
            },
        }
    }
}

/// netperf's default message size for a TCP stream test: the socket
/// buffer's size, or 4096 when it is unknown (0); at most `cap`. Both ends
/// use this rule (netperf for its own side, netserver for its side).
pub fn default_message_size(socket_buf: u32, cap: u32) -> u32 {
    if socket_buf > 0 {
        socket_buf.min(cap)
    } else {
        4096.min(cap)
    }
}
