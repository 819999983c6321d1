//! Every control message, one enum per direction.
//!
//! The conversation on one control connection:
//!
//! ```text
//! netperf                                   netserver
//!   Hello{magic, version, software}  ->
//!                                    <-  Hello{magic, version, software, challenge?}
//!   Auth{nonce, proof}               ->                      (only with a key)
//!                                    <-  AuthOk{proof}
//!   -- then, once per test (each confidence iteration is a test) --
//!   Setup(TestSpec)                  ->
//!                                    <-  Ready(Grant)   or  Error
//!   ... data connections open, present Grant.token, carry the test ...
//!   Done(ClientDone)                 ->
//!                                    <-  Results(SideResults)  or  Error
//!   --
//!   ThirdParty{host, port, test}     ->      (a `fleet` server, keyed)
//!                                    <-  ThirdPartyPart(json)...
//!                                    <-  ThirdPartyResult(json)  or  Error
//!   Bye                              ->
//! ```
//!
//! Hello messages are the first variant of each enum and their leading fields
//! never change, so any two versions can tell each other that they differ.

use serde::{Deserialize, Serialize};

use crate::{
    codec,
    error::ProtoError,
    frame,
    test::{
        ClientDone, ClientSummary, FlowCounters, ForeignConnections, Grant, InterimReport, Paths,
        RxFigures, SideResults, TestSpec, Tuning, Window,
    },
};

/// The version of this control protocol. Peers of different versions refuse
/// each other at hello, with both versions in the error.
pub const PROTOCOL_VERSION: u32 = 3;

/// First bytes of every hello: tells our protocol from anything else that
/// might answer on port 12865 (such as netperf 2.7's netserver).
pub const MAGIC: [u8; 8] = *b"rsnetprf";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub magic: [u8; 8],
    pub protocol: u32,
    /// Name and version of the sending program, for error messages and logs.
    pub software: String,
    /// What this end can do beyond the protocol version's baseline (see
    /// doc/protocol.md, "Adding an option"): a peer uses a feature only if
    /// the other end names it here.
    pub capabilities: Vec<String>,
}

/// The capabilities this build announces.
pub const CAPABILITIES: &[&str] = &[
    "flows",
    "window",
    "crr-server-closes",
    "tuning",
    "foreign",
    "shared-port",
    "interim",
    "summary",
    "paths",
    "queue",
    "stamps",
    "facts",
    "ecn",
];

