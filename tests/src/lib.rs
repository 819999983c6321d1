//! The end-to-end harness: start the real binaries, read what they print,
//! clean up on drop.
//!
//! [`Netserver`] is a guard: it starts `netserver -D` on an ephemeral port,
//! waits (under a deadline) for its `listening on ADDR` line, kills it on
//! drop and, if the test is failing, shows its log. [`netperf`] runs the
//! client with a deadline and returns its status and output.

pub mod attempts;
pub mod netns;
pub mod shape;
pub mod wine;

use std::{
    io::{BufRead, BufReader, Read},
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

/// Path of one of the workspace's binaries, next to the test executable's
/// `deps` directory (cargo and cargo-nextest build them there).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace's binaries first (cargo build --workspace, or run the tests with cargo test/nextest --workspace)",
        path.display()
    );
    path
}

/// A running `netserver -D`, killed on drop.
#[derive(Debug)]
pub struct Netserver {
    child: Child,
    addrs: Vec<SocketAddr>,
    log: Arc<Mutex<String>>,
}

impl Netserver {
    /// Start on 127.0.0.1, port 0, with extra arguments.
    pub fn start(extra: &[&str]) -> Netserver {
        Netserver::start_with(&["-L", "127.0.0.1"], extra)
    }

    /// Start on ::1.
    pub fn start_v6(extra: &[&str]) -> Netserver {
        Netserver::start_with(&["-L", "::1"], extra)
    }

    pub fn start_with(bind: &[&str], extra: &[&str]) -> Netserver {
        let mut cmd = Command::new(bin("netserver"));
        cmd.arg("-D").args(["-p", "0"]).args(bind).args(extra);
        Netserver::spawn(cmd)
    }

