//! The `netserver` binary: parse the command line, bind the control
//! listeners, detach unless `-D`, and serve until SIGINT or SIGTERM.

use std::{
    io::{self, Write},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs},
    process::ExitCode,
    sync::Arc,
    thread,
    time::Duration,
};

use engine::sys::{Asked, Handed, Signals};
mod service;

use netserver::{
    Error, Logger, Shutdown,
    cli::{self, Invocation, ServerOptions},
    policy::Policy,
};
use optparse::value::AddrFamily;
use socket2::{Domain, Socket, Type};

/// Descriptors for many flows and sessions: the soft limit raised to the
/// hard one.
/// Returns (before, now).
fn raise_open_files() -> (u64, u64) {
    let (soft, hard) = engine::sys::open_files_limit();
    (soft, engine::sys::set_open_files(hard))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match cli::parse(&args) {
        Ok(Invocation::Help) => {
            print!("{}", cli::usage());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            println!("{}", cli::version());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::OurVersion) => {
            println!("{}", cli::our_version());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::InstallService(args)) => return finish(service::install(&args)),
        Ok(Invocation::UninstallService) => return finish(service::uninstall()),
        Ok(Invocation::Token(text, t)) => {
            println!("{text}");
            eprintln!(
                "netserver: token {:016x}: valid until {} (the wall clock's seconds), {}, from {}",
                t.id,
                t.expires,
                if t.tests == 0 {
                    "tests as the policy allows".to_string()
                } else {
                    format!("at most {} tests", t.tests)
                },
                t.prefix
                    .map_or_else(|| "any address".to_string(), |(a, l)| format!("{a}/{l}"))
            );
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(o)) if o.service => {
            let files = raise_open_files();
            return finish(service::run(*o, Box::new(move |o| serve(o, files))));
        }
        Ok(Invocation::Run(o)) => *o,
        Err(e) => {
            eprintln!("netserver: {e}");
            eprintln!("Try 'netserver -h' for the options.");
            return ExitCode::from(2);
        }
    };
    let files = raise_open_files();
    finish(serve(opts, files))
}

