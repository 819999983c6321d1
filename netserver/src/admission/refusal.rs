//! Every refusal of the daemon, one value: a session it turns away, a test
//! it will not run. Each is mapped here, and only here, to what the client
//! is told (the wire's error code and its words, in whichever dialect the
//! session speaks: the core frames it) and to the metric's label; the log
//! says the same words.

use std::fmt;

use proto::{ErrorCode, ErrorMsg, TestKind};

use super::{census::SessionCap, descriptors::FdRefusal};
use crate::{
    metrics::{Metrics, Refused},
    policy::{OverBudget, PolicyRefusal, Scope},
};

/// Why a session or a test was turned away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// At a session cap (`--max-sessions`, `--max-per-client`), no idle
    /// session making room.
    Cap(SessionCap),
    /// The policy's sessions of its address or prefix (`--policy`).
    PolicySessions(OverBudget),
    /// Closed to make room for another: the idlest session (idle so many
    /// seconds), or the oldest connection that never spoke.
    Evicted { idle_s: Option<u64> },
    /// A wrong key (its refusal paced by address).
    Auth,
    /// A protocol or dialect this netserver does not serve.
    Protocol,
    /// As many tests are running or ending as sessions may run.
    Workers { alive: usize },
    /// Its file descriptors, for a test of `flows` flows.
    Descriptors { why: FdRefusal, flows: u32 },
    /// Its sockets' share of the kernel's memory: more than a test may.
    SocketShare { need: u64, share: u64, flows: u32 },
    /// Its sockets' share: taken by other tests now.
    SocketBusy { bytes: u64, free: u64, limit: u64 },
    /// Its buffers: more than a session may.
    BufferCap { need: u64, cap: u64 },
    /// Its buffers: more than the daemon's whole budget.
    BufferBudget { need: u64, budget: u64 },
    /// Its buffers: the budget taken by other tests now.
    BufferBusy { need: u64, free: u64, budget: u64 },
    /// The policy's test limits, budgets or token (`--policy`).
    Policy(PolicyRefusal),
    /// It waited its host's turn (`--schedule exclusive`) as long as it may.
    Queue { kind: TestKind, waited_s: u64 },
}

impl Refusal {
    /// The wire's error code: `Busy` where trying again later may work.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Refusal::Cap(_)
            | Refusal::PolicySessions(_)
            | Refusal::Evicted { .. }
            | Refusal::Workers { .. }
            | Refusal::SocketBusy { .. }
            | Refusal::BufferBusy { .. }
            | Refusal::Queue { .. } => ErrorCode::Busy,
            Refusal::Descriptors { why, .. } => match why {
                FdRefusal::PerTest { .. } => ErrorCode::InvalidRequest,
                _ => ErrorCode::Busy,
            },
            Refusal::Auth => ErrorCode::Auth,
            Refusal::Protocol | Refusal::SocketShare { .. } | Refusal::BufferCap { .. } => {
                ErrorCode::InvalidRequest
            }
            Refusal::BufferBudget { .. } => ErrorCode::Resource,
            Refusal::Policy(p) => match p {
                PolicyRefusal::Test(_) => ErrorCode::InvalidRequest,
                PolicyRefusal::Budget(_) => ErrorCode::Busy,
                PolicyRefusal::Token(_) => ErrorCode::Auth,
            },
        }
    }

    /// The metric's label (`netserver_refused_total{reason}`).
    pub(crate) fn metric(&self) -> Refused {
        match self {
            Refusal::Cap(SessionCap::Sessions(_)) | Refusal::Workers { .. } => Refused::Busy,
            Refusal::Cap(SessionCap::PerClient(_)) => Refused::PerAddress,
            Refusal::Evicted { .. } => Refused::Evicted,
            Refusal::Auth => Refused::Auth,
            Refusal::Protocol => Refused::Protocol,
            Refusal::Descriptors { why, .. } => match why {
                FdRefusal::PerAddress { .. } | FdRefusal::Tests { .. } => Refused::PerAddress,
                FdRefusal::PerTest { .. } | FdRefusal::Daemon { .. } => Refused::Descriptors,
            },
            Refusal::SocketShare { .. }
            | Refusal::SocketBusy { .. }
            | Refusal::BufferCap { .. }
            | Refusal::BufferBudget { .. }
            | Refusal::BufferBusy { .. } => Refused::Memory,
            Refusal::Queue { .. } => Refused::Queue,
            Refusal::PolicySessions(o) => of_scope(o.scope),
            Refusal::Policy(p) => match p {
                PolicyRefusal::Test(_) => Refused::Policy,
                PolicyRefusal::Budget(o) => of_scope(o.scope),
                PolicyRefusal::Token(_) => Refused::Token,
            },
        }
    }

    /// Counted, and what the client is told.
    pub(crate) fn told(&self, metrics: &Metrics) -> ErrorMsg {
        self.count(metrics);
        ErrorMsg::new(self.code(), self.to_string())
    }

    /// Counted (the client is told by the core, in its dialect).
    pub(crate) fn count(&self, metrics: &Metrics) {
        metrics.refused(self.metric());
    }
}

