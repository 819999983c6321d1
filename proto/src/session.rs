//! The two ends of a control conversation as state machines, with no I/O.
//!
//! The daemon feeds [`ServerSession::handle`] each message it reads and does
//! what the returned [`ServerAction`] says; when its side of a test ends it
//! calls [`ServerSession::test_ended`]. The client does the same with
//! [`ClientSession`]. Tests drive a pair of them in memory.

use crate::{
    error::ProtoError,
    message::{ClientMsg, ErrorCode, ErrorMsg, Hello, ServerHello, ServerMsg},
    test::{ClientDone, ClientSummary, Grant, Limits, SideResults, TestSpec, Tuning},
};

/// Which end computes a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Seals frame bodies once both ends proved the key, and checks the
/// peer's. The implementation (HMAC-SHA256 with sequence numbers) lives
/// outside this crate.
pub trait Sealer: Send {
    /// Append what proves the body's origin and order.
    fn seal(&mut self, body: &mut Vec<u8>);
    /// Check a sealed body and return the message within.
    fn open(&mut self, sealed: &[u8]) -> Result<Vec<u8>, String>;
}

/// Proves and checks knowledge of a shared key over both nonces. The
/// implementation (HMAC-SHA256 with a constant-time compare) lives outside
/// this crate, which has no cryptography of its own.
pub trait Authenticator: Send + Sync {
    fn proof(&self, role: Role, server_nonce: &[u8; 32], client_nonce: &[u8; 32]) -> [u8; 32];
    /// What seals this end's frames once both proofs are in.
    fn sealer(
        &self,
        role: Role,
        server_nonce: &[u8; 32],
        client_nonce: &[u8; 32],
    ) -> Box<dyn Sealer>;
    fn verify(
        &self,
        role: Role,
        server_nonce: &[u8; 32],
        client_nonce: &[u8; 32],
        proof: &[u8; 32],
    ) -> bool;
    /// The key of a token this key signed, from the token's public part
    /// (`netserver token`; its holder proves the whole token); `None`
    /// where `payload` is not a token's.
    fn for_token(&self, _payload: &str) -> Option<Box<dyn Authenticator>> {
        None
    }
    /// The public part of `token` where this key signed it (netperf 2.7's
    /// `-Z` carrying a token, which its holder sends whole).
    fn signed_token(&self, _token: &str) -> Option<String> {
        None
    }
}

/// What the daemon must do after a message.
#[derive(Debug, PartialEq)]
pub enum ServerAction {
    /// Send this message and carry on.
    Reply(ServerMsg),
    /// Send this message, then close the connection.
    ReplyAndClose(ServerMsg),
    /// Validated test request: prepare the data sockets, then call
    /// [`ServerSession::granted`] with what was set up.
    Prepare(Box<TestSpec>),
    /// netperf finished its data phase; tell the test what it counted.
    ClientDone(ClientDone),
    /// Both sides are done: send the results.
    SendResults(ServerMsg),
    /// The client said goodbye.
    Close,
    /// What the client made of the last test (nothing to answer).
    Summary(Box<ClientSummary>),
    /// A checked third-party request from a client that proved the key:
    /// run it, then call [`ServerSession::third_party_ended`].
    ThirdParty(Box<crate::ThirdParty>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitHello,
    AwaitAuth {
        server_nonce: [u8; 32],
    },
    Idle,
    Preparing,
    Testing {
        client_done: bool,
        server_done: bool,
    },
    /// A third-party test runs on the client's behalf.
    ThirdParty,
    Closed,
}

impl ServerState {
    fn describe(&self) -> &'static str {
        match self {
            ServerState::AwaitHello => "waiting for hello",
            ServerState::AwaitAuth { .. } => "waiting for authentication",
            ServerState::Idle => "waiting for a test request",
            ServerState::Preparing => "preparing a test",
            ServerState::Testing { .. } => "running a test",
            ServerState::ThirdParty => "running a third-party test",
            ServerState::Closed => "closed",
        }
    }
}

/// The netserver end of one control connection.
pub struct ServerSession {
    state: ServerState,
    software: String,
    limits: Limits,
    auth: Option<Box<dyn Authenticator>>,
    nonce: [u8; 32],
    results: Option<SideResults>,
    peer_software: String,
    /// What the client named in its hello.
    peer_capabilities: Vec<String>,
    authenticated: Option<([u8; 32], [u8; 32])>,
    /// CPUs and CPU meter rate, told to clients in the hello.
    cpu: (u32, u32),
    /// What the policy allows one test, told in the hello.
    announced: crate::ServerLimits,
    /// The public part of the token the client proves (its hello's
    /// `token:` name), once proved.
    token: Option<String>,
    /// Whether this server runs third-party tests (`netserver --fleet`).
    fleet: bool,
}

impl std::fmt::Debug for ServerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("state", &self.state)
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

impl ServerSession {
    /// `nonce` is the challenge sent when `auth` is set; the caller draws it
    /// from a secure random source.
    pub fn new(
        software: impl Into<String>,
        limits: Limits,
        auth: Option<Box<dyn Authenticator>>,
        nonce: [u8; 32],
    ) -> ServerSession {
        ServerSession {
            state: ServerState::AwaitHello,
            software: software.into(),
            limits,
            auth,
            nonce,
            results: None,
            peer_software: String::new(),
            peer_capabilities: Vec::new(),
            authenticated: None,
            cpu: (0, 0),
            announced: crate::ServerLimits::default(),
            token: None,
            fleet: false,
        }
    }

