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
    /// The server's receiving flows wake for more than a packet once fast
    /// (iperf3's clients: engine's `Reader::batching`). Not on our wire.
    #[serde(skip)]
    pub batch_wakes: bool,
    /// Data both ways at once (iperf3's `--bidir`): as many flows again,
    /// the server sending on them (the kind's flows come first). Not part
    /// of our `Setup`: iperf3's speaker sets it.
    #[serde(skip)]
    pub bidir: bool,
    /// UDP datagrams carry 64-bit sequence numbers (iperf3's
    /// `udp_counters_64bit`).
    #[serde(skip)]
    pub udp_counters64: bool,
    /// A client that ends the test itself says how long it will run, in
    /// milliseconds (iperf3's `-t` and `-O`), where `end` cannot. Not part
    /// of our `Setup`.
    #[serde(skip)]
    pub client_ends_after_ms: Option<u64>,
    /// What the client sends a call (a UDP sender's datagrams), for a
    /// server whose parameters carry it: iperf3's `len`, one size at both
    /// ends. Not part of our `Setup`.
    #[serde(skip)]
    pub client_send_size: Option<u32>,
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

impl TestSpec {
    /// A spec with netperf's defaults for `kind`.
    pub fn new(kind: TestKind, family: Family) -> TestSpec {
        TestSpec {
            kind,
            family,
            end: TestEnd::Time { millis: 10_000 },
            server: SideSpec {
                send_align: 8,
                recv_align: 8,
                ..SideSpec::default()
            },
            request_size: 1,
            response_size: 1,
            burst: 0,
            flows: 1,
            recv_timeout_ms: None,
            spin: false,
            rate_bps: None,
            measure_cpu: false,
            num_cpus: 0,
            interim_ms: None,
            data_port: None,
            data_addr: None,
            keepalive: false,
            defer_accept: false,
            fastopen: false,
            connected_udp: false,
            remote_fill: false,
            peer_data_port: None,
            window: None,
            udp_fast: UdpFast::default(),
            paths: Paths::default(),
            ecn: None,
            batch_wakes: false,
            bidir: false,
            udp_counters64: false,
            client_ends_after_ms: None,
            client_send_size: None,
        }
    }

    /// Check every field against the server's limits. The error names the
    /// netperf option that sets the field.
    pub fn validate(&self, limits: &Limits) -> Result<(), SpecError> {
        self.check_sizes(limits)?;
        self.check_counts(limits)?;
        self.check_end(limits)?;
        self.check_server_side()?;
        self.check_paths()?;
        self.check_stamps()?;
        self.check_ecn()?;
        let memory = self.server_memory();
        if memory > limits.memory_per_session {
            return Err(SpecError::new(
                "buffers",
                format!(
                    "the test would need {memory} bytes of buffers on the server, more than its limit of {}",
                    limits.memory_per_session
                ),
            ));
        }
        Ok(())
    }

    /// ECN (`--ecn`): the tests that carry it, a mark a sender may use, an
    /// interval a receiver can keep.
    fn check_ecn(&self) -> Result<(), SpecError> {
        let Some(ecn) = self.ecn else {
            return Ok(());
        };
        if !matches!(
            self.kind,
            TestKind::UdpStream | TestKind::UdpRr | TestKind::TcpStream | TestKind::TcpMaerts
        ) {
            return Err(SpecError::new(
                "--ecn",
                "ECN is measured by UDP_STREAM, UDP_RR, TCP_STREAM and TCP_MAERTS",
            ));
        }
        if !matches!(
            ecn.mark,
            crate::ecn::Codepoint::Ect0 | crate::ecn::Codepoint::Ect1
        ) {
            return Err(SpecError::new(
                "--ecn",
                "a sender marks with ECT(0) or ECT(1)",
            ));
        }
        if !(10..=3_600_000).contains(&ecn.interval_ms) {
            return Err(SpecError::new(
                "--ecn",
                "its interval is from 10 ms to an hour",
            ));
        }
        if self.kind == TestKind::UdpRr && self.flows > 1 {
            return Err(SpecError::new(
                "--ecn",
                "UDP_RR's codepoints are counted on one flow: leave out --flows",
            ));
        }
        if self.paths.uring || self.bidir {
            return Err(SpecError::new(
                "--ecn",
                "io_uring's calls, and a test both ways at once, do not read ECN here",
            ));
        }
        Ok(())
    }

    /// One-way delay probes: one flow of [`crate::stamp::LEN`]-byte
    /// probes and answers, paced by the client (no burst, no rate).
    fn check_stamps(&self) -> Result<(), SpecError> {
        if self.kind != TestKind::UdpStamp {
            return Ok(());
        }
        let len = crate::stamp::LEN as u32;
        if self.flows > 1 {
            return Err(SpecError::new("flows", "UDP_STAMP probes on one flow"));
        }
        if self.request_size != len || self.response_size != len {
            return Err(SpecError::new(
                "-r",
                format!("UDP_STAMP's probes and answers are {len} bytes"),
            ));
        }
        if self.burst > 0 || self.window.is_some() || self.paths.is_on() {
            return Err(SpecError::new(
                "UDP_STAMP",
                "its probes take no burst, window or data path of their own",
            ));
        }
        Ok(())
    }

