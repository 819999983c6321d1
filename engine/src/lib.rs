//! The data path that both `netperf` and `netserver` run.
//!
//! Both roles of each test live in one module, so that what one side counts
//! can be checked against what the other counts. The hot loops make one
//! system call per send or receive on a blocking socket; counters are plain
//! integers, published to [`live::Live`] with a relaxed store for interim
//! reports; the clock is read at the start and the end, and in the loop
//! only where a figure needs it (once per transaction for latency, and in
//! UDP_RR's burst mode for its per-request timeouts; once per UDP datagram
//! for the jitter stamp); a [`timer::Timer`] thread raises a
//! flag when a timed test is over.
//!
//! # Layout
//! - [`flow`]: the per-flow state machines (what a flow does next, what it
//!   counted), without I/O; the blocking loops drive one flow, [`evloop`]
//!   many ([`evloop::udp`] UDP's, [`evloop::crr`] TCP_CRR's requesters).
//! - [`conventions`]: what the two ends of a data connection agree on
//!   beside the test's bytes (ours, or netperf 2.7's), a value.
//! - [`stream`]: TCP_STREAM, TCP_MAERTS and UDP_STREAM, sender and receiver roles.
//! - [`netstat`]: the kernel's UDP counters (per socket and per host).
//! - [`ecn`]: a receiver's count of ECN codepoints, TCP's ECN from TCP_INFO.
//! - [`rr`]: TCP_RR and UDP_RR, requester and responder.
//! - [`crr`]: TCP_CRR, a connection per transaction.
//! - [`rfc_stamp`]: a STAMP Session-Sender's data path (`-t STAMP`).
//! - [`cpu`]: CPU utilisation from /proc/stat, service demand.
//! - [`latency`]: the latency histogram and its summary.
//! - [`auth`]: pre-shared-key challenge-response and MAC'd control frames.
//! - [`handshake`]: the token every data connection presents first.
//! - [`control`]: blocking transport of control frames (the client's side).
//! - [`sockopt`]: socket buffers, TCP_NODELAY, TOS, priority, congestion
//!   control, keepalive, TCP_INFO.
//! - [`buffer`]: rings of send buffers.
//! - [`timer`]: the stop flag and the thread that raises it;
//!   [`clock`]: the monotonic clock as plain nanoseconds.
//! - [`drive`]: which driver runs a test's flows (blocking, event loops,
//!   io_uring), one choice from the test's spec;
//!   [`uring`]: the stream tests through io_uring (`--io-uring`).
//! - [`token`]: short-lived tokens (`netserver token`), as text.
//! - [`error`]: the data path's errors.
//! - [`live`]: counters readable while a test runs.
//! - [`sys`]: the only unsafe code: thin system-call wrappers, one file a
//!   platform (`sys/linux.rs`; a portable fallback elsewhere).

#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod auth;
pub mod buffer;
pub mod clock;
pub mod control;
pub mod conventions;
pub mod cpu;
pub mod crr;
pub mod drive;
pub mod ecn;
pub mod error;
pub mod evloop;
pub mod flow;
pub mod handshake;
pub mod latency;
pub mod live;
pub mod netstat;
pub mod rfc_stamp;
pub mod rr;
pub mod sockopt;
pub mod stream;
pub mod sys;
pub mod timer;
pub mod token;
pub mod uring;

pub use error::EngineError;

/// Sockets for the unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::net::{TcpListener, TcpStream, UdpSocket};

    /// Both ends of a TCP connection on loopback: (client, server).
    pub fn tcp_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    /// Two UDP sockets on loopback, connected to each other.
    pub fn udp_pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        (a, b)
    }
}
