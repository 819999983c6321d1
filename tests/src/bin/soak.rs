//! A load generator for a running netserver: sessions back to back, each a
//! whole conversation in this suite's control protocol (hello, the setup
//! of one test, its data connection with the token, done, results, bye),
//! spoken here with `proto`'s session types and `engine`'s data loops, so
//! that what is measured is the netserver, not the start-up of netperf
//! processes.
//!
//! ```sh
//! soak [HOST[:PORT]] [-p PORT] [-c C] [-n N] [-l SECS] [--mixed SECS] [--pid PID]
//! ```
//!
//! The session run is a TCP_RR of one transaction per session, from C
//! workers, until N sessions have run or SECS have passed. `--mixed SECS`
//! then runs TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR and TCP_CRR
//! (short ones) from 32 workers, and kills some of them (`--kill PCT`) at a
//! random point: mid-hello, after the grant, in the data phase, or after
//! `Done`, dropping the control and data sockets abruptly (a reset, or a
//! close without a word). Every other session must succeed, with both
//! ends' counts agreeing.
//!
//! When it can see the netserver's process (`--pid`, or the owner of the
//! listening socket in /proc), it reads its VmRSS, threads and descriptors
//! when idle before the runs and after each, waiting for them to settle,
//! and prints them side by side. The exit status is 1 when a session that
//! was not killed failed, or when the threads or descriptors did not come
//! back to their idle counts; 2 for a bad command line.

use std::{
    collections::HashMap,
    io::{self, Read, Write},
    net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket},
    process::ExitCode,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use engine::{
    buffer::Ring,
    control::{ControlError, ControlStream},
    conventions::Conventions,
    crr::{self, CrrRequester},
    live::Live,
    rr::{self, Requester},
    sockopt,
    stream::{self, udp},
    timer::{StopFlag, Timer},
};
use proto::{
    ClientDone, ClientError, ClientEvent, ClientSession, ErrorCode, Grant, SideResults, TestEnd,
    TestKind, TestSpec,
    conn::{ClientConn, Speak},
};

const USAGE: &str = "\
usage: soak [HOST[:PORT]] [options]

Opens sessions back to back against a running netserver (default
127.0.0.1:12865), each a TCP_RR of one transaction in the suite's own
control protocol, and prints sessions/s and session times.

  -H, --host HOST       the netserver's host, as the first argument
  -p, --port PORT       control port (default 12865)
  -c, --concurrency C   workers opening sessions at once (default 4)
  -n, --sessions N      stop after N sessions
  -l, --seconds SECS    stop after SECS seconds (without -n or -l: -n 10000;
                        a run is always bounded: -l alone caps at 10^8
                        sessions, -n alone at 600 s)
      --mixed SECS      then a mixed run of SECS seconds: TCP_STREAM,
                        TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR,
                        short ones, some clients killed at random
      --mixed-only      the mixed run alone
      --mixed-workers W workers of the mixed run (default 32)
      --kill PCT        percent of mixed sessions killed (default 25)
      --pid PID         the netserver's pid (default: the owner of the
                        listening socket, found in /proc)
      --settle SECS     how long to wait for its threads and descriptors
                        to settle, before and after (default 5)
      --errors K        error messages shown (default 5)
      --seed N          the random choices of the mixed run
  -h, --help            this text";

/// How long a connect, a hello, a grant or results may take.
const CONTROL_WAIT: Duration = Duration::from_secs(10);
/// How long we try again a netserver that says it is busy, as netperf does.
const BUSY_RETRY: Duration = Duration::from_secs(3);
/// How long a stream sender waits for the receiver to close after the last
/// byte.
const LINGER: Duration = Duration::from_secs(30);
/// UDP_RR: a transaction with no response within this is lost.
const UDP_RR_TIMEOUT: Duration = Duration::from_millis(500);
/// The count cap of a run bounded by time, and the time cap of a run
/// bounded by count: every run ends.
const MAX_SESSIONS: u64 = 100_000_000;
const MAX_SECONDS: f64 = 600.0;
/// Distinct error messages counted; beyond that they are counted as
/// "other".
const MAX_DISTINCT_ERRORS: usize = 64;

#[derive(Debug, Clone)]
struct Opts {
    server: SocketAddr,
    workers: usize,
    sessions: u64,
    seconds: f64,
    session_run: bool,
    mixed: Option<f64>,
    mixed_workers: usize,
    kill_percent: u64,
    pid: Option<u32>,
    settle: Duration,
    show_errors: usize,
    seed: u64,
}