impl Hello {
    pub fn new(software: impl Into<String>) -> Hello {
        Hello {
            magic: MAGIC,
            protocol: PROTOCOL_VERSION,
            software: software.into(),
            capabilities: CAPABILITIES.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// Whether the peer that sent this hello can do `capability`.
    pub fn can(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// Check the peer's hello: magic first, then version.
    pub fn check(&self) -> Result<(), ProtoError> {
        if self.magic != MAGIC {
            return Err(ProtoError::NotOurProtocol);
        }
        if self.protocol != PROTOCOL_VERSION {
            return Err(ProtoError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: self.protocol,
                peer_software: self.software.clone(),
            });
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ServerHello {
    pub hello: Hello,
    /// Present when the server requires authentication: its nonce.
    pub challenge: Option<[u8; 32]>,
    /// CPUs the server counts, and the rate of its CPU meter (netperf's
    /// REM_CPU test prints these).
    pub num_cpus: u32,
    pub cpu_rate: u32,
}

/// netperf to netserver.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum ClientMsg {
    Hello(Hello),
    /// Answer to the server's challenge: our nonce and our proof.
    Auth {
        nonce: [u8; 32],
        proof: [u8; 32],
    },
    Setup(Box<TestSpec>),
    Done(ClientDone),
    Bye,
    /// A test with a window (`--warmup`/`--cooldown`): sent only to a
    /// server whose hello names `window`.
    SetupWindowed(Box<TestSpec>, Window),
    /// A test with settings beyond `Setup`'s (UDP_STREAM's `--batch` and
    /// `--gso`, and the window): sent only to a server whose hello names
    /// `tuning`.
    SetupTuned(Box<TestSpec>, Tuning),
    /// What netperf made of the test whose results it just received: sent
    /// only to a server whose hello names `summary`, between tests.
    Summary(Box<ClientSummary>),
    /// A test whose data path's calls are not netperf's (`--rx-zerocopy`,
    /// `--rx-discard`, `--io-uring`), with `SetupTuned`'s settings: sent
    /// only to a server whose hello names `paths`.
    SetupPaths(Box<TestSpec>, Tuning, Paths),
    /// Run a test as netperf against another netserver and answer with
    /// the run's JSON document (a third-party test, for meshes): sent
    /// only to a server whose hello names `fleet`, on a conversation that
    /// proved the key.
    ThirdParty(Box<ThirdParty>),
    /// A test that marks or counts ECN codepoints (`--ecn`), with
    /// `SetupPaths`'s settings: sent only to a server whose hello names
    /// `ecn`.
    SetupEcn(Box<TestSpec>, Tuning, Paths, crate::ecn::EcnAsk),
}

/// A third-party test: the netserver that receives it runs netperf's
/// test, as a client, against the netserver at `host`:`port`, proving
/// the same key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ThirdParty {
    /// The other netserver (a name or an address).
    pub host: String,
    /// Its control port.
    pub port: u16,
    pub test: ThirdPartyTest,
}

/// What a third-party test may ask, typed: a test between the two
/// netservers, its length and iterations, and the shape of its traffic,
/// each as netperf's option of the same name means it. Nothing in it can
/// name a file, an address, a port or a key of either host, or choose an
/// output: the answer is the run's JSON document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ThirdPartyTest {
    /// `-t`.
    pub test: ThirdPartyKind,
    /// `-l`: seconds, or (negative on netperf's command line) a count of
    /// bytes or transactions.
    pub length: ThirdPartyLength,
    /// `-i MAX,MIN` and `-I LEVEL,WIDTH`: a confidence run (each side
    /// of a pair as netperf's comma leaves it: given, or not).
    pub iterations: (Option<u32>, Option<u32>),
    pub confidence: (Option<f64>, Option<f64>),
    /// `-- -4` or `-- -6`: the data connections' family (else the
    /// other netserver's address's).
    pub ipv6: Option<bool>,
    /// `-- -m`, `-- -M`: netperf's send and receive sizes.
    pub send_size: Option<u32>,
    pub recv_size: Option<u32>,
    /// `-- -s SEND,RECV`, `-- -S SEND,RECV`: the socket buffers here and
    /// at the other netserver.
    pub local_bufs: (Option<u32>, Option<u32>),
    pub remote_bufs: (Option<u32>, Option<u32>),
    /// `-- -r REQUEST,RESPONSE`.
    pub rr_size: (Option<u32>, Option<u32>),
    /// `-- -b`, `-- -D`.
    pub burst: u32,
    pub nodelay: bool,
    /// `-- -K LOCAL,REMOTE`: the congestion control at each end.
    pub cong_control: (Option<String>, Option<String>),
    /// `-- --flows`, `-- --rate` (bits/s), `-- --one-way`,
    /// `-- --warmup`/`--cooldown`.
    pub flows: u32,
    pub rate_bps: Option<u64>,
    pub one_way: bool,
    pub window: Option<Window>,
}

impl Default for ThirdPartyTest {
    fn default() -> ThirdPartyTest {
        ThirdPartyTest {
            test: ThirdPartyKind::TcpStream,
            length: ThirdPartyLength::Seconds(10),
            iterations: (None, None),
            confidence: (None, None),
            ipv6: None,
            send_size: None,
            recv_size: None,
            local_bufs: (None, None),
            remote_bufs: (None, None),
            rr_size: (None, None),
            burst: 0,
            nodelay: false,
            cong_control: (None, None),
            flows: 1,
            rate_bps: None,
            one_way: false,
            window: None,
        }
    }
}

/// The tests a third-party test may be.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThirdPartyKind {
    TcpStream,
    TcpMaerts,
    UdpStream,
    TcpRr,
    UdpRr,
    TcpCrr,
    TcpCc,
    Rpm,
}

impl ThirdPartyKind {
    pub const ALL: [ThirdPartyKind; 8] = [
        ThirdPartyKind::TcpStream,
        ThirdPartyKind::TcpMaerts,
        ThirdPartyKind::UdpStream,
        ThirdPartyKind::TcpRr,
        ThirdPartyKind::UdpRr,
        ThirdPartyKind::TcpCrr,
        ThirdPartyKind::TcpCc,
        ThirdPartyKind::Rpm,
    ];

