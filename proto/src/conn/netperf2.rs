//! netperf 2.7's protocol on a control connection, both ends: fixed
//! 656-byte frames whose first word is the request type and second a CPU
//! number or an errno ([`crate::netperf2`] has the frames and their
//! mapping onto our tests). It has no greeting and no version; a test's
//! end is told on the data connections, not here.

use std::{io, time::Instant};

use super::{ClientConnError, ClientSpeaker, Netperf2Policy, ServerEvent, ServerSpeaker, Shared};
use crate::{
    capabilities::Capabilities,
    dialect::{self, Dialect},
    message::{ErrorCode, ErrorMsg},
    netperf2::{self, FRAME_LEN, Frame, Request, Served},
    session::{ClientError, ClientEvent},
    test::{ClientDone, Grant, Limits, SideResults, TestSpec},
};

/// netperf 2.7's server end, or, when this netserver refuses netperf 2.7
/// clients, the refusal in their frame.
pub(crate) struct Netperf2Server {
    policy: Netperf2Policy,
    limits: Limits,
    cpu: (u32, u32),
    /// The passphrase frame came (or none is needed).
    passed: bool,
    /// The daemon's key, which signs tokens: a token given as `-Z`'s
    /// passphrase lets a client in where the key is required.
    auth: Option<Box<dyn crate::session::Authenticator>>,
    /// The public part of the token its passphrase carried.
    token: Option<String>,
    /// The test being served.
    served: Option<Served>,
    /// When the server ends the test itself (netserver 2.7's padded timer).
    pad_deadline: Option<Instant>,
    /// The padded timer ended the running test.
    padded: bool,
}

impl Netperf2Server {
    pub(crate) fn new(
        policy: Netperf2Policy,
        limits: Limits,
        (cpu, auth): ((u32, u32), Option<Box<dyn crate::session::Authenticator>>),
        s: &mut Shared,
    ) -> Netperf2Server {
        let passed = policy.passphrase.is_none() && policy.serve;
        if policy.serve {
            s.log(2, "netperf 2.7 client");
            if passed {
                s.event(ServerEvent::Established);
            }
        }
        Netperf2Server {
            policy,
            limits,
            cpu,
            passed,
            auth,
            token: None,
            served: None,
            pad_deadline: None,
            padded: false,
        }
    }

    fn send(s: &mut Shared, f: &Frame) {
        s.outbuf.extend_from_slice(f.as_bytes());
    }

    /// Refused by policy: told why in its own frame, and closed.
    fn refuse(&mut self, s: &mut Shared, now: Instant) {
        let bytes = std::mem::take(&mut s.inbuf);
        let refusal = dialect::netperf2_refusal(&bytes, self.policy.refused);
        s.outbuf.extend_from_slice(&refusal);
        s.event(ServerEvent::Foreign {
            dialect: Dialect::Netperf2,
            bytes,
        });
        s.close(now);
    }

    /// The passphrase, or a request before it: whether to go on.
    fn check_passphrase(&mut self, s: &mut Shared, req: &Request, now: Instant) -> bool {
        if let Request::Passphrase(text) = req {
            if self.passed && self.token.is_none() {
                // served without one, yet it came with a token: its
                // expiry, prefix and count apply
                self.token = self.auth.as_ref().and_then(|a| a.signed_token(text));
            }
            if !self.passed {
                let right = self.policy.passphrase.as_ref().is_some_and(|p| {
                    crate::session::constant_time_eq(p.as_bytes(), text.as_bytes())
                });
                self.token = self
                    .auth
                    .as_ref()
                    .filter(|_| !right)
                    .and_then(|a| a.signed_token(text));
                if right || self.token.is_some() {
                    self.passed = true;
                    s.event(ServerEvent::Established);
                } else {
                    // as netserver 2.7: closed without a word
                    s.event(ServerEvent::AuthFailed);
                    s.refused("a netperf 2.7 client with the wrong passphrase");
                    s.close(now);
                }
            }
            // later, or unneeded, passphrases are ignored, as netserver 2.7
            return false;
        }
        if !self.passed {
            if !self.policy.serve {
                // the key is required: told so in its frame
                self.refuse(s, now);
                return false;
            }
            s.event(ServerEvent::AuthFailed);
            s.refused("a netperf 2.7 client without the passphrase (-Z)");
            s.close(now);
            return false;
        }
        true
    }

    /// Where netperf 2.7's clients are refused because the key is
    /// required, one whose `-Z` carries a token this key signed is served.
    fn token_door(&self) -> bool {
        self.policy.refused == dialect::Netperf2Refused::KeyRequired && self.auth.is_some()
    }