/// The exit of a run: its error on stderr.
fn finish(r: Result<(), Error>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netserver: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How this netserver was started.
enum Start {
    /// Bind our own listeners (`-p`, `-L`, `-4`/`-6`).
    Bind,
    /// systemd socket activation: listeners from fd 3 on (`LISTEN_FDS`).
    Activated(Vec<TcpListener>),
    /// inetd (nowait): one control connection on standard input.
    Inetd(std::net::TcpStream),
    /// inetd (wait) and the like: a listener on standard input.
    StdinListener(TcpListener),
}

fn how_started() -> Result<Start, Error> {
    // systemd: LISTEN_PID is ours, LISTEN_FDS listeners from fd 3
    match engine::sys::activated_listeners() {
        Ok(Some(l)) if l.is_empty() => {
            return Err(Error::Setup("LISTEN_FDS: systemd passed no sockets".into()));
        }
        Ok(Some(l)) => return Ok(Start::Activated(l)),
        Ok(None) => {}
        Err(e) => return Err(Error::Setup(e.to_string())),
    }
    // inetd: standard input is a TCP socket (not a pipe, a terminal, or a
    // Unix socket a supervisor left there)
    match engine::sys::stdin_socket().map_err(|e| Error::system("standard input", e))? {
        Some(Handed::Listener(l)) => Ok(Start::StdinListener(l)),
        Some(Handed::Stream(s)) => Ok(Start::Inetd(s)),
        None => Ok(Start::Bind),
    }
}

fn serve(mut opts: ServerOptions, files: (u64, u64)) -> Result<(), Error> {
    let listeners = match how_started()? {
        Start::Bind => bind_listeners(&opts)?,
        Start::Activated(l) => {
            // systemd runs us in the foreground (and the sockets are ours)
            opts.foreground = true;
            l
        }
        Start::StdinListener(l) => vec![l],
        Start::Inetd(conn) => return serve_inetd(opts, conn),
    };
    // Signals are taken by one thread with sigwait; every other thread
    // inherits the blocked mask, so no handler runs at an awkward moment.
    // Blocked here, before anything below can start a thread (the log's
    // writer starts at its first line, --metrics's on binding, and so
    // on): a thread started earlier would take SIGHUP's default action,
    // which ends the process. The mask survives the fork of detaching.
    let signals = Signals::block(&[Asked::Interrupt, Asked::Terminate, Asked::Reopen])
        .map_err(|e| Error::system("cannot block signals", e))?;
    let iperf3 = bind_iperf3(&opts, &listeners)?;
    let stamp = bind_stamp(&opts, &listeners)?;
    print_banner(&opts, &listeners, (&iperf3, &stamp));

    // absolute, so that SIGHUP reopens the same path after detaching (cwd /)
    let log_path = opts
        .log_file
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
    let log_file = opts.log_file.as_deref().map(open_log).transpose()?;
    let record_path = opts
        .record_file
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
    let record = opts
        .record_file
        .as_deref()
        .map(|p| open_file("--record", p))
        .transpose()?;
    // bound before detaching, so that a taken port is the command's error
    let metrics = match opts.metrics {
        Some(addr) => Some(bind_metrics(addr)?),
        None => None,
    };
    if !opts.foreground {
        opts.foreground = detach()?;
    }
    let pid_file = write_pid_file(opts.pid_file.as_deref())?;
    opts.config.logger = match log_file {
        Some(f) => file_logger(f, opts.verbosity, opts.log_format, &opts),
        None if opts.foreground => {
            Logger::with_format(Box::new(io::stderr()), opts.verbosity, opts.log_format)
        }
        None => Logger::discard(),
    };
    opts.config.record = record.map(|f| file_logger(f, 0, netserver::log::Format::Raw, &opts));
    if let (Some(gate), false) = (&opts.config.iperf3_gate, iperf3.is_empty()) {
        opts.config.logger.log(1, &gate.describe());
    }
    if let Some(Ok(a)) = metrics.as_ref().map(|m| m.local_addr()) {
        opts.config
            .logger
            .log(1, &format!("metrics at http://{a}/metrics"));
    }

    // (the mask was set above: the log's thread inherits it)
    opts.config.logger.start();
    if let Some(r) = &opts.config.record {
        r.start();
    }
    let shutdown = Shutdown::new();
    let s = shutdown.clone();
    let log = opts.config.logger.clone();
    log.log(
        2,
        &format!(
            "open files: at most {} (raised from {}); buffer memory budget {} bytes",
            files.1,
            files.0,
            opts.config.memory_budget.limit()
        ),
    );
    let mut reopen = Vec::new();
    if let Some(p) = log_path {
        reopen.push((p, log.clone()));
    }
    if let (Some(p), Some(r)) = (record_path, &opts.config.record) {
        reopen.push((p, r.clone()));
    }
    signal_thread(signals, (reopen, opts.config.policy.clone()), log, s)?;

    let log = opts.config.logger.clone();
    let record = opts.config.record.clone();
    let iperf3_udp = iperf3
        .iter()
        .map(|l| l.local_addr().and_then(bind_iperf3_udp))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| Error::system("iperf3's UDP port", e))?;
    let all = netserver::Listeners {
        control: listeners,
        iperf3,
        iperf3_udp,
        metrics,
        stamp,
    };
    let r =
        netserver::serve(all, opts.config, shutdown).map_err(|e| Error::system("accept loop", e));
    if let Some(r) = record {
        r.sync(Duration::from_secs(2));
    }
    if let Some(p) = pid_file {
        let _ = std::fs::remove_file(p);
    }
    // the last lines (why it stopped) reach the log before the process ends
    log.sync(Duration::from_secs(2));
    r
}

