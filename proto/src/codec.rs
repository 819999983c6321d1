//! The one place that knows which serializer encodes message bodies.
//!
//! Bodies are [postcard]: compact, varint-based, with a stable wire format
//! (postcard 1.x). bincode, named in the original design, has ceased
//! development (RUSTSEC-2025-0141); swapping the serializer means changing
//! this file only.

use serde::{Serialize, de::DeserializeOwned};

use crate::error::ProtoError;

/// Serialize `value` and append it to `out`.
pub fn encode_into<T: Serialize>(value: &T, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let bytes = postcard::to_stdvec(value).map_err(|e| ProtoError::Encode(e.to_string()))?;
    out.extend_from_slice(&bytes);
    Ok(())
}

/// Decode a whole body: trailing bytes are an error.
pub fn decode_exact<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProtoError> {
    let (value, rest) =
        postcard::take_from_bytes::<T>(body).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(ProtoError::TrailingBytes { extra: rest.len() });
    }
    Ok(value)
}

/// Decode a prefix of `body`, ignoring what follows. Only the hello messages
/// are read this way, so that a newer peer may append fields to its hello and
/// still be told clearly that the versions differ.
pub fn decode_prefix<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProtoError> {
    postcard::take_from_bytes::<T>(body)
        .map(|(value, _)| value)
        .map_err(|e| ProtoError::Malformed(e.to_string()))
}
