//! A netserver that can be shared (`--policy FILE`): budgets per client
//! address, per prefix and for the daemon ([`file::PolicyFile`]), what one
//! test may ask, counted in a bounded [`Ledger`] that is kept across a
//! restart ([`state`]) and reloaded from the file on SIGHUP. Without
//! `--policy`, nothing here refuses anything.
//!
//! What one test may ask is told to our clients in the hello
//! ([`proto::ServerLimits`]), so that our netperf fits its test to it and
//! says what it changed; other clients are refused in their own dialect,
//! with the same words as the log's.

pub mod file;
pub mod ledger;
pub mod state;

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, RwLock},
    time::{SystemTime, UNIX_EPOCH},
};

use engine::token::Token;
use proto::{LimitsAsked, OverLimit, ServerLimits, TestKind, TestSpec};

pub use file::PolicyFile;
pub use ledger::{Ledger, OverBudget, Scope};

/// The wall clock's seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why the policy could not be read, reloaded or its state kept: each
/// names the file (and, for a policy's text, the line) at fault.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--policy {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The text is not a policy (`message` names the line).
    #[error("--policy {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    /// The state file cannot be read, or is not a state.
    #[error("--policy: state_file {message}")]
    State { message: String },
    #[error("--policy: state_file {}: {source}", path.display())]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What one test asked beyond what the policy allows one test.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TestLimit {
    #[error("this netserver's policy limits tests to {max} s ({})", asked_length(*.asked))]
    TooLong { max: u64, asked: u64 },
    #[error(
        "this netserver's policy limits tests to {max} s, which a count (-l -N) cannot promise: give the test's length in seconds"
    )]
    Counted { max: u64 },
    #[error("this netserver's policy allows at most {max} flows a test ({asked} asked)")]
    TooManyFlows { max: u32, asked: u32 },
    #[error(
        "this netserver's policy allows at most {max} bits/s a test: pace the test at it (netperf: --rate; iperf3: -b), an unpaced stream is refused"
    )]
    Unpaced { max: u64 },
}

/// A test's asked length, in a refusal's words (0: an iperf3 client's
/// `-t 0`, which runs until it is stopped).
fn asked_length(secs: u64) -> String {
    if secs == 0 {
        "it asked to run until stopped".into()
    } else {
        format!("{secs} s asked")
    }
}

/// Why a client's token does not admit its test.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// Not a token at all (what is wrong with it).
    #[error("{0}")]
    Malformed(String),
    #[error("netserver policy: token {id:016x} expired {ago} s ago; ask for a new one")]
    Expired { id: u64, ago: u64 },
    #[error("netserver policy: token {id:016x} is for clients in {prefix}/{len}, not {ip}")]
    Elsewhere {
        id: u64,
        prefix: IpAddr,
        len: u8,
        ip: IpAddr,
    },
}

/// Why a test was refused by the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// It asked more than one test may.
    Test(TestLimit),
    /// A budget is used up.
    Budget(OverBudget),
    /// The client's token has expired, or is not for its address.
    Token(TokenRefusal),
}

impl std::fmt::Display for PolicyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyRefusal::Test(t) => t.fmt(f),
            PolicyRefusal::Token(t) => t.fmt(f),
            PolicyRefusal::Budget(o) => o.fmt(f),
        }
    }
}

/// Where a test was counted, for its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counted(Vec<Scope>);

/// A control session counted in its address's and prefix's sessions,
/// until dropped.
#[derive(Debug)]
pub struct SessionSlot {
    policy: Arc<Policy>,
    counted: Counted,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.policy.close_session(&self.counted);
    }
}

/// The daemon's policy.
#[derive(Debug)]
pub struct Policy {
    path: Option<PathBuf>,
    file: RwLock<Arc<PolicyFile>>,
    ledger: Mutex<Ledger>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::none()
    }
}

impl Policy {
    /// No policy: every budget open, nothing announced.
    pub fn none() -> Policy {
        let file = PolicyFile::default();
        Policy {
            path: None,
            ledger: Mutex::new(Ledger::new(file.max_entries())),
            file: RwLock::new(Arc::new(file)),
        }
    }

