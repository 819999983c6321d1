//! netserver as a library: the daemon that runs the remote side of netperf
//! tests.
//!
//! [`run`] serves control connections on listeners the caller bound (so
//! tests bind port 0), until its [`Shutdown`] is triggered. `netperf` embeds
//! it with [`spawn_embedded`] when no netserver is running on localhost.
//!
//! # Layout
//! - [`listener`]: the accept loop (mio), with its caps on sessions.
//! - [`session`]: one control connection, one thread, a small mio loop over
//!   the control socket and its test's completion.
//! - [`family`]: the server's side of each test family.
//! - [`log`]: the daemon's log lines.
//! - `main.rs`: the command line, daemonizing and signals.

#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod cli;
pub mod family;
pub mod listener;
pub mod log;
pub mod session;

use std::{
    collections::HashMap,
    io,
    net::{IpAddr, SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

pub use log::Logger;
use proto::Limits;

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
    /// Serve netperf 2.7 clients in their own protocol (`None`), or refuse
    /// them, telling them why: `--no-netperf2`, or `--key-file` without
    /// `--allow-netperf2` (their protocol cannot prove a key).
    pub netperf2_refused: Option<proto::dialect::Netperf2Refused>,
    /// `-Z`'s text, which a netperf 2.7 client must send first (in the
    /// clear, as netperf 2.7 does).
    pub netperf2_passphrase: Option<String>,
    pub logger: Logger,
    /// Buffer memory of all running tests together (`--memory-budget`).
    pub memory_budget: Arc<MemoryBudget>,
}

/// The buffer memory all running tests share: each test reserves its
/// estimate ([`proto::TestSpec::server_memory`]) before it allocates, and
/// gives it back when it ends.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// A quarter of the host's memory, between 256 MiB and 64 GiB.
    pub fn for_this_host() -> MemoryBudget {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kib| kib.parse::<u64>().ok())
            })
            .map_or(4 << 30, |kib| kib * 1024);
        MemoryBudget::new((total / 4).clamp(256 << 20, 64 << 30))
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// Reserve `bytes`, or say how much is free.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation, u64> {
        let mut used = self.used.load(Ordering::SeqCst);
        loop {
            let free = self.limit.saturating_sub(used);
            if bytes > free {
                return Err(free);
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self.clone(),
                        bytes,
                    });
                }
                Err(now) => used = now,
            }
        }
    }
}

/// Memory reserved from a [`MemoryBudget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
    }
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
            netperf2_refused: None,
            netperf2_passphrase: None,
            logger: Logger::stderr(1),
            memory_budget: Arc::new(MemoryBudget::for_this_host()),
        }
    }
}

/// Tells a running server to stop: stop accepting, tell clients, end tests.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    inner: Arc<ShutdownInner>,
}

#[derive(Debug, Default)]
struct ShutdownInner {
    flag: AtomicBool,
    next_id: AtomicU64,
    wakers: Mutex<HashMap<u64, Arc<mio::Waker>>>,
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    pub fn trigger(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        if let Ok(w) = self.inner.wakers.lock() {
            for waker in w.values() {
                let _ = waker.wake();
            }
        }
    }

    pub fn is_triggered(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// Wake `waker` on shutdown until the returned guard is dropped.
    pub(crate) fn subscribe(&self, waker: Arc<mio::Waker>) -> Subscription {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut w) = self.inner.wakers.lock() {
            w.insert(id, waker.clone());
        }
        if self.is_triggered() {
            let _ = waker.wake();
        }
        Subscription {
            shutdown: self.clone(),
            id,
        }
    }
}

pub(crate) struct Subscription {
    shutdown: Shutdown,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut w) = self.shutdown.inner.wakers.lock() {
            w.remove(&self.id);
        }
    }
}

/// Counts of sessions, for the caps.
#[derive(Debug, Default)]
pub(crate) struct Census {
    state: Mutex<CensusState>,
}

#[derive(Debug, Default)]
struct CensusState {
    active: usize,
    pending: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// Why a new connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Sessions(usize),
    PerClient(usize),
}

impl Refusal {
    /// Whose idle session may make room: anyone's at the daemon's cap,
    /// `ip`'s own at its per-address cap.
    pub(crate) fn only(self, ip: IpAddr) -> Option<IpAddr> {
        match self {
            Refusal::Sessions(_) => None,
            Refusal::PerClient(_) => Some(ip),
        }
    }
}