fn parse_args(args: &[String]) -> Result<Option<Opts>, String> {
    let mut host: Option<String> = None;
    let mut port: Option<u16> = None;
    let mut workers = 4usize;
    let mut sessions: Option<u64> = None;
    let mut seconds: Option<f64> = None;
    let mut mixed = None;
    let mut mixed_only = false;
    let mut mixed_workers = 32usize;
    let mut kill_percent = 25u64;
    let mut pid = None;
    let mut settle = 5.0f64;
    let mut show_errors = 5usize;
    let mut seed = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{name}: '{v}' is not a valid number"))
        }
        fn secs(name: &str, v: &str) -> Result<f64, String> {
            let s: f64 = num(name, v)?;
            if !(s.is_finite() && s > 0.0 && s <= MAX_SECONDS) {
                return Err(format!(
                    "{name}: {v} is not between 0 and {MAX_SECONDS} seconds"
                ));
            }
            Ok(s)
        }
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "-H" | "--host" => host = Some(value(a)?),
            "-p" | "--port" => port = Some(num(a, &value(a)?)?),
            "-c" | "--concurrency" => workers = num(a, &value(a)?)?,
            "-n" | "--sessions" => sessions = Some(num(a, &value(a)?)?),
            "-l" | "--seconds" => seconds = Some(secs(a, &value(a)?)?),
            "--mixed" => mixed = Some(secs(a, &value(a)?)?),
            "--mixed-only" => mixed_only = true,
            "--mixed-workers" => mixed_workers = num(a, &value(a)?)?,
            "--kill" => kill_percent = num(a, &value(a)?)?,
            "--pid" => pid = Some(num(a, &value(a)?)?),
            "--settle" => settle = secs(a, &value(a)?)?,
            "--errors" => show_errors = num(a, &value(a)?)?,
            "--seed" => seed = Some(num(a, &value(a)?)?),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if host.is_none() => host = Some(s.to_string()),
            s => return Err(format!("unexpected argument '{s}'")),
        }
    }
    if !(1..=1024).contains(&workers) || !(1..=1024).contains(&mixed_workers) {
        return Err("-c, --mixed-workers: between 1 and 1024 workers".into());
    }
    if kill_percent > 100 {
        return Err(format!("--kill: {kill_percent} is not a percentage"));
    }
    if mixed_only && mixed.is_none() {
        return Err("--mixed-only needs --mixed SECS".into());
    }
    let server = resolve(host.as_deref().unwrap_or("127.0.0.1"), port)?;
    let seed = seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()).rotate_left(32)
    });
    let (sessions, seconds) = match (sessions, seconds) {
        (None, None) => (10_000, MAX_SECONDS),
        (Some(n), None) => (n, MAX_SECONDS),
        (None, Some(s)) => (MAX_SESSIONS, s),
        (Some(n), Some(s)) => (n, s),
    };
    Ok(Some(Opts {
        server,
        workers,
        sessions,
        seconds,
        session_run: !mixed_only,
        mixed,
        mixed_workers,
        kill_percent,
        pid,
        settle: Duration::from_secs_f64(settle),
        show_errors,
        seed,
    }))
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or `V6`, with `-p` taking precedence.
fn resolve(host: &str, port: Option<u16>) -> Result<SocketAddr, String> {
    let default = port.unwrap_or(12865);
    if let Ok(mut a) = host.parse::<SocketAddr>() {
        if let Some(p) = port {
            a.set_port(p);
        }
        return Ok(a);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default));
    }
    let (name, p) = match host.rsplit_once(':') {
        Some((n, p)) if port.is_none() => (
            n,
            p.parse()
                .map_err(|_| format!("'{host}': '{p}' is not a port"))?,
        ),
        _ => (host, default),
    };
    (name, p)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{name}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{name}' has no address"))
}

/// A small deterministic generator (splitmix64): the mixed run's choices,
/// reproducible from the seed it prints.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn percent(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

// ---------------------------------------------------------------------
// The control connection

/// Why a session failed: a message, and whether the netserver said it was
/// busy (which is tried again for a while, as netperf does).
#[derive(Debug)]
struct Failure {
    message: String,
    busy: bool,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            busy: false,
        }
    }
}

type Result<T, E = Failure> = std::result::Result<T, E>;

fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(Failure::from(message.into()))
}

fn describe(e: ControlError, what: &str) -> Failure {
    match e {
        ControlError::Session(ClientError::Server(m)) if m.code == ErrorCode::Busy => Failure {
            message: format!("{what}: netserver is busy: {}", m.message),
            busy: true,
        },
        ControlError::Timeout(awaited, d) => Failure::from(format!(
            "{what}: no {awaited} within {:.1} s",
            d.as_secs_f64()
        )),
        e => Failure::from(format!("{what}: {e}")),
    }
}

/// One control conversation, established.
#[derive(Debug)]
struct Control {
    ctl: ControlStream,
    peer: SocketAddr,
    local: SocketAddr,
}

/// Our hello frame, as the protocol core queues it first.
fn hello_bytes() -> Result<Vec<u8>> {
    let session = ClientSession::new(None, [0u8; 32]);
    let core = ClientConn::new(
        session,
        &software(),
        Instant::now(),
        CONTROL_WAIT,
        Speak::Ours,
    )
    .map_err(|e| describe(e.into(), "hello"))?;
    Ok(core.output().to_vec())
}

fn software() -> String {
    format!("rsnetperf soak {}", env!("CARGO_PKG_VERSION"))
}

fn connect(to: SocketAddr, what: &str) -> Result<TcpStream> {
    TcpStream::connect_timeout(&to, CONTROL_WAIT)
        .map_err(|e| Failure::from(format!("{what}: connect to {to}: {e}")))
}

impl Control {
    /// Connect and say hello; a busy netserver is tried again for a while
    /// (each busy answer counted in `busy`).
    fn open(server: SocketAddr, busy: &AtomicU64) -> Result<Control> {
        let give_up = Instant::now() + BUSY_RETRY;
        loop {
            match Control::open_once(server) {
                Err(e) if e.busy && Instant::now() < give_up => {
                    busy.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(Duration::from_millis(10));
                }
                r => return r,
            }
        }
    }

    fn open_once(server: SocketAddr) -> Result<Control> {
        let stream = connect(server, "control connection")?;
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().map_err(|e| format!("control: {e}"))?;
        let local = stream.local_addr().map_err(|e| format!("control: {e}"))?;
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| format!("no secure random numbers: {e}"))?;
        let session = ClientSession::new(None, nonce);
        let core = ClientConn::new(
            session,
            &software(),
            Instant::now(),
            CONTROL_WAIT,
            Speak::Ours,
        )
        .map_err(|e| describe(e.into(), "hello"))?;
        let mut ctl = ControlStream::new(stream, core);
        match ctl.next_event() {
            Ok(ClientEvent::Established) => Ok(Control { ctl, peer, local }),
            Ok(other) => fail(format!("hello: unexpected {other:?}")),
            Err(e) => Err(describe(e, "hello")),
        }
    }

    /// The data path's conventions, as netperf chooses them.
    fn conventions(&self) -> Conventions {
        Conventions::with(self.ctl.peer().capabilities())
    }

    fn setup(&mut self, spec: &TestSpec) -> Result<Grant> {
        let what = spec.kind.name();
        self.ctl
            .core()
            .setup(spec.clone(), Instant::now(), CONTROL_WAIT)
            .map_err(|e| describe(e.into(), what))?;
        match self.ctl.next_event() {
            Ok(ClientEvent::Granted(g)) => Ok(g),
            Ok(other) => fail(format!("{what}: unexpected {other:?} instead of a grant")),
            Err(e) => Err(describe(e, &format!("{what} setup"))),
        }
    }

    /// Say we are done, without waiting for the results.
    fn send_done(&mut self, done: ClientDone, what: &str) -> Result<()> {
        self.ctl
            .core()
            .done(done, Instant::now(), CONTROL_WAIT)
            .map_err(|e| describe(e.into(), what))?;
        self.ctl.flush().map_err(|e| describe(e, what))
    }

    fn finish(&mut self, done: ClientDone, what: &str) -> Result<SideResults> {
        self.send_done(done, what)?;
        match self.ctl.next_event() {
            Ok(ClientEvent::Results(r)) => Ok(*r),
            Ok(other) => fail(format!("{what}: unexpected {other:?} instead of results")),
            Err(e) => Err(describe(e, &format!("{what} results"))),
        }
    }

    fn bye(mut self) {
        self.ctl.core().bye();
        let _ = self.ctl.flush();
    }

    /// The control socket alone, to drop it.
    fn ctl_into_stream(self) -> TcpStream {
        self.ctl.into_stream()
    }

    /// Where the test's data sockets are.
    fn data_addr(&self, grant: &Grant) -> SocketAddr {
        SocketAddr::new(self.peer.ip(), grant.data_port)
    }
}