    /// Read the policy at `path`, and the counts its state file kept; an
    /// error names the file and the line at fault.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let file = read(path)?;
        let mut ledger = Ledger::new(file.max_entries());
        if let Some(state_file) = &file.daemon.state_file {
            let kept = state::load(state_file).map_err(|message| PolicyError::State { message })?;
            ledger.restore(kept.uses, unix_now());
            ledger.restore_tokens(kept.tokens, unix_now());
        }
        Ok(Policy {
            path: Some(path.to_path_buf()),
            ledger: Mutex::new(ledger),
            file: RwLock::new(Arc::new(file)),
        })
    }

    /// SIGHUP: read the file again. On an error the policy in force stays,
    /// and the error (naming the line) is returned for the log.
    pub fn reload(&self) -> Result<Option<String>, PolicyError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let file = read(path)?;
        if let Ok(mut l) = self.ledger.lock() {
            l.set_max(file.max_entries());
        }
        if let Ok(mut f) = self.file.write() {
            *f = Arc::new(file);
        }
        Ok(Some(format!("--policy {} reloaded", path.display())))
    }

    fn current(&self) -> Arc<PolicyFile> {
        self.file
            .read()
            .map_or_else(|_| Arc::new(PolicyFile::default()), |f| f.clone())
    }

    /// `[stamp]`: whom `--stamp`'s reflector answers (read again on
    /// SIGHUP with the rest).
    pub fn stamp(&self) -> file::StampPolicy {
        self.current().stamp.clone()
    }

    /// What one test may ask, for the hello.
    pub fn announced(&self) -> ServerLimits {
        ServerLimits::from(self.current().test)
    }

    /// The scopes `ip` is counted in, with `file`'s budgets.
    fn scopes(file: &PolicyFile, ip: IpAddr) -> [(Scope, file::Budget); 3] {
        let (prefix, len) = file.prefix.of(ip);
        let daemon = file::Budget {
            bytes_per_day: file.daemon.bytes_per_day,
            ..file::Budget::default()
        };
        [
            (Scope::Daemon, daemon),
            (Scope::Address(unmapped(ip)), file.address),
            (Scope::Prefix(prefix, len), file.prefix.budget()),
        ]
    }

    /// A control session from `ip` opens: refused where its address or
    /// prefix holds all the sessions it may, else counted until
    /// [`Policy::close_session`].
    pub fn open_session(self: &Arc<Self>, ip: IpAddr) -> Result<SessionSlot, OverBudget> {
        let file = self.current();
        let scopes = Self::scopes(&file, ip);
        let caps: Vec<(Scope, Option<usize>)> =
            scopes[1..].iter().map(|(s, b)| (*s, b.sessions)).collect();
        let counted = match self.ledger.lock() {
            Ok(mut l) => {
                l.open_session(&caps)?;
                Counted(caps.into_iter().map(|(s, _)| s).collect())
            }
            Err(_) => Counted::default(),
        };
        Ok(SessionSlot {
            policy: self.clone(),
            counted,
        })
    }

    fn close_session(&self, counted: &Counted) {
        if let Ok(mut l) = self.ledger.lock() {
            l.close_session(&counted.0);
        }
    }

    /// A test from `ip` asks to start: refused if it asks more than a test
    /// may or a budget of its address, prefix or the daemon is used up;
    /// else counted. A test the netserver sends is paced at the policy's
    /// rate where it asked none or more (`spec.rate_bps` set to it).
    ///
    /// `token`: the public part of the token the client proved, if any:
    /// refused once expired, from outside its prefix, or when it has
    /// started the tests it allows.
    pub fn admit(
        &self,
        ip: IpAddr,
        spec: &mut TestSpec,
        token: Option<&str>,
    ) -> Result<Counted, PolicyRefusal> {
        let file = self.current();
        let now = unix_now();
        let token = token
            .map(Token::parse)
            .transpose()
            .map_err(|e| PolicyRefusal::Token(TokenRefusal::Malformed(e)))?;
        if let Some(t) = &token {
            check_token(t, ip, now).map_err(PolicyRefusal::Token)?;
        }
        fit(&file.test, spec).map_err(PolicyRefusal::Test)?;
        let scopes = Self::scopes(&file, ip);
        let Ok(mut l) = self.ledger.lock() else {
            return Ok(Counted::default());
        };
        l.admit(&scopes, now).map_err(PolicyRefusal::Budget)?;
        if let Some(t) = &token
            && let Err(e) = l.admit_token(t.id, (t.tests, t.expires), now)
        {
            l.unadmit(&scopes);
            return Err(PolicyRefusal::Budget(e));
        }
        Ok(Counted(scopes.iter().map(|(s, _)| *s).collect()))
    }

    /// A test counted by [`Policy::admit`] ended, having moved `bytes` in
    /// `seconds`.
    pub fn done(&self, counted: &Counted, bytes: u64, seconds: u64) {
        if let Ok(mut l) = self.ledger.lock() {
            l.done(&counted.0, bytes, seconds, unix_now());
        }
    }

    /// The use of `scope` now.
    pub fn usage(&self, scope: Scope) -> ledger::Usage {
        self.ledger
            .lock()
            .map(|l| l.usage(scope))
            .unwrap_or_default()
    }

    /// Scopes remembered now.
    pub fn remembered(&self) -> usize {
        self.ledger.lock().map_or(0, |l| l.len())
    }

    /// Write the state file, if the policy names one.
    pub fn save(&self) -> Result<(), PolicyError> {
        let file = self.current();
        let Some(path) = &file.daemon.state_file else {
            return Ok(());
        };
        let (uses, tokens) = self
            .ledger
            .lock()
            .map(|l| (l.snapshot(), l.token_uses()))
            .unwrap_or_default();
        let s = state::State {
            written: unix_now(),
            uses,
            tokens,
        };
        state::save(path, &s).map_err(|source| PolicyError::Save {
            path: path.clone(),
            source,
        })
    }

    /// Whether a state file is kept.
    pub fn keeps_state(&self) -> bool {
        self.current().daemon.state_file.is_some()
    }
}

