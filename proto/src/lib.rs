//! The control protocol between `netperf` and `netserver`, without I/O.
//!
//! Nothing here opens a socket, starts a thread or reads a clock: messages
//! are values, frames are bytes, sessions are state machines. The daemon and
//! the client do the I/O; this crate decides what bytes mean.
//!
//! # Layout
//! - [`codec`]: the serializer (postcard), one file deep.
//! - [`frame`]: length-prefixed frames, capped before allocation.
//! - [`message`]: [`ClientMsg`] and [`ServerMsg`], the hello and versioning.
//! - [`test`]: [`TestKind`], [`TestSpec`], [`Grant`], [`SideResults`].
//! - [`session`]: [`ServerSession`] and [`ClientSession`] state machines.
//! - [`conn`]: the control core: a session over bytes and time, with its
//!   framing, sealing and deadlines ([`conn::ServerConn`], [`conn::ClientConn`]);
//!   the dialect a connection speaks is a value inside it, a speaker of
//!   ours (`conn::ours`) or of netperf 2.7 (`conn::netperf2`), never a branch.
//! - [`netperf2`]: netperf 2.7's fixed-layout messages, both ways;
//!   [`iperf3`]: iperf3's control protocol, as its clients speak it.
//! - [`stamp`]: one-way delay probes (`UDP_STAMP`), a probe's and its
//!   answer's bytes; [`rfc_stamp`]: the IETF's STAMP (RFC 8762/8972), its
//!   test packets and a reflector's rules.
//! - [`capabilities`]: what the peer can do, typed ([`Capabilities`],
//!   [`Feature`]).
//! - [`dialect`]: which protocol a connection speaks, from its first bytes.
//! - [`ecn`]: ECN codepoints, a receiver's count of them, the path's
//!   verdict (`--ecn`).
//! - [`facts`]: what a host is, for comparing runs (the netserver tells its
//!   own before a test's results).
//! - [`error`]: [`ProtoError`], [`SpecError`].
//!
//! The wire format is specified in `doc/protocol.md`.

#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod capabilities;
pub mod codec;
pub mod conn;
pub mod dialect;
pub mod ecn;
pub mod error;
pub mod facts;
pub mod frame;
pub mod iperf3;
pub mod message;
pub mod netperf2;
pub mod rfc_stamp;
pub mod session;
pub mod stamp;
pub mod test;

pub use capabilities::{Capabilities, Feature, LimitsAsked, LimitsFit, OverLimit, ServerLimits};
pub use error::{ProtoError, SpecError};
pub use message::{
    ClientMsg, ErrorCode, ErrorMsg, Hello, MAGIC, PROTOCOL_VERSION, ServerHello, ServerMsg,
    ThirdParty, ThirdPartyKind, ThirdPartyLength, ThirdPartyTest,
};
pub use session::{
    Authenticator, ClientError, ClientEvent, ClientSession, Role, ServerAction, ServerSession,
};
pub use test::{
    ClientDone, ClientSummary, CpuStats, Direction, Driver, DropSource, Family, FlowCounters,
    ForeignConnections, Grant, InterimReport, KernelBuffers, LatencyFigures, Limits, OwnCpu, Paths,
    Protocol, RX_MAP_WINDOW, RxFigures, RxPath, SideResults, SideSpec, SocketMemory, TcpSample,
    TcpStats, TestEnd, TestKind, TestSpec, Token, Tuning, TxFigures, URING_BUFFER_MAX,
    URING_BUFFERS, UdpFast, UdpRecvStats, Window, uring_buffer_size, uring_buffers,
};