    /// Message sizes, the UDP fast paths, socket buffers.
    fn check_sizes(&self, limits: &Limits) -> Result<(), SpecError> {
        let max_msg = match self.kind.protocol() {
            Protocol::Udp => self.family.max_udp_payload(),
            Protocol::Tcp => limits.max_message,
        };
        let check_size = |field: &str, v: Option<u32>| -> Result<(), SpecError> {
            match v {
                Some(0) => Err(SpecError::new(field, "must be at least 1 byte")),
                Some(n) if n > max_msg => Err(SpecError::new(
                    field,
                    format!("{n} bytes is more than the limit of {max_msg}"),
                )),
                _ => Ok(()),
            }
        };
        check_size("-m (remote send size)", self.server.send_size)?;
        let fast = self.udp_fast;
        if fast.is_on() && self.kind != TestKind::UdpStream {
            return Err(SpecError::new("--batch/--gso", "only UDP_STREAM has them"));
        }
        if !(1..=MAX_UDP_BATCH).contains(&fast.batch) {
            return Err(SpecError::new(
                "--batch",
                format!("{} is not between 1 and {MAX_UDP_BATCH}", fast.batch),
            ));
        }
        if !(1..=MAX_UDP_SEGMENTS).contains(&fast.segments) {
            return Err(SpecError::new(
                "--gso",
                format!(
                    "{} datagrams a send is not between 1 and {MAX_UDP_SEGMENTS}",
                    fast.segments
                ),
            ));
        }
        check_size("-M (remote receive size)", self.server.recv_size)?;
        if self.kind.is_connection_test() {
            // A connection test may carry nothing at all (TCP_CC).
            let some = |n: u32| (n > 0).then_some(n);
            check_size("-r (request size)", some(self.request_size))?;
            check_size("-r (response size)", some(self.response_size))?;
        } else if self.kind.is_rr() {
            check_size("-r (request size)", Some(self.request_size))?;
            check_size("-r (response size)", Some(self.response_size))?;
        }
        for (field, v) in [
            ("-S (remote send socket buffer)", self.server.send_buf),
            ("-S (remote receive socket buffer)", self.server.recv_buf),
        ] {
            if let Some(n) = v
                && n > limits.max_socket_buffer
            {
                return Err(SpecError::new(
                    field,
                    format!(
                        "{n} bytes is more than the limit of {}",
                        limits.max_socket_buffer
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Flows and the burst.
    fn check_counts(&self, limits: &Limits) -> Result<(), SpecError> {
        if self.flows == 0 || self.flows > limits.max_flows {
            return Err(SpecError::new(
                "--flows",
                format!(
                    "{} is not between 1 and this netserver's limit of {} (netserver --max-flows raises it)",
                    self.flows, limits.max_flows
                ),
            ));
        }
        if self.burst > limits.max_burst {
            return Err(SpecError::new(
                "-b (burst)",
                format!(
                    "{} is more than the limit of {}",
                    self.burst, limits.max_burst
                ),
            ));
        }
        if self.burst > 0 && !matches!(self.kind, TestKind::TcpRr | TestKind::UdpRr) {
            return Err(SpecError::new(
                "-b (burst)",
                "applies to TCP_RR and UDP_RR only",
            ));
        }
        if self.burst > 0 && self.kind == TestKind::UdpRr {
            // Each request in flight must be told apart by its tag.
            let (req, resp) = (self.request_size as usize, self.response_size as usize);
            let tag = udp_rr_tag_len(req, resp);
            let distinct = udp_rr_distinct_tags(req, resp);
            if u64::from(self.burst) + 1 > distinct {
                return Err(SpecError::new(
                    "-b (burst)",
                    format!(
                        "{} transactions in flight cannot be told apart by a {tag}-byte tag \
                         (UDP_RR tags each request with its first bytes, as many as \
                         the smaller of -r's sizes, up to 8): at most {} with these sizes",
                        u64::from(self.burst) + 1,
                        distinct
                    ),
                ));
            }
        }
        Ok(())
    }

    /// How the test ends: its length or count, its window, timeouts, rate.
    fn check_end(&self, limits: &Limits) -> Result<(), SpecError> {
        match self.end {
            TestEnd::Time { millis } if millis > limits.max_duration_ms => {
                return Err(SpecError::new(
                    "-l (test length)",
                    format!(
                        "{} s is more than this netserver's limit of {} s (netserver --max-test-length)",
                        millis / 1000,
                        limits.max_duration_ms / 1000
                    ),
                ));
            }
            TestEnd::Bytes(0) | TestEnd::Transactions(0) => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a count of 0 runs nothing",
                ));
            }
            TestEnd::Bytes(_) if self.kind.is_rr() => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a byte count applies to stream tests only",
                ));
            }
            TestEnd::Transactions(_) if !self.kind.is_rr() => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a transaction count applies to _RR tests only",
                ));
            }
            _ => {}
        }
        // a client that ends the test itself (iperf3's -t and -O) is held
        // to the same limit as netperf's -l
        if let Some(ms) = self.client_ends_after_ms
            && ms > limits.max_duration_ms
        {
            return Err(SpecError::new(
                "-t (test length)",
                format!(
                    "{} s is more than this netserver's limit of {} s (netserver --max-test-length)",
                    ms.div_ceil(1000),
                    limits.max_duration_ms / 1000
                ),
            ));
        }
        if let Some(w) = self.window {
            let TestEnd::Time { millis } = self.end else {
                return Err(SpecError::new(
                    "--warmup/--cooldown",
                    "a window needs a timed test (-l seconds), not a count",
                ));
            };
            const HOUR_MS: u32 = 3_600_000;
            if w.warmup_ms > HOUR_MS || w.cooldown_ms > HOUR_MS {
                return Err(SpecError::new(
                    "--warmup/--cooldown",
                    "more than an hour of uncounted traffic",
                ));
            }
            let total = millis + u64::from(w.warmup_ms) + u64::from(w.cooldown_ms);
            if total > limits.max_duration_ms {
                return Err(SpecError::new(
                    "-l (test length)",
                    format!(
                        "{} s with the warmup and cooldown is more than this netserver's limit of {} s (netserver --max-test-length)",
                        total / 1000,
                        limits.max_duration_ms / 1000
                    ),
                ));
            }
        }
        if let Some(t) = self.recv_timeout_ms
            && (t == 0 || t > 3_600_000)
        {
            return Err(SpecError::new(
                "-e (receive timeout)",
                "must be between 1 ms and 1 hour",
            ));
        }
        if let Some(r) = self.rate_bps
            && r == 0
        {
            return Err(SpecError::new("--rate", "must be more than 0 bits/s"));
        }
        Ok(())
    }

    /// The data path's calls: the receive paths where the server receives
    /// a TCP stream, io_uring on the stream tests.
    fn check_paths(&self) -> Result<(), SpecError> {
        let rx = self.paths.rx;
        if rx != RxPath::Copy && self.kind != TestKind::TcpStream {
            return Err(SpecError::new(
                rx.option(),
                "the netserver receives a TCP stream only in TCP_STREAM",
            ));
        }
        if self.paths.uring
            && !matches!(
                self.kind,
                TestKind::TcpStream | TestKind::TcpMaerts | TestKind::UdpStream
            )
        {
            return Err(SpecError::new(
                "--io-uring",
                "only TCP_STREAM, TCP_MAERTS and UDP_STREAM have it",
            ));
        }
        if self.paths.uring && self.window.is_some() {
            return Err(SpecError::new("--io-uring", "not with --warmup/--cooldown"));
        }
        if self.paths.uring && self.kind == TestKind::UdpStream && self.flows > 1 {
            return Err(SpecError::new(
                "--io-uring",
                "UDP_STREAM runs it on one flow",
            ));
        }
        if self.paths.uring && (self.udp_fast.is_on() || rx != RxPath::Copy) {
            return Err(SpecError::new(
                "--io-uring",
                "it makes its own calls: not with --batch, --gso, --rx-zerocopy or --rx-discard",
            ));
        }
        Ok(())
    }

    /// What the server's side is asked to set: congestion control, buffer placement, widths, priority, CPU.
    fn check_server_side(&self) -> Result<(), SpecError> {
        if let Some(cc) = &self.server.cong_control
            && (cc.is_empty()
                || cc.len() > 15
                || !cc
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            return Err(SpecError::new(
                "-K (remote congestion control)",
                "must be 1 to 15 letters, digits, '_' or '-'",
            ));
        }
        // Buffer placement: an alignment up to a page of huge pages, an
        // offset within it.
        for (field, v, min) in [
            ("-A (remote send alignment)", self.server.send_align, 1),
            ("-A (remote receive alignment)", self.server.recv_align, 1),
            ("-O (remote send offset)", self.server.send_offset, 0),
            ("-O (remote receive offset)", self.server.recv_offset, 0),
        ] {
            if v < min || v > MAX_PLACEMENT {
                return Err(SpecError::new(
                    field,
                    format!("{v} is not between {min} and {MAX_PLACEMENT}"),
                ));
            }
        }
        for (field, v) in [
            ("-W (remote send width)", self.server.send_width),
            ("-W (remote receive width)", self.server.recv_width),
        ] {
            if let Some(w) = v
                && !(1..=MAX_WIDTH).contains(&w)
            {
                return Err(SpecError::new(
                    field,
                    format!("{w} buffers is not between 1 and {MAX_WIDTH}"),
                ));
            }
        }
        if let Some(p) = self.server.priority
            && p > 6
        {
            return Err(SpecError::new(
                "-y (remote socket priority)",
                format!("{p} is above 6, which only an administrator may set"),
            ));
        }
        if let Some(cpu) = self.server.cpu_bind
            && cpu >= 65_536
        {
            return Err(SpecError::new(
                "-T (remote CPU)",
                format!("{cpu} is not a CPU"),
            ));
        }
        if self.num_cpus > 65_536 {
            return Err(SpecError::new("-n (CPUs)", "more than 65536"));
        }
        if let Some(i) = self.interim_ms
            && !(MIN_INTERIM_MS..=3_600_000).contains(&i)
        {
            return Err(SpecError::new(
                "-D (interim interval)",
                format!("{i} ms is not between {MIN_INTERIM_MS} ms and an hour"),
            ));
        }
        Ok(())
    }

    /// The least buffer memory the server can need for this test, before
    /// it knows its socket buffers: sizes and widths it was not told count
    /// as the smallest they can be, one CPU. A request that cannot fit even
    /// so is refused before anything is bound; the server then counts and
    /// reserves what it resolved ([`TestSpec::buffer_memory`]) before it
    /// allocates.
    pub fn server_memory(&self) -> u64 {
        const DEFAULT_GUESS: u32 = 1;
        let ring = |size: Option<u32>, width: Option<u32>, align: u32, offset: u32| {
            let r = Ring::placed(
                size.unwrap_or(DEFAULT_GUESS),
                width.unwrap_or(1),
                align,
                offset,
            );
            // A ring whose size the server chooses may be capped at
            // MAX_RING_BYTES; with a larger size, fewer buffers fit and
            // the block may be smaller than with this guess (never below
            // half the cap): count no more than half the cap for it.
            match size {
                Some(_) => r,
                None => {
                    let half = (MAX_RING_BYTES as u64 / 2).saturating_sub(r.lead()) / r.stride();
                    let half = u32::try_from(half).unwrap_or(u32::MAX).max(1);
                    Ring::placed(r.size, r.width.min(half), align, offset)
                }
            }
        };
        self.buffer_memory(
            ring(
                self.server.send_size,
                self.server.send_width,
                self.server.send_align,
                self.server.send_offset,
            ),
            ring(
                self.server.recv_size,
                self.server.recv_width,
                self.server.recv_align,
                self.server.recv_offset,
            ),
            1,
        )
    }

    /// The one memory estimate: the buffers the server allocates for this
    /// test, given its send and receive rings (their sizes, widths and
    /// placement as resolved) and its CPUs (event loops run a thread per
    /// CPU at most). Each case is the shape its family allocates:
    /// - one TCP stream flow: its ring (one block, placement counted);
    /// - TCP flows on event loops (many flows, or a window): each loop
    ///   thread one buffer each way, shared by its flows, and each flow's
    ///   state;
    /// - a UDP receiver: one buffer per flow of the receive size, at most a
    ///   datagram's (and a fast receiver's batch of slots);
    /// - request/response: a request and a response buffer per flow (per
    ///   thread on event loops and for TCP_CRR's answering threads).
    pub fn buffer_memory(&self, send: Ring, recv: Ring, cpus: u32) -> u64 {
        /// Room for a tag, a preamble, a sequence header.
        const SLACK: u64 = 64;
        let flows = u64::from(self.flows.max(1));
        let loops = self.loops(cpus);
        // (io_uring runs even one flow on the many-flow shape: a buffer a
        // thread)
        let on_loops = self.driver(cpus) != Driver::Blocking;
        let (req, resp) = (
            u64::from(self.request_size.max(1)) + SLACK,
            u64::from(self.response_size.max(1)) + SLACK,
        );
        let state = flows.saturating_mul(FLOW_STATE_BYTES);
        match self.kind {
            TestKind::TcpStream if on_loops => {
                let inb = Ring::placed(recv.size.max(512), 1, PAGE_ALIGN, 0).bytes();
                loops.saturating_mul(1 + inb) + state
            }
            TestKind::TcpMaerts if on_loops => {
                loops.saturating_mul(Ring::placed(send.size.max(1), 1, PAGE_ALIGN, 0).bytes() + 512)
                    + state
            }
            TestKind::TcpStream => recv.bytes(),
            TestKind::TcpMaerts | TestKind::UdpMaerts => send.bytes(),
            TestKind::UdpStream => {
                let slots = if self.udp_fast.is_on() {
                    u64::from(self.udp_fast.batch) * u64::from(UDP_SLOT)
                } else {
                    0
                };
                let buf = u64::from(udp_receive_buffer(recv.size));
                flows.saturating_mul(buf + slots + FLOW_STATE_BYTES)
            }
            TestKind::TcpRr if on_loops => loops.saturating_mul(req.max(512) + resp) + state,
            TestKind::TcpRr => req + resp,
            TestKind::UdpRr | TestKind::UdpStamp => {
                flows.saturating_mul(req + resp + FLOW_STATE_BYTES)
            }
            TestKind::TcpCrr | TestKind::TcpCc => loops.saturating_mul(req + resp) + state,
        }
        .saturating_add(self.interim_memory())
        .saturating_add(self.path_memory(recv, loops))
    }

    /// How this test's data path runs, decided from the spec alone, the
    /// same at both ends: io_uring when asked; event loops for many flows
    /// or a window; one flow's blocking calls on the test's own thread
    /// otherwise (the fast path: one send and one receive a transaction).
    pub fn driver(&self, cpus: u32) -> Driver {
        let threads = u32::try_from(self.loops(cpus)).unwrap_or(u32::MAX);
        if self.paths.uring {
            Driver::Uring { threads }
        } else if self.flows > 1 || self.window.is_some() {
            Driver::Loops { threads }
        } else {
            Driver::Blocking
        }
    }

    /// How long the test will run, in whole seconds, where that is known
    /// before it starts: its time (with a window's warmup and cooldown),
    /// or what a client that ends it itself said; `None` for a count.
    pub fn asked_seconds(&self) -> Option<u64> {
        let ms = match self.end {
            TestEnd::Time { millis } if millis > 0 => {
                let length = std::time::Duration::from_millis(millis);
                let total = self.window.map_or(length, |w| w.total(length));
                u64::try_from(total.as_millis()).unwrap_or(u64::MAX)
            }
            _ => self.client_ends_after_ms?,
        };
        Some(ms.div_ceil(1000))
    }

    /// Each flow's share of [`TestSpec::rate_bps`], bits per second.
    pub fn flow_rate_bps(&self) -> Option<u64> {
        self.rate_bps
            .map(|r| (r / u64::from(self.flows.max(1))).max(1))
    }

    /// The threads the server's data path runs this test on: a flow a
    /// thread for TCP streams up to a point ([`stream_threads`]), else a
    /// thread a CPU at most, never more than the flows.
    pub fn loops(&self, cpus: u32) -> u64 {
        match self.kind {
            TestKind::TcpStream | TestKind::TcpMaerts => {
                u64::from(stream_threads(self.flows, cpus))
            }
            _ => u64::from(cpus.max(1).min(self.flows.max(1))),
        }
    }

    /// The most file descriptors the server's side of this test holds at
    /// once, counted before anything is opened: its data socket (and the
    /// copy its waiting room accepts on), the unproven connections a
    /// waiting room keeps ([`DATA_WAITING`]; TCP_CRR's, a thread each),
    /// each flow's socket and the copy kept to wake it on an abort, and an
    /// event loop's poll and waker a thread (an io_uring ring besides).
    pub fn server_descriptors(&self, cpus: u32) -> u64 {
        let flows = u64::from(self.flows.max(1));
        let loops = self.loops(cpus);
        let per_loop = 2 + u64::from(self.paths.uring);
        // the data socket, its copies, the waiting room's poll and waker
        let base = 6;
        let waiting = match self.kind {
            TestKind::TcpCrr | TestKind::TcpCc => loops * DATA_WAITING,
            _ if self.kind.protocol() == Protocol::Tcp => DATA_WAITING,
            _ => 0,
        };
        base + waiting + flows.saturating_mul(2) + loops * per_loop
    }

    /// What the server's data sockets can hold of the kernel's memory, and
    /// the send buffer it sets so that they fit `share` bytes. Each flow's
    /// socket counts both its queues: a buffer the client asked for
    /// (`-s`/`-S`) as the kernel sets it (doubled, within
    /// wmem_max/rmem_max); a TCP send queue left to autotuning as far as
    /// autotuning grows it (what a client that reads nothing makes the
    /// server hold); a receive queue left to autotuning at the size it
    /// starts with (the server reads all it is sent: the queue grows only
    /// as fast as it is read); a UDP socket's at the host's defaults where
    /// it streams, its window of datagrams where it answers. When
    /// that is over the share, a TCP send buffer the client left to the
    /// server is set to fit (at least [`MIN_HELD_BUFFER`]); when the test
    /// cannot fit even so, `Err` carries the least it would hold.
    pub fn socket_memory(&self, k: &KernelBuffers, share: u64) -> Result<SocketMemory, u64> {
        let flows = u64::from(self.flows.max(1));
        let tcp = self.kind.protocol() == Protocol::Tcp;
        let asked = |b: Option<u32>, max: u32| b.map(|b| 2 * u64::from(b.min(max)));
        // a UDP request/response flow's queues hold its window of
        // datagrams (each charged at least a page or so by the kernel)
        let datagrams = |size: u32| u64::from(self.burst + 1) * (u64::from(size) + 2048);
        let (udp_send, udp_recv) = match self.kind {
            TestKind::UdpRr => (datagrams(self.response_size), datagrams(self.request_size)),
            TestKind::UdpMaerts => (u64::from(k.wmem_default), 0),
            _ => (0, u64::from(k.rmem_default)),
        };
        let recv = asked(self.server.recv_buf, k.rmem_max).unwrap_or(if tcp {
            u64::from(k.tcp_rmem_default)
        } else {
            udp_recv
        });
        let send = asked(self.server.send_buf, k.wmem_max);
        let send_free = if tcp {
            u64::from(k.tcp_wmem_max)
        } else {
            udp_send
        };
        let whole = flows.saturating_mul(send.unwrap_or(send_free) + recv);
        if whole <= share {
            return Ok(SocketMemory {
                bytes: whole,
                send_buf: None,
                recv_buf: None,
            });
        }
        if send.is_some() || !tcp {
            // nothing of it is the server's to set
            return Err(whole);
        }
        let least = flows.saturating_mul(2 * u64::from(MIN_HELD_BUFFER) + recv);
        if least > share {
            return Err(least);
        }
        // what the send buffer left to the server may be, before doubling
        let each = (share / flows).saturating_sub(recv) / 2;
        let each = u32::try_from(each)
            .unwrap_or(u32::MAX)
            .clamp(MIN_HELD_BUFFER, k.wmem_max.max(MIN_HELD_BUFFER));
        Ok(SocketMemory {
            bytes: flows.saturating_mul(2 * u64::from(each) + recv),
            send_buf: Some(each),
            recv_buf: None,
        })
    }

    /// What the data path's calls hold beyond the rings, on the server: a
    /// zero-copy receiver's window of mapped pages a flow (taken off the
    /// socket's queue, held until its next call); an io_uring receiver's
    /// provided buffers, a group a thread (`loops` of them; one for one
    /// flow). (An io_uring sender's one buffer a thread is the loops'
    /// buffer, counted with them.)
    pub fn path_memory(&self, recv: Ring, loops: u64) -> u64 {
        let flows = self.flows.max(1);
        let mut bytes = 0u64;
        if self.paths.rx == RxPath::ZeroCopy {
            bytes += u64::from(flows) * u64::from(RX_MAP_WINDOW);
        }
        let server_receives = matches!(self.kind, TestKind::TcpStream | TestKind::UdpStream);
        if self.paths.uring && server_receives {
            let loops = loops.clamp(1, u64::from(flows));
            let per_loop = u32::try_from(u64::from(flows).div_ceil(loops)).unwrap_or(u32::MAX);
            let datagrams = self.kind.protocol() == Protocol::Udp;
            // (a UDP receiver's buffers hold the largest datagram it takes)
            let size = if datagrams {
                udp_receive_buffer(recv.size)
            } else {
                recv.size.max(1)
            };
            bytes += loops
                * u64::from(uring_buffers(per_loop))
                * u64::from(uring_buffer_size(size, datagrams));
        }
        bytes
    }

    /// What the server's interim reports of this test can take: as many
    /// as it keeps, each with TCP_INFO of as many connections as one holds.
    pub fn interim_memory(&self) -> u64 {
        if self.interim_ms.is_none() {
            return 0;
        }
        let one = std::mem::size_of::<InterimReport>()
            + MAX_TCP_PER_REPORT * std::mem::size_of::<TcpSample>();
        (MAX_INTERIM_REPORTS * one) as u64
    }
}

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

