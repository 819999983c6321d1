//! Shared by the targets that see validated test requests: the memory the
//! server would count for a request, against what it would allocate.

use engine::buffer::{Placement, Ring};
use proto::{TestKind, TestSpec, test::MAX_RING_BYTES};

/// Resolve the server's rings as netserver does, for socket buffers it
/// might get (small, Linux's default, the most a client may have), and
/// check the estimate: each ring within the cap with its placement counted
/// (one buffer may exceed it), the test's estimate at least each ring it
/// allocates, the lower bound used at validation no more than what is
/// resolved, and, for rings small enough to allocate here, exactly the
/// bytes allocated.
pub fn check(spec: &TestSpec) {
    for sock_buf in [4096u32, 212_992, 8 << 20] {
        let size = |asked: Option<u32>| {
            asked.unwrap_or_else(|| proto::test::default_message_size(sock_buf, 16 << 20))
        };
        let ring = |asked: Option<u32>, width: Option<u32>, align: u32, offset: u32| {
            let size = size(asked);
            let width = width.map_or_else(
                || proto::test::Ring::width_for(sock_buf, size) as usize,
                |w| w as usize,
            );
            (size, width, Placement::new(align, offset))
        };
        let s = &spec.server;
        let send = ring(s.send_size, s.send_width, s.send_align, s.send_offset);
        let recv = ring(s.recv_size, s.recv_width, s.recv_align, s.recv_offset);
        let shape =
            |(size, width, at): (u32, usize, Placement)| Ring::shape(size as usize, width, at);
        let (ss, rs) = (shape(send), shape(recv));
        for (r, (size, width, at)) in [(ss, send), (rs, recv)] {
            let one = r.lead() + r.stride();
            assert!(r.capped_width() >= 1 && r.capped_width() as usize <= width.max(1));
            assert!(
                r.bytes() <= MAX_RING_BYTES as u64 || r.capped_width() == 1,
                "{r:?}: {} bytes",
                r.bytes()
            );
            assert!(r.bytes() <= (MAX_RING_BYTES as u64).max(one));
            // (allocated for real only when small: a megabyte allocated
            // and filled six times an input cost 400 us of each)
            if r.bytes() <= 64 << 10 {
                let allocated = Ring::placed(size as usize, width, b"", at).allocated();
                assert_eq!(allocated as u64, r.bytes(), "{r:?}");
            }
        }
        for cpus in [1, 2, 64] {
            let m = spec.buffer_memory(ss, rs, cpus);
            // one flow on the blocking driver allocates the ring whole;
            // the loops and io_uring hold one buffer a thread instead
            let single = spec.driver(cpus) == proto::Driver::Blocking;
            match spec.kind {
                TestKind::TcpStream if single => assert!(m >= rs.bytes()),
                TestKind::TcpMaerts | TestKind::UdpMaerts if single => assert!(m >= ss.bytes()),
                _ => {}
            }
            assert!(
                spec.server_memory() <= m,
                "{} > {m} (sock_buf {sock_buf}, cpus {cpus}): {spec:?}",
                spec.server_memory()
            );
            // descriptors: the flows' two each and the loops' at least
            let fds = spec.server_descriptors(cpus);
            assert!(fds >= 2 * u64::from(spec.flows.max(1)) + spec.loops(cpus));
        }
    }
    socket_memory(spec);
}

/// The kernel's socket memory a test would hold: within the share it is
/// fitted to, or refused; never less than its flows' smallest buffers.
pub fn socket_memory(spec: &TestSpec) {
    let k = proto::KernelBuffers {
        wmem_max: 4 << 20,
        rmem_max: 4 << 20,
        ..proto::KernelBuffers::default()
    };
    for share in [1u64 << 20, 300 << 20, u64::MAX / 4] {
        match spec.socket_memory(&k, share) {
            Ok(m) => {
                assert!(m.bytes <= share, "{} > {share}", m.bytes);
                if let Some(b) = m.send_buf {
                    assert!(b >= proto::test::MIN_HELD_BUFFER);
                    assert!(spec.server.send_buf.is_none());
                }
            }
            Err(need) => assert!(need > share, "{need} <= {share}"),
        }
    }
}