    /// netperf's name (`-t`).
    pub fn name(self) -> &'static str {
        match self {
            ThirdPartyKind::TcpStream => "TCP_STREAM",
            ThirdPartyKind::TcpMaerts => "TCP_MAERTS",
            ThirdPartyKind::UdpStream => "UDP_STREAM",
            ThirdPartyKind::TcpRr => "TCP_RR",
            ThirdPartyKind::UdpRr => "UDP_RR",
            ThirdPartyKind::TcpCrr => "TCP_CRR",
            ThirdPartyKind::TcpCc => "TCP_CC",
            ThirdPartyKind::Rpm => "RPM",
        }
    }

    /// From netperf's name, without regard to case.
    pub fn from_name(name: &str) -> Option<ThirdPartyKind> {
        ThirdPartyKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }
}

/// A third-party test's length (`-l`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThirdPartyLength {
    Seconds(u32),
    /// `-l -N`: bytes (a stream test) or transactions.
    Count(u64),
}

/// The longest a third-party test may ask to run: a day (its netserver's
/// own `--max-test-length` and policy bound it further).
pub const THIRD_PARTY_MAX_SECONDS: u32 = 86_400;
/// The most flows, iterations, and characters of a congestion control's
/// name, a third-party request carries.
pub const THIRD_PARTY_MAX_FLOWS: u32 = 65_536;
pub const THIRD_PARTY_MAX_ITERATIONS: u32 = 30;
pub const THIRD_PARTY_MAX_CC: usize = 16;
/// The fastest pace a third-party test asks (netperf's `--rate` reads
/// no more: 1 Pbit/s).
pub const THIRD_PARTY_MAX_RATE: u64 = 1_000_000_000_000_000;
/// Most bytes of a third-party test's JSON document, in all; it travels
/// in parts of at most [`THIRD_PARTY_PART`] bytes.
pub const THIRD_PARTY_MAX_RESULT: usize = 16 * 1024 * 1024;
pub const THIRD_PARTY_PART: usize = 32 * 1024;

impl ThirdParty {
    /// What is wrong with the request, before anything runs.
    pub fn check(&self) -> Result<(), String> {
        if self.host.is_empty() || self.host.len() > 255 {
            return Err("the other netserver's host name is empty or longer than 255 bytes".into());
        }
        // a name or an address: nothing an option parser would take for
        // an option or a second value
        if self.host.starts_with('-')
            || !self
                .host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:_%".contains(&b))
        {
            return Err("the other netserver's host is not a host name or an address".into());
        }
        if self.port == 0 {
            return Err("the other netserver's port is 0".into());
        }
        self.test.check()
    }
}

