//! What each side measured ([`SideResults`]) and the interim reports.

use super::*;

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
