//! Ctrl-C: end the running tests early and still print their results, as
//! iperf3 does; a second Ctrl-C, or one outside a test, exits at once.
//! Several tests may run at once (`-t RPM`'s probes and its load, each load
//! flow a test of its own): Ctrl-C stops them all.

use std::{
    process,
    sync::{
        Mutex,
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

/// Stop every test running in this process now, as Ctrl-C would (a
/// netserver's third-party test whose client went away).
pub fn stop_all() {
    if let Ok(c) = CURRENT.lock() {
        for (_, f) in c.iter() {
            f.set();
        }
    }
}
