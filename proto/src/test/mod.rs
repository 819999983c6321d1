//! What both ends of a test must agree on ([`TestSpec`]), what the server
//! grants ([`Grant`]), and what each side measured ([`SideResults`]).
//!
//! Names follow netperf: "local" is the netperf (client) side, "remote" the
//! netserver side. A `TestSpec` is built once from the command line and is the
//! only thing about the test that crosses the wire.

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// The named tests, as `netperf -t` spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TestKind {
    TcpStream,
    TcpMaerts,
    UdpStream,
    TcpRr,
    UdpRr,
    TcpCrr,
    /// netperf's TCP_CC: a connection per transaction, no data.
    TcpCc,
    /// UDP datagrams from netserver to netperf (netperf 2.7's UDP receive
    /// test: OMNI `-d recv -T udp`, or TCP_MAERTS `-- -T udp`).
    UdpMaerts,
    /// One-way delay probes beside a test (`--under-load`, `-t RPM`):
    /// UDP requests carrying their send time on the client's monotonic
    /// clock, answered with the netserver's receive and send times on its
    /// own ([`crate::stamp`]). Never a test a user names: not in
    /// [`TestKind::ALL`]; asked only of a netserver naming `stamps`.
    UdpStamp,
}

/// Transport protocol of the data connections.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// Which way the data flows, seen from netperf.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// netperf sends, netserver receives (TCP_STREAM, UDP_STREAM).
    Send,
    /// netserver sends, netperf receives (TCP_MAERTS).
    Receive,
    /// Requests one way, responses the other (the _RR tests).
    RequestResponse,
}

impl TestKind {
    pub const ALL: [TestKind; 8] = [
        TestKind::TcpStream,
        TestKind::TcpMaerts,
        TestKind::UdpStream,
        TestKind::TcpRr,
        TestKind::UdpRr,
        TestKind::TcpCrr,
        TestKind::TcpCc,
        TestKind::UdpMaerts,
    ];

    /// The name netperf uses for `-t`.
    pub fn name(self) -> &'static str {
        match self {
            TestKind::TcpStream => "TCP_STREAM",
            TestKind::TcpMaerts => "TCP_MAERTS",
            TestKind::UdpStream => "UDP_STREAM",
            TestKind::TcpRr => "TCP_RR",
            TestKind::UdpRr => "UDP_RR",
            TestKind::TcpCrr => "TCP_CRR",
            TestKind::TcpCc => "TCP_CC",
            TestKind::UdpMaerts => "UDP_MAERTS",
            TestKind::UdpStamp => "UDP_STAMP",
        }
    }

    /// Parse a data-path name, case-insensitively.
    pub fn from_name(name: &str) -> Option<TestKind> {
        TestKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    pub fn protocol(self) -> Protocol {
        match self {
            TestKind::UdpStream | TestKind::UdpRr | TestKind::UdpMaerts | TestKind::UdpStamp => {
                Protocol::Udp
            }
            _ => Protocol::Tcp,
        }
    }

    pub fn direction(self) -> Direction {
        match self {
            TestKind::TcpStream | TestKind::UdpStream => Direction::Send,
            TestKind::TcpMaerts | TestKind::UdpMaerts => Direction::Receive,
            TestKind::TcpRr
            | TestKind::UdpRr
            | TestKind::TcpCrr
            | TestKind::TcpCc
            | TestKind::UdpStamp => Direction::RequestResponse,
        }
    }

    /// A new connection for every transaction (TCP_CRR, TCP_CC).
    pub fn is_connection_test(self) -> bool {
        matches!(self, TestKind::TcpCrr | TestKind::TcpCc)
    }

    /// The kind with the same direction over `protocol`, if there is one
    /// (netperf's `-T`): TCP_STREAM over UDP is UDP_STREAM. Connection
    /// tests have no UDP form.
    pub fn over(self, protocol: Protocol) -> Option<TestKind> {
        use TestKind::*;
        Some(match (self, protocol) {
            (TcpStream | UdpStream, Protocol::Tcp) => TcpStream,
            (TcpStream | UdpStream, Protocol::Udp) => UdpStream,
            (TcpMaerts | UdpMaerts, Protocol::Tcp) => TcpMaerts,
            (TcpMaerts | UdpMaerts, Protocol::Udp) => UdpMaerts,
            (TcpRr | UdpRr, Protocol::Tcp) => TcpRr,
            (TcpRr | UdpRr, Protocol::Udp) => UdpRr,
            (TcpCrr | TcpCc, Protocol::Tcp) => self,
            (TcpCrr | TcpCc, Protocol::Udp) => return None,
            (UdpStamp, Protocol::Udp) => UdpStamp,
            (UdpStamp, Protocol::Tcp) => return None,
        })
    }

    pub fn is_rr(self) -> bool {
        self.direction() == Direction::RequestResponse
    }
}

