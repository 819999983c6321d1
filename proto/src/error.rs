//! Errors of the control protocol.

use thiserror::Error;

/// Everything that can go wrong encoding, decoding or sequencing control
/// messages. Each variant names what was at fault.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProtoError {
    #[error("control frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("empty control frame")]
    EmptyFrame,
    #[error("malformed control message: {0}")]
    Malformed(String),
    #[error("control message has {extra} unexpected trailing bytes")]
    TrailingBytes { extra: usize },
    #[error("could not encode control message: {0}")]
    Encode(String),
    #[error(
        "peer does not speak this control protocol (no rsnetperf hello; is it netperf 2.7's netserver or another service?)"
    )]
    NotOurProtocol,
    #[error(
        "protocol version mismatch: we speak version {ours}, the peer ({peer_software}) speaks version {theirs}"
    )]
    VersionMismatch {
        ours: u32,
        theirs: u32,
        peer_software: String,
    },
    #[error("unexpected {got} while {state}")]
    UnexpectedMessage {
        got: &'static str,
        state: &'static str,
    },
    #[error("invalid test request: {0}")]
    InvalidSpec(#[from] SpecError),
    #[error("authentication failed: {0}")]
    Auth(String),
}

/// A field of a test request that is out of range. The field is named as the
/// netperf option that sets it, so that both ends can tell the user what to
/// change.
#[derive(Debug, Error, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[error("{field}: {problem}")]
pub struct SpecError {
    pub field: String,
    pub problem: String,
}

impl SpecError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}
