//! Test workers alive.

use std::{
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

/// Test workers alive, those of aborted tests included: a session that
/// goes away does not wait for its worker, which ends on its own soon
/// after; this bounds how many can be alive at once, and lets the daemon
/// wait for them when it stops.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    alive: Mutex<usize>,
    ended: Condvar,
}

/// One worker's place in [`Workers`], given back when dropped.
#[derive(Debug)]
pub(crate) struct WorkerSlot(Arc<Workers>);

impl Workers {
    /// A place for one more worker, if fewer than `max` are alive.
    pub(crate) fn enter(self: &Arc<Self>, max: usize) -> Result<WorkerSlot, usize> {
        let Ok(mut n) = self.alive.lock() else {
            return Err(max);
        };
        if *n >= max {
            return Err(*n);
        }
        *n += 1;
        Ok(WorkerSlot(self.clone()))
    }

    pub(crate) fn alive(&self) -> usize {
        self.alive.lock().map_or(0, |n| *n)
    }

    /// Wait until no worker is alive, at most `limit`.
    pub(crate) fn wait_none(&self, limit: Duration) -> bool {
        let Ok(guard) = self.alive.lock() else {
            return false;
        };
        match self.ended.wait_timeout_while(guard, limit, |n| *n > 0) {
            Ok((n, _)) => *n == 0,
            Err(_) => false,
        }
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        if let Ok(mut n) = self.0.alive.lock() {
            *n = n.saturating_sub(1);
        }
        self.0.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    #[test]
    fn workers_are_bounded_and_waited_for() {
        let w = Arc::new(Workers::default());
        let a = w.enter(2).unwrap();
        let b = w.enter(2).unwrap();
        assert_eq!(w.enter(2).unwrap_err(), 2);
        assert_eq!(w.alive(), 2);
        drop(a);
        let c = w.enter(2).unwrap();
        assert!(!w.wait_none(Duration::from_millis(10)));
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            drop((b, c));
        });
        assert!(w.wait_none(Duration::from_secs(5)));
        assert_eq!(w.alive(), 0);
        t.join().unwrap();
    }
}