impl std::fmt::Display for TestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Address family of the data connections.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The largest UDP payload that fits one datagram.
    pub fn max_udp_payload(self) -> u32 {
        match self {
            Family::V4 => 65_507,
            Family::V6 => 65_527,
        }
    }
}

/// When a test ends: after a time, or after a count whose unit depends on the
/// test (netperf's negative `-l`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestEnd {
    /// Milliseconds; 0 means "until netperf says stop" (netperf's `-l 0`).
    Time { millis: u64 },
    /// Exactly this many bytes (TCP stream tests), or, as netperf 2.7
    /// counts a UDP stream test, datagrams until this many bytes are out.
    Bytes(u64),
    /// Exactly this many transactions (the _RR tests).
    Transactions(u64),
}

/// Socket and message settings of one side (netperf's local or remote).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SideSpec {
    /// SO_SNDBUF to request (`-s`/`-S` first value).
    pub send_buf: Option<u32>,
    /// SO_RCVBUF to request (`-s`/`-S` second value).
    pub recv_buf: Option<u32>,
    /// Bytes per send call (`-m`); default depends on the test.
    pub send_size: Option<u32>,
    /// Bytes per receive call (`-M`); default depends on the test.
    pub recv_size: Option<u32>,
    /// TCP_NODELAY (`-D`).
    pub nodelay: bool,
    /// IP TOS / traffic class (`-Y`).
    pub tos: Option<u8>,
    /// TCP congestion control algorithm (`-K`).
    pub cong_control: Option<String>,
    /// SO_PRIORITY (`-y`).
    pub priority: Option<u32>,
    /// CPU to pin this side's test thread to (`-T`).
    pub cpu_bind: Option<u32>,
    /// SO_DONTROUTE (`-- -R 0`; netperf 2.7's default for UDP stream tests).
    pub dont_route: bool,
    /// Buffer alignment and offset of the send and receive rings (global
    /// `-a`/`-A` and `-o`/`-O`).
    pub send_align: u32,
    pub recv_align: u32,
    pub send_offset: u32,
    pub recv_offset: u32,
    /// Buffers in the send and receive rings (global `-W`, test `-W`).
    pub send_width: Option<u32>,
    pub recv_width: Option<u32>,
    /// TCP_MAXSEG on the server's end of each stream: an iperf3 client's
    /// `-M`, which `iperf3 -s` sets on its listening socket. Never on our
    /// wire (netperf 2.7's `-G` is the client's own end only).
    #[serde(skip)]
    pub mss: Option<u32>,
}

