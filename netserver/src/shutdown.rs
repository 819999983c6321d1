//! The daemon's stop signal: triggered once (a signal, or an embedded
//! netserver's handle dropped), seen by the accept loop and every session.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

/// Tells a running server to stop: stop accepting, tell clients, end tests.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    inner: Arc<ShutdownInner>,
}

#[derive(Debug, Default)]
struct ShutdownInner {
    flag: AtomicBool,
    next_id: AtomicU64,
    wakers: Mutex<HashMap<u64, Arc<mio::Waker>>>,
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    pub fn trigger(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        if let Ok(w) = self.inner.wakers.lock() {
            for waker in w.values() {
                let _ = waker.wake();
            }
        }
    }

    pub fn is_triggered(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// Wake `waker` on shutdown until the returned guard is dropped.
    pub(crate) fn subscribe(&self, waker: Arc<mio::Waker>) -> Subscription {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut w) = self.inner.wakers.lock() {
            w.insert(id, waker.clone());
        }
        if self.is_triggered() {
            let _ = waker.wake();
        }
        Subscription {
            shutdown: self.clone(),
            id,
        }
    }
}

pub(crate) struct Subscription {
    shutdown: Shutdown,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut w) = self.shutdown.inner.wakers.lock() {
            w.remove(&self.id);
        }
    }
}
