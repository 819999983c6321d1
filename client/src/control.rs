//! The control connection: one [`Control`] whatever the netserver
//! speaks. The protocol core ([`proto::conn::ClientConn`]) holds the
//! dialect as a value (ours, or netperf 2.7's 656-byte frames, found out
//! from the netserver's answer to our hello); this file moves its bytes
//! (through [`engine::control::ControlStream`]), connects, and starts the
//! embedded netserver when none answers on loopback.

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
    Capabilities, ClientDone, ClientError, ClientEvent, ClientSession, Grant, ProtoError,
    SideResults, TestSpec,
    conn::{ClientConn, Speak},
};
use socket2::{Domain, Socket, Type};

use crate::plan::{DialectChoice, Plan};

/// How long we wait for the netserver's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long we keep trying a netserver that says it is busy (a script's
/// previous runs may still be closing their sessions).
const BUSY_RETRY: Duration = Duration::from_secs(3);
/// How long we wait for a setup reply (the server binds a socket); netperf
/// 2.7 waits 120 s.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// netperf 2.7 waits this long for CPU_CALIBRATE's answer.
const CALIBRATE_WAIT: Duration = Duration::from_secs(160);

/// A control conversation with a netserver, whichever protocol it speaks.
#[derive(Debug)]
pub struct Control {
    ctl: ControlStream,
    peer: SocketAddr,
    local: SocketAddr,
    /// A test was asked on this conversation.
    tested: bool,
}

/// The netserver's own word on why a conversation ended, or that it
/// closed without one: an error that needs no other beside it.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// It turns us away for now.
    #[error("netserver: {0}")]
    Busy(String),
    /// It refused or failed what was asked, and said why.
    #[error("netserver: {0}")]
    Said(String),
    /// netperf 2.7's netserver said why with an errno ("remote error N").
    #[error("netserver at {0}: {1}")]
    Errno(SocketAddr, String),
    #[error("netserver at {0} closed the control connection without saying why")]
    Closed(SocketAddr),
}

/// A control connection's failure, worded for the user; what the
/// netserver said is a [`ServerError`]. `netperf2`: the peer speaks
/// netperf 2.7's protocol.
fn describe(e: ControlError, peer: SocketAddr, netperf2: bool) -> anyhow::Error {
    match e {
        ControlError::Timeout(what, d) => {
            anyhow!("no {what} from {peer} within {} s", d.as_secs_f64().round())
        }
        ControlError::Closed => ServerError::Closed(peer).into(),
        ControlError::Io(e) => anyhow!("control connection to {peer}: {e}"),
        ControlError::Proto(e) => anyhow!("control connection to {peer}: {e}"),
        ControlError::Session(ClientError::Server(m)) => match (m.code, netperf2) {
            (proto::ErrorCode::Busy, _) => ServerError::Busy(m.message),
            (_, true) => ServerError::Errno(peer, m.message),
            (_, false) => ServerError::Said(m.message),
        }
        .into(),
        ControlError::Session(e) => anyhow!("{e}"),
        ControlError::Netperf2 => anyhow!(
            "--dialect native: the netserver at {peer} is netperf 2.7's (it answered in its own protocol)"
        ),
    }
}

/// What became of our hello.
enum Hello {
    Up(Box<Control>),
    /// Closed without a word: netserver 2.7 with `-Z` does so.
    Closed,
}