/// What a server allows a client to ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest TCP message size (send or receive).
    pub max_message: u32,
    /// Largest socket buffer a client may request.
    pub max_socket_buffer: u32,
    /// Largest number of flows in one test.
    pub max_flows: u32,
    /// Largest burst (transactions in flight beyond one).
    pub max_burst: u32,
    /// Longest test, in milliseconds; count-limited tests are cut off here too.
    pub max_duration_ms: u64,
    /// Buffer memory one session may use.
    pub memory_per_session: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: 16 * 1024 * 1024,
            max_socket_buffer: 256 * 1024 * 1024,
            max_flows: 16_384,
            max_burst: 4096,
            max_duration_ms: 86_400_000,
            memory_per_session: 64 * 1024 * 1024,
        }
    }
}

/// A per-test secret that every data connection presents first.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub struct Token(pub [u8; 32]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// The server's answer to a test request: where to connect and what it set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Port of the data listener (TCP) or data socket (UDP).
    pub data_port: u16,
    /// What each data connection must present first.
    pub token: Token,
    /// Socket buffer sizes the kernel gave the server's data socket.
    pub send_buf: u32,
    pub recv_buf: u32,
    /// Message sizes the server will use.
    pub send_size: u32,
    pub recv_size: u32,
    /// Buffers in the server's send and receive rings (0 for a direction
    /// it does not use).
    pub send_width: u32,
    pub recv_width: u32,
    /// Whether the server measures its CPU utilisation.
    pub measure_cpu: bool,
    /// CPUs the server counts for utilisation.
    pub num_cpus: u32,
}