impl Census {
    /// Whether [`Census::admit`] would admit `ip` now (nothing reserved).
    pub(crate) fn would_admit(&self, ip: IpAddr, cfg: &Config) -> Result<(), Refusal> {
        let Ok(s) = self.state.lock() else {
            return Err(Refusal::Sessions(cfg.max_sessions));
        };
        if s.active >= cfg.max_sessions {
            return Err(Refusal::Sessions(cfg.max_sessions));
        }
        if s.per_client.get(&ip).copied().unwrap_or(0) >= cfg.max_per_client {
            return Err(Refusal::PerClient(cfg.max_per_client));
        }
        Ok(())
    }

    pub(crate) fn admit(&self, ip: IpAddr, cfg: &Config) -> Result<(), Refusal> {
        let Ok(mut s) = self.state.lock() else {
            return Err(Refusal::Sessions(cfg.max_sessions));
        };
        if s.active >= cfg.max_sessions {
            return Err(Refusal::Sessions(cfg.max_sessions));
        }
        let n = s.per_client.get(&ip).copied().unwrap_or(0);
        if n >= cfg.max_per_client {
            return Err(Refusal::PerClient(cfg.max_per_client));
        }
        s.active += 1;
        s.pending += 1;
        *s.per_client.entry(ip).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn established(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.pending = s.pending.saturating_sub(1);
        }
    }

    pub(crate) fn leave(&self, ip: IpAddr, was_pending: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.active = s.active.saturating_sub(1);
            if was_pending {
                s.pending = s.pending.saturating_sub(1);
            }
            if let Some(n) = s.per_client.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.per_client.remove(&ip);
                }
            }
        }
    }
}

/// Test workers alive, those of aborted tests included: a session that
/// goes away does not wait for its worker, which ends on its own soon
/// after; this bounds how many can be alive at once, and lets the daemon
/// wait for them when it stops.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    alive: Mutex<usize>,
    ended: Condvar,
}

/// One worker's place in [`Workers`], given back when dropped.
#[derive(Debug)]
pub(crate) struct WorkerSlot(Arc<Workers>);

impl Workers {
    /// A place for one more worker, if fewer than `max` are alive.
    pub(crate) fn enter(self: &Arc<Self>, max: usize) -> Result<WorkerSlot, usize> {
        let Ok(mut n) = self.alive.lock() else {
            return Err(max);
        };
        if *n >= max {
            return Err(*n);
        }
        *n += 1;
        Ok(WorkerSlot(self.clone()))
    }

    pub(crate) fn alive(&self) -> usize {
        self.alive.lock().map_or(0, |n| *n)
    }

    /// Wait until no worker is alive, at most `limit`.
    pub(crate) fn wait_none(&self, limit: Duration) -> bool {
        let Ok(guard) = self.alive.lock() else {
            return false;
        };
        match self.ended.wait_timeout_while(guard, limit, |n| *n > 0) {
            Ok((n, _)) => *n == 0,
            Err(_) => false,
        }
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        if let Ok(mut n) = self.0.alive.lock() {
            *n = n.saturating_sub(1);
        }
        self.0.ended.notify_all();
    }
}

/// Failed authentications per client address, to slow down guessing: past
/// a few failures, an address gets one attempt a second (each waits its
/// turn), never a lock-out, so that whoever shares an address (a host, a
/// NAT) with a guesser still gets in with the right key.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    map: Mutex<HashMap<IpAddr, Tries>>,
}

/// One address's failures within the window, and its next turn.
#[derive(Debug, Clone, Copy)]
struct Tries {
    failed: u32,
    since: Instant,
    next_turn: Instant,
}

/// When an attempt may try its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    Now,
    At(Instant),
}

impl Failures {
    /// Failures an address may have within [`Failures::WINDOW`] before its
    /// attempts are spaced out.
    const LIMIT: u32 = 5;
    const WINDOW: Duration = Duration::from_secs(60);
    /// Between two attempts of an address past its limit.
    const INTERVAL: Duration = Duration::from_secs(1);
    /// Addresses remembered at most (expired entries are dropped first).
    const MAX_ENTRIES: usize = 10_000;

    /// When an attempt from `ip` may try a key: now, or, for an address
    /// past its limit, at its next turn (which this takes).
    pub(crate) fn turn(&self, ip: IpAddr, now: Instant) -> Turn {
        let Ok(mut map) = self.map.lock() else {
            return Turn::Now;
        };
        let Some(t) = map.get_mut(&ip) else {
            return Turn::Now;
        };
        if t.failed < Self::LIMIT || now.duration_since(t.since) >= Self::WINDOW {
            return Turn::Now;
        }
        let at = t.next_turn.max(now);
        t.next_turn = at + Self::INTERVAL;
        if at <= now { Turn::Now } else { Turn::At(at) }
    }

