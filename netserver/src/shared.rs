//! What every session and the accept loop share.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use crate::{
    admission::{Census, Failures, Workers},
    config::Config,
    shutdown::Shutdown,
};

/// What sessions share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub shutdown: Shutdown,
    pub census: Census,
    pub failures: Failures,
    pub workers: Arc<Workers>,
    /// The last session's number (the log's and the record's `session`).
    pub sessions_begun: AtomicU64,
}

impl Shared {
    /// A number for a new session.
    pub fn session_id(&self) -> u64 {
        self.sessions_begun.fetch_add(1, Ordering::Relaxed) + 1
    }
}