/// netperf's word that its part of the data phase is over, with what it
/// counted (the server needs the datagram count to tell in-flight datagrams
/// from lost ones).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientDone {
    /// A UDP sender's count of datagrams sent, so that the receiver knows
    /// when it has all that will arrive (0 for the other tests).
    pub datagrams_sent: u64,
}

/// Bytes one flow's sending and receiving queues may hold (the largest
/// socket buffer a test may ask, [`Limits`]'s default): what one end may
/// have counted that the other did not when the test ended.
const IN_FLIGHT_PER_FLOW: u64 = 512 * 1024 * 1024;

/// How much shorter than half the netserver's interval a client's may be
/// (the spans the two clocks cover differ by a round trip and a wake).
const SPAN_SLACK_NS: u64 = 1_000_000;

/// No test's interval, at either end, is shorter than this (a system
/// call takes longer).
const SHORTEST_NS: u64 = 100;

/// What netperf made of a test, sent after its results to a netserver
/// whose hello names `summary` (the netserver's `--record` writes it
/// beside its own figures). Nothing answers it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClientSummary {
    /// netperf's own counters over its measured interval (per-flow
    /// counters left out: `flow_count` and `spread` say enough).
    pub local: SideResults,
    /// Round trips of a request/response test.
    pub latency: Option<LatencyFigures>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
}