    /// A request other than a test's, answered at once: whether it was one.
    fn answer(&mut self, s: &mut Shared, req: &Request) -> bool {
        let reply = match req {
            Request::CpuCalibrate => {
                let (cpus, rate) = self.cpu;
                netperf2::cpu_calibrate_reply(rate as f32, cpus)
            }
            Request::Debug => Frame::new(netperf2::DEBUG_OK, 0),
            Request::SysInfo => netperf2::sysinfo_reply(),
            Request::Unknown(code) => {
                s.log(1, format!("netperf 2.7 client: unknown request {code}"));
                netperf2::error_frame(0, netperf2::UNKNOWN_REQUEST)
            }
            Request::Passphrase(_) => return true,
            Request::Omni(_) | Request::Classic(_) => return false,
        };
        Self::send(s, &reply);
        true
    }

    /// A test request: prepared, or refused with its errno.
    fn test(&mut self, s: &mut Shared, req: &Request, now: Instant) {
        let fam = self.policy.control_family;
        let served = match req {
            Request::Omni(r) => netperf2::serve_omni(r, fam),
            Request::Classic(r) => netperf2::serve_classic(r, fam),
            _ => return,
        };
        let reply_type = match req {
            Request::Classic(r) => r.code + 1,
            _ => netperf2::OMNI_RESPONSE,
        };
        if self.served.is_some() {
            // netperf 2.7 sends nothing during a test
            s.log(1, "netperf 2.7 client: a request during a test");
            s.event(ServerEvent::ProtocolError);
            s.abort_test();
            s.close(now);
            return;
        }
        let served = served.and_then(|sv| match sv.spec.validate(&self.limits) {
            Ok(()) => Ok(sv),
            Err(e) => Err(netperf2::Refusal {
                errno: netperf2::EINVAL,
                why: e.to_string(),
            }),
        });
        match served {
            Ok(sv) => {
                let spec = Box::new(sv.spec.clone());
                self.served = Some(sv);
                self.padded = false;
                s.test_requested();
                s.event(ServerEvent::Prepare(spec));
            }
            Err(r) => {
                s.refused(format!("netperf 2.7 request: {}", r.why));
                Self::send(s, &netperf2::error_frame(reply_type, r.errno));
            }
        }
    }
}

impl ServerSpeaker for Netperf2Server {
    fn established(&self) -> bool {
        (self.policy.serve || self.token.is_some()) && self.passed
    }

    fn token(&self) -> Option<&str> {
        self.token.as_deref().filter(|_| self.passed)
    }

    fn process(&mut self, s: &mut Shared, now: Instant) {
        if !self.policy.serve && !self.token_door() {
            return self.refuse(s, now);
        }
        while !s.closing() {
            let Some(f) = Frame::from_bytes(&s.inbuf) else {
                return;
            };
            s.inbuf.drain(..FRAME_LEN);
            if let Some(err) = s.request(now) {
                self.tell(s, &err);
                s.close(now);
                return;
            }
            let req = Request::decode(&f);
            if !self.check_passphrase(s, &req, now) || self.answer(s, &req) {
                continue;
            }
            self.test(s, &req, now);
        }
    }

    fn granted(&mut self, s: &mut Shared, grant: Grant, now: Instant) {
        if let Some(sv) = &self.served {
            Self::send(s, &netperf2::response(sv, &grant));
            self.pad_deadline = sv.pad_timer.map(|d| now + d);
            s.test_granted(now);
        }
    }

    fn prepare_failed(&mut self, s: &mut Shared, err: ErrorMsg) {
        let kind = match self.served.take() {
            Some(sv) if sv.code != netperf2::DO_OMNI => sv.code + 1,
            _ => netperf2::OMNI_RESPONSE,
        };
        s.refused(format!("netperf 2.7 request: {}", err.message));
        Self::send(
            s,
            &netperf2::error_frame(kind, netperf2::errno_of(err.code)),
        );
    }

    fn test_ended(&mut self, s: &mut Shared, outcome: Result<SideResults, ErrorMsg>, now: Instant) {
        let Some(sv) = self.served.take() else { return };
        self.pad_deadline = None;
        s.test_over(now);
        match outcome {
            Ok(r) => {
                Self::send(s, &netperf2::results(&sv, &r, self.padded));
                s.event(ServerEvent::ResultsSent(Box::new(r)));
            }
            Err(e) => {
                // netserver 2.7 sends the errno and ends the connection
                let f = netperf2::error_frame(netperf2::OMNI_RESULTS, netperf2::errno_of(e.code));
                Self::send(s, &f);
                s.close(now);
            }
        }
    }

    fn tell(&mut self, s: &mut Shared, err: &ErrorMsg) {
        // netperf 2.7 reads a response or results frame: an errno
        s.log(1, format!("netperf 2.7 client: {}", err.message));
        Self::send(s, &netperf2::error_frame(0, netperf2::errno_of(err.code)));
    }

    fn own_deadline(&self) -> Option<Instant> {
        self.pad_deadline
    }

    fn own_timeout(&mut self, s: &mut Shared, _now: Instant) {
        self.pad_deadline = None;
        self.padded = true;
        s.event(ServerEvent::EndTest);
    }
}

/// What a netperf 2.7 client awaits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    Nothing,
    Response,
    Results,
    Calibration,
}