    /// Run third-party tests for clients that prove the key (`--fleet`),
    /// and say so in the hello (`fleet`).
    pub fn with_fleet(mut self, fleet: bool) -> ServerSession {
        self.fleet = fleet;
        self
    }

    /// The public part of the token the client proved, if it came with one.
    pub fn token(&self) -> Option<&str> {
        self.token
            .as_deref()
            .filter(|_| self.authenticated.is_some())
    }

    /// What the hello tells clients one test may ask (`limit:` names).
    pub fn with_announced(mut self, limits: crate::ServerLimits) -> ServerSession {
        self.announced = limits;
        self
    }

    /// What this server allows.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What the hello tells clients of this host's CPUs: how many, and the
    /// rate of the meter (netperf's REM_CPU).
    pub fn with_cpu_info(mut self, num_cpus: u32, rate: u32) -> ServerSession {
        self.cpu = (num_cpus, rate);
        self
    }

    /// After a successful authentication: (server nonce, client nonce), from
    /// which both ends derive the key that seals every later frame.
    pub fn auth_nonces(&self) -> Option<([u8; 32], [u8; 32])> {
        self.authenticated
    }

    /// After a successful authentication, what seals our frames.
    pub fn sealer(&self) -> Option<Box<dyn Sealer>> {
        let (s, c) = self.authenticated?;
        Some(self.auth.as_ref()?.sealer(Role::Server, &s, &c))
    }

    /// The client's software string from its hello.
    pub fn peer_software(&self) -> &str {
        &self.peer_software
    }

    /// Whether the client named `capability` in its hello.
    pub fn peer_can(&self, capability: &str) -> bool {
        self.peer_capabilities.iter().any(|c| c == capability)
    }

    /// True once hello (and authentication, if required) are done.
    pub fn established(&self) -> bool {
        !matches!(
            self.state,
            ServerState::AwaitHello | ServerState::AwaitAuth { .. } | ServerState::Closed
        )
    }