impl ThirdPartyTest {
    /// What is wrong with the test asked, before anything runs.
    pub fn check(&self) -> Result<(), String> {
        match self.length {
            ThirdPartyLength::Seconds(s) if s == 0 || s > THIRD_PARTY_MAX_SECONDS => {
                return Err(format!(
                    "-l {s}: a third-party test runs 1 to {THIRD_PARTY_MAX_SECONDS} s"
                ));
            }
            ThirdPartyLength::Count(0) => return Err("-l: a count of 0".into()),
            _ => {}
        }
        let (max, min) = self.iterations;
        if max
            .into_iter()
            .chain(min)
            .any(|n| n > THIRD_PARTY_MAX_ITERATIONS)
        {
            return Err(format!(
                "-i: at most {THIRD_PARTY_MAX_ITERATIONS} iterations"
            ));
        }
        let (level, width) = self.confidence;
        if level.is_some_and(|l| !(l.is_finite() && (0.0..=100.0).contains(&l)))
            || width.is_some_and(|w| !(w.is_finite() && w > 0.0 && w <= 100.0))
        {
            return Err("-I: a level of 0 to 100 and a width of 0 to 100%".into());
        }
        if self.flows == 0 || self.flows > THIRD_PARTY_MAX_FLOWS {
            return Err(format!(
                "--flows {}: 1 to {THIRD_PARTY_MAX_FLOWS}",
                self.flows
            ));
        }
        if let Some(r) = self.rate_bps
            && !(1..=THIRD_PARTY_MAX_RATE).contains(&r)
        {
            return Err(format!("--rate {r}: a rate between 1 bit/s and 1 Pbit/s"));
        }
        let (l, r) = &self.cong_control;
        if l.iter().chain(r).any(|cc| {
            cc.is_empty()
                || cc.len() > THIRD_PARTY_MAX_CC
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }) {
            return Err("-K: not a congestion control's name".into());
        }
        if let Some(w) = self.window
            && (w.warmup_ms > 3_600_000 || w.cooldown_ms > 3_600_000)
        {
            return Err("--warmup/--cooldown: at most 3600 s".into());
        }
        Ok(())
    }
}

/// netserver to netperf.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum ServerMsg {
    Hello(ServerHello),
    /// The server's proof that it knows the key too.
    AuthOk {
        proof: [u8; 32],
    },
    Ready(Grant),
    /// Counters of flows `first..first + counters.len()`, before the
    /// results of a test with more flows than one frame holds.
    Flows {
        first: u32,
        counters: Vec<FlowCounters>,
    },
    Results(Box<SideResults>),
    Error(ErrorMsg),
    /// Whole-run counters of flows `first..first + counters.len()`, before
    /// the results of a windowed test (its results cover the window).
    FlowTotals {
        first: u32,
        counters: Vec<FlowCounters>,
    },
    /// Data connections closed as not the test's, before the results: sent
    /// only to a client whose hello names `foreign`, when there were some.
    Foreign(ForeignConnections),
    /// The server's interim reports (`TestSpec::interim_ms`, which a client
    /// sets only for a server that names `interim`), before the results.
    Interim(Vec<InterimReport>),
    /// What the server's receive path did beyond copying (bytes mapped by
    /// `--rx-zerocopy`), before the results: sent only to a client whose
    /// hello names `paths`, when the test asked for a path.
    Received(RxFigures),
    /// The test waits its turn (`netserver --schedule exclusive`): so many
    /// tests are ahead of it, and it waits at most `limit_secs` before it
    /// is refused. Sent only to a client whose hello names `queue`, again
    /// as its place changes; its grant (`Ready`) or refusal follows.
    Queued {
        ahead: u32,
        limit_secs: u32,
    },
    /// A part of a third-party test's JSON document, before the last.
    ThirdPartyPart(String),
    /// The last part of a third-party test's JSON document: the test ran.
    ThirdPartyResult(String),
    /// The netserver's host as it is at a test's end (kernel, CPU,
    /// interface, offloads, sysctls), before the results: sent only to a
    /// client whose hello names `facts`.
    Facts(Box<crate::facts::HostFacts>),
    /// What the server saw of ECN (`--ecn`): the codepoints it received,
    /// its TCP connections' ECN; before the results, only to a client whose
    /// hello names `ecn`.
    Ecn(Box<crate::ecn::EcnReport>),
}

