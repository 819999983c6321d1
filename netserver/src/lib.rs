//! netserver as a library: the daemon that runs the remote side of netperf
//! tests.
//!
//! [`run`] serves control connections on listeners the caller bound (so
//! tests bind port 0), until its [`Shutdown`] is triggered. `netperf` embeds
//! it with [`spawn_embedded`] when no netserver is running on localhost.
//!
//! # Layout
//! - [`listener`]: the accept loop (mio): the waiting room of connections
//!   whose first message has not come, the caps on sessions, the pace of
//!   authentication failures.
//! - [`session`]: every control connection of the daemon on one mio loop,
//!   each a `proto::conn::ServerConn` (ours or netperf 2.7's dialect, a
//!   value inside it); a running test has a thread of its own, which tells
//!   its session when it ends. What a session is doing is one state
//!   (`session::state`: idle, held, waiting its turn, testing, a
//!   third-party test), its moves sans-IO and unit-tested.
//! - [`family`]: the server's side of each test family (`stream`, `rr`,
//!   `udp_stream`), what they share (`TestCtl`, data sockets), and `proof`:
//!   the waiting room where data connections prove they are the test's.
//! - [`cli`]: netserver's options; [`config`]: what shapes the daemon
//!   (limits, deadlines, keys, log); [`log`]: the daemon's log lines,
//!   through a queue to a writer thread.
//! - [`admission`]: what the daemon admits, counted before anything is
//!   allocated: sessions in all and by address, buffer memory, file
//!   descriptors, the turns of `--schedule exclusive`; every refusal one
//!   `Refusal`, mapped in one place to the client's code and words and to
//!   the metric.
//! - [`policy`]: `--policy FILE`, budgets per address, per prefix and for
//!   the daemon, kept across restarts.
//! - [`shared`]: what every session and the accept loop share;
//!   [`shutdown`]: the one stop signal they all see.
//! - `handoff`: data connections that come to a session's own port and
//!   are handed to its test (iperf3's streams, by cookie);
//!   [`iperf3_auth`]: who may test on the iperf3 port.
//! - `fleet`: third-party tests (`--fleet`), run with the client
//!   library's lifecycle.
//! - [`stamp`]: `--stamp`, a STAMP reflector (RFC 8762/8972) on a UDP
//!   port, a thread of its own, rate-limited by address.
//! - [`metrics`]: what `--metrics` counts; `scrape`: its HTTP endpoint on
//!   the control loop; `record`: `--record FILE`, a JSON line a test.
//! - [`error`]: what goes wrong, and who is told (a test's client, or the
//!   operator).
//! - `main.rs`: the command line, daemonizing and signals.

#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod admission;
pub mod cli;
pub mod config;
pub mod error;
pub mod family;
mod fleet;
mod handoff;
pub mod iperf3_auth;
pub mod listener;
pub mod log;
pub mod metrics;
pub mod policy;
mod record;
mod scrape;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod stamp;

use std::{
    io,
    net::{IpAddr, SocketAddr, TcpListener, TcpStream},
    sync::Arc,
    thread,
    time::Duration,
};

pub use admission::{MemoryBudget, Reservation};
pub use config::{Config, software};
pub use error::Error;
pub use log::Logger;
use shared::Shared;
pub use shutdown::Shutdown;

/// Serve control connections on `listeners` until `shutdown` is triggered.
/// Returns once every session has ended (or after 5 s of waiting for them).
/// inetd's way: serve the one control connection we were started with,
/// then return.
pub fn serve_one(stream: TcpStream, config: Config) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    let shared = Arc::new(Shared::new(config, Shutdown::new()));
    if let Err(why) = shared.census.admit(peer.ip(), shared.config.session_caps()) {
        return Err(io::Error::other(format!("{why:?}")));
    }
    let r = listener::accept_loop(Vec::new(), Vec::new(), None, Some((stream, peer)), &shared);
    shared.workers.wait_none(Duration::from_secs(5));
    r
}

