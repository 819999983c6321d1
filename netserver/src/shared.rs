//! What every session and the accept loop share.

use std::{
    net::IpAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    admission::{Census, Descriptors, Failures, FdShares, Workers},
    config::Config,
    shutdown::Shutdown,
};

/// What sessions share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub shutdown: Shutdown,
    pub census: Census,
    pub failures: Failures,
    pub workers: Arc<Workers>,
    /// The file descriptors tests hold, and the tests each address runs.
    pub descriptors: Arc<Descriptors>,
    /// The last session's number (the log's and the record's `session`).
    pub sessions_begun: AtomicU64,
    /// Streams handed to their test by the listener (iperf3's).
    pub handoff: crate::handoff::Handoff,
    /// The turns tests take (`--schedule exclusive`).
    pub turns: crate::admission::Turns,
    /// A third-party test runs (`--fleet`: one at a time).
    pub third_party: Arc<crate::fleet::Busy>,
    /// The host's facts as last read, for an address, and when.
    facts: Mutex<Option<(Instant, IpAddr, proto::facts::HostFacts)>>,
}

/// How long the host's facts read for one test serve the next: a sysctl
/// or an offload changed between two runs is seen, and a daemon serving
/// many short tests reads its files (about 30 system calls, on the control
/// loop) once a second, not once a test.
const FACTS_FRESH: Duration = Duration::from_secs(1);

impl Shared {
    /// What the sessions of a daemon with `config` share. The open-files
    /// limit is raised to its hard limit and split
    /// ([`FdShares::split`]); the waiting room is kept within its part.
    pub fn new(mut config: Config, shutdown: Shutdown) -> Shared {
        // a daemon's tests come and go for months: what they free goes back
        engine::sys::give_memory_back();
        let (_, hard) = engine::sys::open_files_limit();
        let open_files = engine::sys::set_open_files(hard);
        let shares = FdShares::split(
            open_files,
            config.max_sessions,
            config.max_pending,
            config.max_test_fds,
            config.max_tests_per_client,
        );
        config.max_pending = shares.waiting;
        config.max_sessions = shares.sessions;
        config.max_per_client = config.max_per_client.min(shares.sessions);
        let turns = crate::admission::Turns::new(config.schedule, config.max_wait);
        Shared {
            config,
            shutdown,
            census: Census::default(),
            failures: Failures::default(),
            workers: Arc::default(),
            descriptors: Arc::new(Descriptors::new(shares)),
            sessions_begun: AtomicU64::new(0),
            handoff: crate::handoff::Handoff::default(),
            turns,
            third_party: Arc::default(),
            facts: Mutex::default(),
        }
    }

    /// This host's facts, with the interface of `local` (read at most
    /// once a second for the same address).
    pub fn host_facts(&self, local: IpAddr) -> proto::facts::HostFacts {
        let now = Instant::now();
        let Ok(mut kept) = self.facts.lock() else {
            return engine::sys::host_facts(Some(local));
        };
        match &*kept {
            Some((at, ip, f)) if *ip == local && now.duration_since(*at) < FACTS_FRESH => f.clone(),
            _ => {
                let f = engine::sys::host_facts(Some(local));
                *kept = Some((now, local, f.clone()));
                f
            }
        }
    }

    /// A number for a new session.
    pub fn session_id(&self) -> u64 {
        self.sessions_begun.fetch_add(1, Ordering::Relaxed) + 1
    }
}
