//! Errors of the data path.

use std::io;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    /// A system call failed; `context` says which and on what. The OS
    /// error is part of the message (not a separate cause, which a report
    /// of the whole chain would print twice).
    #[error("{context}: {error}")]
    Io { context: String, error: io::Error },
    #[error("data connection did not present this test's token")]
    BadToken,
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Invalid(String),
    #[error("test aborted")]
    Aborted,
}

impl EngineError {
    pub fn io(context: impl Into<String>, source: io::Error) -> EngineError {
        EngineError::Io {
            context: context.into(),
            error: source,
        }
    }

    /// The underlying OS error, if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            EngineError::Io { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The underlying OS error number, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            EngineError::Io { error, .. } => error.raw_os_error(),
            _ => None,
        }
    }
}

/// Attach context to an `io::Result`.
pub trait IoContext<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, EngineError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, EngineError> {
        self.map_err(|source| EngineError::Io {
            context: what(),
            error: source,
        })
    }
}

/// A receive timeout (SO_RCVTIMEO) expired, or a non-blocking call would
/// block: Linux reports either as EAGAIN, std as one of these two kinds.
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A receive on a connected UDP socket brought no datagram: it timed out
/// or would block, or it reported the ICMP error ("port unreachable") that
/// an earlier datagram of ours drew (ECONNREFUSED; Windows says
/// WSAECONNRESET).
pub(crate) fn no_datagram(e: &io::Error) -> bool {
    timed_out(e)
        || matches!(
            e.kind(),
            io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
        )
}