/// Drop a socket abruptly: a reset (SO_LINGER 0) or a close without a word.
fn drop_tcp(s: TcpStream, reset: bool) {
    if reset {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    }
    drop(s);
}

// ---------------------------------------------------------------------
// One session

/// A test to run in a session.
#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: TestKind,
    end: TestEnd,
}

impl Plan {
    /// The session run's: TCP_RR of one transaction.
    const ONE_TRANSACTION: Plan = Plan {
        kind: TestKind::TcpRr,
        end: TestEnd::Transactions(1),
    };

    /// A short test of a kind the mixed run picks.
    fn mixed(rng: &mut Rng) -> Plan {
        let kind = MIXED_KINDS[rng.below(MIXED_KINDS.len() as u64) as usize];
        let end = match kind {
            TestKind::TcpStream | TestKind::TcpMaerts => TestEnd::Time {
                millis: 20 + rng.below(130),
            },
            // 64 to 1024 datagrams of 1 KiB
            TestKind::UdpStream => TestEnd::Bytes(1024 * (64 + rng.below(961))),
            TestKind::TcpCrr => TestEnd::Transactions(1 + rng.below(20)),
            _ => TestEnd::Transactions(1 + rng.below(200)),
        };
        Plan { kind, end }
    }
}

const MIXED_KINDS: [TestKind; 6] = [
    TestKind::TcpStream,
    TestKind::TcpMaerts,
    TestKind::UdpStream,
    TestKind::TcpRr,
    TestKind::UdpRr,
    TestKind::TcpCrr,
];

/// UDP datagrams of the mixed run's UDP_STREAM.
const UDP_SIZE: usize = 1024;
/// TCP_STREAM's send size.
const TCP_SIZE: usize = 16384;

/// Where a killed client dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillAt {
    /// Part of the hello sent.
    Hello,
    /// The test granted, no data connection made.
    Granted,
    /// In the data phase, after `after`.
    Data,
    /// `Done` sent, the results not read.
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Kill {
    at: KillAt,
    after: Duration,
    /// Reset the connections (SO_LINGER 0) rather than close them.
    reset: bool,
}

impl Kill {
    fn pick(rng: &mut Rng) -> Kill {
        // the data phase is where a test holds the most: half the kills
        let at = match rng.below(8) {
            0 => KillAt::Hello,
            1 => KillAt::Granted,
            2 | 3 => KillAt::Done,
            _ => KillAt::Data,
        };
        Kill {
            at,
            after: Duration::from_millis(rng.below(150)),
            reset: rng.below(2) == 0,
        }
    }
}

#[derive(Debug)]
enum Outcome {
    Ok,
    Killed,
    Failed(String),
}

/// Per-worker settings of the session code.
#[derive(Debug)]
struct Worker<'a> {
    server: SocketAddr,
    busy: &'a AtomicU64,
    /// Local ports of this worker's TCP_CRR connections (each worker its
    /// own, so that they never compete for one).
    crr_ports: (u16, u16),
    /// UDP datagrams our UDP_STREAM senders sent that the netserver did
    /// not count (loopback drops them when its buffer is full).
    udp_lost: &'a AtomicU64,
}

/// The data sockets of a test, to drop together.
#[derive(Debug)]
enum DataSock {
    Tcp(TcpStream),
    Udp(UdpSocket),
    None,
}

/// What our side counted, to check against the netserver's results.
#[derive(Debug, Default)]
struct Counted {
    bytes_sent: u64,
    bytes_received: u64,
    datagrams_sent: u64,
    transactions: u64,
    lost: u64,
}

fn session(w: &Worker<'_>, plan: Plan, kill: Option<Kill>) -> Outcome {
    let r = match kill {
        Some(k) if k.at == KillAt::Hello => kill_in_hello(w.server, k),
        _ => run_session(w, plan, kill),
    };
    match r {
        Ok(true) => Outcome::Killed,
        Ok(false) => Outcome::Ok,
        Err(e) => Outcome::Failed(e.message),
    }
}

/// Connect, send part of the hello, die.
fn kill_in_hello(server: SocketAddr, k: Kill) -> Result<bool> {
    let hello = hello_bytes()?;
    let mut s = connect(server, "control connection")?;
    let part = (k.after.as_millis() as usize * hello.len() / 150).min(hello.len() - 1);
    s.write_all(hello.get(..part).unwrap_or_default())
        .map_err(|e| format!("sending part of a hello: {e}"))?;
    drop_tcp(s, k.reset);
    Ok(true)
}

