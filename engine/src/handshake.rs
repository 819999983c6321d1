//! What every data connection presents first: the test's token and its flow
//! number. Anything else is closed without touching the test.

use std::io::Write;

use proto::Token;

use crate::{EngineError, error::IoContext};

/// Bytes of the preamble: 32 of token, 4 of flow number (big-endian).
pub const PREAMBLE_LEN: usize = 36;

/// A fresh random token.
pub fn new_token() -> Result<Token, EngineError> {
    let mut t = [0u8; 32];
    getrandom::fill(&mut t)
        .map_err(|e| EngineError::Invalid(format!("no secure random numbers: {e}")))?;
    Ok(Token(t))
}

/// Compare two secrets in constant time (their lengths are not secret).
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The one parser of a preamble: the flow number, if the first
/// [`PREAMBLE_LEN`] bytes of `bytes` are a preamble carrying `expected`
/// (compared in constant time). Short input or another token is
/// [`EngineError::BadToken`].
pub fn parse_preamble(bytes: &[u8], expected: &Token) -> Result<u32, EngineError> {
    let (Some(token), Some(flow)) = (bytes.get(..32), bytes.get(32..PREAMBLE_LEN)) else {
        return Err(EngineError::BadToken);
    };
    if !bytes_eq(token, &expected.0) {
        return Err(EngineError::BadToken);
    }
    let mut f = [0u8; 4];
    f.copy_from_slice(flow);
    Ok(u32::from_be_bytes(f))
}

pub fn preamble(token: &Token, flow: u32) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..32].copy_from_slice(&token.0);
    p[32..].copy_from_slice(&flow.to_be_bytes());
    p
}

pub fn write_preamble(mut w: impl Write, token: &Token, flow: u32) -> Result<(), EngineError> {
    w.write_all(&preamble(token, flow))
        .context(|| "sending the data connection's token".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trip_and_bad_token() {
        let tok = new_token().unwrap();
        let p = preamble(&tok, 7);
        assert_eq!(parse_preamble(&p, &tok).unwrap(), 7);
        assert!(matches!(
            parse_preamble(&p, &new_token().unwrap()),
            Err(EngineError::BadToken)
        ));
        assert!(parse_preamble(&p[..PREAMBLE_LEN - 1], &tok).is_err());
        assert!(bytes_eq(&tok.0, &tok.0));
    }
}
