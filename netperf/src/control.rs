//! The control connection, behind one interface.
//!
//! Everything the client needs from a netserver goes through [`Dialect`]:
//! ask for a test, learn where to connect, say when it is done, get the
//! server's counters. [`Native`] speaks this suite's protocol; a second
//! dialect (netperf 2.7's own wire format, to use existing netservers) would
//! implement the same trait, and nothing that runs tests would change.

use std::{
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};
use engine::{
    auth::Key,
    control::{ControlError, ControlStream},
};
use optparse::value::AddrFamily;
use proto::{
    ClientDone, ClientError, ClientEvent, ClientSession, Grant, ProtoError, SideResults, TestSpec,
    conn::ClientConn,
};
use socket2::{Domain, Socket, Type};

use crate::{
    cli::{DialectChoice, Plan},
    netperf2::Netperf2,
};

/// How long we wait for the netserver's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long we keep trying a netserver that says it is busy (a script's
/// previous runs may still be closing their sessions).
const BUSY_RETRY: Duration = Duration::from_secs(3);
/// How long we wait for a setup reply (the server binds a socket).
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A control conversation with a netserver.
pub trait Dialect {
    /// The netserver's own description of itself.
    fn server_software(&self) -> &str;
    /// The netserver's CPU count and CPU meter rate (REM_CPU).
    fn server_cpu(&self) -> (u32, u32);
    /// The netserver's control address; data connections go to its IP.
    fn peer(&self) -> SocketAddr;
    /// Our end of the control connection.
    fn local(&self) -> SocketAddr;
    /// Ask for a test; the server prepares its data sockets.
    fn setup(&mut self, spec: &TestSpec) -> Result<Grant>;
    /// Our data phase is over: report it and collect the server's counters,
    /// waiting at most `wait`.
    fn finish(&mut self, done: ClientDone, wait: Duration) -> Result<SideResults>;
    /// End the conversation politely.
    fn bye(&mut self);
    /// After our data path failed: what the netserver said, if it said why
    /// within `wait`.
    fn server_said(&mut self, _wait: Duration) -> Option<String> {
        None
    }
    /// Whether the netserver announced `capability` in its hello.
    fn can(&self, _capability: &str) -> bool {
        false
    }
    /// Whether this is netperf 2.7's netserver (which reports less).
    fn is_netperf2(&self) -> bool {
        false
    }
    /// Learn the netserver's CPU count and meter rate if the hello did not
    /// say them (netperf 2.7's CPU_CALIBRATE, for REM_CPU).
    fn calibrate(&mut self) -> Result<()> {
        Ok(())
    }
    /// The data path's conventions of this dialect.
    fn conventions(&self) -> engine::conventions::Conventions;
}

/// This suite's own control protocol.
#[derive(Debug)]
pub struct Native {
    ctl: ControlStream,
    peer: SocketAddr,
    local: SocketAddr,
}

fn describe(e: ControlError, peer: SocketAddr) -> anyhow::Error {
    match e {
        ControlError::Timeout(what, d) => {
            anyhow!("no {what} from {peer} within {} s", d.as_secs_f64().round())
        }
        ControlError::Closed => anyhow!("netserver at {peer} closed the control connection"),
        ControlError::Io(e) => anyhow!("control connection to {peer}: {e}"),
        ControlError::Proto(e) => anyhow!("control connection to {peer}: {e}"),
        ControlError::Session(ClientError::Server(m)) if m.code == proto::ErrorCode::Busy => {
            anyhow::Error::new(Busy(m.message))
        }
        ControlError::Session(e) => anyhow!("{e}"),
        ControlError::Netperf2 => anyhow!("the netserver at {peer} speaks netperf 2.7's protocol"),
    }
}

/// The outcome of our hello: our protocol, or netperf 2.7's (the stream
/// and what of its answer arrived), or a close without a word.
enum Hello {
    Native(Box<Native>),
    Netperf2(TcpStream, Vec<u8>),
    Closed,
}

impl Native {
    /// Say hello over a connected control stream.
    pub fn handshake(stream: TcpStream, key: Option<&Key>, optional: bool) -> Result<Native> {
        match Native::hello(stream, key, optional)? {
            Hello::Native(n) => Ok(*n),
            Hello::Netperf2(s, _) => bail!(
                "{} answered in netperf 2.7's protocol: it is netperf 2.7's netserver",
                s.peer_addr()
                    .map_or_else(|_| "the netserver".into(), |a| a.to_string())
            ),
            Hello::Closed => bail!("the netserver closed the control connection at our hello"),
        }
    }