/// netperf 2.7's client end, for netservers 2.7 that labs already run.
pub(crate) struct Netperf2Client {
    capabilities: Capabilities,
    /// Bytes still to drop: the rest of netserver 2.7's answer to our
    /// hello, which told us what it is.
    skip: usize,
    /// Established to the caller (once what to skip is gone).
    told: bool,
    awaiting: Awaiting,
    /// The last response announced CPU figures (only then are the
    /// results' CPU words meaningful).
    measured: bool,
    cpu: Option<(u32, u32)>,
}

impl Netperf2Client {
    /// `passphrase`: netperf 2.7's `-Z`, sent first; `skip`: bytes of
    /// netserver 2.7's answer to our probe still to come and be dropped.
    pub(crate) fn new(passphrase: Option<&str>, skip: usize, out: &mut Vec<u8>) -> Netperf2Client {
        if let Some(p) = passphrase {
            out.extend_from_slice(netperf2::passphrase_frame(p).as_bytes());
        }
        Netperf2Client {
            capabilities: Capabilities::netperf2(),
            skip,
            told: skip == 0,
            awaiting: Awaiting::Nothing,
            measured: false,
            cpu: None,
        }
    }
}

/// What netserver 2.7's serv_errno means (Linux numbering, its own codes).
fn remote_error(n: i32) -> String {
    match n {
        netperf2::UNKNOWN_REQUEST => "it does not know this request".into(),
        n => io::Error::from_raw_os_error(n).to_string(),
    }
}

impl ClientSpeaker for Netperf2Client {
    fn setup(&mut self, spec: TestSpec, out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        let req = netperf2::omni_request(&spec, spec.peer_data_port.unwrap_or(0));
        out.extend_from_slice(req.as_bytes());
        self.awaiting = Awaiting::Response;
        Ok(())
    }

    fn done(&mut self, _done: ClientDone, _out: &mut Vec<u8>) -> Result<(), ClientConnError> {
        // the data connections told the end; the results just come
        self.awaiting = Awaiting::Results;
        Ok(())
    }

    fn calibrate(&mut self, out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(netperf2::cpu_calibrate_request().as_bytes());
        self.awaiting = Awaiting::Calibration;
        true
    }

    fn bye(&mut self, _out: &mut Vec<u8>) {
        self.awaiting = Awaiting::Nothing;
    }

    fn handle(
        &mut self,
        inbuf: &mut Vec<u8>,
        _out: &mut Vec<u8>,
    ) -> Result<Option<ClientEvent>, ClientConnError> {
        if self.skip > 0 {
            let n = self.skip.min(inbuf.len());
            inbuf.drain(..n);
            self.skip -= n;
            if self.skip > 0 {
                return Ok(None);
            }
        }
        if !self.told {
            self.told = true;
            return Ok(Some(ClientEvent::Established));
        }
        let Some(f) = Frame::from_bytes(inbuf) else {
            return Ok(None);
        };
        inbuf.drain(..FRAME_LEN);
        let awaiting = std::mem::replace(&mut self.awaiting, Awaiting::Nothing);
        // netserver 2.7 does not reset serv_errno for a calibration (its
        // earlier 998, to our hello, sticks): the figures are fresh
        let errno = f.int(1);
        if errno != 0 && awaiting != Awaiting::Calibration {
            return Err(ClientError::Server(ErrorMsg::new(
                match errno {
                    13 => ErrorCode::Auth,
                    16 => ErrorCode::Busy,
                    22 => ErrorCode::InvalidRequest,
                    _ => ErrorCode::TestFailed,
                },
                format!("remote error {errno} ({})", remote_error(errno)),
            ))
            .into());
        }
        Ok(Some(match awaiting {
            Awaiting::Response => {
                let g = netperf2::grant_of(&f);
                if g.data_port == 0 {
                    return Err(ClientError::Server(ErrorMsg::new(
                        ErrorCode::TestFailed,
                        "its response names no data port",
                    ))
                    .into());
                }
                self.measured = g.measure_cpu;
                ClientEvent::Granted(g)
            }
            Awaiting::Results => {
                ClientEvent::Results(Box::new(netperf2::side_results_of(&f, self.measured)))
            }
            Awaiting::Calibration => {
                // (read whatever serv_errno says, see above)
                let (rate, cpus) = (
                    f.float(netperf2::frame::ts(0)),
                    f.word(netperf2::frame::ts(4)),
                );
                self.cpu = Some((cpus, rate.max(0.0) as u32));
                ClientEvent::Calibrated
            }
            Awaiting::Nothing => {
                return Err(crate::error::ProtoError::Malformed(format!(
                    "a frame of type {} that nothing asked for",
                    f.word(0)
                ))
                .into());
            }
        }))
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn server_cpu(&self) -> (u32, u32) {
        self.cpu.unwrap_or((0, 0))
    }

    fn half_closes(&self) -> bool {
        true
    }
}