/// Detach as netserver does: fork, new session, cwd /, stdio to
/// /dev/null. No thread exists yet, so forking is safe. Whether this
/// stays in the foreground after all (Windows cannot detach: it stays,
/// as netperf 2.7's does there).
fn detach() -> Result<bool, Error> {
    match engine::sys::detach() {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            eprintln!("netserver: {e}; serving in the foreground");
            Ok(true)
        }
        Err(e) => Err(Error::system("cannot detach", e)),
    }
}

/// inetd's connection (standard input), served alone. Its stdout and
/// stderr are the client's connection too: nothing may be printed; the
/// log goes only to --log-file.
fn serve_inetd(mut opts: ServerOptions, conn: std::net::TcpStream) -> Result<(), Error> {
    opts.config.logger = match &opts.log_file {
        Some(path) => file_logger(open_log(path)?, opts.verbosity, opts.log_format, &opts),
        None => Logger::discard(),
    };
    opts.config.record = open_record(&opts)?;
    // (an error printed on stderr would go to the client)
    let log = opts.config.logger.clone();
    let record = opts.config.record.clone();
    if let Err(e) = netserver::serve_one(conn, opts.config) {
        log.log(1, &format!("inetd connection: {e}"));
    }
    log.sync(Duration::from_secs(2));
    if let Some(r) = record {
        r.sync(Duration::from_secs(2));
    }
    Ok(())
}

/// netserver 2.7's first line, and where we listen.
fn print_banner(
    opts: &ServerOptions,
    listeners: &[TcpListener],
    (iperf3, stamp): (&[TcpListener], &[std::net::UdpSocket]),
) {
    let family = match opts.family {
        AddrFamily::Unspec => "AF_UNSPEC",
        AddrFamily::V4 => "AF_INET",
        AddrFamily::V6 => "AF_INET6",
    };
    let mut out = io::stdout().lock();
    let _ = writeln!(
        out,
        "Starting netserver with host '{}' port '{}' and family {family}",
        opts.bind.as_deref().unwrap_or("IN(6)ADDR_ANY"),
        opts.port
    );
    for l in listeners {
        if let Ok(a) = l.local_addr() {
            let _ = writeln!(out, "listening on {a}");
        }
    }
    for l in iperf3 {
        if let Ok(a) = l.local_addr() {
            let _ = writeln!(out, "iperf3 listening on {a}");
        }
    }
    for s in stamp {
        if let Ok(a) = s.local_addr() {
            let _ = writeln!(out, "STAMP reflector on {a} (UDP)");
        }
    }
    let _ = out.flush();
}

/// `--pid-file`: the daemon's own pid (after the fork), for whoever stops
/// it; the file's path, to remove at exit.
fn write_pid_file(path: Option<&std::path::Path>) -> Result<Option<std::path::PathBuf>, Error> {
    let Some(p) = path else {
        return Ok(None);
    };
    std::fs::write(p, format!("{}\n", std::process::id()))
        .map_err(|e| Error::Setup(format!("--pid-file {}: {e}", p.display())))?;
    Ok(Some(p.to_path_buf()))
}

/// The one thread that takes the daemon's signals (the others have them
/// blocked): SIGHUP reopens the log file (logrotate moved it), SIGINT and
/// SIGTERM shut the daemon down.
fn signal_thread(
    signals: Signals,
    (reopen, policy): (Vec<(std::path::PathBuf, Logger)>, Arc<Policy>),
    log: Logger,
    s: Shutdown,
) -> Result<(), Error> {
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                match signals.wait() {
                    Ok(Asked::Reopen) => {
                        // the policy read again; an error keeps the one in force
                        let reloaded = match policy.reload() {
                            Ok(Some(said)) => {
                                log.log(1, &format!("SIGHUP: {said}"));
                                true
                            }
                            Ok(None) => false,
                            Err(e) => {
                                log.log(1, &format!("SIGHUP: {e}; the policy in force stays"));
                                true
                            }
                        };
                        if reopen.is_empty() && !reloaded {
                            log.log(
                                1,
                                "SIGHUP ignored (no --log-file or --record to reopen, no --policy to read)",
                            );
                        }
                        // logrotate moved the files: write to new ones there
                        for (p, to) in &reopen {
                            reopen_one(p, to, &log);
                        }
                    }
                    Ok(sig) => {
                        log.log(1, &format!("{sig}: shutting down"));
                        s.trigger();
                        return;
                    }
                    Err(_) => return,
                }
            }
        })
        .map(drop)
        .map_err(|e| Error::system("cannot start the signal thread", e))
}