impl ClientSummary {
    /// What a client says of its test, checked field by field before a
    /// record takes it: its interval within the longest test `limits`
    /// allow, CPU figures percentages, round trips finite, non-negative and
    /// in order, names short and printable. Per-flow counters are left
    /// out (the record keeps `flow_count` and `spread`). An error names the
    /// field at fault.
    pub fn validated(mut self, limits: &Limits) -> Result<ClientSummary, SpecError> {
        let bad = |field: &str, problem: &str| Err(SpecError::new(field, problem));
        let l = &self.local;
        let longest = limits
            .max_duration_ms
            .saturating_mul(1_000_000)
            .saturating_add(60_000_000_000);
        if l.elapsed_ns > longest {
            return bad(
                "local.elapsed_ns",
                "longer than this netserver lets a test run",
            );
        }
        if let Some(tcp) = &l.tcp
            && !is_name(&tcp.cong_control)
        {
            return bad(
                "local.tcp.cong_control",
                "not a congestion control's name (at most 16 printable characters)",
            );
        }
        if let Some(c) = &l.cpu {
            let shares = [
                c.util,
                c.user,
                c.system,
                c.iowait,
                c.irq,
                c.softirq,
                c.peak_util,
            ];
            if shares.iter().any(|v| !(0.0..=100.0).contains(v)) {
                return bad("local.cpu", "a utilisation that is not a percentage");
            }
            if !c.method.is_ascii_graphic() {
                return bad("local.cpu.method", "not a method letter");
            }
        }
        if let Some(t) = &self.latency {
            let v = [t.min_us, t.p50_us, t.p90_us, t.p99_us, t.max_us];
            // a day in microseconds: no round trip is longer
            let ok = |x: f64| (0.0..=8.64e10).contains(&x);
            if !v.iter().all(|x| ok(*x))
                || !ok(t.mean_us)
                || !v.windows(2).all(|w| matches!(w, [a, b] if a <= b))
            {
                return bad(
                    "latency",
                    "round trips that are not finite, non-negative and in order",
                );
            }
        }
        self.local.flows = Vec::new();
        Ok(self)
    }

    /// The summary held against what the netserver measured of the same
    /// test (`server`, of a test of `kind` with `flows` data connections):
    /// the client's interval like the server's (half to twice it, a
    /// millisecond less and a second more, never under 100 ns),
    /// no more bytes received than the server sent, no fewer
    /// sent than it received (and over TCP no more than its receive
    /// queues and the network could hold besides), no more transactions
    /// than the server answered. A client's rate is thereby bounded by
    /// the netserver's own figures; a summary out of them is left out,
    /// naming the field.
    pub fn checked_against(
        self,
        server: &SideResults,
        kind: TestKind,
        flows: u32,
    ) -> Result<ClientSummary, SpecError> {
        let bad = |field: &str, problem: String| Err(SpecError::new(field, problem));
        let (c, sv) = (&self.local, server);
        // the two clocks cover different spans (the client's from its
        // first send, the server's from its accept): on a test of
        // microseconds that is more than half; no test of either end is
        // shorter than 100 ns
        let (lo, hi) = (
            (sv.elapsed_ns / 2)
                .saturating_sub(SPAN_SLACK_NS)
                .max(SHORTEST_NS),
            sv.elapsed_ns
                .saturating_mul(2)
                .saturating_add(1_000_000_000),
        );
        if !(lo..=hi).contains(&c.elapsed_ns) {
            return bad(
                "local.elapsed_ns",
                format!(
                    "{} ns, where the netserver measured {} ns",
                    c.elapsed_ns, sv.elapsed_ns
                ),
            );
        }
        // bytes a flow's queues and path may hold that one end counted and
        // the other did not (send and receive buffers, at most)
        let in_flight = u64::from(flows.max(1)).saturating_mul(2 * IN_FLIGHT_PER_FLOW);
        if c.bytes_received > sv.bytes_sent {
            return bad(
                "local.bytes_received",
                format!(
                    "{} bytes, more than the netserver sent ({})",
                    c.bytes_received, sv.bytes_sent
                ),
            );
        }
        let sent_cap = match kind.protocol() {
            Protocol::Tcp => sv.bytes_received.saturating_add(in_flight),
            // datagrams may be lost on the way: what arrived says nothing
            // of an upper bound but the elapsed time's at 1 Tbit/s
            Protocol::Udp => c.elapsed_ns.saturating_mul(125).max(sv.bytes_received),
        };
        if c.bytes_sent < sv.bytes_received || c.bytes_sent > sent_cap {
            return bad(
                "local.bytes_sent",
                format!(
                    "{} bytes, where the netserver received {} (and at most {sent_cap} could have been sent)",
                    c.bytes_sent, sv.bytes_received
                ),
            );
        }
        let answered = sv.transactions.saturating_add(u64::from(flows.max(1)));
        if kind.is_rr() && c.transactions > answered {
            return bad(
                "local.transactions",
                format!(
                    "{}, more than the netserver answered ({})",
                    c.transactions, sv.transactions
                ),
            );
        }
        Ok(self)
    }
}

/// A congestion control's name as Linux allows one (TCP_CA_NAME_MAX 16).
fn is_name(s: &str) -> bool {
    s.len() <= 16 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// A request/response test's round trips, microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyFigures {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// CPU utilisation measured by one side over its measured interval.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CpuStats {
    /// Percent of all CPUs busy, 0..=100.
    pub util: f64,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    /// Busiest CPU and its utilisation.
    pub peak_cpu: u32,
    pub peak_util: f64,
    pub num_cpus: u32,
    /// netperf's method letter ('S' for /proc/stat).
    pub method: char,
}

/// The most interim reports a server keeps for a test (over an hour at
/// one a second; later ones are not kept).
pub const MAX_INTERIM_REPORTS: usize = 4_096;
/// The most data connections whose TCP_INFO one interim report carries.
pub const MAX_TCP_PER_REPORT: usize = 8;
/// The shortest interval between a server's interim reports.
pub const MIN_INTERIM_MS: u32 = 10;
/// Interim reports a frame carries.
pub const INTERIM_REPORTS_PER_FRAME: usize = 128;