    fn unexpected(&mut self, msg: &ClientMsg) -> ServerAction {
        let err = ProtoError::UnexpectedMessage {
            got: msg.name(),
            state: self.state.describe(),
        };
        self.state = ServerState::Closed;
        ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg::new(
            ErrorCode::Protocol,
            err.to_string(),
        )))
    }

    /// An error message for a failure to decode what the client sent.
    pub fn protocol_error(&mut self, err: &ProtoError) -> ServerMsg {
        self.state = ServerState::Closed;
        let code = match err {
            ProtoError::VersionMismatch { .. } => ErrorCode::Version,
            _ => ErrorCode::Protocol,
        };
        ServerMsg::Error(ErrorMsg::new(code, err.to_string()))
    }

    pub fn handle(&mut self, msg: ClientMsg) -> ServerAction {
        match (self.state, msg) {
            (ServerState::AwaitHello, ClientMsg::Hello(hello)) => self.hello(&hello),
            (ServerState::AwaitAuth { server_nonce }, ClientMsg::Auth { nonce, proof }) => {
                self.auth(server_nonce, nonce, &proof)
            }
            (ServerState::Idle, ClientMsg::SetupWindowed(mut spec, window)) => {
                spec.window = Some(window);
                self.handle(ClientMsg::Setup(spec))
            }
            (ServerState::Idle, ClientMsg::SetupEcn(mut spec, t, paths, ecn)) => {
                spec.ecn = Some(ecn);
                self.handle(ClientMsg::SetupPaths(spec, t, paths))
            }
            (ServerState::Idle, ClientMsg::SetupPaths(mut spec, t, paths)) => {
                spec.paths = paths;
                self.handle(ClientMsg::SetupTuned(spec, t))
            }
            (ServerState::Idle, ClientMsg::SetupTuned(mut spec, t)) => {
                spec.window = t.window;
                spec.udp_fast = t.udp_fast;
                self.handle(ClientMsg::Setup(spec))
            }
            (ServerState::Idle, ClientMsg::Setup(spec)) => match spec.validate(&self.limits) {
                Ok(()) => {
                    self.state = ServerState::Preparing;
                    ServerAction::Prepare(spec)
                }
                Err(e) => ServerAction::Reply(ServerMsg::Error(ErrorMsg::new(
                    ErrorCode::InvalidRequest,
                    format!("invalid test request: {e}"),
                ))),
            },
            (
                ServerState::Testing {
                    client_done: false,
                    server_done,
                },
                ClientMsg::Done(done),
            ) => {
                if server_done {
                    self.finish()
                } else {
                    self.state = ServerState::Testing {
                        client_done: true,
                        server_done,
                    };
                    ServerAction::ClientDone(done)
                }
            }
            (ServerState::Idle, ClientMsg::Summary(summary)) => ServerAction::Summary(summary),
            (ServerState::Idle, ClientMsg::ThirdParty(req)) => self.third_party(req),
            (ServerState::Idle | ServerState::AwaitHello, ClientMsg::Bye) => {
                self.state = ServerState::Closed;
                ServerAction::Close
            }
            (_, msg) => self.unexpected(&msg),
        }
    }

    /// The client's hello: checked, a token's key taken, ours answered
    /// (with a challenge where a key is required).
    fn hello(&mut self, hello: &Hello) -> ServerAction {
        self.peer_software = hello.software.clone();
        self.peer_capabilities = hello.capabilities.clone();
        if let Err(e) = hello.check() {
            return ServerAction::ReplyAndClose(self.protocol_error(&e));
        }
        // a token: its holder proves the whole token, not our key
        if let Some(payload) = hello
            .capabilities
            .iter()
            .find_map(|c| c.strip_prefix(TOKEN_NAME))
            && let Some(auth) = &self.auth
        {
            let Some(key) = auth.for_token(payload) else {
                self.state = ServerState::Closed;
                return ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg::new(
                    ErrorCode::Auth,
                    "authentication failed: the token is not one this netserver makes",
                )));
            };
            self.auth = Some(key);
            self.token = Some(payload.to_string());
        }
        let challenge = self.auth.as_ref().map(|_| self.nonce);
        self.state = match challenge {
            Some(server_nonce) => ServerState::AwaitAuth { server_nonce },
            None => ServerState::Idle,
        };
        let mut hello = Hello::new(self.software.clone());
        hello.capabilities.extend(self.announced.names());
        if self.fleet {
            hello.capabilities.push(FLEET.into());
        }
        ServerAction::Reply(ServerMsg::Hello(ServerHello {
            hello,
            challenge,
            num_cpus: self.cpu.0,
            cpu_rate: self.cpu.1,
        }))
    }

    /// The client's proof of the key, and ours back.
    fn auth(&mut self, server_nonce: [u8; 32], nonce: [u8; 32], proof: &[u8; 32]) -> ServerAction {
        let Some(auth) = &self.auth else {
            self.state = ServerState::Closed;
            return ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg::new(
                ErrorCode::Auth,
                "authentication state lost",
            )));
        };
        if nonce == server_nonce || !auth.verify(Role::Client, &server_nonce, &nonce, proof) {
            self.state = ServerState::Closed;
            let why = if self.token.is_some() {
                "authentication failed: the token was not signed with this netserver's key, or was altered"
            } else {
                "authentication failed: the key does not match"
            };
            return ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg::new(
                ErrorCode::Auth,
                why,
            )));
        }
        let proof = auth.proof(Role::Server, &server_nonce, &nonce);
        self.authenticated = Some((server_nonce, nonce));
        self.state = ServerState::Idle;
        ServerAction::Reply(ServerMsg::AuthOk { proof })
    }

    /// A third-party request: refused unless this server runs them and
    /// the client proved the key itself (not a token's holder).
    fn third_party(&mut self, req: Box<crate::ThirdParty>) -> ServerAction {
        let refuse =
            |code, why: String| ServerAction::Reply(ServerMsg::Error(ErrorMsg::new(code, why)));
        if !self.fleet {
            return refuse(
                ErrorCode::Unsupported,
                "third-party test refused: this netserver does not run them (start it with --fleet and --key-file)".into(),
            );
        }
        if self.authenticated.is_none() || self.token.is_some() {
            return refuse(
                ErrorCode::Auth,
                "third-party test refused: the client did not prove the netserver's own key".into(),
            );
        }
        if let Err(e) = req.check() {
            return refuse(
                ErrorCode::InvalidRequest,
                format!("third-party test refused: {e}"),
            );
        }
        self.state = ServerState::ThirdParty;
        ServerAction::ThirdParty(req)
    }

    /// The third-party test ended: the messages to send (its JSON in
    /// parts, or the error). The session waits for another request.
    pub fn third_party_ended(&mut self, outcome: Result<String, ErrorMsg>) -> Vec<ServerMsg> {
        if self.state != ServerState::ThirdParty {
            return Vec::new();
        }
        self.state = ServerState::Idle;
        let json = match outcome {
            Ok(j) if j.len() <= crate::message::THIRD_PARTY_MAX_RESULT => j,
            Ok(j) => {
                return vec![ServerMsg::Error(ErrorMsg::new(
                    ErrorCode::Resource,
                    format!(
                        "third-party test: its JSON document ({} bytes) is larger than {} bytes",
                        j.len(),
                        crate::message::THIRD_PARTY_MAX_RESULT
                    ),
                ))];
            }
            Err(e) => return vec![ServerMsg::Error(e)],
        };
        let mut parts = split_text(&json, crate::message::THIRD_PARTY_PART);
        let last = parts.pop().unwrap_or_default();
        let mut out: Vec<ServerMsg> = parts.into_iter().map(ServerMsg::ThirdPartyPart).collect();
        out.push(ServerMsg::ThirdPartyResult(last));
        out
    }

    /// The data sockets are ready: the reply to send.
    pub fn granted(&mut self, grant: Grant) -> ServerMsg {
        self.state = ServerState::Testing {
            client_done: false,
            server_done: false,
        };
        self.results = None;
        ServerMsg::Ready(grant)
    }

    /// Preparing the test failed: the reply to send. The session stays open
    /// for another request.
    pub fn prepare_failed(&mut self, err: ErrorMsg) -> ServerMsg {
        self.state = ServerState::Idle;
        ServerMsg::Error(err)
    }

    /// The server's side of the test ended. Returns the message to send now,
    /// if any: the results once netperf is done too, or the error at once.
    /// After an error the connection should be closed.
    pub fn test_ended(&mut self, outcome: Result<SideResults, ErrorMsg>) -> Option<ServerAction> {
        let ServerState::Testing { client_done, .. } = self.state else {
            return None;
        };
        match outcome {
            Err(e) => {
                self.state = ServerState::Closed;
                Some(ServerAction::ReplyAndClose(ServerMsg::Error(e)))
            }
            Ok(results) => {
                self.results = Some(results);
                if client_done {
                    Some(self.finish())
                } else {
                    self.state = ServerState::Testing {
                        client_done,
                        server_done: true,
                    };
                    None
                }
            }
        }
    }

    fn finish(&mut self) -> ServerAction {
        self.state = ServerState::Idle;
        let results = self.results.take().unwrap_or_default();
        ServerAction::SendResults(ServerMsg::Results(Box::new(results)))
    }
}

