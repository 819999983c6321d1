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
//!   ThirdParty{host, port, args}     ->      (a `fleet` server, keyed)
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
}

/// A third-party test: the netserver that receives it runs netperf's
/// test, as a client, against the netserver at `host`:`port`, proving
/// the same key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ThirdParty {
    /// The other netserver (a name or an address).
    pub host: String,
    /// Its control port.
    pub port: u16,
    /// netperf's options: global ones, then `--` and the test's (no
    /// `-H`, `-p` or key options: the request names those).
    pub args: Vec<String>,
}

/// Most arguments a third-party request carries, and longest argument.
pub const THIRD_PARTY_MAX_ARGS: usize = 256;
pub const THIRD_PARTY_MAX_ARG: usize = 4096;
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
        if self.port == 0 {
            return Err("the other netserver's port is 0".into());
        }
        if self.args.len() > THIRD_PARTY_MAX_ARGS {
            return Err(format!(
                "{} options, more than {THIRD_PARTY_MAX_ARGS}",
                self.args.len()
            ));
        }
        if let Some(a) = self.args.iter().find(|a| a.len() > THIRD_PARTY_MAX_ARG) {
            return Err(format!(
                "an option of {} bytes, more than {THIRD_PARTY_MAX_ARG}",
                a.len()
            ));
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