    pub(crate) fn record(&self, ip: IpAddr) {
        let Ok(mut map) = self.map.lock() else {
            return;
        };
        let now = Instant::now();
        if map.len() >= Self::MAX_ENTRIES {
            map.retain(|_, t| now.duration_since(t.since) < Self::WINDOW);
            if map.len() >= Self::MAX_ENTRIES {
                return;
            }
        }
        let t = map.entry(ip).or_insert(Tries {
            failed: 0,
            since: now,
            next_turn: now,
        });
        if now.duration_since(t.since) >= Self::WINDOW {
            *t = Tries {
                failed: 0,
                since: now,
                next_turn: now,
            };
        }
        t.failed += 1;
    }
}

/// What sessions share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub shutdown: Shutdown,
    pub census: Census,
    pub failures: Failures,
    pub workers: Arc<Workers>,
}

/// Serve control connections on `listeners` until `shutdown` is triggered.
/// Returns once every session has ended (or after 5 s of waiting for them).
/// inetd's way: serve the one control connection we were started with,
/// then return.
pub fn serve_one(stream: TcpStream, config: Config) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    let shared = Arc::new(Shared {
        config,
        shutdown: Shutdown::new(),
        census: Census::default(),
        failures: Failures::default(),
        workers: Arc::default(),
    });
    if let Err(why) = shared.census.admit(peer.ip(), &shared.config) {
        return Err(io::Error::other(format!("{why:?}")));
    }
    let r = listener::accept_loop(Vec::new(), Some((stream, peer)), &shared);
    shared.workers.wait_none(Duration::from_secs(5));
    r
}

pub fn run(listeners: Vec<TcpListener>, config: Config, shutdown: Shutdown) -> io::Result<()> {
    let shared = Arc::new(Shared {
        config,
        shutdown,
        census: Census::default(),
        failures: Failures::default(),
        workers: Arc::default(),
    });
    let r = listener::accept_loop(listeners, None, &shared);
    // aborted tests' workers end on their own, soon: their data sockets
    // are closed before we return
    shared.workers.wait_none(Duration::from_secs(5));
    r
}

/// A netserver running on threads of this process.
#[derive(Debug)]
pub struct Embedded {
    addr: SocketAddr,
    shutdown: Shutdown,
    thread: Option<thread::JoinHandle<io::Result<()>>>,
}

impl Embedded {
    /// The control address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Start a netserver on an ephemeral port of `ip` (a loopback address) in
/// this process, requiring `key` if given. It logs nothing, and stops when
/// the handle is dropped.
pub fn spawn_embedded(ip: IpAddr, key: Option<engine::auth::Key>) -> io::Result<Embedded> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))?;
    let addr = listener.local_addr()?;
    let shutdown = Shutdown::new();
    let config = Config {
        logger: Logger::discard(),
        key,
        ..Config::default()
    };
    let s = shutdown.clone();
    let thread = thread::Builder::new()
        .name("embedded-netserver".into())
        .spawn(move || run(vec![listener], config, s))?;
    Ok(Embedded {
        addr,
        shutdown,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_bounded_and_waited_for() {
        let w = Arc::new(Workers::default());
        let a = w.enter(2).unwrap();
        let b = w.enter(2).unwrap();
        assert_eq!(w.enter(2).unwrap_err(), 2);
        assert_eq!(w.alive(), 2);
        drop(a);
        let c = w.enter(2).unwrap();
        assert!(!w.wait_none(Duration::from_millis(10)));
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            drop((b, c));
        });
        assert!(w.wait_none(Duration::from_secs(5)));
        assert_eq!(w.alive(), 0);
        t.join().unwrap();
    }

    #[test]
    fn the_memory_budget_is_shared_and_given_back() {
        let b = Arc::new(MemoryBudget::new(100));
        let r1 = b.reserve(60).unwrap();
        assert_eq!(b.reserve(50).unwrap_err(), 40, "40 bytes free");
        let r2 = b.reserve(40).unwrap();
        assert_eq!(b.in_use(), 100);
        drop(r1);
        assert_eq!(b.in_use(), 40);
        drop(r2);
        assert_eq!(b.in_use(), 0);
        let host = MemoryBudget::for_this_host().limit();
        assert!((256 << 20..=64 << 30).contains(&host), "{host}");
    }
}
