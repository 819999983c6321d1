//! Ctrl-C: end a running test early and still print its results, as iperf3
//! does; a second Ctrl-C, or one outside a test, exits at once.

use std::{process, sync::Mutex, thread};

use engine::timer::StopFlag;
use nix::sys::signal::{SigSet, Signal};

static CURRENT: Mutex<Option<StopFlag>> = Mutex::new(None);

/// Take SIGINT on a thread of its own. Call before any other thread starts,
/// so that every thread inherits the blocked signal.
pub fn install() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    if set.thread_block().is_err() {
        return;
    }
    let _ = thread::Builder::new().name("sigint".into()).spawn(move || {
        loop {
            if set.wait().is_err() {
                return;
            }
            let flag = CURRENT.lock().ok().and_then(|mut c| c.take());
            match flag {
                Some(f) => f.set(),
                None => process::exit(130),
            }
        }
    });
}

/// While the guard lives, Ctrl-C raises `flag` instead of exiting.
pub fn stop_on_interrupt(flag: &StopFlag) -> Guard {
    if let Ok(mut c) = CURRENT.lock() {
        *c = Some(flag.clone());
    }
    Guard
}

#[derive(Debug)]
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut c) = CURRENT.lock() {
            *c = None;
        }
    }
}
