//! Ctrl-C: end the running tests early and still print their results, as
//! iperf3 does; a second Ctrl-C, or one outside a test, exits at once.
//! Several tests may run at once (`-t RPM`'s probes and its load, each load
//! flow a test of its own): Ctrl-C stops them all.

use std::{
    process,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread,
};

use engine::sys::{Asked, Signals};
use engine::timer::StopFlag;

/// The running tests' flags, each under its guard's number.
static CURRENT: Mutex<Vec<(u64, StopFlag)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Take SIGINT on a thread of its own. Call before any other thread starts,
/// so that every thread inherits the blocked signal.
pub fn install() {
    let Ok(set) = Signals::block(&[Asked::Interrupt]) else {
        return;
    };
    let _ = thread::Builder::new().name("sigint".into()).spawn(move || {
        loop {
            if set.wait().is_err() {
                return;
            }
            let flags = CURRENT
                .lock()
                .map(|mut c| std::mem::take(&mut *c))
                .unwrap_or_default();
            if flags.is_empty() {
                process::exit(130);
            }
            for (_, f) in flags {
                f.set();
            }
        }
    });
}

/// While the guard lives, Ctrl-C raises `flag` (and those of the other
/// tests running) instead of exiting.
pub fn stop_on_interrupt(flag: &StopFlag) -> Guard {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut c) = CURRENT.lock() {
        c.push((id, flag.clone()));
    }
    Guard(id)
}

#[derive(Debug)]
pub struct Guard(u64);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut c) = CURRENT.lock() {
            c.retain(|(id, _)| *id != self.0);
        }
    }
}

/// The tests of one run, stopped together by whoever holds the group (a
/// netserver's third-party test, whose client went away), apart from
/// Ctrl-C and from every other run of the process. A plan names its group
/// ([`crate::plan::Plan::stop_group`]); each test of the run (each
/// iteration, each load flow) joins it as it starts.
#[derive(Clone, Debug, Default)]
pub struct StopGroup(Arc<Mutex<Members>>);

#[derive(Debug, Default)]
struct Members {
    stopped: bool,
    flags: Vec<StopFlag>,
}

impl StopGroup {
    pub fn new() -> StopGroup {
        StopGroup::default()
    }

    /// `flag` is raised when the group stops (at once if it has).
    pub fn join(&self, flag: &StopFlag) {
        if let Ok(mut m) = self.0.lock() {
            if m.stopped {
                flag.set();
            } else {
                // (a test that ended keeps its place: the run's tests are
                // its iterations and load flows, a few dozen at most)
                m.flags.push(flag.clone());
            }
        }
    }

    /// Stop every test of the group, and any that joins later.
    pub fn stop(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.stopped = true;
            for f in m.flags.drain(..) {
                f.set();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group stops its own tests, those that join after, and no other.
    #[test]
    fn a_group_stops_its_tests_and_no_others() {
        let (g, other) = (StopGroup::new(), StopGroup::new());
        let (a, b, c) = (StopFlag::new(), StopFlag::new(), StopFlag::new());
        g.join(&a);
        other.join(&b);
        g.stop();
        assert!(a.is_set() && !b.is_set());
        g.join(&c);
        assert!(c.is_set(), "a test joining a stopped group stops at once");
    }
}