    /// Say hello, and learn which protocol the netserver speaks.
    fn hello(stream: TcpStream, key: Option<&Key>, optional: bool) -> Result<Hello> {
        let peer = stream.peer_addr()?;
        let local = stream.local_addr()?;
        let _ = stream.set_nodelay(true);
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| anyhow!("no secure random numbers: {e}"))?;
        let auth = key.map(|k| Box::new(k.clone()) as Box<dyn proto::Authenticator>);
        let mut session = ClientSession::new(auth, nonce);
        if optional {
            session = session.auth_optional();
        }
        let core = ClientConn::new(session, &software(), Instant::now(), HELLO_TIMEOUT)
            .map_err(|e| describe(e.into(), peer))?;
        let mut ctl = ControlStream::new(stream, core);
        match ctl.next_event() {
            Ok(ClientEvent::Established) => {}
            Err(ControlError::Netperf2) => {
                let (s, rest) = ctl.into_parts();
                return Ok(Hello::Netperf2(s, rest));
            }
            Err(ControlError::Closed) => return Ok(Hello::Closed),
            Err(ControlError::Timeout(..) | ControlError::Proto(ProtoError::Malformed(_))) => {
                bail!(
                    "{peer} does not answer in this suite's control protocol (is it netperf 2.7's netserver, or another service?)"
                )
            }
            Err(e) => return Err(describe(e, peer)),
            Ok(other) => bail!("unexpected {other:?} from {peer} during hello"),
        }
        if key.is_some() && ctl.session().auth_nonces().is_none() && debug() {
            eprintln!(
                "netperf: -Z: the netserver at {peer} asks for no passphrase; running without one, as netperf 2.7 does"
            );
        }
        Ok(Hello::Native(Box::new(Native { ctl, peer, local })))
    }
}

impl Dialect for Native {
    fn conventions(&self) -> engine::conventions::Conventions {
        let mut conv = engine::conventions::Conventions::NATIVE;
        // a netserver of this suite from before it closed TCP_CRR's
        // connections first waits for ours to close
        if !self.can("crr-server-closes") {
            conv.crr_closer = engine::conventions::Closer::Requester;
        }
        conv
    }

    fn server_cpu(&self) -> (u32, u32) {
        self.ctl.session().server_cpu()
    }

    fn server_software(&self) -> &str {
        self.ctl.session().server_software()
    }

    fn can(&self, capability: &str) -> bool {
        self.ctl.session().server_can(capability)
    }

    fn server_said(&mut self, wait: Duration) -> Option<String> {
        self.ctl.server_error_within(wait).map(|m| m.message)
    }

    fn peer(&self) -> SocketAddr {
        self.peer
    }

    fn local(&self) -> SocketAddr {
        self.local
    }

    fn setup(&mut self, spec: &TestSpec) -> Result<Grant> {
        self.ctl
            .core()
            .setup(spec.clone(), Instant::now(), SETUP_TIMEOUT)
            .map_err(|e| describe(e.into(), self.peer))?;
        match self.ctl.next_event().map_err(|e| describe(e, self.peer))? {
            ClientEvent::Granted(g) => Ok(g),
            other => bail!("unexpected {other:?} in answer to a test request"),
        }
    }

    fn finish(&mut self, done: ClientDone, wait: Duration) -> Result<SideResults> {
        self.ctl
            .core()
            .done(done, Instant::now(), wait)
            .map_err(|e| describe(e.into(), self.peer))?;
        match self.ctl.next_event().map_err(|e| describe(e, self.peer))? {
            ClientEvent::Results(r) => {
                crate::family::got_results(&r);
                Ok(*r)
            }
            other => bail!("unexpected {other:?} instead of results"),
        }
    }

    fn bye(&mut self) {
        self.ctl.core().bye();
        let _ = self.ctl.flush();
    }
}

/// The netserver turned us away for now.
#[derive(Debug, thiserror::Error)]
#[error("netserver: {0}")]
pub struct Busy(String);