/// What the server's side of a test had done at one moment
/// (`TestSpec::interim_ms`): its counters since its side began, and the
/// kernel's view of its first data connections. Sent, in frames of their
/// own, before the results.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct InterimReport {
    /// Since the server's side of the test began.
    pub elapsed_ns: u64,
    /// What the server's side moved (both ways added), in how many calls,
    /// and its transactions.
    pub bytes: u64,
    pub calls: u64,
    pub transactions: u64,
    /// TCP_INFO of its first data connections (at most
    /// [`MAX_TCP_PER_REPORT`]), in flow order.
    pub tcp: Vec<TcpSample>,
}

/// TCP_INFO of a data connection at one moment.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSample {
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Segments.
    pub cwnd: u32,
    pub retransmits: u64,
    /// Bytes a second the kernel last measured delivered, and paces at
    /// (`None`: no pacing).
    pub delivery_rate: u64,
    pub pacing_rate: Option<u64>,
    /// Bytes sent and not yet acknowledged.
    pub bytes_in_flight: u64,
}

/// TCP_INFO figures of a data connection at the end of a test.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    pub retransmits: u64,
    pub mss: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub cwnd: u32,
    pub cong_control: String,
}

/// Where a receiver's count of socket-buffer drops came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropSource {
    /// The socket's own counter (/proc/net/udp drops column): exact.
    Socket,
    /// The host's UDP receive-buffer error counter: includes other sockets.
    Host,
    /// Neither was readable.
    Unavailable,
    /// The socket's own counter, of messages the kernel had coalesced
    /// (UDP_GRO, `--gso`): each held one or more datagrams. Sent only to a
    /// client that asked for `--gso` (capability `tuning`).
    SocketCoalesced,
}

/// What a UDP receiver counted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct UdpRecvStats {
    /// Distinct datagrams of this test received.
    pub received: u64,
    /// Datagrams that arrived with a lower sequence number than one before.
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Datagrams that did not carry this test's identifier.
    pub foreign: u64,
    /// Datagrams the receiving socket dropped for lack of buffer space.
    pub rcvbuf_drops: u64,
    pub drops_source: DropSource,
    /// RFC 3550 interarrival jitter, nanoseconds.
    pub jitter_ns: u64,
}

/// Counters of one data connection: what every flow of every test counts,
/// on either side.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
}

/// What one side measured over its measured interval.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SideResults {
    pub elapsed_ns: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
    /// Sends that failed with a transient error (a UDP sender's "Errors").
    pub send_errors: u64,
    /// Socket buffer sizes at the end (Linux autotuning changes them).
    pub send_buf_end: u32,
    pub recv_buf_end: u32,
    pub cpu: Option<CpuStats>,
    pub tcp: Option<TcpStats>,
    pub udp: Option<UdpRecvStats>,
    /// How many flows the test had (0 or 1: the totals are the flow's).
    pub flow_count: u32,
    /// Per-flow counters when the test had more than one flow (on the
    /// wire, those beyond one frame's worth go in `Flows` frames first).
    pub flows: Vec<FlowCounters>,
    /// The least and the most any one flow moved, when there were several:
    /// in the results message itself, however many flows there were.
    pub spread: Option<FlowSpread>,
    /// With a window (`--warmup`/`--cooldown`), every flow's counters over
    /// the whole run, for checking the two ends against each other to the
    /// byte (the fields above cover the measured interval). They travel in
    /// `FlowTotals` frames, never in this message.
    #[serde(skip)]
    pub totals: Vec<FlowCounters>,
    /// Data connections the server closed as not the test's. They travel
    /// in a `Foreign` frame before the results, to a client that names the
    /// `foreign` capability, never in this message.
    #[serde(skip)]
    pub foreign_connections: ForeignConnections,
    /// What the receive path did beyond copying. It travels in a
    /// `Received` frame before the results, to a client that names the
    /// `paths` capability, never in this message.
    #[serde(skip)]
    pub rx: RxFigures,
    /// What the send path did beyond copying (`--zerocopy`): our own end's,
    /// never on the wire.
    #[serde(skip)]
    pub tx: TxFigures,
    /// The CPU time the test's own threads used, where the platform counts
    /// a thread's: iperf3's dialect reports it as the server's utilisation
    /// (a netserver runs many tests at once, so its process's time is not
    /// one test's). Never on our wire.
    #[serde(skip)]
    pub own_cpu: Option<OwnCpu>,
    /// What this side saw of ECN (`--ecn`). It travels in an `Ecn` frame
    /// before the results, to a client that names `ecn`, never in this
    /// message.
    #[serde(skip)]
    pub ecn: Option<crate::ecn::EcnReport>,
}

/// CPU time, user and system, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnCpu {
    pub user_ns: u64,
    pub system_ns: u64,
}

impl OwnCpu {
    /// As iperf3 states its CPU use: (total, user, system), each in percent
    /// of `elapsed_ns` of one CPU (over 100 where threads ran in parallel).
    pub fn percent_of(&self, elapsed_ns: u64) -> (f64, f64, f64) {
        if elapsed_ns == 0 {
            return (0.0, 0.0, 0.0);
        }
        let pct = |ns: u64| ns as f64 * 100.0 / elapsed_ns as f64;
        let (u, s) = (pct(self.user_ns), pct(self.system_ns));
        (u + s, u, s)
    }
}

/// A sender's `--zerocopy` sends: how many were made, and of them how many
/// the kernel could not pin pages for (the locked-memory limit), so were
/// made with a copy instead. The bytes count either way.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxFigures {
    pub zerocopy_sends: u64,
    pub copied_sends: u64,
}

/// What a receiver's path did beyond copying (`--rx-zerocopy`): of the
/// bytes it received, how many came as mapped pages (the rest were
/// copied).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxFigures {
    pub mapped_bytes: u64,
}

/// Data connections that reached a test's data port without being the
/// test's (a third party, a scanner, a stale client): closed without
/// touching the test, and counted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForeignConnections {
    /// All of them.
    pub closed: u64,
    /// Those that came during the measurement (TCP_CRR's listener is open
    /// all along): they cost the test time, so its figures may be lower.
    pub measured: u64,
}

/// The least and the most of the flows of a test.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSpread {
    /// Bytes each way added, of the flow that moved the fewest, the most.
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub min_transactions: u64,
    pub max_transactions: u64,
}

impl FlowCounters {
    /// What was counted since `earlier` (a snapshot of the same flow).
    pub fn since(self, earlier: FlowCounters) -> FlowCounters {
        FlowCounters {
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            send_calls: self.send_calls.saturating_sub(earlier.send_calls),
            recv_calls: self.recv_calls.saturating_sub(earlier.recv_calls),
            transactions: self.transactions.saturating_sub(earlier.transactions),
        }
    }

    /// The sum of two flows' counters.
    pub fn plus(self, o: FlowCounters) -> FlowCounters {
        FlowCounters {
            bytes_sent: self.bytes_sent.saturating_add(o.bytes_sent),
            bytes_received: self.bytes_received.saturating_add(o.bytes_received),
            send_calls: self.send_calls.saturating_add(o.send_calls),
            recv_calls: self.recv_calls.saturating_add(o.recv_calls),
            transactions: self.transactions.saturating_add(o.transactions),
        }
    }
}

impl SideResults {
    /// One flow's results: its counters are the totals.
    pub fn of_flow(c: &FlowCounters, elapsed_ns: u64) -> SideResults {
        let mut r = SideResults::default();
        r.set_totals(c);
        r.elapsed_ns = elapsed_ns;
        r
    }