/// A budget's scope, as the metric names it.
fn of_scope(scope: Scope) -> Refused {
    match scope {
        Scope::Prefix(..) => Refused::Prefix,
        Scope::Token(_) => Refused::Token,
        Scope::Daemon | Scope::Address(_) => Refused::Quota,
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Cap(SessionCap::Sessions(n)) => write!(
                f,
                "netserver is busy: it already serves {n} sessions (--max-sessions); try again later"
            ),
            Refusal::Cap(SessionCap::PerClient(n)) => write!(
                f,
                "netserver is busy: {n} sessions from your address already (--max-per-client); try again later"
            ),
            Refusal::PolicySessions(o) => o.fmt(f),
            Refusal::Evicted { idle_s: Some(idle) } => write!(
                f,
                "netserver closed this session to make room for another client: it had run no test for {idle} s and the netserver is at its cap of sessions (--max-sessions, --max-per-client)"
            ),
            Refusal::Evicted { idle_s: None } => write!(
                f,
                "netserver closed this connection to make room: it sent nothing while others waited (--max-pending)"
            ),
            Refusal::Auth => write!(f, "authentication failed: the key does not match"),
            Refusal::Protocol => write!(f, "a protocol this netserver does not serve"),
            Refusal::Workers { alive } => write!(
                f,
                "netserver is busy: {alive} tests are running or ending (--max-sessions); try again shortly"
            ),
            Refusal::Descriptors { why, flows } => descriptors(f, *why, *flows),
            Refusal::SocketShare { need, share, flows } => write!(
                f,
                "socket buffers: the test's {flows} flows would hold up to {need} bytes of the kernel's socket memory, more than a test may ({share}: a quarter of netserver --socket-budget); ask for smaller buffers (-s/-S) or fewer flows"
            ),
            Refusal::SocketBusy { bytes, free, limit } => write!(
                f,
                "netserver's socket memory is taken by other tests: this one may hold {bytes} bytes, {free} of its {limit} are free (netserver --socket-budget); try again later"
            ),
            Refusal::BufferCap { need, cap } => write!(
                f,
                "buffers: the test would need {need} bytes of buffers on the server, more than its limit of {cap} a session"
            ),
            Refusal::BufferBudget { need, budget } => write!(
                f,
                "the test needs {need} bytes of buffers on the server, more than netserver's whole budget of {budget} (netserver --memory-budget)"
            ),
            Refusal::BufferBusy { need, free, budget } => write!(
                f,
                "netserver's buffer memory is taken by other tests: this one needs {need} bytes, {free} of its {budget} are free (netserver --memory-budget); try again later"
            ),
            Refusal::Policy(p) => p.fmt(f),
            Refusal::Queue { kind, waited_s } => write!(
                f,
                "netserver runs one client host's tests at a time (--schedule exclusive): {kind} waited {waited_s} s for its host's turn, the longest it may (--max-wait); try again later"
            ),
        }
    }
}