pub fn software() -> String {
    format!("rsnetperf netperf {}", env!("CARGO_PKG_VERSION"))
}

/// An established control conversation, and the embedded netserver behind
/// it when there was none to talk to.
pub struct Connection {
    pub dialect: Box<dyn Dialect>,
    pub embedded: Option<netserver::Embedded>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.dialect.peer())
            .field("embedded", &self.embedded.is_some())
            .finish()
    }
}

/// Resolve `-H`, connect, say hello. When the target is a loopback address
/// and nothing listens there, start a netserver in this process and say so
/// on stderr: with no `-H`, or with `-H` naming loopback and the default
/// control port. Naming both a loopback host and a port (`-H 127.0.0.1 -p 9`)
/// asks for that netserver, and a refusal stays an error.
pub fn connect(plan: &Plan) -> Result<Connection> {
    let key = plan.auth.as_ref().map(|a| a.load()).transpose()?;
    let host = plan.host_name().to_string();
    let addrs: Vec<SocketAddr> = (host.as_str(), plan.port)
        .to_socket_addrs()
        .with_context(|| format!("-H: cannot resolve host '{host}'"))?
        // `-H host,fam`, `-4`/`-6`, or else `-L host,fam`'s family
        .filter(|a| match (plan.family, plan.local_family) {
            (AddrFamily::Unspec, AddrFamily::Unspec) => true,
            (AddrFamily::V4, _) | (AddrFamily::Unspec, AddrFamily::V4) => a.is_ipv4(),
            (AddrFamily::V6, _) | (AddrFamily::Unspec, AddrFamily::V6) => a.is_ipv6(),
        })
        .collect();
    if addrs.is_empty() {
        bail!("-H: host '{host}' has no address of the requested family");
    }
    crate::debug::line(1, || format!("{host} port {} is {addrs:?}", plan.port));
    let mut last: Option<(SocketAddr, io::Error)> = None;
    for addr in &addrs {
        match connect_one(*addr, plan) {
            Ok(stream) => {
                crate::debug::line(1, || {
                    format!(
                        "control connection from {} to {addr}",
                        stream
                            .local_addr()
                            .map_or_else(|_| "?".into(), |a| a.to_string())
                    )
                });
                return Ok(Connection {
                    dialect: open(stream, *addr, plan, key.as_ref())?,
                    embedded: None,
                });
            }
            Err(e) => last = Some((*addr, e)),
        }
    }
    let Some((addr, err)) = last else {
        bail!("-H: no address to connect to for '{host}'");
    };
    if err.kind() == io::ErrorKind::ConnectionRefused
        && addr.ip().is_loopback()
        && (plan.host.is_none() || plan.port == crate::cli::DEFAULT_PORT)
    {
        let ip = addr.ip();
        let embedded = netserver::spawn_embedded(ip, key.clone())
            .context("cannot start an embedded netserver")?;
        eprintln!(
            "netperf: no netserver on {host} port {}; started an embedded netserver in this process on {}",
            plan.port,
            embedded.addr()
        );
        let stream = connect_one(embedded.addr(), plan).with_context(|| {
            format!(
                "cannot connect to the embedded netserver at {}",
                embedded.addr()
            )
        })?;
        return Ok(Connection {
            dialect: Box::new(Native::handshake(
                stream,
                key.as_ref(),
                optional_auth(plan),
            )?),
            embedded: Some(embedded),
        });
    }
    Err(Unreachable {
        host,
        port: plan.port,
        addr,
        err,
        local: plan.local_host.clone().unwrap_or_else(|| {
            if plan.family == AddrFamily::V6 {
                "::0".into()
            } else {
                "0.0.0.0".into()
            }
        }),
        local_port: plan.local_port.unwrap_or(0),
        local_family: match (plan.local_family, plan.family) {
            (AddrFamily::V4, _) | (AddrFamily::Unspec, AddrFamily::V4) => "AF_INET",
            (AddrFamily::V6, _) | (AddrFamily::Unspec, AddrFamily::V6) => "AF_INET6",
            (AddrFamily::Unspec, AddrFamily::Unspec) => "AF_UNSPEC",
        },
    }
    .into())
}