/// SIGHUP: `to` writes to a new file at `p` from now on (said in `log`).
fn reopen_one(p: &std::path::Path, to: &Logger, log: &Logger) {
    match engine::sys::open_private_append(p) {
        Ok(f) => {
            let already = f.metadata().map_or(0, |m| m.len());
            if to.replace_sink(Box::new(f), already) {
                log.log(1, &format!("SIGHUP: {} reopened", p.display()));
            } else {
                log.log(
                    0,
                    &format!(
                        "SIGHUP: the writer is stuck writing to the old file; {} not reopened",
                        p.display()
                    ),
                );
            }
        }
        Err(e) => log.log(
            0,
            &format!(
                "SIGHUP: cannot reopen {}: {e}; still writing to the old file",
                p.display()
            ),
        ),
    }
}

/// A log (or record) to `f`, held to `--max-file-size` (counting what the
/// file holds already) and the rates of [`netserver::log::Limits`].
fn file_logger(
    f: std::fs::File,
    verbosity: u8,
    format: netserver::log::Format,
    opts: &ServerOptions,
) -> Logger {
    let already = f.metadata().map_or(0, |m| m.len());
    let limits = netserver::log::Limits {
        file_size: opts.max_file_size,
        ..Default::default()
    };
    Logger::with_format(Box::new(f), verbosity, format).with_limits(limits, already)
}

/// `--record`'s writer, for the inetd case (the daemon opens it itself).
fn open_record(opts: &ServerOptions) -> Result<Option<Logger>, Error> {
    Ok(match &opts.record_file {
        Some(p) => Some(file_logger(
            open_file("--record", p)?,
            0,
            netserver::log::Format::Raw,
            opts,
        )),
        None => None,
    })
}

/// Bind `--iperf3`'s listener: its address, or the control listeners'
/// (-L's), or every address.
fn bind_iperf3(opts: &ServerOptions, control: &[TcpListener]) -> Result<Vec<TcpListener>, Error> {
    let Some(asked) = opts.iperf3 else {
        return Ok(Vec::new());
    };
    let addr = side_port(opts, control, asked);
    let ip = addr.ip();
    let listen = || -> io::Result<TcpListener> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        s.set_reuse_address(true)?;
        if addr.is_ipv6() && ip.is_unspecified() {
            // every address, both families
            let _ = s.set_only_v6(false);
        }
        s.bind(&addr.into())?;
        s.listen(1024)?;
        Ok(s.into())
    };
    listen()
        .map(|l| vec![l])
        .map_err(|source| Error::Listen { addr, source })
}

/// A port beside the control port's (`--iperf3`, `--stamp`): at its own
/// address, else -L's, else every address (both families).
fn side_port(
    opts: &ServerOptions,
    control: &[TcpListener],
    (ip, port): (Option<IpAddr>, u16),
) -> SocketAddr {
    let ip = ip
        .or_else(|| {
            opts.bind
                .as_ref()
                .and(control.first())
                .and_then(|l| l.local_addr().ok())
                .map(|a| a.ip())
        })
        .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    SocketAddr::new(ip, port)
}