    /// Start from a prepared command (e.g. run inside a network namespace).
    /// It must print `listening on ADDR` lines on stdout.
    pub fn spawn(mut cmd: Command) -> Netserver {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn netserver");
        let log = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let l = log.clone();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(a) = line.strip_prefix("listening on ") {
                    let _ = tx.send(a.parse::<SocketAddr>().ok());
                }
                l.lock().unwrap().push_str(&format!("{line}\n"));
            }
            let _ = tx.send(None);
        });
        let l = log.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                l.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let mut addrs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        // The first address arrives under the deadline; more may follow at once.
        while let Ok(Some(a)) = rx.recv_timeout(if addrs.is_empty() {
            deadline.saturating_duration_since(Instant::now())
        } else {
            Duration::from_millis(200)
        }) {
            addrs.push(a);
        }
        if addrs.is_empty() {
            let _ = child.kill();
            panic!(
                "netserver printed no 'listening on' line; its output:\n{}",
                log.lock().unwrap()
            );
        }
        Netserver { child, addrs, log }
    }

    /// Start on 127.0.0.1 with at most `nofile` open files (prlimit), or
    /// `None`, said loudly, where prlimit is not installed.
    pub fn start_with_nofile(nofile: u32, extra: &[&str]) -> Option<Netserver> {
        if Command::new("prlimit").arg("--version").output().is_err() {
            eprintln!("!!! SKIPPED: prlimit is not installed");
            return None;
        }
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={nofile}"))
            .arg("--")
            .arg(bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", "127.0.0.1"]).args(extra);
        Some(Netserver::spawn(cmd))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Run netperf against this netserver: `-H 127.0.0.1 -p port`, then
    /// `args`.
    pub fn netperf(&self, args: &[&str]) -> Output {
        netperf_at(&self.port().to_string(), args)
    }

    pub fn port(&self) -> u16 {
        self.addr().port()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The port of its `--iperf3` listener, once its log names it (within
    /// 5 s).
    pub fn iperf3_port(&self) -> u16 {
        assert!(
            self.wait_for_log("iperf3 listening on", Duration::from_secs(5)),
            "no iperf3 listener: {}",
            self.log()
        );
        self.log()
            .lines()
            .find_map(|l| l.strip_prefix("iperf3 listening on "))
            .and_then(|a| a.rsplit(':').next()?.parse().ok())
            .expect("iperf3's port")
    }

    /// Everything netserver printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Wait until the log contains `needle`, at most `limit`.
    pub fn wait_for_log(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Send a signal and wait for the process to exit, at most `limit`.
    pub fn signal_and_wait(&mut self, sig: &str, limit: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args([format!("-{sig}"), self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Netserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("---- netserver log ----\n{}", self.log());
        }
    }
}

/// Whether iperf3 is installed; if not, say so loudly (and fail where
/// `NETPERF_REQUIRE_IPERF3=1`, as in CI).
pub fn have_iperf3() -> bool {
    if Command::new("iperf3").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("NETPERF_REQUIRE_IPERF3").as_deref() != Ok("1"),
        "iperf3 is not installed (apt-get install iperf3) and NETPERF_REQUIRE_IPERF3=1"
    );
    eprintln!("!!! SKIPPED: iperf3 is not installed (apt-get install iperf3)");
    false
}

/// strace is in CI (`.ci/run` installs it and sets NETPERF_REQUIRE_STRACE):
/// there a test that needs it fails without it; elsewhere it says it
/// skipped.
pub fn have_strace() -> bool {
    if Command::new("strace").arg("-V").output().is_ok() {
        return true;
    }
    let required = ["NETPERF_REQUIRE_STRACE", "NETPERF_REQUIRE_NETNS"]
        .iter()
        .any(|v| std::env::var(v).as_deref() == Ok("1"));
    assert!(
        !required,
        "strace is not installed, and NETPERF_REQUIRE_STRACE=1 requires it"
    );
    eprintln!("!!! SKIPPED: strace is not installed");
    false
}

/// A netserver on 127.0.0.1 under `strace -f -qq`, its trace in a file:
/// to see its system calls, or to make some of them fail (`-e inject=`).
#[derive(Debug)]
pub struct TracedServer {
    pub ns: Netserver,
    file: PathBuf,
}

impl TracedServer {
    /// `strace_args` go before the netserver; `extra` after its own
    /// `-D -p 0 -L 127.0.0.1`. `tag` names the trace file.
    pub fn start<S: AsRef<std::ffi::OsStr>>(
        strace_args: &[S],
        extra: &[&str],
        tag: &str,
    ) -> TracedServer {
        let file = std::env::temp_dir().join(format!("rsnetperf-ns-{tag}-{}", std::process::id()));
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-s", "64", "-o"])
            .arg(&file)
            .args(strace_args)
            .arg(bin("netserver"))
            .args(["-D", "-p", "0", "-L", "127.0.0.1"])
            .args(extra);
        TracedServer::spawn(cmd, file)
    }

    /// A netserver under the strace that `cmd` runs (in a namespace, say),
    /// tracing into `file`; both gone on drop, the netserver first.
    pub fn spawn(cmd: Command, file: PathBuf) -> TracedServer {
        TracedServer {
            ns: Netserver::spawn(cmd),
            file,
        }
    }

    pub fn port(&self) -> String {
        self.ns.port().to_string()
    }

    pub fn trace(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap_or_default()
    }
}

impl Drop for TracedServer {
    fn drop(&mut self) {
        // strace killed lets its tracee go on: end the netserver first
        let strace = self.ns.pid();
        let children = std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children"))
            .unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// What a finished netperf run left behind.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Panic with the output unless the run succeeded.
    pub fn ok(self) -> Output {
        assert!(self.success(), "netperf failed: {self}");
        self
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Run a program to completion with a deadline (killed after it, with
/// every process it started: it runs in a process group of its own).
///
/// Its output is read until its end or, once the program has exited, for
/// at most [`DRAIN`] more: a process it left running (Wine's services,
/// which live while any program of the prefix does) may hold the pipes
/// open, and a test must not wait on them.
pub fn run_with_deadline(mut cmd: Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            kill_group(&child);
            let _ = child.kill();
            let s = child.wait().expect("wait");
            panic!(
                "{cmd:?} did not finish within {limit:?}\n--- stdout ---\n{}--- stderr ---\n{}status {s}",
                out.take(),
                err.take()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.take(),
        stderr: err.take(),
    }
}

/// How long a program's output is read after it exited, when something
/// it started still holds its pipes.
pub const DRAIN: Duration = Duration::from_secs(3);

/// A pipe read to its end on a thread of its own.
struct Drained {
    text: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

fn drain(mut pipe: impl Read + Send + 'static) -> Drained {
    let text = Arc::new(Mutex::new(Vec::new()));
    let (tx, done) = mpsc::channel();
    let into = Arc::clone(&text);
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            into.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(());
    });
    Drained { text, done }
}

impl Drained {
    /// What came: to the pipe's end, or what came within [`DRAIN`].
    fn take(&self) -> String {
        let _ = self.done.recv_timeout(DRAIN);
        let bytes = self.text.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// SIGKILL to the process group `child` leads.
fn kill_group(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Run netperf with `args`, for at most 60 s.
pub fn netperf(args: &[&str]) -> Output {
    let mut cmd = Command::new(bin("netperf"));
    cmd.args(args);
    run_with_deadline(cmd, Duration::from_secs(60))
}

/// Run netperf against the netserver on 127.0.0.1 at `port`: `-H 127.0.0.1
/// -p port` and then `args`.
pub fn netperf_at(port: &str, args: &[&str]) -> Output {
    let mut all = vec!["-H", "127.0.0.1", "-p", port];
    all.extend_from_slice(args);
    netperf(&all)
}

/// One line for the common case: a fresh netserver on 127.0.0.1, netperf
/// run against it with `args` (after `-H 127.0.0.1 -p port`), and what it
/// printed, with the netserver's log kept for a failure.
pub fn netperf_vs_netserver(args: &[&str]) -> (Output, Netserver) {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(args);
    (out, ns)
}

/// The value of `KEY=value` in `-k` output, as a number; a missing key
/// fails the test, naming it.
pub fn keyval(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{key} in {stdout}"))
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {stdout}: {e}"))
}

/// A TCP port on 127.0.0.1 with nothing listening (bound, then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The fields of a data row, split on whitespace.
pub fn fields(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Parse a number from a table field.
pub fn num(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| panic!("'{s}' is not a number"))
}

/// A control connection spoken by hand, to play a hostile or broken
/// client against a real netserver.
#[derive(Debug)]
pub struct RawClient {
    pub stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> RawClient {
        let stream = std::net::TcpStream::connect(addr).expect("connect");
        RawClient {
            stream,
            buf: Vec::new(),
        }
    }

    /// Connect from `local` (another loopback address: another client).
    pub fn connect_from(addr: SocketAddr, local: std::net::IpAddr) -> RawClient {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )
        .expect("socket");
        sock.bind(&SocketAddr::new(local, 0).into()).expect("bind");
        sock.connect(&addr.into()).expect("connect");
        RawClient {
            stream: sock.into(),
            buf: Vec::new(),
        }
    }

    /// Say hello from `local`; panics unless the server answers with its
    /// hello.
    pub fn hello_from(addr: SocketAddr, local: std::net::IpAddr) -> RawClient {
        let mut c = RawClient::connect_from(addr, local);
        c.say_hello();
        c
    }

    fn say_hello(&mut self) {
        self.send(&proto::ClientMsg::Hello(proto::Hello::new(
            "raw test client",
        )));
        match self.recv(Duration::from_secs(10)) {
            Some(proto::ServerMsg::Hello(_)) => {}
            other => panic!("expected the server's hello, got {other:?}"),
        }
    }

    pub fn send(&mut self, msg: &proto::ClientMsg) {
        use std::io::Write;
        self.stream
            .write_all(&msg.encode().expect("encode"))
            .expect("send");
    }

    /// The next server message, or `None` if the server closed first or
    /// nothing came within `limit`.
    pub fn recv(&mut self, limit: Duration) -> Option<proto::ServerMsg> {
        use std::io::Read;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some((m, used))) =
                proto::message::take_frame(&self.buf, proto::ServerMsg::decode)
            {
                self.buf.drain(..used);
                return Some(m);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            self.stream.set_read_timeout(Some(deadline - now)).ok()?;
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A session that has run one TCP_STREAM of one byte to the server
    /// at `addr` (on 127.0.0.1), and the server's results.
    pub fn after_one_byte(addr: SocketAddr) -> (RawClient, Box<proto::SideResults>) {
        use std::io::{Read, Write};
        let mut c = RawClient::hello(addr);
        let mut spec = proto::TestSpec::new(proto::TestKind::TcpStream, proto::Family::V4);
        spec.end = proto::TestEnd::Bytes(1);
        c.send(&proto::ClientMsg::Setup(Box::new(spec)));
        let g = match c.recv(Duration::from_secs(5)) {
            Some(proto::ServerMsg::Ready(g)) => g,
            other => panic!("no grant: {other:?}"),
        };
        let mut d = std::net::TcpStream::connect(("127.0.0.1", g.data_port)).expect("connect");
        d.write_all(&engine::handshake::preamble(&g.token, 0))
            .expect("preamble");
        d.write_all(b"x").expect("a byte");
        d.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut b = [0u8; 8];
        let _ = d.read(&mut b);
        c.send(&proto::ClientMsg::Done(proto::ClientDone::default()));
        loop {
            match c.recv(Duration::from_secs(5)) {
                Some(proto::ServerMsg::Results(r)) => return (c, r),
                // (the host's facts go first: the hello named `facts`)
                Some(proto::ServerMsg::Facts(_)) => {}
                other => panic!("no results: {other:?}"),
            }
        }
    }

    /// Say hello; panics unless the server answers with its hello.
    pub fn hello(addr: SocketAddr) -> RawClient {
        let mut c = RawClient::connect(addr);
        c.say_hello();
        c
    }

    /// Whether the server closed the connection within `limit` (end of
    /// file, or a reset), after any messages it sent first.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        use std::io::Read;
        let deadline = Instant::now() + limit;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if self.stream.set_read_timeout(Some(deadline - now)).is_err() {
                return true;
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }
}

/// User and system CPU time of the process at `proc_dir` (`/proc/PID`)
/// so far, in ticks of 10 ms; 0 if it is gone.
pub fn cpu_ticks(proc_dir: &std::path::Path) -> u64 {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    // after the name in parentheses: state is the first field, utime and
    // stime the 12th and 13th
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| f.get(i).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    tick(11) + tick(12)
}

/// Counts of a process's resources, from /proc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    pub fds: usize,
    pub threads: usize,
    pub rss_kib: u64,
    /// The most it has been resident, ever (VmHWM).
    pub peak_rss_kib: u64,
}

pub fn footprint(pid: u32) -> Footprint {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Footprint {
        fds,
        threads,
        rss_kib: kib("VmRSS:"),
        peak_rss_kib: kib("VmHWM:"),
    }
}

/// A cgroup of one controller (`pids`, `memory`) holding the processes a
/// test puts in it, removed when dropped (after they have gone). Cgroup v1's
/// hierarchy of that controller, or v2's unified one, below the cgroup
/// this test process is in.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// None where no such cgroup can be made (not root, no controller).
    pub fn new(controller: &str, name: &str) -> Option<Cgroup> {
        let mine = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let v1_root = std::path::Path::new("/sys/fs/cgroup").join(controller);
        let (base, v2) = if v1_root.join("cgroup.procs").exists() {
            let own = mine
                .lines()
                .filter_map(|l| l.splitn(3, ':').nth(2).map(|p| (l, p)))
                .find(|(l, _)| {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|c| c.split(',').any(|c| c == controller))
                })
                .map_or("/", |(_, p)| p);
            (v1_root.join(own.trim_start_matches('/')), false)
        } else {
            let root = std::path::Path::new("/sys/fs/cgroup");
            let ctl = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
            if !ctl.split_whitespace().any(|c| c == controller) {
                return None;
            }
            std::fs::write(
                root.join("cgroup.subtree_control"),
                format!("+{controller}"),
            )
            .ok()?;
            (root.to_path_buf(), true)
        };
        let dir = base.join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).ok()?;
        Some(Cgroup { dir, v2 })
    }

    pub fn adopt(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// Write one of its files (`pids.max`, ...).
    pub fn set(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.dir.display()));
    }

    pub fn get(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Limit its memory to `bytes` (swap included where v1 allows).
    pub fn limit_memory(&self, bytes: u64) {
        if self.v2 {
            self.set("memory.max", &bytes.to_string());
            let _ = std::fs::write(self.dir.join("memory.swap.max"), "0");
        } else {
            self.set("memory.limit_in_bytes", &bytes.to_string());
            let _ = std::fs::write(
                self.dir.join("memory.memsw.limit_in_bytes"),
                bytes.to_string(),
            );
        }
    }

    /// Times the kernel's OOM killer acted in it.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        self.get(file)
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// Whether the root-only tests must run here (`NETPERF_REQUIRE_NETNS=1`):
/// a test that cannot run says so and skips, or fails where it must run.
pub fn skip_unless_required(why: &str) {
    assert!(
        std::env::var("NETPERF_REQUIRE_NETNS").as_deref() != Ok("1"),
        "{why} (NETPERF_REQUIRE_NETNS=1 requires the root-only tests)"
    );
    eprintln!("!!! SKIPPED: {why}");
}

/// The spans (start, end) of the tests a `--record` file holds, sorted;
/// panics unless there are `n` and no two overlap (`--schedule
/// exclusive`).
pub fn record_spans_apart(record: &std::path::Path, n: usize) -> Vec<(String, String)> {
    let mut spans: Vec<(String, String)> = std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["start"].as_str().unwrap().to_string(),
                v["time"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    spans.sort();
    assert_eq!(spans.len(), n, "{spans:?}");
    for w in spans.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlapping tests: {spans:?}");
    }
    spans
}
