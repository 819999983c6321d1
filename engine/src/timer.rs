//! The stop flag of a timed test and the thread that raises it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

/// Raised when a test must stop: its time is up, or it was aborted.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Raises a [`StopFlag`] when a duration has passed. Dropping the timer
/// cancels it (the flag is then left as it is).
#[derive(Debug)]
pub struct Timer {
    cancel: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Timer {
    pub fn start(after: Duration, flag: StopFlag) -> std::io::Result<Timer> {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let deadline = Instant::now() + after;
        let thread = thread::Builder::new()
            .name("test-timer".into())
            .spawn(move || {
                loop {
                    if c.load(Ordering::Relaxed) {
                        return;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        flag.set();
                        return;
                    }
                    thread::park_timeout(deadline - now);
                }
            })?;
        Ok(Timer {
            cancel,
            thread: Some(thread),
        })
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_raises_flag() {
        let f = StopFlag::new();
        let _t = Timer::start(Duration::from_millis(20), f.clone()).unwrap();
        let start = Instant::now();
        while !f.is_set() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "timer never fired"
            );
            thread::sleep(Duration::from_millis(1));
        }
        assert!(start.elapsed() >= Duration::from_millis(15));
    }

    #[test]
    fn dropped_timer_does_not_fire() {
        let f = StopFlag::new();
        drop(Timer::start(Duration::from_millis(10), f.clone()).unwrap());
        thread::sleep(Duration::from_millis(30));
        assert!(!f.is_set());
    }
}