    /// The totals, as one flow's counters.
    pub fn totals(&self) -> FlowCounters {
        FlowCounters {
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            send_calls: self.send_calls,
            recv_calls: self.recv_calls,
            transactions: self.transactions,
        }
    }

    pub fn set_totals(&mut self, c: &FlowCounters) {
        self.bytes_sent = c.bytes_sent;
        self.bytes_received = c.bytes_received;
        self.send_calls = c.send_calls;
        self.recv_calls = c.recv_calls;
        self.transactions = c.transactions;
    }

    /// Adds a flow: its counters to the totals and to the per-flow list,
    /// its time to the measured interval (the longest flow's).
    pub fn add_flow(&mut self, c: &FlowCounters, elapsed_ns: u64) {
        let t = self.totals().plus(*c);
        self.set_totals(&t);
        self.elapsed_ns = self.elapsed_ns.max(elapsed_ns);
        self.flows.push(*c);
        self.flow_count = u32::try_from(self.flows.len()).unwrap_or(u32::MAX);
    }

    /// After the last [`add_flow`](Self::add_flow): a single flow's list
    /// goes (its counters are the totals); several flows get their spread.
    pub fn close_flows(&mut self) {
        if self.flows.len() <= 1 {
            self.flows.clear();
            self.spread = None;
            return;
        }
        let bytes = |f: &FlowCounters| f.bytes_sent.saturating_add(f.bytes_received);
        let b = self.flows.iter().map(bytes);
        let t = self.flows.iter().map(|f| f.transactions);
        self.spread = Some(FlowSpread {
            min_bytes: b.clone().min().unwrap_or(0),
            max_bytes: b.max().unwrap_or(0),
            min_transactions: t.clone().min().unwrap_or(0),
            max_transactions: t.max().unwrap_or(0),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_add_up_and_a_single_flow_needs_no_list() {
        let a = FlowCounters {
            bytes_sent: 10,
            send_calls: 2,
            ..FlowCounters::default()
        };
        let mut r = SideResults::default();
        r.add_flow(&a, 5);
        r.close_flows();
        assert_eq!((r.bytes_sent, r.flow_count, r.flows.len()), (10, 1, 0));
        let mut r = SideResults::default();
        r.add_flow(&a, 5);
        r.add_flow(&a, 7);
        r.close_flows();
        assert_eq!((r.bytes_sent, r.send_calls, r.elapsed_ns), (20, 4, 7));
        assert_eq!((r.flow_count, r.flows.len()), (2, 2));
        let mut r = SideResults::default();
        r.add_flow(&a, 1);
        r.add_flow(
            &FlowCounters {
                bytes_received: 3,
                transactions: 2,
                ..a
            },
            1,
        );
        r.close_flows();
        let s = r.spread.unwrap();
        assert_eq!((s.min_bytes, s.max_bytes), (10, 13));
        assert_eq!((s.min_transactions, s.max_transactions), (0, 2));
        assert_eq!(SideResults::of_flow(&a, 3).totals(), a);
    }

    #[test]
    fn names_round_trip_case_insensitively() {
        for k in TestKind::ALL {
            assert_eq!(TestKind::from_name(k.name()), Some(k));
            assert_eq!(TestKind::from_name(&k.name().to_lowercase()), Some(k));
        }
        assert_eq!(TestKind::from_name("TCP_STREAMX"), None);
    }

    #[test]
    fn default_spec_is_valid() {
        for k in TestKind::ALL {
            TestSpec::new(k, Family::V4)
                .validate(&Limits::default())
                .unwrap();
        }
    }

    #[test]
    fn probes_are_one_flow_of_their_own_size() {
        let limits = Limits::default();
        let mut s = TestSpec::new(TestKind::UdpStamp, Family::V4);
        s.request_size = crate::stamp::LEN as u32;
        s.response_size = crate::stamp::LEN as u32;
        s.validate(&limits).unwrap();
        let refused = |f: &dyn Fn(&mut TestSpec)| {
            let mut t = s.clone();
            f(&mut t);
            t.validate(&limits).unwrap_err().to_string()
        };
        assert!(refused(&|t| t.flows = 2).contains("one flow"));
        assert!(refused(&|t| t.response_size = 9000).contains("32 bytes"));
        assert!(refused(&|t| t.burst = 1).contains("burst"));
        assert_eq!(TestKind::UdpStamp.protocol(), Protocol::Udp);
        assert_eq!(
            TestKind::from_name("UDP_STAMP"),
            None,
            "not a test a user names"
        );
    }

    #[test]
    fn zero_and_oversized_messages_are_refused() {
        let limits = Limits::default();
        let mut s = TestSpec::new(TestKind::UdpStream, Family::V4);
        s.server.recv_size = Some(0);
        let e = s.validate(&limits).unwrap_err();
        assert!(e.field.starts_with("-M"), "{e}");
        s.server.recv_size = Some(65_508);
        assert!(s.validate(&limits).unwrap_err().problem.contains("65507"));
        s.family = Family::V6;
        s.validate(&limits).unwrap();

        let mut r = TestSpec::new(TestKind::TcpRr, Family::V4);
        r.response_size = 0;
        assert!(r.validate(&limits).unwrap_err().field.starts_with("-r"));
    }

    #[test]
    fn udp_rr_burst_must_fit_its_tags() {
        let limits = Limits::default();
        let mut s = TestSpec::new(TestKind::UdpRr, Family::V4);
        s.request_size = 1;
        s.response_size = 1;
        s.burst = 255;
        s.validate(&limits).unwrap();
        s.burst = 256;
        let e = s.validate(&limits).unwrap_err();
        assert!(e.field.starts_with("-b"), "{e}");
        assert!(e.problem.contains("at most 256"), "{e}");
        s.request_size = 2;
        s.response_size = 64;
        s.validate(&limits).unwrap();
        s.kind = TestKind::TcpStream;
        s.burst = 1;
        assert!(s.validate(&limits).unwrap_err().field.starts_with("-b"));
    }

    #[test]
    fn memory_cap_is_enforced() {
        let limits = Limits::default();
        // a receive buffer per UDP flow: 2,000 x 64 KiB can never fit
        let mut s = TestSpec::new(TestKind::UdpStream, Family::V4);
        s.server.recv_size = Some(65_507);
        s.flows = 2_000;
        assert_eq!(s.validate(&limits).unwrap_err().field, "buffers");
        // on event loops, what it needs depends on the server's CPUs: the
        // server counts them before it allocates
        let mut s = TestSpec::new(TestKind::TcpRr, Family::V4);
        s.request_size = 16 * 1024 * 1024;
        s.response_size = 16 * 1024 * 1024;
        s.flows = 3;
        s.validate(&limits).unwrap();
        let none = Ring::new(0, 0);
        let one_cpu = s.buffer_memory(none, none, 1);
        assert!(one_cpu < limits.memory_per_session);
        assert_eq!(
            s.buffer_memory(none, none, 3),
            3 * (one_cpu - 3 * FLOW_STATE_BYTES) + 3 * FLOW_STATE_BYTES
        );
        assert!(s.buffer_memory(none, none, 3) > limits.memory_per_session);
    }

    /// What the server resolves is what is counted: sizes it chose, the
    /// placement of every buffer, a buffer per UDP flow.
    #[test]
    fn the_estimate_counts_what_is_allocated() {
        let mut s = TestSpec::new(TestKind::TcpMaerts, Family::V4);
        // 1-byte messages at the largest alignment and offset: a ring of
        // one buffer, 6 MiB with its placement, not 65,536 x 4 MiB
        let r = Ring::placed(1, 65_536, MAX_PLACEMENT, MAX_PLACEMENT - 1);
        assert_eq!(r.capped_width(), 1);
        assert_eq!(s.buffer_memory(r, r, 2), r.bytes());
        assert_eq!(r.bytes(), u64::from(2 * MAX_PLACEMENT - 2 + MAX_PLACEMENT));
        // an 8 MiB size the server took from its socket buffer
        s.kind = TestKind::TcpStream;
        let r = Ring::new(8 << 20, 2);
        assert_eq!(r.capped_width(), 1);
        assert!(s.buffer_memory(r, r, 2) >= 8 << 20);
        // a UDP receiver's buffer is a datagram's at most, per flow
        s.kind = TestKind::UdpStream;
        s.flows = 100;
        let r = Ring::new(8 << 20, 1);
        assert_eq!(
            s.buffer_memory(r, r, 2),
            100 * (u64::from(UDP_SLOT) + FLOW_STATE_BYTES)
        );
    }

    #[test]
    fn a_window_needs_a_timed_test_within_the_limit() {
        let limits = Limits::default();
        let mut s = TestSpec::new(TestKind::TcpStream, Family::V4);
        s.window = Some(Window {
            warmup_ms: 2000,
            cooldown_ms: 1000,
        });
        s.validate(&limits).unwrap();
        assert_eq!(
            s.window.unwrap().total(std::time::Duration::from_secs(10)),
            std::time::Duration::from_secs(13)
        );
        s.end = TestEnd::Bytes(1000);
        assert_eq!(
            s.validate(&limits).unwrap_err().field,
            "--warmup/--cooldown"
        );
        s.end = TestEnd::Time { millis: 86_399_000 };
        assert!(
            s.validate(&limits)
                .unwrap_err()
                .problem
                .contains("warmup and cooldown")
        );
    }

    #[test]
    fn length_units_must_fit_the_test() {
        let limits = Limits::default();
        let mut s = TestSpec::new(TestKind::TcpRr, Family::V4);
        s.end = TestEnd::Bytes(10);
        assert!(s.validate(&limits).is_err());
        s.end = TestEnd::Transactions(10);
        s.validate(&limits).unwrap();
        // a day-long soak runs by default; a day and a second does not
        s.end = TestEnd::Time { millis: 86_400_000 };
        s.validate(&limits).unwrap();
        s.end = TestEnd::Time { millis: 86_401_000 };
        assert!(s.validate(&limits).unwrap_err().problem.contains("86400 s"));
    }

    #[test]
    fn socket_memory_fits_a_share_or_names_what_it_needs() {
        let k = KernelBuffers {
            wmem_max: 4 << 20,
            rmem_max: 4 << 20,
            tcp_wmem_max: 4 << 20,
            ..KernelBuffers::default()
        };
        let mut s = TestSpec::new(TestKind::TcpMaerts, Family::V4);
        // one flow, autotuning: a 4 MiB send queue, a receive buffer
        // as it starts
        let m = s.socket_memory(&k, 300_000_000).unwrap();
        assert_eq!((m.bytes, m.send_buf), ((4 << 20) + 131_072, None));
        // 500 flows: the send buffer left to the server is set to fit
        s.flows = 500;
        let m = s.socket_memory(&k, 300_000_000).unwrap();
        assert_eq!(m.send_buf, Some((600_000 - 131_072) / 2));
        assert!(m.bytes <= 300_000_000, "{}", m.bytes);
        // -S 256M: the kernel gives 8 MiB a flow (4 MiB doubled); 500 do
        // not fit, and the figure says what they would hold
        s.server.send_buf = Some(256 << 20);
        let need = s.socket_memory(&k, 300_000_000).unwrap_err();
        assert!(need >= 500 * (8 << 20), "{need}");
        // a flow count no buffer can fit
        s.server.send_buf = None;
        s.flows = 16_384;
        assert!(s.socket_memory(&k, 100_000_000).is_err());
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    fn server(elapsed_ns: u64, received: u64, sent: u64, transactions: u64) -> SideResults {
        SideResults {
            elapsed_ns,
            bytes_received: received,
            bytes_sent: sent,
            transactions,
            ..SideResults::default()
        }
    }

    fn said(elapsed_ns: u64, sent: u64, received: u64, transactions: u64) -> ClientSummary {
        ClientSummary {
            local: server(elapsed_ns, received, sent, transactions),
            ..ClientSummary::default()
        }
    }

    /// A client's summary is held against the netserver's own figures of
    /// the same test: an honest one passes; the attack's 1.48e29 bit/s
    /// (bytes the server never saw, or an interval of nanoseconds) is
    /// left out naming the field.
    #[test]
    fn a_clients_rates_are_bounded_by_the_netservers_figures() {
        let sv = server(10_000_000_000, 10_000_000_000, 0, 0);
        let ok = said(10_001_000_000, 10_004_000_000, 0, 0);
        assert!(ok.checked_against(&sv, TestKind::TcpStream, 1).is_ok());
        for (forged, field) in [
            (said(10_000_000_000, u64::MAX, 0, 0), "local.bytes_sent"),
            (said(1, 10_004_000_000, 0, 0), "local.elapsed_ns"),
            (
                said(4_000_000_000, 10_004_000_000, 0, 0),
                "local.elapsed_ns",
            ),
            (
                said(10_000_000_000, 5_000_000_000, 0, 0),
                "local.bytes_sent",
            ),
            (
                said(10_000_000_000, 10_000_000_000, 1, 0),
                "local.bytes_received",
            ),
        ] {
            let e = forged
                .checked_against(&sv, TestKind::TcpStream, 1)
                .unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        // a test of microseconds: the client's span may be well under
        // half the server's, not under 100 ns
        let sv = server(5_239, 1, 0, 0);
        assert!(
            said(2_221, 1, 0, 0)
                .checked_against(&sv, TestKind::TcpStream, 1)
                .is_ok()
        );
        let e = said(1, 1, 0, 0)
            .checked_against(&sv, TestKind::TcpStream, 1)
            .unwrap_err();
        assert_eq!(e.field, "local.elapsed_ns");
        // UDP: a sender may have sent far more than arrived, not more than
        // 1 Tbit/s over its interval
        let sv = server(10_000_000_000, 1_000_000, 0, 0);
        assert!(
            said(10_000_000_000, 900_000_000, 0, 0)
                .checked_against(&sv, TestKind::UdpStream, 1)
                .is_ok()
        );
        assert!(
            said(10_000_000_000, 2_000_000_000_000, 0, 0)
                .checked_against(&sv, TestKind::UdpStream, 1)
                .is_err()
        );
        // RR: no more transactions than the netserver answered
        let sv = server(10_000_000_000, 100, 100, 100);
        assert!(
            said(10_000_000_000, 100, 100, 100)
                .checked_against(&sv, TestKind::TcpRr, 1)
                .is_ok()
        );
        let e = said(10_000_000_000, 100, 100, 1_000_000)
            .checked_against(&sv, TestKind::TcpRr, 1)
            .unwrap_err();
        assert_eq!(e.field, "local.transactions");
    }
}