/// Everything the server needs to run its side of one test.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TestSpec {
    pub kind: TestKind,
    pub family: Family,
    pub end: TestEnd,
    /// The server's (netperf's "remote") side settings.
    pub server: SideSpec,
    /// Request and response sizes of the _RR tests (`-r`).
    pub request_size: u32,
    pub response_size: u32,
    /// Extra transactions in flight (TCP_RR `-b`).
    pub burst: u32,
    /// Number of data connections (flows) in this test.
    pub flows: u32,
    /// Receive timeout for lost UDP_RR transactions (`-e`), milliseconds.
    pub recv_timeout_ms: Option<u32>,
    /// Busy-poll non-blocking sockets instead of sleeping (`--spin`).
    pub spin: bool,
    /// Pace the sender at this many bits per second in all (`--rate`; an
    /// iperf3 client's `-b` times its streams), shared by its flows
    /// ([`TestSpec::flow_rate_bps`]): a UDP sender's own pacing, a TCP
    /// sender's SO_MAX_PACING_RATE.
    pub rate_bps: Option<u64>,
    /// Measure CPU utilisation on the server (`-C`).
    pub measure_cpu: bool,
    /// Number of CPUs to assume for utilisation (`-n`), 0 = count them.
    pub num_cpus: u32,
    /// The server's interim reports, one every this many milliseconds
    /// ([`InterimReport`]), sent before its results; asked only of a
    /// server that names `interim` (others leave it unread).
    pub interim_ms: Option<u32>,
    /// Data port the client asks the server to listen on (`-P ,port`).
    pub data_port: Option<u16>,
    /// Address of the server's host its data sockets bind to, when not the
    /// control connection's (`-- -H`, or another data family).
    pub data_addr: Option<std::net::IpAddr>,
    /// Set SO_KEEPALIVE on the data connections (global `-S`).
    pub keepalive: bool,
    /// TCP_DEFER_ACCEPT on the server's data listener (`-- -a`).
    pub defer_accept: bool,
    /// TCP Fast Open on the server's data listener (`-- -F`).
    pub fastopen: bool,
    /// The server connects its UDP socket to the client (`-- -N`).
    pub connected_udp: bool,
    /// The client asked for a fill file on the server (`-F ,rfill`): the
    /// server fills its buffers with data of its own, never a named file.
    pub remote_fill: bool,
    /// The port of netperf's own data socket, where it has bound one
    /// before asking (UDP): netperf 2.7's netserver sends a UDP receive
    /// test's datagrams there, to the control connection's peer address.
    pub peer_data_port: Option<u16>,
    /// `--warmup`/`--cooldown`: traffic before and after the measured
    /// interval. Not part of the `Setup` message (an older peer would not
    /// read it): it travels in `SetupWindowed`, to a server that named the
    /// `window` capability.
    #[serde(skip)]
    pub window: Option<Window>,
    /// UDP_STREAM's fast paths (`--batch`, `--gso`): not part of `Setup`
    /// either; they travel in `SetupTuned`, to a server that named the
    /// `tuning` capability.
    #[serde(skip)]
    pub udp_fast: UdpFast,
    /// The data path's system calls (`--rx-zerocopy`, `--rx-discard`,
    /// `--io-uring`): not part of `Setup` either; they travel in
    /// `SetupPaths`, to a server that named the `paths` capability.
    #[serde(skip)]
    pub paths: Paths,
    /// ECN (`--ecn`): what the server marks its sends with and whether it
    /// counts what it receives. Not part of `Setup` either: it travels in
    /// `SetupEcn`, to a server that named the `ecn` capability.
    #[serde(skip)]
    pub ecn: Option<crate::ecn::EcnAsk>,
    /// What an iperf3 peer's test asks beyond our `Setup` (both ways at
    /// once, 64-bit UDP counters, a client that ends the test itself, its
    /// one send size, batched wakes): iperf3's speakers alone set it
    /// (`proto::iperf3`); never on our wire.
    #[serde(skip)]
    pub iperf3: crate::iperf3::Extras,
}

/// The most datagrams (or GSO messages) one sendmmsg/recvmmsg moves
/// (`--batch`); Linux takes at most 1024 (UIO_MAXIOV).
pub const MAX_UDP_BATCH: u32 = 1024;
/// The most datagrams one UDP_SEGMENT send carries (`--gso`): Linux's
/// UDP_MAX_SEGMENTS on the kernels of the last years.
pub const MAX_UDP_SEGMENTS: u32 = 64;
/// Room for one datagram, or one GRO-coalesced message, in a batch slot.
pub const UDP_SLOT: u32 = 65_536;

/// UDP_STREAM's fast paths: how many datagrams one system call moves.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpFast {
    /// Messages per sendmmsg/recvmmsg (1: one send or receive a message).
    pub batch: u32,
    /// Datagrams per message: UDP_SEGMENT on the sender, UDP_GRO on the
    /// receiver (1: no segmentation offload).
    pub segments: u32,
}

impl Default for UdpFast {
    fn default() -> Self {
        UdpFast {
            batch: 1,
            segments: 1,
        }
    }
}

impl UdpFast {
    /// Whether any fast path is on.
    pub fn is_on(&self) -> bool {
        self.batch > 1 || self.segments > 1
    }
}

/// How a TCP stream receiver takes its bytes off the socket.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RxPath {
    /// recv(2) into a buffer: the kernel copies every byte (netperf's).
    #[default]
    Copy,
    /// recv(2) with MSG_TRUNC: the kernel drops the bytes without copying
    /// them (`--rx-discard`): nothing reaches user space.
    Discard,
    /// TCP_ZEROCOPY_RECEIVE: whole pages of the socket's data mapped into
    /// user space, the rest copied (`--rx-zerocopy`).
    ZeroCopy,
}

impl RxPath {
    /// The option that asks for it.
    pub fn option(self) -> &'static str {
        match self {
            RxPath::Copy => "",
            RxPath::Discard => "--rx-discard",
            RxPath::ZeroCopy => "--rx-zerocopy",
        }
    }
}