/// A whole session; `Ok(true)` if it was killed as planned.
fn run_session(w: &Worker<'_>, plan: Plan, kill: Option<Kill>) -> Result<bool> {
    let what = plan.kind.name();
    let mut c = Control::open(w.server, w.busy)?;
    let mut spec = TestSpec::new(plan.kind, sockopt::family_of(&c.peer));
    spec.end = plan.end;
    let killed_in_data = kill.is_some_and(|k| k.at == KillAt::Data);
    if killed_in_data {
        // long enough that the kill comes first
        spec.end = match plan.end {
            TestEnd::Time { .. } => TestEnd::Time { millis: 30_000 },
            TestEnd::Bytes(_) => TestEnd::Bytes(1 << 40),
            TestEnd::Transactions(_) => TestEnd::Transactions(1 << 40),
        };
    }
    // A UDP socket is bound before the request, which names its port.
    let udp = if plan.kind.protocol() == proto::Protocol::Udp {
        let s = UdpSocket::bind(SocketAddr::new(c.local.ip(), 0))
            .map_err(|e| format!("{what}: binding a UDP socket: {e}"))?;
        spec.peer_data_port = s.local_addr().ok().map(|a| a.port());
        Some(s)
    } else {
        None
    };
    let grant = c.setup(&spec)?;
    if let Some(k) = kill.filter(|k| k.at == KillAt::Granted) {
        drop_tcp(c.ctl_into_stream(), k.reset);
        return Ok(true);
    }
    let conv = c.conventions();
    let to = c.data_addr(&grant);
    let data = match (plan.kind, udp) {
        (TestKind::TcpCrr, _) => DataSock::None,
        (_, Some(s)) => {
            udp::client_hello(
                udp::Link::to(&s, to),
                &grant.token,
                &conv,
                Instant::now() + CONTROL_WAIT,
            )
            .map_err(|e| format!("{what}: UDP hello: {e}"))?;
            DataSock::Udp(s)
        }
        (_, None) => {
            let s = connect(to, &format!("{what} data connection"))?;
            conv.present(&s, &grant.token, 0)
                .map_err(|e| format!("{what}: {e}"))?;
            DataSock::Tcp(s)
        }
    };
    if let Some(k) = kill.filter(|_| killed_in_data) {
        chatter(w, &c, plan.kind, &grant, &data, &conv, k)?;
        if let DataSock::Tcp(s) = data {
            drop_tcp(s, k.reset);
        }
        drop_tcp(c.ctl_into_stream(), k.reset);
        return Ok(true);
    }
    let counted =
        data_phase(w, &c, plan, &grant, data, &conv).map_err(|e| format!("{what}: {e}"))?;
    let done = ClientDone {
        datagrams_sent: counted.datagrams_sent,
    };
    if let Some(k) = kill.filter(|k| k.at == KillAt::Done) {
        c.send_done(done, what)?;
        drop_tcp(c.ctl_into_stream(), k.reset);
        return Ok(true);
    }
    let remote = c.finish(done, what)?;
    check(w, plan, &counted, &remote).map_err(|e| format!("{what}: {e}"))?;
    c.bye();
    Ok(false)
}

/// The test's data phase, run to its end.
fn data_phase(
    w: &Worker<'_>,
    c: &Control,
    plan: Plan,
    grant: &Grant,
    data: DataSock,
    conv: &Conventions,
) -> std::result::Result<Counted, String> {
    let live = Live::new();
    let stop = StopFlag::new();
    let e = |e: engine::EngineError| e.to_string();
    let mut n = Counted::default();
    let transactions = match plan.end {
        TestEnd::Transactions(t) => t,
        _ => 0,
    };
    let requester = Requester {
        req: 1,
        resp: 1,
        burst: 0,
        until: rr::Until::Transactions(transactions),
        timing: false,
        spin: false,
    };
    match (plan.kind, data) {
        (TestKind::TcpStream, DataSock::Tcp(s)) => {
            let _timer = match plan.end {
                TestEnd::Time { millis } => Some(
                    Timer::start(Duration::from_millis(millis), stop.clone())
                        .map_err(|e| format!("starting a timer: {e}"))?,
                ),
                _ => None,
            };
            let until = match plan.end {
                TestEnd::Bytes(b) => stream::Until::Bytes(b),
                _ => stream::Until::Stopped,
            };
            let mut ring = Ring::new(TCP_SIZE, 2, b"");
            let o = stream::tcp::send(&s, &mut ring, until, &stop, &live, LINGER).map_err(e)?;
            n.bytes_sent = o.counters.bytes_sent;
        }
        (TestKind::TcpMaerts, DataSock::Tcp(s)) => {
            s.set_read_timeout(Some(LINGER))
                .map_err(|e| format!("setting a receive timeout: {e}"))?;
            let mut buf = vec![0u8; 65536];
            let o = stream::tcp::receive(&s, &mut buf, &live).map_err(e)?;
            n.bytes_received = o.counters.bytes_received;
        }
        (TestKind::TcpRr, DataSock::Tcp(s)) => {
            let o = rr::tcp_requester(&s, &requester, &stop, &live).map_err(e)?;
            n.transactions = o.transactions();
        }
        (TestKind::UdpStream, DataSock::Udp(s)) => {
            let until = match plan.end {
                TestEnd::Bytes(b) => udp::Until::Bytes(b),
                _ => udp::Until::Stopped,
            };
            let mut ring = Ring::new(UDP_SIZE, 2, b"");
            let o = udp::send(
                udp::Link::to(&s, c.data_addr(grant)),
                &mut ring,
                udp::test_id(&grant.token),
                conv,
                until,
                None,
                &stop,
                &live,
                None,
                proto::UdpFast::default(),
            )
            .map_err(e)?;
            n.bytes_sent = o.bytes;
            n.datagrams_sent = o.sent;
        }
        (TestKind::UdpRr, DataSock::Udp(s)) => {
            let o = rr::udp_requester(
                udp::Link::to(&s, c.data_addr(grant)),
                &requester,
                conv,
                UDP_RR_TIMEOUT,
                &stop,
                &live,
            )
            .map_err(e)?;
            n.transactions = o.transactions();
            n.lost = o.lost + o.stale;
        }
        (TestKind::TcpCrr, DataSock::None) => {
            let o = crr::requester(
                &crr_requester(w, c, grant, conv, requester.until),
                &stop,
                &live,
            )
            .map_err(e)?;
            n.transactions = o.transactions();
        }
        (kind, _) => return Err(format!("{kind} is not one of the soak's tests")),
    }
    Ok(n)
}