impl Control {
    /// Say hello over a connected control stream, in our protocol (or
    /// netperf 2.7's, when the netserver answers in it and `speak` lets us).
    ///
    /// `token`: the public part of the token `key` is (`--token`, or `-Z`
    /// given one), named in the hello.
    fn hello(
        stream: TcpStream,
        (key, token): (Option<&Key>, Option<&str>),
        optional: bool,
        speak: Speak,
    ) -> Result<Hello> {
        let peer = stream.peer_addr()?;
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| anyhow!("no secure random numbers: {e}"))?;
        let auth = key.map(|k| Box::new(k.clone()) as Box<dyn proto::Authenticator>);
        let mut session = ClientSession::new(auth, nonce);
        if optional {
            session = session.auth_optional();
        }
        if let Some(t) = token {
            session = session.with_token(t);
        }
        let core = ClientConn::new(session, &software(), Instant::now(), HELLO_TIMEOUT, speak)
            .map_err(|e| describe(e.into(), peer, false))?;
        let c = Control::over(stream, core)?;
        c.established(
            key,
            "in this suite's control protocol (is it netperf 2.7's netserver, or another service?)",
        )
    }

    /// iperf3's conversation (`--iperf3`): our cookie, made of a new
    /// token, which the test's streams present too; established at the
    /// server's PARAM_EXCHANGE.
    fn iperf3(stream: TcpStream) -> Result<Hello> {
        let peer = stream.peer_addr()?;
        let token = engine::handshake::new_token()?;
        let core = ClientConn::iperf3(
            token,
            peer.port(),
            &software(),
            Instant::now(),
            HELLO_TIMEOUT,
        );
        let c = Control::over(stream, core)?;
        match c.established(None, "as an iperf3 server (is iperf3 -s listening there?)")? {
            Hello::Closed => bail!(
                "{peer} closed the control connection at our cookie without a word (is it an iperf3 server?)"
            ),
            up => Ok(up),
        }
    }

    /// netperf 2.7's protocol from the first frame (`--dialect netperf2`,
    /// or a netserver 2.7 that wants `-Z`'s passphrase first).
    fn netperf2(stream: TcpStream, passphrase: Option<&str>) -> Result<Control> {
        Control::over(stream, ClientConn::netperf2(passphrase))
    }

    fn over(stream: TcpStream, core: ClientConn) -> Result<Control> {
        let peer = stream.peer_addr()?;
        let local = stream.local_addr()?;
        let _ = stream.set_nodelay(true);
        Ok(Control {
            ctl: ControlStream::new(stream, core),
            peer,
            local,
            tested: false,
        })
    }

    /// Wait for the hello to be answered; `expected`: how the server
    /// should have answered, for the error when it did not.
    fn established(mut self, key: Option<&Key>, expected: &str) -> Result<Hello> {
        let peer = self.peer;
        match self.ctl.next_event() {
            Ok(ClientEvent::Established) => {}
            Err(ControlError::Closed) => return Ok(Hello::Closed),
            Err(ControlError::Timeout(..) | ControlError::Proto(ProtoError::Malformed(_))) => {
                bail!("{peer} does not answer {expected}")
            }
            Err(e) => return Err(self.describe(e)),
            Ok(other) => bail!("unexpected {other:?} from {peer} during hello"),
        }
        crate::debug::line(1, || {
            format!(
                "{peer} is {} ({:?})",
                self.caps().software,
                self.caps().dialect
            )
        });
        if key.is_some() && !self.ctl.peer().authenticated() && debug() {
            eprintln!(
                "netperf: -Z: the netserver at {peer} asks for no passphrase; running without one, as netperf 2.7 does"
            );
        }
        Ok(Hello::Up(Box::new(self)))
    }

    fn describe(&self, e: ControlError) -> anyhow::Error {
        describe(
            e,
            self.peer,
            self.caps().dialect == proto::dialect::Dialect::Netperf2,
        )
    }

    /// What the netserver can do and tells.
    pub fn caps(&self) -> &Capabilities {
        self.ctl.peer().capabilities()
    }

    /// The data path's conventions with this netserver.
    pub fn conventions(&self) -> engine::conventions::Conventions {
        engine::conventions::Conventions::with(self.caps())
    }

    /// The netserver's CPU count and CPU meter rate (REM_CPU).
    pub fn server_cpu(&self) -> (u32, u32) {
        self.ctl.peer().server_cpu()
    }

    /// The netserver's control address; data connections go to its IP.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Our end of the control connection.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// After our data path failed: what the netserver said, if it said why
    /// within `wait`.
    pub fn server_said(&mut self, wait: Duration) -> Option<String> {
        self.ctl.server_error_within(wait).map(|m| m.message)
    }

    /// Ready for the plan's next test: where the server runs one test a
    /// connection (an iperf3 server) and this one has run its test, a new
    /// conversation with it, on a new connection.
    pub fn ready(&mut self, plan: &Plan) -> Result<()> {
        if !(self.tested && self.caps().one_test) {
            return Ok(());
        }
        self.bye();
        let key = plan.auth.as_ref().map(|a| a.load()).transpose()?;
        // (iperf3 -s listens again a moment after its test)
        let give_up = Instant::now() + BUSY_RETRY;
        let stream = loop {
            match connect_one(self.peer, plan) {
                Ok(s) => break s,
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused && Instant::now() < give_up =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(
                        anyhow!(e).context(format!("cannot connect again to {}", self.peer))
                    );
                }
            }
        };
        *self = open(stream, self.peer, plan, key.as_ref())?;
        Ok(())
    }

    /// Our data connections are up: where the server says when the data
    /// phase begins (iperf3's TEST_START, TEST_RUNNING), wait for it.
    pub fn start(&mut self) -> Result<()> {
        if !self.ctl.core().start(Instant::now(), SETUP_TIMEOUT) {
            return Ok(());
        }
        match self.ctl.next_event().map_err(|e| self.describe(e))? {
            ClientEvent::Started => Ok(()),
            other => bail!("unexpected {other:?} instead of the start of the test"),
        }
    }

    /// Tell the server now that the test is over, where it sends until
    /// told (a receiving client's time is up); nothing for the others.
    pub fn tell_end(&mut self) -> Result<()> {
        self.ctl.core().tell_end();
        self.ctl.flush().map_err(|e| self.describe(e))
    }

    /// Ask for a test; the server prepares its data sockets.
    pub fn setup(&mut self, spec: &TestSpec) -> Result<Grant> {
        self.tested = true;
        self.ctl
            .core()
            .setup(spec.clone(), Instant::now(), SETUP_TIMEOUT)
            .map_err(|e| self.describe(e.into()))?;
        loop {
            match self.ctl.next_event().map_err(|e| self.describe(e))? {
                ClientEvent::Granted(g) => return Ok(g),
                ClientEvent::Queued { ahead, limit_secs } => eprintln!(
                    "netperf: the netserver runs one client host's tests at a time (--schedule exclusive): {ahead} {} ahead of this one; waiting at most {limit_secs} s for its turn",
                    if ahead == 1 {
                        "host's turn"
                    } else {
                        "hosts' turns"
                    }
                ),
                other => bail!("unexpected {other:?} in answer to a test request"),
            }
        }
    }

    /// Ask the netserver (a `--fleet` one) to run a test as netperf
    /// against another netserver (`netperf mesh`); its JSON document,
    /// waiting at most `wait`.
    pub fn third_party(&mut self, req: proto::ThirdParty, wait: Duration) -> Result<String> {
        self.tested = true;
        self.ctl
            .core()
            .third_party(req, Instant::now(), wait)
            .map_err(|e| self.describe(e.into()))?;
        match self.ctl.next_event().map_err(|e| self.describe(e))? {
            ClientEvent::ThirdParty(json) => Ok(json),
            other => bail!("unexpected {other:?} in answer to a third-party request"),
        }
    }

    /// Our data phase is over: report it (`ours`: what our side counted,
    /// for a server whose results exchange carries both sides') and
    /// collect the server's counters, waiting at most `wait`.
    pub fn finish(
        &mut self,
        done: ClientDone,
        ours: &SideResults,
        wait: Duration,
    ) -> Result<SideResults> {
        self.ctl.core().our_results(ours);
        self.ctl
            .core()
            .done(done, Instant::now(), wait)
            .map_err(|e| self.describe(e.into()))?;
        match self.ctl.next_event().map_err(|e| self.describe(e))? {
            ClientEvent::Results(r) => {
                crate::debug::got_results(&r);
                Ok(*r)
            }
            other => bail!("unexpected {other:?} instead of results"),
        }
    }

    /// The netserver's interim reports of the test just finished (a
    /// netserver that names `interim`, asked with `interim_ms`).
    pub fn take_interims(&mut self) -> Vec<proto::InterimReport> {
        self.ctl.core().take_interims()
    }

    /// The netserver's host facts told with the test just finished (a
    /// netserver that names `facts`).
    pub fn take_facts(&mut self) -> Option<Box<proto::facts::HostFacts>> {
        self.ctl.core().take_facts()
    }

    /// Learn the netserver's CPU count and meter rate if the hello did not
    /// say them (netperf 2.7's CPU_CALIBRATE, for REM_CPU).
    pub fn calibrate(&mut self) -> Result<()> {
        if !self.ctl.core().calibrate(Instant::now(), CALIBRATE_WAIT) {
            return Ok(());
        }
        match self.ctl.next_event().map_err(|e| self.describe(e))? {
            ClientEvent::Calibrated => Ok(()),
            other => bail!("unexpected {other:?} instead of the CPU calibration"),
        }
    }

    /// Tell the netserver what we made of the test just finished (one
    /// that names `summary`, for its `--record`; nothing answers). A
    /// failure to send is the next request's to report.
    pub fn summary(&mut self, summary: proto::ClientSummary) {
        self.ctl.core().summary(summary);
        let _ = self.ctl.flush();
    }

    /// End the conversation politely.
    pub fn bye(&mut self) {
        self.ctl.close();
    }
}

