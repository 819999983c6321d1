//! The `netserver` binary: parse the command line, bind the control
//! listeners, detach unless `-D`, and serve until SIGINT or SIGTERM.

use std::{
    fs::OpenOptions,
    io::{self, Write},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs},
    process::ExitCode,
    thread,
};

use netserver::{
    Logger, Shutdown,
    cli::{self, Invocation, ServerOptions},
};
use nix::sys::signal::{SigSet, Signal};
use optparse::value::AddrFamily;
use socket2::{Domain, Socket, Type};

/// Descriptors for many flows and sessions: the soft limit raised to the
/// hard one.
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
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
        Ok(Invocation::Run(o)) => *o,
        Err(e) => {
            eprintln!("netserver: {e}");
            eprintln!("Try 'netserver -h' for the options.");
            return ExitCode::from(2);
        }
    };
    raise_open_files();
    match serve(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netserver: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(mut opts: ServerOptions) -> Result<(), String> {
    let listeners = bind_listeners(&opts)?;
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
    for l in &listeners {
        if let Ok(a) = l.local_addr() {
            let _ = writeln!(out, "listening on {a}");
        }
    }
    let _ = out.flush();
    drop(out);

    let log_file = match &opts.log_file {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--log-file {}: {e}", path.display()))?,
        ),
        None => None,
    };
    if !opts.foreground {
        // Detach as netserver does: fork, new session, cwd /, stdio to
        // /dev/null. No thread exists yet, so forking is safe.
        nix::unistd::daemon(false, false).map_err(|e| format!("cannot detach: {e}"))?;
    }
    opts.config.logger = match log_file {
        Some(f) => Logger::new(Box::new(f), opts.verbosity),
        None if opts.foreground => Logger::stderr(opts.verbosity),
        None => Logger::discard(),
    };

    // Signals are taken by one thread with sigwait; every other thread
    // inherits the blocked mask, so no handler runs at an awkward moment.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGHUP);
    signals
        .thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    let shutdown = Shutdown::new();
    let s = shutdown.clone();
    let log = opts.config.logger.clone();
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                match signals.wait() {
                    Ok(Signal::SIGHUP) => log.log(1, "SIGHUP ignored"),
                    Ok(sig) => {
                        log.log(1, &format!("{sig}: shutting down"));
                        s.trigger();
                        return;
                    }
                    Err(_) => return,
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;

    netserver::run(listeners, opts.config, shutdown).map_err(|e| format!("accept loop: {e}"))
}

/// Bind the control listeners: both families by default, as netperf's
/// netserver does with AF_UNSPEC.
fn bind_listeners(opts: &ServerOptions) -> Result<Vec<TcpListener>, String> {
    let wants = |ip: &IpAddr| match opts.family {
        AddrFamily::Unspec => true,
        AddrFamily::V4 => ip.is_ipv4(),
        AddrFamily::V6 => ip.is_ipv6(),
    };
    let (addrs, explicit): (Vec<IpAddr>, bool) = match &opts.bind {
        Some(name) => {
            let mut ips: Vec<IpAddr> = (name.as_str(), 0)
                .to_socket_addrs()
                .map_err(|e| format!("-L {name}: cannot resolve: {e}"))?
                .map(|a| a.ip())
                .filter(|ip| wants(ip))
                .collect();
            ips.dedup();
            if ips.is_empty() {
                return Err(format!("-L {name}: no address of the requested family"));
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
            Err(e) => {
                return Err(format!(
                    "cannot listen on {}: {e}",
                    SocketAddr::new(ip, port)
                ));
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
    s.listen(128)?;
    Ok(s.into())
}