/// What the client learns from a server message.
#[derive(Debug, PartialEq)]
pub enum ClientEvent {
    /// Send this (the authentication answer) and wait for the next message.
    Send(ClientMsg),
    /// Handshake complete; tests may be requested.
    Established,
    Granted(Grant),
    Results(Box<SideResults>),
    /// The netserver's CPU figures came (netperf 2.7's CPU_CALIBRATE).
    Calibrated,
    /// The test waits its turn (`--schedule exclusive`): so many tests
    /// ahead of it, waiting at most so many seconds; the grant follows.
    Queued {
        ahead: u32,
        limit_secs: u32,
    },
    /// The server says the data phase begins, where its dialect waits
    /// for that once the data connections are up (iperf3's TEST_RUNNING).
    Started,
    /// A part of a third-party test's JSON document, before the last.
    ThirdPartyPart(String),
    /// The third-party test's JSON document (its last part).
    ThirdParty(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitHello,
    AwaitAuthOk {
        server_nonce: [u8; 32],
        client_nonce: [u8; 32],
    },
    Idle,
    AwaitGrant,
    Testing,
    AwaitResults,
    AwaitThirdParty,
}

/// The netperf end of a control connection.
pub struct ClientSession {
    state: ClientState,
    auth: Option<Box<dyn Authenticator>>,
    nonce: [u8; 32],
    server_software: String,
    server_capabilities: Vec<String>,
    /// The server's CPUs and CPU meter rate, from its hello.
    server_cpu: (u32, u32),
    authenticated: Option<([u8; 32], [u8; 32])>,
    /// Run unauthenticated when the server asks for no key (netperf 2.7's
    /// `-Z` against a netserver without one).
    auth_optional: bool,
    /// The public part of the token proved, named in the hello.
    token: Option<String>,
}

impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("state", &self.state)
            .finish()
    }
}