pub fn software() -> String {
    format!("rsnetperf netperf {}", env!("CARGO_PKG_VERSION"))
}

/// An established control conversation, and the embedded netserver behind
/// it when there was none to talk to.
#[derive(Debug)]
pub struct Connection {
    pub control: Control,
    pub embedded: Option<Box<dyn EmbeddedServer>>,
}

/// A netserver running in this process (it stops when dropped). The
/// client library knows no netserver: the program that embeds one (the
/// `netperf` binary) hands a starter to [`set_embedder`]; a library user
/// that sets none (netserver's third-party tests) never starts one.
pub trait EmbeddedServer: Send + std::fmt::Debug {
    /// The control address it listens on.
    fn addr(&self) -> SocketAddr;
}

/// Starts a netserver in this process on an ephemeral port of a loopback
/// address, requiring the key if one is given.
pub type Embedder = fn(IpAddr, Option<Key>) -> io::Result<Box<dyn EmbeddedServer>>;

static EMBEDDER: std::sync::OnceLock<Embedder> = std::sync::OnceLock::new();

/// Let [`connect`] start a netserver in this process when none answers on
/// loopback (the first starter given stays).
pub fn set_embedder(start: Embedder) {
    let _ = EMBEDDER.set(start);
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
                    control: open(stream, *addr, plan, key.as_ref())?,
                    embedded: None,
                });
            }
            Err(e) => last = Some((*addr, e)),
        }
    }
    let Some((addr, err)) = last else {
        bail!("-H: no address to connect to for '{host}'");
    };
    let may_embed = err.kind() == io::ErrorKind::ConnectionRefused
        && addr.ip().is_loopback()
        && plan.dialect.embeddable()
        && (plan.host.is_none() || plan.port == crate::plan::DEFAULT_PORT);
    if let (true, Some(start)) = (may_embed, EMBEDDER.get()) {
        let ip = addr.ip();
        let embedded = start(ip, key.clone()).context("cannot start an embedded netserver")?;
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
        // (the embedded netserver's key is ours, the token itself)
        let control = match Control::hello(
            stream,
            (key.as_ref(), None),
            optional_auth(plan),
            Speak::Ours,
        )? {
            Hello::Up(c) => *c,
            Hello::Closed => {
                bail!("the embedded netserver closed the control connection at our hello")
            }
        };
        return Ok(Connection {
            control,
            embedded: Some(embedded),
        });
    }
    Err(Unreachable {
        server: plan.dialect.server(),
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
    "cannot connect to {server} at {host} port {port} ({addr}): {err}{hint}",
    hint = if err.kind() == io::ErrorKind::ConnectionRefused { format!("; is {server} running there?") } else { String::new() }
)]
pub struct Unreachable {
    /// What should be listening there (netserver, iperf3 -s).
    pub server: &'static str,
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

/// Whether `-d` was given.
fn debug() -> bool {
    crate::debug::level() > 0
}

/// netperf 2.7's `-Z` runs against a netserver that asks for no passphrase;
/// our `--key-file` insists on authentication.
fn optional_auth(plan: &Plan) -> bool {
    matches!(plan.auth, Some(crate::plan::AuthSource::Passphrase(_)))
}

/// Say hello in the protocol the netserver speaks (`--dialect`, or found
/// out from its answer); while it says it is busy, try again for a while.
fn open(stream: TcpStream, addr: SocketAddr, plan: &Plan, key: Option<&Key>) -> Result<Control> {
    let passphrase = match &plan.auth {
        Some(crate::plan::AuthSource::Passphrase(p)) => Some(p.as_str()),
        _ => None,
    };
    let speak = match plan.dialect {
        DialectChoice::Netperf2 => return Control::netperf2(stream, passphrase),
        DialectChoice::Native => Speak::Ours,
        DialectChoice::Auto | DialectChoice::Iperf3 => Speak::Either,
    };
    let give_up = std::time::Instant::now() + BUSY_RETRY;
    let mut stream = stream;
    let reconnect = || {
        connect_one(addr, plan).with_context(|| format!("cannot connect to netserver at {addr}"))
    };
    loop {
        let token = passphrase.and_then(engine::token::split).map(|(p, _)| p);
        let said = match plan.dialect {
            DialectChoice::Iperf3 => Control::iperf3(stream),
            _ => Control::hello(stream, (key, token), optional_auth(plan), speak),
        };
        match said {
            Ok(Hello::Up(c)) => return Ok(*c),
            Ok(Hello::Closed) => {
                // netserver 2.7 started with -Z closes without a word on
                // any first frame but its passphrase
                if let (Some(p), DialectChoice::Auto) = (passphrase, plan.dialect) {
                    crate::debug::line(1, || {
                        format!("{addr} closed at our hello: trying netperf 2.7's protocol with -Z")
                    });
                    return Control::netperf2(reconnect()?, Some(p));
                }
                bail!(
                    "netserver at {addr} closed the control connection at our hello without a word: ours always says why, but netperf 2.7's netserver closes so when it was started with -Z (give netperf -Z with its passphrase)"
                );
            }
            Err(e)
                if matches!(e.downcast_ref(), Some(ServerError::Busy(_)))
                    && std::time::Instant::now() < give_up =>
            {
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