fn crr_requester(
    w: &Worker<'_>,
    c: &Control,
    grant: &Grant,
    conv: &Conventions,
    until: rr::Until,
) -> CrrRequester {
    CrrRequester {
        server: c.data_addr(grant),
        local_ip: c.local.ip(),
        ports: w.crr_ports,
        token: grant.token,
        req: 1,
        resp: 1,
        until,
        timing: false,
        side: proto::SideSpec::default(),
        local: sockopt::LocalOpts::default(),
        conv: *conv,
        flow: 0,
    }
}

/// What the netserver counted agrees with ours.
fn check(
    w: &Worker<'_>,
    plan: Plan,
    ours: &Counted,
    theirs: &SideResults,
) -> std::result::Result<(), String> {
    let wanted = match plan.end {
        TestEnd::Transactions(t) => t,
        _ => 0,
    };
    match plan.kind {
        TestKind::TcpStream if ours.bytes_sent != theirs.bytes_received => Err(format!(
            "sent {} bytes, the netserver received {}",
            ours.bytes_sent, theirs.bytes_received
        )),
        TestKind::TcpMaerts if ours.bytes_received != theirs.bytes_sent => Err(format!(
            "the netserver sent {} bytes, we received {}",
            theirs.bytes_sent, ours.bytes_received
        )),
        TestKind::UdpStream if theirs.bytes_received > ours.bytes_sent => Err(format!(
            "sent {} bytes of datagrams, the netserver counted {}",
            ours.bytes_sent, theirs.bytes_received
        )),
        TestKind::UdpStream => {
            let lost = (ours.bytes_sent - theirs.bytes_received) / UDP_SIZE as u64;
            w.udp_lost.fetch_add(lost, Ordering::Relaxed);
            Ok(())
        }
        TestKind::TcpRr | TestKind::TcpCrr
            if ours.transactions != wanted || theirs.transactions != wanted =>
        {
            Err(format!(
                "{wanted} transactions asked, we completed {}, the netserver answered {}",
                ours.transactions, theirs.transactions
            ))
        }
        TestKind::UdpRr
            if ours.transactions + ours.lost < wanted
                || theirs.transactions < ours.transactions
                || theirs.transactions > ours.transactions + ours.lost =>
        {
            Err(format!(
                "{wanted} transactions asked, we completed {} ({} lost), the netserver answered {}",
                ours.transactions, ours.lost, theirs.transactions
            ))
        }
        _ => Ok(()),
    }
}