pub fn run(listeners: Vec<TcpListener>, config: Config, shutdown: Shutdown) -> io::Result<()> {
    run_with_metrics(listeners, None, config, shutdown)
}

/// [`run`], serving the metrics endpoint on `metrics` too (`--metrics`).
pub fn run_with_metrics(
    listeners: Vec<TcpListener>,
    metrics: Option<TcpListener>,
    config: Config,
    shutdown: Shutdown,
) -> io::Result<()> {
    serve(
        Listeners {
            control: listeners,
            metrics,
            ..Listeners::default()
        },
        config,
        shutdown,
    )
}

/// What the daemon listens on: its control port (ours and netperf 2.7's
/// clients), iperf3's port (`--iperf3`), the metrics endpoint.
#[derive(Debug, Default)]
pub struct Listeners {
    pub control: Vec<TcpListener>,
    pub iperf3: Vec<TcpListener>,
    /// iperf3's UDP streams' first datagrams come to its port too.
    pub iperf3_udp: Vec<std::net::UdpSocket>,
    pub metrics: Option<TcpListener>,
    /// `--stamp`: STAMP's reflector (RFC 8762), a thread a socket.
    pub stamp: Vec<std::net::UdpSocket>,
}

/// Serve every listener of `l` until `shutdown` is triggered.
pub fn serve(l: Listeners, config: Config, shutdown: Shutdown) -> io::Result<()> {
    use session::Origin;
    let listeners: Vec<(TcpListener, Origin)> = l
        .control
        .into_iter()
        .map(|c| (c, Origin::Control))
        .chain(l.iperf3.into_iter().map(|c| (c, Origin::Iperf3)))
        .collect();
    let metrics = l.metrics;
    let udp = l.iperf3_udp;
    let shared = Arc::new(Shared::new(config, shutdown));
    let f = shared.descriptors.shares();
    shared.config.logger.log(
        2,
        &format!(
            "descriptors: {} open files; {} for tests (a test {}, an address's tests {}, {} tests an address), the rest for {} sessions, {} new connections waiting and the daemon's own",
            f.open_files,
            f.tests,
            f.per_test,
            f.per_address,
            f.tests_per_address,
            shared.config.max_sessions,
            f.waiting
        ),
    );
    let keeper = keep_policy_state(&shared);
    let reflectors = l
        .stamp
        .into_iter()
        .map(|s| stamp::spawn(s, &shared))
        .collect::<io::Result<Vec<_>>>()?;
    let r = listener::accept_loop(listeners, udp, metrics, None, &shared);
    // (the loop may have ended on an error: the reflectors stop too)
    shared.shutdown.trigger();
    for t in reflectors {
        let _ = t.join();
    }
    // aborted tests' workers end on their own, soon: their data sockets
    // are closed before we return
    shared.workers.wait_none(Duration::from_secs(5));
    if let Some(k) = keeper {
        let _ = k.join();
    }
    r
}

/// How often the policy's counts are written to its state file: a crash
/// loses at most this much of them.
const POLICY_SAVE_EVERY: Duration = Duration::from_secs(60);

/// `--policy` with a `state_file`: a thread writes the counts every
/// [`POLICY_SAVE_EVERY`] and once more at shutdown.
fn keep_policy_state(shared: &Arc<Shared>) -> Option<thread::JoinHandle<()>> {
    let policy = shared.config.policy.clone();
    if !policy.keeps_state() {
        return None;
    }
    let shutdown = shared.shutdown.clone();
    let log = shared.config.logger.clone();
    let save = move || {
        if let Err(e) = policy.save() {
            log.warn_limited("policy", &e.to_string());
        }
    };
    thread::Builder::new()
        .name("policy-state".into())
        .spawn(move || {
            let mut since = std::time::Instant::now();
            while !shutdown.is_triggered() {
                thread::sleep(Duration::from_millis(250));
                if since.elapsed() >= POLICY_SAVE_EVERY {
                    save();
                    since = std::time::Instant::now();
                }
            }
            save();
        })
        .ok()
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
