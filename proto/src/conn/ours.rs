//! This suite's protocol on a control connection: length-prefixed frames
//! (capped both ways), sealed once a key is agreed, carrying
//! [`crate::message`]'s messages; the sessions ([`crate::session`]) decide
//! what each one means.

use std::time::Instant;

use super::{
    ClientConnError, ClientSpeaker, FLOWS_PER_FRAME, MAX_FLOWS_REPORTED, ServerEvent,
    ServerSpeaker, Shared,
};
use crate::{
    capabilities::Capabilities,
    codec,
    error::ProtoError,
    facts::HostFacts,
    frame,
    message::{ClientMsg, ErrorCode, ErrorMsg, ServerMsg, ThirdParty},
    session::{
        Authenticator, ClientError, ClientEvent, ClientSession, Sealer, ServerAction, ServerSession,
    },
    test::{
        ClientDone, ClientSummary, FlowCounters, ForeignConnections, Grant,
        INTERIM_REPORTS_PER_FRAME, InterimReport, Limits, MAX_INTERIM_REPORTS, RxFigures,
        SideResults, TestSpec,
    },
};

/// Encode one message as a frame, sealed if `sealer` is given; the body is
/// checked against the cap before it goes out.
fn encode_frame<M: serde::Serialize>(
    msg: &M,
    sealer: &mut Option<Box<dyn Sealer>>,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    let mut body = Vec::new();
    codec::encode_into(msg, &mut body)?;
    if let Some(s) = sealer {
        s.seal(&mut body);
    }
    if body.len() > frame::MAX_FRAME {
        return Err(ProtoError::FrameTooLarge {
            len: body.len(),
            max: frame::MAX_FRAME,
        });
    }
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// Take the first whole frame off `inbuf`, opened if sealed. `Ok(None)`:
/// more bytes are needed.
fn take_frame(
    inbuf: &mut Vec<u8>,
    sealer: &mut Option<Box<dyn Sealer>>,
) -> Result<Option<Vec<u8>>, ProtoError> {
    let Some((body, used)) = frame::split(inbuf)? else {
        return Ok(None);
    };
    let body = match sealer {
        Some(s) => s.open(body).map_err(ProtoError::Auth)?,
        None => body.to_vec(),
    };
    inbuf.drain(..used);
    Ok(Some(body))
}

/// Our server end.
pub(crate) struct OurServer {
    session: ServerSession,
    sealer: Option<Box<dyn Sealer>>,
    /// The running test's interim reports, sent before its results.
    interims: Vec<InterimReport>,
    /// The host's facts at the test's end, sent before its results.
    facts: Option<Box<HostFacts>>,
}

impl OurServer {
    pub(crate) fn new(
        software: String,
        limits: Limits,
        auth: Option<Box<dyn Authenticator>>,
        nonce: [u8; 32],
        cpu: (u32, u32),
    ) -> OurServer {
        OurServer {
            session: ServerSession::new(software, limits, auth, nonce).with_cpu_info(cpu.0, cpu.1),
            sealer: None,
            interims: Vec::new(),
            facts: None,
        }
    }

    /// Tell the client in the hello what one test may ask.
    pub(crate) fn announcing(mut self, limits: crate::ServerLimits) -> OurServer {
        self.session = self.session.with_announced(limits);
        self
    }

    /// Run third-party tests (`--fleet`), and say so in the hello.
    pub(crate) fn fleet(mut self, fleet: bool) -> OurServer {
        self.session = self.session.with_fleet(fleet);
        self
    }

    /// Queue one message, sealed if the session is; a message that would
    /// not fit a frame is replaced by an error saying so.
    fn send(&mut self, s: &mut Shared, msg: &ServerMsg) {
        if let Err(e) = encode_frame(msg, &mut self.sealer, &mut s.outbuf) {
            s.log(0, format!("cannot send a reply: {e}"));
            let err = ServerMsg::Error(ErrorMsg::new(
                ErrorCode::TestFailed,
                format!("netserver cannot send its reply: {e}"),
            ));
            let _ = encode_frame(&err, &mut self.sealer, &mut s.outbuf);
        }
    }

    /// Results, with what was turned away from the data port and per-flow
    /// counters in frames of their own first, when there are some.
    fn send_results(&mut self, s: &mut Shared, mut r: Box<SideResults>) {
        if let Some(facts) = self.facts.take() {
            self.send(s, &ServerMsg::Facts(facts));
        }
        if r.foreign_connections.closed > 0 && self.session.peer_can("foreign") {
            self.send(s, &ServerMsg::Foreign(r.foreign_connections));
        }
        if r.rx != RxFigures::default() && self.session.peer_can("paths") {
            self.send(s, &ServerMsg::Received(r.rx));
        }
        if let Some(ecn) = r.ecn.take()
            && self.session.peer_can("ecn")
        {
            self.send(s, &ServerMsg::Ecn(Box::new(ecn)));
        }
        // the interim reports, in frames of their own
        let interims = std::mem::take(&mut self.interims);
        for chunk in interims.chunks(INTERIM_REPORTS_PER_FRAME) {
            self.send(s, &ServerMsg::Interim(chunk.to_vec()));
        }
        // a windowed test's whole-run counters first, in frames of their own
        let totals = std::mem::take(&mut r.totals);
        for (i, chunk) in totals.chunks(FLOWS_PER_FRAME).enumerate() {
            self.send(
                s,
                &ServerMsg::FlowTotals {
                    first: (i * FLOWS_PER_FRAME) as u32,
                    counters: chunk.to_vec(),
                },
            );
        }
        if r.flows.len() > FLOWS_PER_FRAME {
            let flows = std::mem::take(&mut r.flows);
            for (i, chunk) in flows.chunks(FLOWS_PER_FRAME).enumerate() {
                self.send(
                    s,
                    &ServerMsg::Flows {
                        first: (i * FLOWS_PER_FRAME) as u32,
                        counters: chunk.to_vec(),
                    },
                );
            }
            r.flow_count = flows.len() as u32;
        } else if !r.flows.is_empty() {
            r.flow_count = r.flows.len() as u32;
        }
        self.send(s, &ServerMsg::Results(r.clone()));
        s.event(ServerEvent::ResultsSent(r));
    }

    fn act(&mut self, s: &mut Shared, action: ServerAction, now: Instant) {
        match action {
            ServerAction::Reply(m) => {
                self.send(s, &m);
                // The proofs are exchanged: seal every frame from now on.
                if matches!(m, ServerMsg::AuthOk { .. }) {
                    self.sealer = self.session.sealer();
                }
            }
            ServerAction::ReplyAndClose(m) => {
                if let ServerMsg::Error(e) = &m {
                    match e.code {
                        ErrorCode::Auth => s.event(ServerEvent::AuthFailed),
                        ErrorCode::Protocol | ErrorCode::Version => {
                            s.event(ServerEvent::ProtocolError)
                        }
                        _ => {}
                    }
                    s.refused(e.message.clone());
                }
                s.abort_test();
                self.send(s, &m);
                s.close(now);
            }
            ServerAction::Prepare(spec) => s.event(ServerEvent::Prepare(spec)),
            ServerAction::ClientDone(done) => s.event(ServerEvent::ClientDone(done)),
            ServerAction::SendResults(m) => {
                s.test_over(now);
                match m {
                    ServerMsg::Results(r) => self.send_results(s, r),
                    m => self.send(s, &m),
                }
            }
            ServerAction::Close => s.close(now),
            ServerAction::Summary(summary) => s.event(ServerEvent::Summary(summary)),
            ServerAction::ThirdParty(req) => {
                // the test deadline holds it, as a test of ours
                s.test_granted(now);
                s.event(ServerEvent::ThirdParty(req));
            }
        }
    }
}

impl ServerSpeaker for OurServer {
    fn third_party_ended(
        &mut self,
        s: &mut Shared,
        outcome: Result<String, ErrorMsg>,
        now: Instant,
    ) {
        s.test_over(now);
        for m in self.session.third_party_ended(outcome) {
            self.send(s, &m);
        }
    }

    fn queued(&mut self, s: &mut Shared, ahead: u32, limit_secs: u32) {
        if self.session.peer_can("queue") {
            self.send(s, &ServerMsg::Queued { ahead, limit_secs });
        }
    }

    fn established(&self) -> bool {
        self.session.established()
    }

    fn process(&mut self, s: &mut Shared, now: Instant) {
        while !s.closing() {
            let next = take_frame(&mut s.inbuf, &mut self.sealer)
                .and_then(|b| b.map(|b| ClientMsg::decode(&b)).transpose());
            match next {
                Ok(Some(msg)) => {
                    if let Some(err) = s.request(now) {
                        self.tell(s, &err);
                        s.close(now);
                        return;
                    }
                    let was = self.session.established();
                    let action = self.session.handle(msg);
                    if matches!(action, ServerAction::Prepare(_)) {
                        s.test_requested();
                    }
                    self.act(s, action, now);
                    if !was && self.session.established() {
                        s.event(ServerEvent::Established);
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    s.log(1, e.to_string());
                    s.event(ServerEvent::ProtocolError);
                    let msg = self.session.protocol_error(&e);
                    s.abort_test();
                    self.send(s, &msg);
                    s.close(now);
                    return;
                }
            }
        }
    }

    fn granted(&mut self, s: &mut Shared, grant: Grant, now: Instant) {
        let m = self.session.granted(grant);
        s.test_granted(now);
        self.send(s, &m);
    }

    fn prepare_failed(&mut self, s: &mut Shared, err: ErrorMsg) {
        let m = self.session.prepare_failed(err);
        self.send(s, &m);
    }

    fn host_facts(&mut self, facts: HostFacts) {
        // only a client that reads them
        if self.session.peer_can("facts") {
            self.facts = Some(Box::new(facts));
        }
    }

    fn interim(&mut self, reports: Vec<InterimReport>) {
        // only a client that asked for them, which it does of a server
        // that names `interim`
        if self.session.peer_can("interim") {
            self.interims = reports;
            self.interims.truncate(MAX_INTERIM_REPORTS);
        }
    }

    fn test_ended(&mut self, s: &mut Shared, outcome: Result<SideResults, ErrorMsg>, now: Instant) {
        if let Some(action) = self.session.test_ended(outcome) {
            if matches!(action, ServerAction::ReplyAndClose(_)) {
                s.test_deadline = None;
            }
            self.act(s, action, now);
        }
    }

    fn tell(&mut self, s: &mut Shared, err: &ErrorMsg) {
        self.send(s, &ServerMsg::Error(err.clone()));
    }

    fn peer_can(&self, capability: &str) -> bool {
        self.session.peer_can(capability)
    }

    fn token(&self) -> Option<&str> {
        self.session.token()
    }
}

/// Our client end: the session, the sealing, and the counters that come in
/// frames of their own before a test's results.
pub(crate) struct OurClient {
    session: ClientSession,
    sealer: Option<Box<dyn Sealer>>,
    capabilities: Capabilities,
    flows: Vec<FlowCounters>,
    /// A windowed test's whole-run counters, from `FlowTotals` frames.
    totals: Vec<FlowCounters>,
    /// What the server turned away from the data port, from a `Foreign`
    /// frame.
    foreign: ForeignConnections,
    /// The server's interim reports, from `Interim` frames.
    interims: Vec<InterimReport>,
    /// What the server's receive path did, from a `Received` frame.
    rx: RxFigures,
    /// What the server saw of ECN, from an `Ecn` frame.
    ecn: Option<crate::ecn::EcnReport>,
    /// The turn queue's place, from a `Queued` frame, until taken.
    queued: Option<(u32, u32)>,
    /// The netserver's host, from a `Facts` frame, until taken.
    facts: Option<Box<HostFacts>>,
    /// A third-party test's JSON document, from its parts so far.
    third_party: String,
}

impl OurClient {
    /// The hello is queued in `out`, padded to netperf 2.7's 656 bytes: our
    /// netserver reads the hello and ignores what follows it; netperf
    /// 2.7's reads one whole request of an unknown type and answers it at
    /// once (serv_errno 998), which tells us what it is without waiting.
    pub(crate) fn new(
        session: ClientSession,
        software: &str,
        out: &mut Vec<u8>,
    ) -> Result<OurClient, ClientConnError> {
        let mut c = OurClient {
            session,
            sealer: None,
            capabilities: Capabilities::from_names("", &[]),
            flows: Vec::new(),
            totals: Vec::new(),
            foreign: ForeignConnections::default(),
            interims: Vec::new(),
            rx: RxFigures::default(),
            ecn: None,
            queued: None,
            facts: None,
            third_party: String::new(),
        };
        let start = out.len();
        let hello = c.session.hello_as(software);
        c.send(&hello, out)?;
        let total = crate::netperf2::FRAME_LEN;
        if out.len() - start < total
            && let Some(len) = out.get_mut(start..start + 4)
        {
            len.copy_from_slice(&((total - 4) as u32).to_be_bytes());
            out.resize(start + total, 0);
        }
        Ok(c)
    }

    fn send(&mut self, msg: &ClientMsg, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        Ok(encode_frame(msg, &mut self.sealer, out)?)
    }

    /// Gather a frame of flow counters; whether `msg` was one.
    fn gather(&mut self, msg: &ServerMsg) -> Result<bool, ClientConnError> {
        let (list, first, counters) = match msg {
            ServerMsg::Foreign(f) => {
                self.foreign = *f;
                return Ok(true);
            }
            ServerMsg::Received(rx) => {
                self.rx = *rx;
                return Ok(true);
            }
            ServerMsg::Ecn(e) => {
                e.check()?;
                self.ecn = Some((**e).clone());
                return Ok(true);
            }
            ServerMsg::Facts(f) => {
                self.facts = Some(Box::new((**f).clone().bounded()));
                return Ok(true);
            }
            ServerMsg::Queued { ahead, limit_secs } => {
                self.queued = Some((*ahead, *limit_secs));
                return Ok(true);
            }
            ServerMsg::Interim(reports) => {
                if self.interims.len() + reports.len() > MAX_INTERIM_REPORTS {
                    return Err(ProtoError::Malformed(format!(
                        "more than {MAX_INTERIM_REPORTS} interim reports"
                    ))
                    .into());
                }
                self.interims.extend_from_slice(reports);
                return Ok(true);
            }
            ServerMsg::Flows { first, counters } => (&mut self.flows, first, counters),
            ServerMsg::FlowTotals { first, counters } => (&mut self.totals, first, counters),
            _ => return Ok(false),
        };
        if *first as usize != list.len() {
            return Err(ProtoError::Malformed(format!(
                "flow counters from flow {first}, expected {}",
                list.len()
            ))
            .into());
        }
        if list.len() + counters.len() > MAX_FLOWS_REPORTED {
            return Err(ProtoError::Malformed(format!(
                "counters of more than {MAX_FLOWS_REPORTED} flows"
            ))
            .into());
        }
        list.extend_from_slice(counters);
        Ok(true)
    }

    /// The results, with what came before them in frames of their own.
    fn complete(&mut self, mut r: Box<SideResults>) -> Result<Box<SideResults>, ClientConnError> {
        if !self.flows.is_empty() {
            r.flows = std::mem::take(&mut self.flows);
        }
        r.totals = std::mem::take(&mut self.totals);
        r.foreign_connections = std::mem::take(&mut self.foreign);
        r.rx = std::mem::take(&mut self.rx);
        r.ecn = self.ecn.take();
        if !r.totals.is_empty() && r.totals.len() != (r.flow_count.max(1) as usize) {
            return Err(ProtoError::Malformed(format!(
                "results of {} flows carried whole-run counters of {}",
                r.flow_count,
                r.totals.len()
            ))
            .into());
        }
        if r.flows.len() != r.flow_count as usize && !(r.flow_count <= 1 && r.flows.is_empty()) {
            return Err(ProtoError::Malformed(format!(
                "results of {} flows carried counters of {}",
                r.flow_count,
                r.flows.len()
            ))
            .into());
        }
        Ok(r)
    }
}

impl ClientSpeaker for OurClient {
    fn take_queued(&mut self) -> Option<(u32, u32)> {
        self.queued.take()
    }

    fn take_facts(&mut self) -> Option<Box<HostFacts>> {
        self.facts.take()
    }

    fn setup(&mut self, spec: TestSpec, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        self.interims.clear();
        self.facts = None;
        let m = self.session.setup(spec)?;
        self.send(&m, out)
    }

    fn done(&mut self, done: ClientDone, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        let m = self.session.done(done)?;
        self.send(&m, out)?;
        self.flows.clear();
        self.foreign = ForeignConnections::default();
        self.rx = RxFigures::default();
        self.ecn = None;
        Ok(())
    }

    fn third_party(&mut self, req: ThirdParty, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        if !self.session.server_can(crate::session::FLEET) {
            let why = if self.session.server_can(crate::session::FLEET_WORDS) {
                "this netserver runs the third-party tests of an older netperf (its requests were netperf's words, ours are typed): upgrade it"
            } else {
                "this netserver does not run third-party tests (it was not started with --fleet)"
            };
            return Err(ClientError::Server(ErrorMsg::new(ErrorCode::Unsupported, why)).into());
        }
        self.third_party.clear();
        let m = self.session.third_party(req)?;
        self.send(&m, out)
    }

    fn calibrate(&mut self, _out: &mut Vec<u8>) -> bool {
        // the hello told
        false
    }

    fn bye(&mut self, out: &mut Vec<u8>) {
        let _ = self.send(&ClientMsg::Bye, out);
    }

    fn handle(
        &mut self,
        inbuf: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Option<ClientEvent>, ClientConnError> {
        while let Some(body) = take_frame(inbuf, &mut self.sealer)? {
            let msg = ServerMsg::decode(&body)?;
            if self.gather(&msg)? {
                continue;
            }
            if let ServerMsg::Hello(h) = &msg {
                self.capabilities =
                    Capabilities::from_names(&h.hello.software, &h.hello.capabilities);
            }
            match self.session.handle(msg)? {
                ClientEvent::Send(m) => self.send(&m, out)?,
                ClientEvent::Established => {
                    // The proofs are exchanged: seal every frame from now on.
                    self.sealer = self.session.sealer();
                    return Ok(Some(ClientEvent::Established));
                }
                ClientEvent::Results(r) => {
                    return Ok(Some(ClientEvent::Results(self.complete(r)?)));
                }
                ClientEvent::ThirdPartyPart(p) => {
                    if self.third_party.len() + p.len() > crate::message::THIRD_PARTY_MAX_RESULT {
                        return Err(ProtoError::Malformed(format!(
                            "a third-party test's JSON document longer than {} bytes",
                            crate::message::THIRD_PARTY_MAX_RESULT
                        ))
                        .into());
                    }
                    self.third_party.push_str(&p);
                }
                ClientEvent::ThirdParty(last) => {
                    let mut all = std::mem::take(&mut self.third_party);
                    all.push_str(&last);
                    return Ok(Some(ClientEvent::ThirdParty(all)));
                }
                e => return Ok(Some(e)),
            }
        }
        Ok(None)
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn server_cpu(&self) -> (u32, u32) {
        self.session.server_cpu()
    }

    fn authenticated(&self) -> bool {
        self.session.auth_nonces().is_some()
    }

    fn take_interims(&mut self) -> Vec<InterimReport> {
        std::mem::take(&mut self.interims)
    }

    fn summary(&mut self, mut summary: ClientSummary, out: &mut Vec<u8>) {
        if self.capabilities.summary {
            // the flows' own counters stay here: a summary fits a frame
            summary.local.flows.clear();
            let _ = self.send(&ClientMsg::Summary(Box::new(summary)), out);
        }
    }
}