/// `--stamp`'s UDP socket: its address, else -L's, else every address
/// (both families).
fn bind_stamp(
    opts: &ServerOptions,
    control: &[TcpListener],
) -> Result<Vec<std::net::UdpSocket>, Error> {
    let Some(asked) = opts.stamp else {
        return Ok(Vec::new());
    };
    let addr = side_port(opts, control, asked);
    let ip = addr.ip();
    let bind = || -> io::Result<std::net::UdpSocket> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::DGRAM,
            None,
        )?;
        if addr.is_ipv6() && ip.is_unspecified() {
            let _ = s.set_only_v6(false);
        }
        s.bind(&addr.into())?;
        Ok(s.into())
    };
    bind()
        .map(|s| vec![s])
        .map_err(|source| Error::Listen { addr, source })
}

/// iperf3's UDP port, where its UDP streams' first datagrams come: the TCP
/// listener's address and port, shared (SO_REUSEADDR) with each stream's
/// own connected socket.
fn bind_iperf3_udp(at: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::for_address(at), socket2::Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    if at.is_ipv6() && at.ip().is_unspecified() {
        let _ = s.set_only_v6(false);
    }
    s.bind(&at.into())?;
    Ok(s.into())
}

/// Bind `--metrics`'s listener.
fn bind_metrics(addr: std::net::SocketAddr) -> Result<std::net::TcpListener, Error> {
    std::net::TcpListener::bind(addr).map_err(|e| Error::Setup(format!("--metrics {addr}: {e}")))
}

/// Open (append to) the `--log-file`.
fn open_log(path: &std::path::Path) -> Result<std::fs::File, Error> {
    open_file("--log-file", path)
}

/// Open (append to) the file of `option`.
fn open_file(option: &'static str, path: &std::path::Path) -> Result<std::fs::File, Error> {
    engine::sys::open_private_append(path).map_err(|source| Error::LogFile {
        option,
        path: path.to_path_buf(),
        source,
    })
}

/// Bind the control listeners: both families by default, as netperf's
/// netserver does with AF_UNSPEC.
fn bind_listeners(opts: &ServerOptions) -> Result<Vec<TcpListener>, Error> {
    let wants = |ip: &IpAddr| match opts.family {
        AddrFamily::Unspec => true,
        AddrFamily::V4 => ip.is_ipv4(),
        AddrFamily::V6 => ip.is_ipv6(),
    };
    let (addrs, explicit): (Vec<IpAddr>, bool) = match &opts.bind {
        Some(name) => {
            let mut ips: Vec<IpAddr> = (name.as_str(), 0)
                .to_socket_addrs()
                .map_err(|e| Error::Setup(format!("-L {name}: cannot resolve: {e}")))?
                .map(|a| a.ip())
                .filter(|ip| wants(ip))
                .collect();
            ips.dedup();
            if ips.is_empty() {
                return Err(Error::Setup(format!(
                    "-L {name}: no address of the requested family"
                )));
            }
            (ips, true)
        }
        None => {
            let all = [
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            ];
            (
                all.into_iter().filter(|ip| wants(ip)).collect(),
                opts.family != AddrFamily::Unspec,
            )
        }
    };
    let mut port = opts.port;
    let mut listeners = Vec::new();
    for ip in addrs {
        match listen_on(SocketAddr::new(ip, port)) {
            Ok(l) => {
                if port == 0 {
                    port = l.local_addr().map(|a| a.port()).unwrap_or(0);
                }
                listeners.push(l);
            }
            // With no family asked for, a host without IPv6 still serves IPv4.
            Err(e) if !explicit && ip.is_ipv6() && !listeners.is_empty() => {
                let _ = e;
            }
            Err(source) => {
                return Err(Error::Listen {
                    addr: SocketAddr::new(ip, port),
                    source,
                });
            }
        }
    }
    Ok(listeners)
}

fn listen_on(addr: SocketAddr) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    // room for the default 256 sessions arriving at once, and then some
    // (the kernel caps it at net.core.somaxconn)
    s.listen(4096)?;
    Ok(s.into())
}