/// The data path's system calls beyond netperf's, as `SetupPaths` tells
/// the netserver.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paths {
    /// How the netserver's side receives, where it receives a TCP stream.
    pub rx: RxPath,
    /// Both ends move the stream's data through io_uring (`--io-uring`).
    pub uring: bool,
}

impl Paths {
    /// Whether anything is asked beyond netperf's plain calls.
    pub fn is_on(&self) -> bool {
        *self != Paths::default()
    }
}

/// The threads a TCP stream test's flows run on, at either end: a flow a
/// thread, in blocking calls (a send then waits in the kernel for room,
/// rather than returning to wait in the loop), up to this many; beyond,
/// the netserver's flows share them on event loops (netperf's share a
/// thread a CPU: its `default_threads`).
pub const STREAM_THREADS: u32 = 16;

/// The threads of a TCP stream test of `flows` flows on a machine of
/// `cpus` CPUs: [`STREAM_THREADS`] at most, or the CPUs where there are
/// more.
pub fn stream_threads(flows: u32, cpus: u32) -> u32 {
    flows.max(1).min(cpus.max(STREAM_THREADS))
}

/// Where a stream sender's buffer starts on the event loops: a page, so
/// that its pages go whole to a zero-copy send (and so to a receiver that
/// maps them).
pub const PAGE_ALIGN: u32 = 4096;

/// The io_uring receiver's provided buffers: a thread's group holds eight
/// a flow, at least this many ...
pub const URING_BUFFERS: u32 = 64;
/// ... and at most this many ...
pub const URING_BUFFERS_MAX: u32 = 1024;
/// ... each of at most this many bytes (a stream's receive size, or a
/// datagram's room).
pub const URING_BUFFER_MAX: u32 = 65_536;

/// The provided buffers of an io_uring thread that receives `flows` flows.
pub fn uring_buffers(flows: u32) -> u32 {
    flows
        .saturating_mul(8)
        .clamp(URING_BUFFERS, URING_BUFFERS_MAX)
        .next_power_of_two()
}

/// A provided buffer's size for receives of `size` bytes (UDP: room for
/// the sender's address and the kernel's header before the datagram).
pub fn uring_buffer_size(size: u32, datagrams: bool) -> u32 {
    size.clamp(1, URING_BUFFER_MAX) + if datagrams { 16 + 128 } else { 0 }
}
/// The zero-copy receiver's window of mapped pages, a flow: the most it
/// maps in one call, and holds until its next.
pub const RX_MAP_WINDOW: u32 = 2 << 20;

/// What `SetupTuned` carries beside the spec.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    pub window: Option<Window>,
    pub udp_fast: UdpFast,
}

/// Traffic that runs but is not counted: `warmup_ms` before the measured
/// interval (the test's length) and `cooldown_ms` after it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub warmup_ms: u32,
    pub cooldown_ms: u32,
}

impl Window {
    /// The measured interval's offsets from the start of the traffic,
    /// given its length.
    pub fn bounds(
        &self,
        length: std::time::Duration,
    ) -> (std::time::Duration, std::time::Duration) {
        let open = std::time::Duration::from_millis(u64::from(self.warmup_ms));
        (open, open + length)
    }

    /// How long the traffic runs in all.
    pub fn total(&self, length: std::time::Duration) -> std::time::Duration {
        self.bounds(length).1 + std::time::Duration::from_millis(u64::from(self.cooldown_ms))
    }
}

/// The largest buffer alignment or offset a server takes (`-A`, `-O`).
pub const MAX_PLACEMENT: u32 = 2 * 1024 * 1024;
/// The most buffers in a ring a server takes (`-W`).
pub const MAX_WIDTH: u32 = 65_536;

/// How many leading bytes of each UDP_RR request carry its transaction's
/// tag (its sequence number, little-endian), echoed in the response: as
/// many as the smaller of the two sizes allows, at least 1 and at most 8.
pub fn udp_rr_tag_len(req: usize, resp: usize) -> usize {
    req.min(resp).clamp(1, 8)
}

/// How many consecutive sequence numbers UDP_RR's tags tell apart with
/// these sizes: the most requests that may be in flight at once.
pub fn udp_rr_distinct_tags(req: usize, resp: usize) -> u64 {
    match udp_rr_tag_len(req, resp) {
        8 => u64::MAX,
        tag => 1 << (8 * tag),
    }
}

mod budget;
mod grant;
mod results;
mod sizes;
mod summary;
mod validate;

pub use budget::*;
pub use grant::*;
pub use results::*;
pub use sizes::*;
pub use summary::*;

#[cfg(test)]
mod tests;
