//! What every data connection presents first: the test's token and its flow
//! number. Anything else is closed without touching the test.

use std::{
    io::{self, Read, Write},
    net::TcpStream,
    time::Instant,
};

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

/// Compare tokens in constant time.
pub fn token_eq(a: &Token, b: &Token) -> bool {
    bytes_eq(&a.0, &b.0)
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

/// What a new data connection presents first, by the conventions: our
/// preamble, or nothing (netperf 2.7's).
pub fn present(
    w: impl Write,
    token: &Token,
    flow: u32,
    conv: &crate::conventions::Conventions,
) -> Result<(), EngineError> {
    match conv.proof {
        crate::conventions::Proof::Preamble => write_preamble(w, token, flow),
        crate::conventions::Proof::ControlPeer => Ok(()),
    }
}

pub fn write_preamble(mut w: impl Write, token: &Token, flow: u32) -> Result<(), EngineError> {
    w.write_all(&preamble(token, flow))
        .context(|| "sending the data connection's token".to_string())
}

/// Read exactly `buf.len()` bytes before `deadline`, however slowly they
/// dribble in: the deadline is for the whole read.
pub fn read_exact_by(stream: &TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let now = Instant::now();
        if now >= deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(deadline - now))?;
        match (&*stream).read(buf.get_mut(got..).unwrap_or_default()) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::error::timed_out(&e) => {
                return Err(io::ErrorKind::TimedOut.into());
            }
            Err(e) => return Err(e),
        }
    }
    stream.set_read_timeout(None)
}

/// Read a data connection's preamble and check its token. Returns the flow
/// number.
pub fn read_preamble(
    stream: &TcpStream,
    expected: &Token,
    deadline: Instant,
) -> Result<u32, EngineError> {
    let mut p = [0u8; PREAMBLE_LEN];
    read_exact_by(stream, &mut p, deadline).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => {
            EngineError::Timeout("data connection sent no token in time".into())
        }
        _ => EngineError::io("reading a data connection's token", e),
    })?;
    parse_preamble(&p, expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{net::TcpListener, time::Duration};

    #[test]
    fn tokens_compare() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert!(token_eq(&a, &a));
        assert!(!token_eq(&a, &b));
    }

    #[test]
    fn preamble_round_trip_and_bad_token() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let tok = new_token().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        write_preamble(&c, &tok, 7).unwrap();
        let (s, _) = l.accept().unwrap();
        let dl = Instant::now() + Duration::from_secs(5);
        assert_eq!(read_preamble(&s, &tok, dl).unwrap(), 7);

        let c2 = TcpStream::connect(addr).unwrap();
        write_preamble(&c2, &new_token().unwrap(), 0).unwrap();
        let (s2, _) = l.accept().unwrap();
        assert!(matches!(
            read_preamble(&s2, &tok, dl),
            Err(EngineError::BadToken)
        ));
    }

    #[test]
    fn silent_connection_times_out() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let start = Instant::now();
        let r = read_preamble(
            &s,
            &new_token().unwrap(),
            start + Duration::from_millis(100),
        );
        assert!(matches!(r, Err(EngineError::Timeout(_))));
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