/// An IPv4 client on a dual-stack port, as its IPv4 address.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn read(path: &Path) -> Result<PolicyFile, PolicyError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut file = PolicyFile::parse(&text).map_err(|message| PolicyError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    // a relative state file is beside the policy
    if let (Some(state), Some(dir)) = (&mut file.daemon.state_file, path.parent())
        && state.is_relative()
    {
        *state = dir.join(&*state);
    }
    Ok(file)
}

/// A token's expiry and prefix, against the client and the clock.
fn check_token(t: &Token, ip: IpAddr, now: u64) -> Result<(), TokenRefusal> {
    if now >= t.expires {
        return Err(TokenRefusal::Expired {
            id: t.id,
            ago: now - t.expires,
        });
    }
    if !t.admits(ip) {
        let (prefix, len) = t.prefix.unwrap_or((ip, 0));
        return Err(TokenRefusal::Elsewhere {
            id: t.id,
            prefix,
            len,
            ip,
        });
    }
    Ok(())
}

/// The test fitted to what one test may ask, or why it cannot be.
fn fit(limits: &file::TestLimits, spec: &mut TestSpec) -> Result<(), TestLimit> {
    let limits = ServerLimits::from(*limits);
    let asked = LimitsAsked {
        seconds: spec.asked_seconds(),
        flows: spec.flows,
        // (both ways, the request's pace is both ends': the netserver's
        // held to the limit is the test's)
        client_sends: !spec.iperf3.bidir
            && matches!(spec.kind, TestKind::TcpStream | TestKind::UdpStream),
        server_sends: spec.iperf3.bidir
            || matches!(spec.kind, TestKind::TcpMaerts | TestKind::UdpMaerts),
        rate_bps: spec.rate_bps,
    };
    // the rule the client fitted its test by, from what this netserver
    // told: what it would have had to change arrives refused
    let fit = limits.fit(asked).map_err(|e| match e {
        OverLimit::Counted { max } => TestLimit::Counted { max },
        OverLimit::TooManyFlows { max, asked } => TestLimit::TooManyFlows { max, asked },
    })?;
    if let (Some(asked), Some(max)) = (asked.seconds, fit.seconds)
        && asked != max
    {
        return Err(TestLimit::TooLong { max, asked });
    }
    if let Some(max) = fit.rate_bps
        && fit.rate_bps != spec.rate_bps
    {
        if asked.client_sends {
            return Err(TestLimit::Unpaced { max });
        }
        // ours is paced at the policy's rate
        spec.rate_bps = Some(max);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{TestEnd, test::Family};

    fn spec(kind: TestKind, secs: u64) -> TestSpec {
        let mut s = TestSpec::new(kind, Family::V4);
        s.end = TestEnd::Time {
            millis: secs * 1000,
        };
        s
    }

    #[test]
    fn a_test_is_fitted_or_refused_by_name() {
        let l = file::TestLimits {
            max_seconds: Some(30),
            max_flows: Some(4),
            max_rate: Some(1_000_000),
        };
        let e = fit(&l, &mut spec(TestKind::TcpRr, 60)).unwrap_err();
        assert_eq!(e, TestLimit::TooLong { max: 30, asked: 60 });
        assert!(
            e.to_string().contains("limits tests to 30 s (60 s asked)"),
            "{e}"
        );
        // an iperf3 client's -t 0 runs until it is stopped: longer than any limit
        let mut endless = spec(TestKind::TcpStream, 0);
        endless.iperf3.client_ends_after_ms = Some(0);
        let e = fit(&l, &mut endless).unwrap_err();
        assert_eq!(e, TestLimit::TooLong { max: 30, asked: 0 });
        assert!(e.to_string().contains("until stopped"), "{e}");
        let mut counted = spec(TestKind::TcpRr, 0);
        counted.end = TestEnd::Transactions(10);
        let e = fit(&l, &mut counted).unwrap_err();
        assert_eq!(e, TestLimit::Counted { max: 30 });
        assert!(e.to_string().contains("a count"));
        let mut many = spec(TestKind::TcpRr, 10);
        many.flows = 5;
        let e = fit(&l, &mut many).unwrap_err();
        assert_eq!(e, TestLimit::TooManyFlows { max: 4, asked: 5 });
        assert!(e.to_string().contains("at most 4 flows"));
        // a stream the client sends must come paced
        let e = fit(&l, &mut spec(TestKind::UdpStream, 10)).unwrap_err();
        assert_eq!(e, TestLimit::Unpaced { max: 1_000_000 });
        assert!(e.to_string().contains("--rate"));
        let mut paced = spec(TestKind::TcpStream, 10);
        paced.rate_bps = Some(500_000);
        fit(&l, &mut paced).unwrap();
        // one the netserver sends is paced by it
        let mut maerts = spec(TestKind::TcpMaerts, 10);
        fit(&l, &mut maerts).unwrap();
        assert_eq!(maerts.rate_bps, Some(1_000_000));
        // an iperf3 client's own length counts
        let mut iperf3 = spec(TestKind::TcpRr, 0);
        iperf3.iperf3.client_ends_after_ms = Some(40_000);
        assert_eq!(
            fit(&l, &mut iperf3).unwrap_err(),
            TestLimit::TooLong { max: 30, asked: 40 }
        );
    }

    #[test]
    fn no_policy_refuses_nothing() {
        let p = Policy::none();
        let mut s = spec(TestKind::UdpStream, 100_000);
        s.flows = 10_000;
        for _ in 0..1000 {
            p.admit("10.0.0.1".parse().unwrap(), &mut s, None).unwrap();
        }
        assert_eq!(p.announced(), ServerLimits::default());
    }
}
