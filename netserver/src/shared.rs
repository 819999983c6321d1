//! What every session and the accept loop share.

use std::sync::Arc;

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
}