fn descriptors(f: &mut fmt::Formatter<'_>, why: FdRefusal, flows: u32) -> fmt::Result {
    match why {
        FdRefusal::PerTest { need, shares } => write!(
            f,
            "descriptors: the test ({flows} flows) would hold up to {need} of netserver's file descriptors, more than one test may ({}: netserver --max-test-fds, a share of its limit of {} open files); ask for fewer flows",
            shares.per_test, shares.open_files
        ),
        FdRefusal::PerAddress { need, held, shares } => write!(
            f,
            "netserver is busy: tests from your address hold {held} of the {} file descriptors an address may (a third of those for tests, or twice --max-test-fds where that is larger); this one needs {need}; try again when they end",
            shares.per_address
        ),
        FdRefusal::Tests { running, shares } => write!(
            f,
            "netserver is busy: {running} tests from your address are running, as many as an address may (--max-tests-per-client {}); try again when one ends",
            shares.tests_per_address
        ),
        FdRefusal::Daemon { need, free, shares } => write!(
            f,
            "netserver's file descriptors are taken by other tests: this one needs {need}, {free} of the {} for tests are free (its limit is {} open files); try again later",
            shares.tests, shares.open_files
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::descriptors::FdShares;

    /// Each refusal maps to one code and one label: busy where trying
    /// again later may work, a bad request where it never will.
    #[test]
    fn each_refusal_has_its_code_label_and_words() {
        let shares = FdShares::split(20_000, 256, 4096, Some(4_000), 3);
        for (r, code, label, words) in [
            (
                Refusal::Cap(SessionCap::Sessions(8)),
                ErrorCode::Busy,
                Refused::Busy,
                "--max-sessions",
            ),
            (
                Refusal::Cap(SessionCap::PerClient(2)),
                ErrorCode::Busy,
                Refused::PerAddress,
                "--max-per-client",
            ),
            (
                Refusal::Descriptors {
                    why: FdRefusal::PerTest { need: 9, shares },
                    flows: 4,
                },
                ErrorCode::InvalidRequest,
                Refused::Descriptors,
                "--max-test-fds",
            ),
            (
                Refusal::Descriptors {
                    why: FdRefusal::Tests { running: 3, shares },
                    flows: 1,
                },
                ErrorCode::Busy,
                Refused::PerAddress,
                "--max-tests-per-client",
            ),
            (
                Refusal::BufferCap { need: 2, cap: 1 },
                ErrorCode::InvalidRequest,
                Refused::Memory,
                "a session",
            ),
            (
                Refusal::BufferBudget { need: 2, budget: 1 },
                ErrorCode::Resource,
                Refused::Memory,
                "--memory-budget",
            ),
            (
                Refusal::SocketShare {
                    need: 2,
                    share: 1,
                    flows: 3,
                },
                ErrorCode::InvalidRequest,
                Refused::Memory,
                "--socket-budget",
            ),
            (
                Refusal::Queue {
                    kind: TestKind::TcpRr,
                    waited_s: 30,
                },
                ErrorCode::Busy,
                Refused::Queue,
                "--max-wait",
            ),
            (
                Refusal::Workers { alive: 4 },
                ErrorCode::Busy,
                Refused::Busy,
                "running or ending",
            ),
            (
                Refusal::Policy(PolicyRefusal::Budget(OverBudget {
                    scope: Scope::Prefix("198.18.0.0".parse().unwrap(), 24),
                    budget: "tests_per_hour",
                    limit: 5,
                    again_in: 60,
                })),
                ErrorCode::Busy,
                Refused::Prefix,
                "5 tests an hour",
            ),
        ] {
            assert_eq!(r.code(), code, "{r:?}");
            assert_eq!(r.metric(), label, "{r:?}");
            assert!(r.to_string().contains(words), "{r}");
        }
    }
}