/// No netserver answered at the address netperf was given.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot connect to netserver at {host} port {port} ({addr}): {err}{hint}",
    hint = if err.kind() == io::ErrorKind::ConnectionRefused { "; is netserver running there?" } else { "" }
)]
pub struct Unreachable {
    pub host: String,
    pub port: u16,
    pub addr: SocketAddr,
    pub err: io::Error,
    pub local: String,
    pub local_port: u16,
    pub local_family: &'static str,
}

impl Unreachable {
    /// The two lines netperf 2.7 prints on stdout, which scripts look for.
    pub fn netperf_lines(&self) -> String {
        format!(
            "establish control: are you sure there is a netserver listening on {} at port {}?\n\
             establish_control could not establish the control connection from {} port {} address family {} to {} port {} address family {}\n",
            self.host,
            self.port,
            self.local,
            self.local_port,
            self.local_family,
            self.host,
            self.port,
            if self.addr.is_ipv4() {
                "AF_INET"
            } else {
                "AF_INET6"
            }
        )
    }
}

/// Whether `-d` was given (debug lines on stderr).
fn debug() -> bool {
    crate::debug::level() > 0
}

/// netperf 2.7's `-Z` runs against a netserver that asks for no passphrase;
/// our `--key-file` insists on authentication.
fn optional_auth(plan: &Plan) -> bool {
    matches!(plan.auth, Some(crate::cli::AuthSource::Passphrase(_)))
}

/// Say hello in the protocol the netserver speaks (`--dialect`, or found
/// out from its answer); while it says it is busy, try again for a while.
fn open(
    stream: TcpStream,
    addr: SocketAddr,
    plan: &Plan,
    key: Option<&Key>,
) -> Result<Box<dyn Dialect>> {
    let passphrase = match &plan.auth {
        Some(crate::cli::AuthSource::Passphrase(p)) => Some(p.as_str()),
        _ => None,
    };
    if plan.dialect == DialectChoice::Netperf2 {
        return Ok(Box::new(Netperf2::new(stream, &[], passphrase)?));
    }
    let give_up = std::time::Instant::now() + BUSY_RETRY;
    let mut stream = stream;
    let reconnect = || {
        connect_one(addr, plan).with_context(|| format!("cannot connect to netserver at {addr}"))
    };
    loop {
        match Native::hello(stream, key, optional_auth(plan)) {
            Ok(Hello::Native(n)) => return Ok(n),
            Ok(Hello::Netperf2(s, rest)) => {
                if plan.dialect == DialectChoice::Native {
                    bail!(
                        "--dialect native: the netserver at {addr} is netperf 2.7's (it answered in its own protocol)"
                    );
                }
                crate::debug::line(1, || {
                    format!("{addr} is netperf 2.7's netserver: speaking its protocol")
                });
                // a netserver 2.7 without -Z ignores passphrases: none needed
                return Ok(Box::new(Netperf2::new(s, &rest, None)?));
            }
            Ok(Hello::Closed) => {
                // netserver 2.7 started with -Z closes without a word on
                // any first frame but its passphrase
                if let (Some(p), DialectChoice::Auto) = (passphrase, plan.dialect) {
                    crate::debug::line(1, || {
                        format!("{addr} closed at our hello: trying netperf 2.7's protocol with -Z")
                    });
                    return Ok(Box::new(Netperf2::new(reconnect()?, &[], Some(p))?));
                }
                bail!(
                    "netserver at {addr} closed the control connection without a word (netperf 2.7's netserver does so when it was started with -Z: give netperf -Z with its passphrase)"
                );
            }
            Err(e) if e.is::<Busy>() && std::time::Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(100));
                stream = reconnect()?;
            }
            Err(e) => return Err(e),
        }
    }
}

fn connect_one(addr: SocketAddr, plan: &Plan) -> io::Result<TcpStream> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, None)?;
    if plan.local_host.is_some() || plan.local_port.is_some() {
        let ip = match &plan.local_host {
            Some(h) => (h.as_str(), 0)
                .to_socket_addrs()?
                .map(|a| a.ip())
                .find(|ip| ip.is_ipv4() == addr.is_ipv4())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("-L {h}: no address of the control connection's family"),
                    )
                })?,
            None if addr.is_ipv4() => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let _ = sock.set_reuse_address(true);
        sock.bind(&SocketAddr::new(ip, plan.local_port.unwrap_or(0)).into())?;
    }
    sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)?;
    Ok(sock.into())
}