/// Why a conversation failed, from the client's side.
#[derive(Debug, PartialEq)]
pub enum ClientError {
    /// The server sent an error message.
    Server(ErrorMsg),
    Protocol(ProtoError),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Server(e) => write!(f, "netserver: {}", e.message),
            ClientError::Protocol(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<ProtoError> for ClientError {
    fn from(e: ProtoError) -> Self {
        ClientError::Protocol(e)
    }
}

impl ClientSession {
    /// `nonce` answers a challenge, if the server sends one.
    pub fn new(auth: Option<Box<dyn Authenticator>>, nonce: [u8; 32]) -> ClientSession {
        ClientSession {
            state: ClientState::AwaitHello,
            auth,
            nonce,
            server_software: String::new(),
            server_capabilities: Vec::new(),
            server_cpu: (0, 0),
            authenticated: None,
            auth_optional: false,
            token: None,
        }
    }

    /// With a key, still run when the server asks for none, as netperf
    /// 2.7 does with `-Z` against a netserver that has no passphrase.
    pub fn auth_optional(mut self) -> ClientSession {
        self.auth_optional = true;
        self
    }

    /// After a successful authentication: (server nonce, client nonce).
    pub fn auth_nonces(&self) -> Option<([u8; 32], [u8; 32])> {
        self.authenticated
    }

    /// After a successful authentication, what seals our frames.
    pub fn sealer(&self) -> Option<Box<dyn Sealer>> {
        let (s, c) = self.authenticated?;
        Some(self.auth.as_ref()?.sealer(Role::Client, &s, &c))
    }

    pub fn hello(software: &str) -> ClientMsg {
        ClientMsg::Hello(Hello::new(software))
    }

    /// The hello, naming the token whose holder this end proves it is
    /// (its key is then the whole token; see [`ClientSession::with_token`]).
    pub fn hello_as(&self, software: &str) -> ClientMsg {
        let mut h = Hello::new(software);
        if let Some(t) = &self.token {
            h.capabilities.push(format!("{TOKEN_NAME}{t}"));
        }
        ClientMsg::Hello(h)
    }

    /// Prove a token rather than a key: `payload` is its public part, and
    /// the authenticator holds the whole token.
    pub fn with_token(mut self, payload: impl Into<String>) -> ClientSession {
        self.token = Some(payload.into());
        self
    }

    pub fn server_software(&self) -> &str {
        &self.server_software
    }

    /// Whether the server named `capability` in its hello.
    pub fn server_can(&self, capability: &str) -> bool {
        self.server_capabilities.iter().any(|c| c == capability)
    }

    /// The server's CPU count and CPU meter rate, from its hello.
    pub fn server_cpu(&self) -> (u32, u32) {
        self.server_cpu
    }

    /// Ask for a test. Only valid between tests.
    pub fn setup(&mut self, spec: TestSpec) -> Result<ClientMsg, ClientError> {
        if self.state != ClientState::Idle {
            return Err(ProtoError::UnexpectedMessage {
                got: "Setup",
                state: "not idle",
            }
            .into());
        }
        self.state = ClientState::AwaitGrant;
        Ok(match (spec.window, spec.udp_fast) {
            (window, udp_fast) if spec.ecn.is_some() => {
                let (paths, ecn) = (spec.paths, spec.ecn);
                match ecn {
                    Some(ecn) => {
                        ClientMsg::SetupEcn(Box::new(spec), Tuning { window, udp_fast }, paths, ecn)
                    }
                    None => {
                        ClientMsg::SetupPaths(Box::new(spec), Tuning { window, udp_fast }, paths)
                    }
                }
            }
            (window, udp_fast) if spec.paths.is_on() => {
                let paths = spec.paths;
                ClientMsg::SetupPaths(Box::new(spec), Tuning { window, udp_fast }, paths)
            }
            (window, udp_fast) if udp_fast.is_on() => {
                ClientMsg::SetupTuned(Box::new(spec), Tuning { window, udp_fast })
            }
            (Some(w), _) => ClientMsg::SetupWindowed(Box::new(spec), w),
            (None, _) => ClientMsg::Setup(Box::new(spec)),
        })
    }

    /// Ask the server (one whose hello names `fleet`) to run a test as
    /// netperf against another netserver. Only valid between tests.
    pub fn third_party(&mut self, req: crate::ThirdParty) -> Result<ClientMsg, ClientError> {
        if self.state != ClientState::Idle {
            return Err(ProtoError::UnexpectedMessage {
                got: "ThirdParty",
                state: "not idle",
            }
            .into());
        }
        self.state = ClientState::AwaitThirdParty;
        Ok(ClientMsg::ThirdParty(Box::new(req)))
    }

    /// netperf's data phase is over.
    pub fn done(&mut self, done: ClientDone) -> Result<ClientMsg, ClientError> {
        if self.state != ClientState::Testing {
            return Err(ProtoError::UnexpectedMessage {
                got: "Done",
                state: "not testing",
            }
            .into());
        }
        self.state = ClientState::AwaitResults;
        Ok(ClientMsg::Done(done))
    }

    pub fn handle(&mut self, msg: ServerMsg) -> Result<ClientEvent, ClientError> {
        if let ServerMsg::Error(e) = msg {
            return Err(ClientError::Server(e));
        }
        match (self.state, msg) {
            (ClientState::AwaitHello, ServerMsg::Hello(h)) => {
                self.server_software = h.hello.software.clone();
                self.server_capabilities = h.hello.capabilities.clone();
                self.server_cpu = (h.num_cpus, h.cpu_rate);
                h.hello.check()?;
                match (h.challenge, &self.auth) {
                    (None, None) => {
                        self.state = ClientState::Idle;
                        Ok(ClientEvent::Established)
                    }
                    (None, Some(_)) if self.auth_optional => {
                        self.state = ClientState::Idle;
                        Ok(ClientEvent::Established)
                    }
                    (None, Some(_)) => Err(ProtoError::Auth(
                        "a key was given but the netserver does not ask for authentication; refusing to run unauthenticated".into(),
                    )
                    .into()),
                    (Some(_), None) => Err(ProtoError::Auth(
                        "the netserver requires a key (use --key-file or -Z)".into(),
                    )
                    .into()),
                    (Some(server_nonce), Some(auth)) => {
                        let proof = auth.proof(Role::Client, &server_nonce, &self.nonce);
                        self.state = ClientState::AwaitAuthOk {
                            server_nonce,
                            client_nonce: self.nonce,
                        };
                        Ok(ClientEvent::Send(ClientMsg::Auth {
                            nonce: self.nonce,
                            proof,
                        }))
                    }
                }
            }
            (
                ClientState::AwaitAuthOk {
                    server_nonce,
                    client_nonce,
                },
                ServerMsg::AuthOk { proof },
            ) => {
                let ok = self
                    .auth
                    .as_ref()
                    .is_some_and(|a| a.verify(Role::Server, &server_nonce, &client_nonce, &proof));
                if !ok {
                    return Err(ProtoError::Auth(
                        "the netserver could not prove it knows the key".into(),
                    )
                    .into());
                }
                self.authenticated = Some((server_nonce, client_nonce));
                self.state = ClientState::Idle;
                Ok(ClientEvent::Established)
            }
            (ClientState::AwaitGrant, ServerMsg::Ready(grant)) => {
                self.state = ClientState::Testing;
                Ok(ClientEvent::Granted(grant))
            }
            (ClientState::AwaitResults | ClientState::Testing, ServerMsg::Results(r)) => {
                self.state = ClientState::Idle;
                Ok(ClientEvent::Results(r))
            }
            (ClientState::AwaitThirdParty, ServerMsg::ThirdPartyPart(p)) => {
                Ok(ClientEvent::ThirdPartyPart(p))
            }
            (ClientState::AwaitThirdParty, ServerMsg::ThirdPartyResult(p)) => {
                self.state = ClientState::Idle;
                Ok(ClientEvent::ThirdParty(p))
            }
            (_, msg) => Err(ProtoError::UnexpectedMessage {
                got: msg.name(),
                state: "in this state",
            }
            .into()),
        }
    }
}

/// The hello's name of a server that runs third-party tests, asked as a
/// typed [`crate::ThirdPartyTest`]. (A netserver of before the typed
/// request named `fleet` and read netperf's words: a client names neither
/// to the other, so that neither misreads the other's message.)
pub const FLEET: &str = "fleet-typed";

/// What a netserver of before the typed request named.
pub const FLEET_WORDS: &str = "fleet";

/// `text` in pieces of at most `max` bytes, cut at character boundaries.
fn split_text(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    out.push(rest.to_string());
    out
}

/// The hello's name for a token: `token:` and its public part.
pub const TOKEN_NAME: &str = "token:";

/// Compare two secrets in constant time (their lengths are not secret).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test::{Family, TestKind, Token};

    /// A toy authenticator: the proof is the key xor-folded with the nonces.
    struct Xor([u8; 32]);
    impl Authenticator for Xor {
        fn proof(&self, role: Role, s: &[u8; 32], c: &[u8; 32]) -> [u8; 32] {
            let mut out = self.0;
            for i in 0..32 {
                out[i] ^= s[i].wrapping_add(c[i]) ^ (role as u8);
            }
            out
        }
        fn verify(&self, role: Role, s: &[u8; 32], c: &[u8; 32], p: &[u8; 32]) -> bool {
            self.proof(role, s, c) == *p
        }
        fn sealer(&self, _: Role, _: &[u8; 32], _: &[u8; 32]) -> Box<dyn Sealer> {
            Box::new(Plain)
        }
    }

    /// Seals nothing (the in-memory tests look at messages, not MACs).
    struct Plain;
    impl Sealer for Plain {
        fn seal(&mut self, _: &mut Vec<u8>) {}
        fn open(&mut self, sealed: &[u8]) -> Result<Vec<u8>, String> {
            Ok(sealed.to_vec())
        }
    }

    fn grant() -> Grant {
        Grant {
            data_port: 5000,
            token: Token([7; 32]),
            send_buf: 1,
            recv_buf: 2,
            send_size: 3,
            recv_size: 4,
            send_width: 2,
            recv_width: 1,
            measure_cpu: false,
            num_cpus: 2,
        }
    }

    /// Shuttle messages through encode/decode, as the wire would.
    fn wire_c(m: ClientMsg) -> ClientMsg {
        let f = m.encode().unwrap();
        ClientMsg::decode(&f[4..]).unwrap()
    }
    fn wire_s(m: ServerMsg) -> ServerMsg {
        let f = m.encode().unwrap();
        ServerMsg::decode(&f[4..]).unwrap()
    }

    fn reply(a: ServerAction) -> ServerMsg {
        match a {
            ServerAction::Reply(m) | ServerAction::SendResults(m) => m,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn a_whole_conversation_with_two_tests() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let mut client = ClientSession::new(None, [2; 32]);
        let m = reply(server.handle(wire_c(ClientSession::hello("cli"))));
        assert_eq!(client.handle(wire_s(m)).unwrap(), ClientEvent::Established);
        assert_eq!(server.peer_software(), "cli");
        assert_eq!(client.server_software(), "srv");

        for round in 0..2u64 {
            let spec = TestSpec::new(TestKind::TcpStream, Family::V4);
            let a = server.handle(wire_c(client.setup(spec.clone()).unwrap()));
            assert_eq!(a, ServerAction::Prepare(Box::new(spec)));
            let ev = client.handle(wire_s(server.granted(grant()))).unwrap();
            assert_eq!(ev, ClientEvent::Granted(grant()));
            // server finishes first in round 0, client first in round 1
            let res = SideResults {
                bytes_received: round + 10,
                ..Default::default()
            };
            let done = ClientDone {
                datagrams_sent: round + 10,
            };
            let msg = if round == 0 {
                assert_eq!(server.test_ended(Ok(res.clone())), None);
                reply(server.handle(wire_c(client.done(done).unwrap())))
            } else {
                let a = server.handle(wire_c(client.done(done.clone()).unwrap()));
                assert_eq!(a, ServerAction::ClientDone(done));
                reply(server.test_ended(Ok(res.clone())).unwrap())
            };
            assert_eq!(
                client.handle(wire_s(msg)).unwrap(),
                ClientEvent::Results(Box::new(res))
            );
            // what the client made of it, between tests: nothing answers
            let summary = ClientSummary {
                lost: round,
                ..Default::default()
            };
            assert_eq!(
                server.handle(wire_c(ClientMsg::Summary(Box::new(summary.clone())))),
                ServerAction::Summary(Box::new(summary))
            );
        }
        assert_eq!(server.handle(wire_c(ClientMsg::Bye)), ServerAction::Close);
    }

    /// A summary in the middle of a test is out of order.
    #[test]
    fn a_summary_mid_test_is_a_protocol_error() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let mut client = ClientSession::new(None, [2; 32]);
        let m = reply(server.handle(wire_c(ClientSession::hello("cli"))));
        client.handle(wire_s(m)).unwrap();
        let spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        server.handle(wire_c(client.setup(spec).unwrap()));
        server.granted(grant());
        let a = server.handle(wire_c(ClientMsg::Summary(Box::default())));
        let ServerAction::ReplyAndClose(ServerMsg::Error(e)) = a else {
            panic!("{a:?}");
        };
        assert_eq!(e.code, ErrorCode::Protocol);
        assert!(e.message.contains("Summary"), "{}", e.message);
    }

    /// `--batch`/`--gso` (and a window beside them) travel in `SetupTuned`
    /// and reach the server's spec whole.
    #[test]
    fn tuning_travels_in_setup_tuned() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let mut client = ClientSession::new(None, [2; 32]);
        let m = reply(server.handle(wire_c(ClientSession::hello("cli"))));
        client.handle(wire_s(m)).unwrap();
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.udp_fast = crate::UdpFast {
            batch: 8,
            segments: 16,
        };
        spec.window = Some(crate::Window {
            warmup_ms: 100,
            cooldown_ms: 200,
        });
        let msg = client.setup(spec.clone()).unwrap();
        assert!(matches!(msg, ClientMsg::SetupTuned(..)), "{msg:?}");
        assert_eq!(
            server.handle(wire_c(msg)),
            ServerAction::Prepare(Box::new(spec))
        );
        // a batch beyond the kernel's is refused, naming the option
        let mut client = ClientSession::new(None, [2; 32]);
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let m = reply(server.handle(wire_c(ClientSession::hello("cli"))));
        client.handle(wire_s(m)).unwrap();
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.udp_fast.batch = 5000;
        match reply(server.handle(wire_c(client.setup(spec).unwrap()))) {
            ServerMsg::Error(e) => assert!(e.message.contains("--batch"), "{e:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn version_mismatch_is_reported_on_both_ends() {
        let mut server = ServerSession::new("srv 9", Limits::default(), None, [1; 32]);
        let mut hello = Hello::new("cli 1");
        hello.protocol = 1;
        let ServerAction::ReplyAndClose(ServerMsg::Error(e)) =
            server.handle(ClientMsg::Hello(hello))
        else {
            panic!("expected an error");
        };
        assert_eq!(e.code, ErrorCode::Version);
        assert!(
            e.message.contains("version 1")
                && e.message
                    .contains(&format!("version {}", crate::PROTOCOL_VERSION)),
            "{}",
            e.message
        );

        let mut client = ClientSession::new(None, [0; 32]);
        let mut sh = Hello::new("srv 3");
        let other = crate::PROTOCOL_VERSION + 1;
        sh.protocol = other;
        let err = client
            .handle(ServerMsg::Hello(ServerHello {
                hello: sh,
                challenge: None,
                num_cpus: 2,
                cpu_rate: 100,
            }))
            .unwrap_err();
        assert!(
            err.to_string().contains(&format!("version {other}")),
            "{err}"
        );
    }

    /// A feature is used only if the server's hello names it: an older
    /// server, naming none, is known not to run `--flows`.
    #[test]
    fn the_servers_capabilities_come_from_its_hello() {
        for (caps, can) in [(vec!["flows".to_string()], true), (vec![], false)] {
            let mut client = ClientSession::new(None, [0; 32]);
            let mut sh = Hello::new("srv");
            sh.capabilities = caps;
            client
                .handle(ServerMsg::Hello(ServerHello {
                    hello: sh,
                    challenge: None,
                    num_cpus: 2,
                    cpu_rate: 100,
                }))
                .unwrap();
            assert_eq!(client.server_can("flows"), can);
            assert!(!client.server_can("teleport"));
        }
    }

    #[test]
    fn bad_magic_is_not_our_protocol() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let mut hello = Hello::new("x");
        hello.magic = *b"GET / HT";
        let ServerAction::ReplyAndClose(ServerMsg::Error(e)) =
            server.handle(ClientMsg::Hello(hello))
        else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::Protocol);
    }