/// Why the server refused or ended something.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The peers speak different protocol versions.
    Version,
    /// A message could not be decoded or came out of order.
    Protocol,
    /// A test request had a field out of range.
    InvalidRequest,
    /// The server is at one of its caps; try again later.
    Busy,
    /// Authentication was required and failed.
    Auth,
    /// The server does not support what was asked.
    Unsupported,
    /// The server ran out of a resource (sockets, memory, threads, ports).
    Resource,
    /// A deadline passed.
    Timeout,
    /// The server is shutting down.
    ShuttingDown,
    /// The test started but failed.
    TestFailed,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ErrorMsg {
    pub code: ErrorCode,
    /// Human-readable, one line.
    pub message: String,
}

impl ErrorMsg {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorMsg {
        ErrorMsg {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ErrorMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ClientMsg {
    /// Short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            ClientMsg::Hello(_) => "Hello",
            ClientMsg::Auth { .. } => "Auth",
            ClientMsg::Setup(_) => "Setup",
            ClientMsg::Done(_) => "Done",
            ClientMsg::Bye => "Bye",
            ClientMsg::SetupWindowed(..) => "SetupWindowed",
            ClientMsg::SetupTuned(..) => "SetupTuned",
            ClientMsg::SetupPaths(..) => "SetupPaths",
            ClientMsg::SetupEcn(..) => "SetupEcn",
            ClientMsg::Summary(_) => "Summary",
            ClientMsg::ThirdParty(_) => "ThirdParty",
        }
    }

    /// Decode one message body. A hello may carry fields we do not know
    /// (a newer peer); anything else must be exact.
    pub fn decode(body: &[u8]) -> Result<ClientMsg, ProtoError> {
        decode_tolerating_hello(body, |m| matches!(m, ClientMsg::Hello(_)))
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtoError> {
        frame::encode(self)
    }
}

impl ServerMsg {
    pub fn name(&self) -> &'static str {
        match self {
            ServerMsg::Hello(_) => "Hello",
            ServerMsg::AuthOk { .. } => "AuthOk",
            ServerMsg::Ready(_) => "Ready",
            ServerMsg::Flows { .. } => "Flows",
            ServerMsg::Results(_) => "Results",
            ServerMsg::Error(_) => "Error",
            ServerMsg::FlowTotals { .. } => "FlowTotals",
            ServerMsg::Foreign(_) => "Foreign",
            ServerMsg::Interim(_) => "Interim",
            ServerMsg::Received(_) => "Received",
            ServerMsg::Queued { .. } => "Queued",
            ServerMsg::ThirdPartyPart(_) => "ThirdPartyPart",
            ServerMsg::ThirdPartyResult(_) => "ThirdPartyResult",
            ServerMsg::Facts(_) => "Facts",
            ServerMsg::Ecn(_) => "Ecn",
        }
    }

    pub fn decode(body: &[u8]) -> Result<ServerMsg, ProtoError> {
        decode_tolerating_hello(body, |m| matches!(m, ServerMsg::Hello(_)))
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtoError> {
        frame::encode(self)
    }
}

fn decode_tolerating_hello<T: serde::de::DeserializeOwned>(
    body: &[u8],
    is_hello: impl Fn(&T) -> bool,
) -> Result<T, ProtoError> {
    let value: T = codec::decode_prefix(body)?;
    if is_hello(&value) {
        return Ok(value);
    }
    codec::decode_exact(body)
}

/// Take the first whole frame off `buf` and decode it with `decode`.
/// `Ok(None)` means more bytes are needed.
pub fn take_frame<T>(
    buf: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, ProtoError>,
) -> Result<Option<(T, usize)>, ProtoError> {
    match frame::split(buf)? {
        Some((body, used)) => Ok(Some((decode(body)?, used))),
        None => Ok(None),
    }
}
