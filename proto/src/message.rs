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
