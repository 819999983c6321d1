//! What shapes the daemon's behaviour ([`Config`]): its limits, deadlines,
//! keys and log.

use std::{sync::Arc, time::Duration};

use proto::Limits;

use crate::{
    admission::{MemoryBudget, SessionCaps},
    log::Logger,
    metrics::Metrics,
};

/// The software string netserver sends in its hello.
pub fn software() -> String {
    format!("rsnetperf netserver {}", env!("CARGO_PKG_VERSION"))
}

/// Everything that shapes the daemon's behaviour.
#[derive(Clone, Debug)]
pub struct Config {
    pub limits: Limits,
    /// Most control sessions at once.
    pub max_sessions: usize,
    /// Most sessions from one client address at once.
    pub max_per_client: usize,
    /// Most connections waiting for their first bytes at once (then the
    /// oldest of the address holding the most is closed for a new one).
    pub max_pending: usize,
    /// Range of data ports clients may ask for, and which the server uses.
    pub data_ports: Option<(u16, u16)>,
    /// First bytes of a new control connection must arrive within this.
    pub first_byte_timeout: Duration,
    /// Hello (and authentication) must be done within this.
    pub handshake_timeout: Duration,
    /// Longest silence on an idle control connection between tests.
    pub idle_timeout: Duration,
    /// Data connections must arrive within this after the setup reply.
    pub data_connect_timeout: Duration,
    /// CPUs to assume for utilisation (`-n`); 0 = count them.
    pub num_cpus: u32,
    /// The pre-shared key clients must prove they know (`--key-file`, `-Z`).
    pub key: Option<engine::auth::Key>,
    /// Run third-party tests for clients that prove `key` (`--fleet`).
    pub fleet: bool,
    /// Serve netperf 2.7 clients in their own protocol (`None`), or refuse
    /// them, telling them why: `--no-netperf2`, or `--key-file` without
    /// `--allow-netperf2` (their protocol cannot prove a key).
    pub netperf2_refused: Option<proto::dialect::Netperf2Refused>,
    /// `-Z`'s text, which a netperf 2.7 client must send first (in the
    /// clear, as netperf 2.7 does).
    pub netperf2_passphrase: Option<String>,
    pub logger: Logger,
    /// File descriptors one test may hold (`--max-test-fds`); `None`: a
    /// quarter of what the open-files limit leaves for tests
    /// ([`crate::admission::FdShares`]).
    pub max_test_fds: Option<u64>,
    /// Tests one client address may run at once (`--max-tests-per-client`).
    pub max_tests_per_client: u32,
    /// Whether tests run at once or take turns (`--schedule`), and the
    /// longest a test waits its turn (`--max-wait`).
    pub schedule: crate::admission::Schedule,
    pub max_wait: Duration,
    /// Buffer memory of all running tests together (`--memory-budget`).
    pub memory_budget: Arc<MemoryBudget>,
    /// The kernel's socket buffers of all running tests together
    /// (`--socket-budget`); a test may hold a quarter of it.
    pub socket_budget: Arc<MemoryBudget>,
    /// What `--metrics` serves (counted whether or not it is served).
    pub metrics: Arc<Metrics>,
    /// `--record`: a line for each completed test.
    pub record: Option<Logger>,
    /// `--policy`: budgets per address, prefix and daemon, and what one
    /// test may ask (none: nothing refused).
    pub policy: Arc<crate::policy::Policy>,
    /// Who may test on the iperf3 port (`None`: every client, as iperf3
    /// -s without credentials).
    pub iperf3_gate: Option<Arc<crate::iperf3_auth::Iperf3Gate>>,
    /// `--stamp`'s reflector (RFC 8762): how it numbers, its key.
    pub stamp: StampConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            max_sessions: 256,
            max_per_client: 128,
            max_pending: 4096,
            data_ports: None,
            first_byte_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            data_connect_timeout: Duration::from_secs(10),
            num_cpus: 0,
            key: None,
            fleet: false,
            netperf2_refused: None,
            netperf2_passphrase: None,
            max_test_fds: None,
            max_tests_per_client: 64,
            schedule: crate::admission::Schedule::Shared,
            max_wait: Duration::from_secs(60),
            logger: Logger::stderr(1),
            memory_budget: Arc::new(MemoryBudget::for_this_host()),
            socket_budget: Arc::new(MemoryBudget::for_sockets()),
            metrics: Arc::default(),
            record: None,
            policy: Arc::default(),
            iperf3_gate: None,
            stamp: StampConfig::default(),
        }
    }
}

impl Config {
    /// The caps on control sessions the census admits by.
    pub fn session_caps(&self) -> SessionCaps {
        SessionCaps {
            sessions: self.max_sessions,
            per_client: self.max_per_client,
        }
    }
}

/// `--stamp`'s reflector: how it numbers, its key (authenticated mode),
/// and each address's pace.
#[derive(Clone, Debug)]
pub struct StampConfig {
    pub numbering: proto::rfc_stamp::Numbering,
    /// `--stamp-key`: authenticated mode, HMAC-SHA-256 under it.
    pub key: Option<Vec<u8>>,
    /// Reflections a second to one address, at most.
    pub per_source: u32,
}

impl Default for StampConfig {
    fn default() -> StampConfig {
        StampConfig {
            numbering: proto::rfc_stamp::Numbering::Stateful,
            key: None,
            per_source: 100_000,
        }
    }
}

impl StampConfig {
    pub fn mode(&self) -> proto::rfc_stamp::Mode {
        if self.key.is_some() {
            proto::rfc_stamp::Mode::Authenticated
        } else {
            proto::rfc_stamp::Mode::Unauthenticated
        }
    }
}