/// A killed client's data phase: traffic of the test's kind until the
/// kill. TCP by hand, so that it stops mid-stream (engine's loops end
/// cleanly, with a half-close); UDP and TCP_CRR's connections with
/// engine's loops, stopped by a timer, since a UDP socket has no end to
/// signal and a TCP_CRR test is its connections.
fn chatter(
    w: &Worker<'_>,
    c: &Control,
    kind: TestKind,
    grant: &Grant,
    data: &DataSock,
    conv: &Conventions,
    k: Kill,
) -> Result<()> {
    let stop = StopFlag::new();
    let _timer =
        Timer::start(k.after, stop.clone()).map_err(|e| format!("starting a timer: {e}"))?;
    let live = Live::new();
    let to = c.data_addr(grant);
    let e = |e: engine::EngineError| format!("{kind}: {e}");
    match (kind, data) {
        (TestKind::TcpCrr, _) => {
            crr::requester(
                &crr_requester(w, c, grant, conv, rr::Until::Stopped),
                &stop,
                &live,
            )
            .map_err(e)?;
            // and one connection cut short in its preamble
            if let Ok(mut s) = TcpStream::connect_timeout(&to, CONTROL_WAIT) {
                let _ = s.write_all(grant.token.0.get(..16).unwrap_or_default());
                drop_tcp(s, k.reset);
            }
        }
        (_, DataSock::Tcp(s)) => {
            let short = Some(Duration::from_millis(10));
            let _ = s.set_write_timeout(short);
            let _ = s.set_read_timeout(short);
            let mut s = s;
            let mut buf = vec![b's'; TCP_SIZE];
            while !stop.is_set() {
                let r = match kind {
                    TestKind::TcpStream => s.write(&buf),
                    TestKind::TcpMaerts => s.read(&mut buf),
                    // requests may pile up when an answer is late
                    _ => s
                        .write(b"r")
                        .and_then(|_| s.read(buf.get_mut(..1).unwrap_or_default())),
                };
                match r {
                    Ok(0) if kind != TestKind::TcpStream => break,
                    Ok(_) => {}
                    Err(e) if engine::error::timed_out(&e) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        (TestKind::UdpStream, DataSock::Udp(s)) => {
            udp::send(
                udp::Link::to(s, to),
                &mut Ring::new(UDP_SIZE, 2, b""),
                udp::test_id(&grant.token),
                conv,
                udp::Until::Stopped,
                None,
                &stop,
                &live,
                None,
                proto::UdpFast::default(),
            )
            .map_err(e)?;
        }
        (_, DataSock::Udp(s)) => {
            let requester = Requester {
                req: 1,
                resp: 1,
                burst: 0,
                until: rr::Until::Stopped,
                timing: false,
                spin: false,
            };
            rr::udp_requester(
                udp::Link::to(s, to),
                &requester,
                conv,
                UDP_RR_TIMEOUT,
                &stop,
                &live,
            )
            .map_err(e)?;
        }
        (_, DataSock::None) => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Runs

/// What a run's sessions came to.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    failed: u64,
    killed: u64,
    /// Microseconds each completed session took.
    times_us: Vec<u32>,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.ok += o.ok;
        self.failed += o.failed;
        self.killed += o.killed;
        self.times_us.extend_from_slice(&o.times_us);
    }
}

/// Error messages: the first few as they came, and how often each.
#[derive(Debug, Default)]
struct Errors {
    first: Vec<String>,
    counts: HashMap<String, u64>,
    other: u64,
}

impl Errors {
    fn record(&mut self, keep: usize, msg: &str) {
        if self.first.len() < keep {
            self.first.push(msg.to_string());
        }
        if let Some(n) = self.counts.get_mut(msg) {
            *n += 1;
        } else if self.counts.len() < MAX_DISTINCT_ERRORS {
            self.counts.insert(msg.to_string(), 1);
        } else {
            self.other += 1;
        }
    }

    fn print(&self, indent: &str) {
        if self.first.is_empty() {
            return;
        }
        println!("{indent}first errors:");
        for m in &self.first {
            println!("{indent}  {m}");
        }
        let mut by: Vec<_> = self.counts.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("{indent}errors by message:");
        for (m, n) in by.iter().take(10) {
            println!("{indent}  {n:>6} x {m}");
        }
        if self.other > 0 {
            println!("{indent}  {:>6} x (other messages)", self.other);
        }
    }
}

/// What workers share.
#[derive(Debug)]
struct Shared {
    started: AtomicU64,
    limit: u64,
    deadline: Instant,
    errors: Mutex<Errors>,
    keep_errors: usize,
    busy: AtomicU64,
    udp_lost: AtomicU64,
}

impl Shared {
    fn new(limit: u64, secs: f64, keep_errors: usize) -> Shared {
        Shared {
            started: AtomicU64::new(0),
            limit,
            deadline: Instant::now() + Duration::from_secs_f64(secs),
            errors: Mutex::new(Errors::default()),
            keep_errors,
            busy: AtomicU64::new(0),
            udp_lost: AtomicU64::new(0),
        }
    }

    /// Whether another session may start.
    fn claim(&self) -> bool {
        Instant::now() < self.deadline && self.started.fetch_add(1, Ordering::Relaxed) < self.limit
    }

    fn failed(&self, msg: &str) {
        if let Ok(mut e) = self.errors.lock() {
            e.record(self.keep_errors, msg);
        }
    }
}

/// TCP_CRR's local ports: from netperf's 5000 to below the ephemeral range,
/// a slice for each of `n` workers.
fn crr_slice(i: usize, n: usize) -> (u16, u16) {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&l| l > 6000)
        .unwrap_or(32768);
    let (lo, hi) = (5000u32, low - 1);
    let share = (hi - lo + 1) / n.max(1) as u32;
    let first = lo + share * i as u32;
    let last = (first + share.max(1) - 1).min(hi);
    (first as u16, last as u16)
}

/// The session run: TCP_RR of one transaction, back to back.
fn session_run(o: &Opts) -> (Tally, Duration, Shared) {
    let shared = Shared::new(o.sessions, o.seconds, o.show_errors);
    let start = Instant::now();
    let tallies: Vec<Tally> = thread::scope(|s| {
        let handles: Vec<_> = (0..o.workers)
            .map(|i| {
                let shared = &shared;
                s.spawn(move || {
                    let w = Worker {
                        server: o.server,
                        busy: &shared.busy,
                        crr_ports: crr_slice(i, o.workers),
                        udp_lost: &shared.udp_lost,
                    };
                    let mut t = Tally::default();
                    while shared.claim() {
                        let began = Instant::now();
                        match session(&w, Plan::ONE_TRANSACTION, None) {
                            Outcome::Ok => {
                                t.ok += 1;
                                t.times_us.push(micros(began.elapsed()));
                            }
                            Outcome::Killed => t.killed += 1,
                            Outcome::Failed(m) => {
                                t.failed += 1;
                                shared.failed(&m);
                            }
                        }
                    }
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    shared.failed("a worker panicked (its message is above)");
                    Tally {
                        failed: 1,
                        ..Tally::default()
                    }
                })
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut all = Tally::default();
    for t in &tallies {
        all.add(t);
    }
    (all, elapsed, shared)
}

/// The mixed run: six kinds of short test, some clients killed.
fn mixed_run(o: &Opts, secs: f64) -> (Vec<Tally>, Duration, Shared) {
    let shared = Shared::new(MAX_SESSIONS, secs, o.show_errors);
    let start = Instant::now();
    let per_worker: Vec<Vec<Tally>> = thread::scope(|s| {
        let handles: Vec<_> = (0..o.mixed_workers)
            .map(|i| {
                let shared = &shared;
                s.spawn(move || {
                    let w = Worker {
                        server: o.server,
                        busy: &shared.busy,
                        crr_ports: crr_slice(i, o.mixed_workers),
                        udp_lost: &shared.udp_lost,
                    };
                    let mut rng = Rng(o.seed ^ (i as u64).wrapping_mul(0xa076_1d64_78bd_642f));
                    let mut t: Vec<Tally> = MIXED_KINDS.iter().map(|_| Tally::default()).collect();
                    while shared.claim() {
                        let plan = Plan::mixed(&mut rng);
                        let kill = rng.percent(o.kill_percent).then(|| Kill::pick(&mut rng));
                        let slot = MIXED_KINDS
                            .iter()
                            .position(|k| *k == plan.kind)
                            .unwrap_or(0);
                        let Some(tally) = t.get_mut(slot) else {
                            continue;
                        };
                        let began = Instant::now();
                        match session(&w, plan, kill) {
                            Outcome::Ok => {
                                tally.ok += 1;
                                tally.times_us.push(micros(began.elapsed()));
                            }
                            Outcome::Killed => tally.killed += 1,
                            Outcome::Failed(m) => {
                                tally.failed += 1;
                                shared.failed(&format!(
                                    "{m}{}",
                                    kill.map_or(String::new(), |k| format!(
                                        " (a session to be killed {:?})",
                                        k.at
                                    ))
                                ));
                            }
                        }
                    }
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    shared.failed("a worker panicked (its message is above)");
                    vec![Tally {
                        failed: 1,
                        ..Tally::default()
                    }]
                })
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut kinds: Vec<Tally> = MIXED_KINDS.iter().map(|_| Tally::default()).collect();
    for w in &per_worker {
        for (all, t) in kinds.iter_mut().zip(w) {
            all.add(t);
        }
    }
    (kinds, elapsed, shared)
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The nearest-rank percentile of sorted samples, in milliseconds.
fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    f64::from(sorted.get(i).copied().unwrap_or(0)) / 1000.0
}

fn times_line(t: &mut Tally) -> String {
    t.times_us.sort_unstable();
    let s = &t.times_us;
    format!(
        "p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        percentile_ms(s, 50.0),
        percentile_ms(s, 90.0),
        percentile_ms(s, 99.0),
        percentile_ms(s, 100.0)
    )
}

// ---------------------------------------------------------------------
// The netserver's footprint

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Footprint {
    rss_kib: u64,
    threads: u64,
    fds: u64,
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rss {:.1} MiB ({} KiB), {} threads, {} fds",
            self.rss_kib as f64 / 1024.0,
            self.rss_kib,
            self.threads,
            self.fds
        )
    }
}

/// VmRSS and Threads from /proc/PID/status, and the entries of
/// /proc/PID/fd; `None` if the process is gone or not ours to read.
fn footprint(pid: u32) -> Option<Footprint> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Footprint {
        rss_kib: field("VmRSS:")?,
        threads: field("Threads:")?,
        fds,
    })
}

/// User and system CPU time of a process so far, from /proc/PID/stat.
fn cpu_time(pid: &str) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the command name may hold spaces and parentheses: fields count from
    // the last ')'; utime and stime are the 14th and 15th fields
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    // in USER_HZ, which Linux fixes at 100 for /proc whatever the kernel's HZ
    let tick = |t: u64| Duration::from_millis(t * 10);
    Some((tick(utime), tick(stime)))
}

/// CPU time of the netserver and of soak itself, over a run.
#[derive(Debug)]
struct CpuMeter {
    pid: Option<u32>,
    server: Option<(Duration, Duration)>,
    us: Option<(Duration, Duration)>,
}

impl CpuMeter {
    fn start(pid: Option<u32>) -> CpuMeter {
        CpuMeter {
            pid,
            server: pid.and_then(|p| cpu_time(&p.to_string())),
            us: cpu_time("self"),
        }
    }

    /// What the run cost a session, on each side.
    fn report(&self, sessions: u64, elapsed: Duration) {
        let per = |label: &str, then: Option<(Duration, Duration)>, now| {
            let (Some((u0, s0)), Some((u1, s1))) = (then, now) else {
                return;
            };
            let (u, s): (Duration, Duration) = (u1 - u0, s1 - s0);
            let n = sessions.max(1) as f64;
            println!(
                "  {label} CPU: {:.0} us user + {:.0} us system a session ({:.0}% of a core)",
                u.as_secs_f64() * 1e6 / n,
                s.as_secs_f64() * 1e6 / n,
                (u + s).as_secs_f64() * 100.0 / elapsed.as_secs_f64().max(1e-9)
            );
        };
        per(
            "netserver",
            self.server,
            self.pid.and_then(|p| cpu_time(&p.to_string())),
        );
        per("soak", self.us, cpu_time("self"));
    }
}

const SAMPLE: Duration = Duration::from_millis(50);

/// The idle footprint: sampled until the threads and descriptors have
/// not changed for 300 ms, for at most `limit`.
fn idle(pid: u32, limit: Duration) -> Option<(Footprint, Duration)> {
    let start = Instant::now();
    let mut last = footprint(pid)?;
    let mut same_since = Instant::now();
    loop {
        thread::sleep(SAMPLE);
        let now = footprint(pid)?;
        if (now.threads, now.fds) != (last.threads, last.fds) {
            same_since = Instant::now();
        }
        last = now;
        if same_since.elapsed() >= Duration::from_millis(300) || start.elapsed() >= limit {
            return Some((last, start.elapsed()));
        }
    }
}

/// After a run: wait for the threads and descriptors to come back to
/// their idle counts, at most `limit`. Returns the footprint then (its
/// memory read half a second later: the daemon gives its heap back a
/// moment after it is idle), how long it took, and whether they came back.
fn settled(pid: u32, idle: Footprint, limit: Duration) -> Option<(Footprint, Duration, bool)> {
    let start = Instant::now();
    loop {
        let now = footprint(pid)?;
        let back = now.threads == idle.threads && now.fds == idle.fds;
        if back || start.elapsed() >= limit {
            let took = start.elapsed();
            thread::sleep(Duration::from_millis(500));
            let rss_kib = footprint(pid).map_or(now.rss_kib, |f| f.rss_kib);
            return Some((Footprint { rss_kib, ..now }, took, back));
        }
        thread::sleep(SAMPLE);
    }
}

/// The process holding a listening TCP socket on `port`, from /proc/net
/// and the descriptors of the processes we may read.
fn find_listener(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let lport = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            // 0A: TCP_LISTEN
            if lport == Some(port) && *state == "0A" {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let procs = std::fs::read_dir("/proc").ok()?;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| link.as_os_str() == i.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}

/// The footprint after a run, printed beside the idle one; whether the
/// threads and descriptors came back.
fn report_after(pid: Option<u32>, before: Option<Footprint>, o: &Opts, label: &str) -> bool {
    let (Some(pid), Some(before)) = (pid, before) else {
        return true;
    };
    match settled(pid, before, o.settle) {
        Some((after, took, back)) => {
            println!("  idle before: {before}");
            println!(
                "  after:       {after} ({})",
                if back {
                    format!(
                        "threads and fds back to idle in {:.2} s",
                        took.as_secs_f64()
                    )
                } else {
                    format!(
                        "NOT back to idle within {:.1} s: {:+} threads, {:+} fds",
                        took.as_secs_f64(),
                        after.threads as i64 - before.threads as i64,
                        after.fds as i64 - before.fds as i64
                    )
                }
            );
            println!(
                "summary {label}: idle_rss_kib={} idle_threads={} idle_fds={} after_rss_kib={} after_threads={} after_fds={} back={back}",
                before.rss_kib, before.threads, before.fds, after.rss_kib, after.threads, after.fds
            );
            back
        }
        None => {
            println!("  the netserver (pid {pid}) is gone");
            println!("summary {label}: gone");
            false
        }
    }
}

/// The sessions run, its figures printed: whether none failed.
fn sessions_report(o: &Opts, pid: Option<u32>) -> bool {
    println!(
        "sessions: TCP_RR of one transaction, {} workers, at most {} sessions and {} s",
        o.workers, o.sessions, o.seconds
    );
    let cpu = CpuMeter::start(pid);
    let (mut t, elapsed, shared) = session_run(o);
    let rate = t.ok as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "  completed {}, failed {}, busy answers {} in {:.2} s: {rate:.0} sessions/s",
        t.ok,
        t.failed,
        shared.busy.load(Ordering::Relaxed),
        elapsed.as_secs_f64()
    );
    println!("  session time: {}", times_line(&mut t));
    cpu.report(t.ok + t.failed, elapsed);
    if let Ok(e) = shared.errors.lock() {
        e.print("  ");
    }
    println!(
        "summary sessions: completed={} failed={} rate={rate:.0} p50_ms={:.3} p99_ms={:.3}",
        t.ok,
        t.failed,
        percentile_ms(&t.times_us, 50.0),
        percentile_ms(&t.times_us, 99.0)
    );
    t.failed == 0
}

/// The mixed run, its figures printed: whether none failed.
fn mixed_report(o: &Opts, pid: Option<u32>, secs: f64) -> bool {
    println!(
        "mixed: {} for {secs} s, {} workers, {}% killed (seed {})",
        MIXED_KINDS.map(|k| k.name()).join(", "),
        o.mixed_workers,
        o.kill_percent,
        o.seed
    );
    let cpu = CpuMeter::start(pid);
    let (mut kinds, elapsed, shared) = mixed_run(o, secs);
    let mut all = Tally::default();
    for (k, t) in MIXED_KINDS.iter().zip(kinds.iter_mut()) {
        let times = times_line(t);
        println!(
            "  {:<10}  completed {:>6}, failed {:>4}, killed {:>5}; {times}",
            k.name(),
            t.ok,
            t.failed,
            t.killed,
        );
        all.add(t);
    }
    println!(
        "  all         completed {:>6}, failed {:>4}, killed {:>5} in {:.2} s ({:.0} sessions/s); busy answers {}; UDP_STREAM datagrams not counted by the netserver {}",
        all.ok,
        all.failed,
        all.killed,
        elapsed.as_secs_f64(),
        (all.ok + all.killed) as f64 / elapsed.as_secs_f64().max(1e-9),
        shared.busy.load(Ordering::Relaxed),
        shared.udp_lost.load(Ordering::Relaxed)
    );
    cpu.report(all.ok + all.failed + all.killed, elapsed);
    if let Ok(e) = shared.errors.lock() {
        e.print("  ");
    }
    println!(
        "summary mixed: completed={} failed={} killed={}",
        all.ok, all.failed, all.killed
    );
    all.failed == 0
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("soak: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // A first session says whether anything answers, before the workers
    // start: a wrong address is one message, not thousands.
    let busy = AtomicU64::new(0);
    let software = match Control::open(o.server, &busy) {
        Ok(c) => {
            let s = c.ctl.peer().capabilities().software.clone();
            c.bye();
            s
        }
        Err(e) => {
            eprintln!("soak: {}", e.message);
            return ExitCode::FAILURE;
        }
    };
    let pid = o.pid.or_else(|| find_listener(o.server.port()));
    println!(
        "soak: netserver at {} ({software}), {}",
        o.server,
        match pid {
            Some(p) => format!("pid {p}"),
            None => "its process not found (--pid PID to watch its footprint)".into(),
        }
    );
    let mut ok = true;
    let mut before = pid.and_then(|p| idle(p, o.settle)).map(|(f, _)| f);
    if let (Some(p), None) = (pid, before) {
        println!("soak: cannot read /proc/{p}: its footprint is not watched");
    }
    if o.session_run {
        ok &= sessions_report(&o, pid);
        ok &= report_after(pid, before, &o, "sessions-footprint");
        // the mixed run is compared with the same idle state
        if let Some(p) = pid
            && o.mixed.is_some()
        {
            before = before.or_else(|| idle(p, o.settle).map(|(f, _)| f));
        }
    }
    if let Some(secs) = o.mixed {
        ok &= mixed_report(&o, pid, secs);
        ok &= report_after(pid, before, &o, "mixed-footprint");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn addresses_and_bounds() {
        let o = parse_args(&args("")).unwrap().unwrap();
        assert_eq!(o.server, "127.0.0.1:12865".parse().unwrap());
        assert_eq!((o.sessions, o.seconds), (10_000, MAX_SECONDS));
        let o = parse_args(&args("[::1]:9000 -c 8 -l 3")).unwrap().unwrap();
        assert_eq!(o.server, "[::1]:9000".parse().unwrap());
        assert_eq!((o.workers, o.sessions, o.seconds), (8, MAX_SESSIONS, 3.0));
        let o = parse_args(&args("127.0.0.2 -p 7 -n 5")).unwrap().unwrap();
        assert_eq!(o.server, "127.0.0.2:7".parse().unwrap());
        assert_eq!((o.sessions, o.seconds), (5, MAX_SECONDS));
        assert!(parse_args(&args("-l 0")).is_err());
        assert!(parse_args(&args("--kill 101")).is_err());
        assert!(parse_args(&args("--mixed-only")).is_err());
        assert!(parse_args(&args("-x")).is_err());
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 50.0), 50.0);
        assert_eq!(percentile_ms(&v, 99.0), 99.0);
        assert_eq!(percentile_ms(&v, 100.0), 100.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn crr_slices_do_not_overlap() {
        let a = crr_slice(0, 32);
        let b = crr_slice(1, 32);
        assert!(a.0 <= a.1 && a.1 < b.0 && b.0 <= b.1);
        assert_eq!(a.0, 5000);
    }

    #[test]
    fn mixed_plans_cover_every_kind() {
        let mut rng = Rng(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(Plan::mixed(&mut rng).kind);
        }
        assert_eq!(seen.len(), MIXED_KINDS.len());
    }
}
