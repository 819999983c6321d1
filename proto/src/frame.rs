//! Length-prefixed frames on the control connection.
//!
//! A frame is a 4-byte big-endian body length followed by the body. The
//! length is checked against [`MAX_FRAME`] as soon as its 4 bytes are known,
//! before any buffer is sized for the body, so a peer cannot make us allocate
//! more than the cap. Decoding never panics: short input is "incomplete"
//! (`Ok(None)`), bad input is an error.

use serde::{Serialize, de::DeserializeOwned};

use crate::{codec, error::ProtoError};

/// Largest body a frame may carry.
pub const MAX_FRAME: usize = 64 * 1024;
/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Body length announced by a frame header, checked against the cap.
pub fn body_len(header: [u8; HEADER_LEN]) -> Result<usize, ProtoError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    if len == 0 {
        return Err(ProtoError::EmptyFrame);
    }
    Ok(len)
}

/// Encode `msg` as one frame: header and body.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let mut out = vec![0u8; HEADER_LEN];
    codec::encode_into(msg, &mut out)?;
    let len = out.len() - HEADER_LEN;
    if len > MAX_FRAME {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    // The header is the first HEADER_LEN bytes, allocated above.
    let header = (len as u32).to_be_bytes();
    out.splice(0..HEADER_LEN, header);
    Ok(out)
}

/// Find the first whole frame in `buf`. Returns its body and the number of
/// bytes it occupies, `Ok(None)` if more bytes are needed, or an error if the
/// header announces an impossible length.
pub fn split(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtoError> {
    let Some(header) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let len = body_len(*header)?;
    let total = HEADER_LEN + len;
    match buf.get(HEADER_LEN..total) {
        Some(body) => Ok(Some((body, total))),
        None => Ok(None),
    }
}

/// Decode the first whole frame in `buf` as a `T` (strict: the body must be
/// exactly one `T`).
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, ProtoError> {
    match split(buf)? {
        Some((body, used)) => Ok(Some((codec::decode_exact(body)?, used))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let frame = encode(&(7u32, String::from("x"))).unwrap();
        let (v, used): ((u32, String), usize) = decode(&frame).unwrap().unwrap();
        assert_eq!(v, (7, "x".to_string()));
        assert_eq!(used, frame.len());
    }

    #[test]
    fn incomplete_is_not_an_error() {
        let frame = encode(&123456u64).unwrap();
        for cut in 0..frame.len() {
            assert_eq!(decode::<u64>(&frame[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn oversized_header_fails_before_body_arrives() {
        let header = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert_eq!(
            split(&header),
            Err(ProtoError::FrameTooLarge {
                len: MAX_FRAME + 1,
                max: MAX_FRAME
            })
        );
        let huge = u32::MAX.to_be_bytes();
        assert!(matches!(
            split(&huge),
            Err(ProtoError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn empty_frame_is_rejected() {
        assert_eq!(split(&[0, 0, 0, 0]), Err(ProtoError::EmptyFrame));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut frame = encode(&1u8).unwrap();
        frame.push(9);
        let n = (frame.len() - HEADER_LEN) as u32;
        frame[..4].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            decode::<u8>(&frame),
            Err(ProtoError::TrailingBytes { extra: 1 })
        ));
    }

    #[test]
    fn two_frames_back_to_back() {
        let mut buf = encode(&1u16).unwrap();
        buf.extend(encode(&2u16).unwrap());
        let (a, used): (u16, usize) = decode(&buf).unwrap().unwrap();
        let (b, _): (u16, usize) = decode(&buf[used..]).unwrap().unwrap();
        assert_eq!((a, b), (1, 2));
    }
}