    #[test]
    fn messages_out_of_order_close_the_session() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let spec = TestSpec::new(TestKind::TcpRr, Family::V6);
        assert!(matches!(
            server.handle(ClientMsg::Setup(Box::new(spec))),
            ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg {
                code: ErrorCode::Protocol,
                ..
            }))
        ));
    }

    #[test]
    fn invalid_spec_is_refused_but_session_survives() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        reply(server.handle(ClientMsg::Hello(Hello::new("c"))));
        let mut spec = TestSpec::new(TestKind::UdpStream, Family::V4);
        spec.server.send_size = Some(0);
        let ServerMsg::Error(e) = reply(server.handle(ClientMsg::Setup(Box::new(spec)))) else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.contains("-m"), "{}", e.message);
        let ok = TestSpec::new(TestKind::UdpStream, Family::V4);
        assert!(matches!(
            server.handle(ClientMsg::Setup(Box::new(ok))),
            ServerAction::Prepare(_)
        ));
    }

    #[test]
    fn authentication_both_ways() {
        let key = [9u8; 32];
        let mut server =
            ServerSession::new("srv", Limits::default(), Some(Box::new(Xor(key))), [1; 32]);
        let mut client = ClientSession::new(Some(Box::new(Xor(key))), [2; 32]);
        let m = reply(server.handle(ClientSession::hello("c")));
        let ClientEvent::Send(auth) = client.handle(m).unwrap() else {
            panic!()
        };
        let m = reply(server.handle(auth));
        assert_eq!(client.handle(m).unwrap(), ClientEvent::Established);
        assert!(server.established());
        assert_eq!(server.auth_nonces(), Some(([1; 32], [2; 32])));
        assert_eq!(client.auth_nonces(), server.auth_nonces());
    }

    fn third_party_req() -> crate::ThirdParty {
        crate::ThirdParty {
            host: "198.18.0.12".into(),
            port: 12865,
            test: crate::ThirdPartyTest::default(),
        }
    }

    /// A keyed conversation with a server that runs third-party tests or
    /// not.
    fn keyed(fleet: bool) -> (ServerSession, ClientSession) {
        let key = [9u8; 32];
        let mut server =
            ServerSession::new("srv", Limits::default(), Some(Box::new(Xor(key))), [1; 32])
                .with_fleet(fleet);
        let mut client = ClientSession::new(Some(Box::new(Xor(key))), [2; 32]);
        let m = reply(server.handle(ClientSession::hello("c")));
        assert_eq!(
            matches!(&m, ServerMsg::Hello(h) if h.hello.can(FLEET)),
            fleet
        );
        let ClientEvent::Send(auth) = client.handle(m).unwrap() else {
            panic!()
        };
        let m = reply(server.handle(auth));
        assert_eq!(client.handle(m).unwrap(), ClientEvent::Established);
        (server, client)
    }

    #[test]
    fn a_third_party_test_is_asked_run_and_answered_in_parts() {
        let (mut server, mut client) = keyed(true);
        let m = wire_c(client.third_party(third_party_req()).unwrap());
        let ServerAction::ThirdParty(req) = server.handle(m) else {
            panic!("not run")
        };
        assert_eq!(*req, third_party_req());
        // a second request while it runs breaks the protocol
        assert!(matches!(
            server.handle(ClientMsg::ThirdParty(Box::new(third_party_req()))),
            ServerAction::ReplyAndClose(_)
        ));
        let (mut server, mut client) = keyed(true);
        client.third_party(third_party_req()).unwrap();
        server.handle(ClientMsg::ThirdParty(Box::new(third_party_req())));
        // a document of three parts and a bit, with a character across a cut
        let doc: String = "é".repeat(crate::message::THIRD_PARTY_PART * 3 / 2 + 7);
        let msgs = server.third_party_ended(Ok(doc.clone()));
        assert_eq!(msgs.len(), 4);
        let mut got = String::new();
        for m in msgs {
            match client.handle(wire_s(m)).unwrap() {
                ClientEvent::ThirdPartyPart(p) => got.push_str(&p),
                ClientEvent::ThirdParty(p) => got.push_str(&p),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, doc);
        // and the conversation goes on
        assert!(client.third_party(third_party_req()).is_ok());
    }

    #[test]
    fn third_party_tests_are_refused_without_fleet_or_the_key() {
        let (mut server, _) = keyed(false);
        let m = reply(server.handle(ClientMsg::ThirdParty(Box::new(third_party_req()))));
        assert!(
            matches!(&m, ServerMsg::Error(e) if e.code == ErrorCode::Unsupported && e.message.contains("--fleet")),
            "{m:?}"
        );
        // no key on this server: nobody proved one
        let mut open = ServerSession::new("srv", Limits::default(), None, [1; 32]).with_fleet(true);
        reply(open.handle(ClientSession::hello("c")));
        let m = reply(open.handle(ClientMsg::ThirdParty(Box::new(third_party_req()))));
        assert!(
            matches!(&m, ServerMsg::Error(e) if e.code == ErrorCode::Auth && e.message.contains("key")),
            "{m:?}"
        );
        // a request out of bounds
        for out_of_bounds in [
            |r: &mut crate::ThirdParty| r.host = "-Z".into(),
            |r: &mut crate::ThirdParty| r.test.flows = crate::message::THIRD_PARTY_MAX_FLOWS + 1,
            |r: &mut crate::ThirdParty| r.test.cong_control.0 = Some("x".repeat(17)),
            |r: &mut crate::ThirdParty| {
                r.test.length = crate::ThirdPartyLength::Seconds(0);
            },
        ] {
            let (mut server, _) = keyed(true);
            let mut req = third_party_req();
            out_of_bounds(&mut req);
            let m = reply(server.handle(ClientMsg::ThirdParty(Box::new(req))));
            assert!(
                matches!(&m, ServerMsg::Error(e) if e.code == ErrorCode::InvalidRequest),
                "{m:?}"
            );
        }
        // a result too large is an error, not a flood
        let (mut server, _) = keyed(true);
        server.handle(ClientMsg::ThirdParty(Box::new(third_party_req())));
        let big = "x".repeat(crate::message::THIRD_PARTY_MAX_RESULT + 1);
        let msgs = server.third_party_ended(Ok(big));
        assert!(matches!(&msgs[..], [ServerMsg::Error(e)] if e.code == ErrorCode::Resource));
    }

    #[test]
    fn wrong_key_and_replayed_proof_fail() {
        let mut server = ServerSession::new(
            "srv",
            Limits::default(),
            Some(Box::new(Xor([9; 32]))),
            [1; 32],
        );
        let mut client = ClientSession::new(Some(Box::new(Xor([8; 32]))), [2; 32]);
        let m = reply(server.handle(ClientSession::hello("c")));
        let ClientEvent::Send(auth) = client.handle(m).unwrap() else {
            panic!()
        };
        assert!(matches!(
            server.handle(auth),
            ServerAction::ReplyAndClose(ServerMsg::Error(ErrorMsg {
                code: ErrorCode::Auth,
                ..
            }))
        ));

        // A transcript recorded against nonce [1;32] does not pass a server
        // whose nonce is [3;32].
        let good = Xor([9; 32]);
        let recorded = ClientMsg::Auth {
            nonce: [2; 32],
            proof: good.proof(Role::Client, &[1; 32], &[2; 32]),
        };
        let mut server2 = ServerSession::new(
            "srv",
            Limits::default(),
            Some(Box::new(Xor([9; 32]))),
            [3; 32],
        );
        reply(server2.handle(ClientSession::hello("c")));
        assert!(matches!(
            server2.handle(recorded),
            ServerAction::ReplyAndClose(_)
        ));
    }

    #[test]
    fn server_error_during_test_reaches_client() {
        let mut server = ServerSession::new("srv", Limits::default(), None, [1; 32]);
        let mut client = ClientSession::new(None, [2; 32]);
        client
            .handle(reply(server.handle(ClientSession::hello("c"))))
            .unwrap();
        let spec = TestSpec::new(TestKind::TcpStream, Family::V4);
        server.handle(client.setup(spec).unwrap());
        client.handle(server.granted(grant())).unwrap();
        let Some(ServerAction::ReplyAndClose(m)) =
            server.test_ended(Err(ErrorMsg::new(ErrorCode::TestFailed, "boom")))
        else {
            panic!()
        };
        let err = client.handle(m).unwrap_err();
        assert_eq!(err.to_string(), "netserver: boom");
    }
}
