//! Blocking transport of control frames, for the client side (the daemon
//! drives its control connections from a mio event loop instead).

use std::{
    io::{self, Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

use proto::{ProtoError, codec, frame};
use serde::Serialize;
use thiserror::Error;

use crate::auth::Channel;

#[derive(Debug, Error)]
pub enum ControlError {
    #[error("control connection: {0}")]
    Io(#[source] io::Error),
    #[error("the peer closed the control connection")]
    Closed,
    #[error("no answer on the control connection within {} s", .0.as_secs_f64())]
    Timeout(Duration),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error("{0}")]
    Refused(String),
}

/// A control connection with its read buffer.
#[derive(Debug)]
pub struct ControlStream {
    stream: TcpStream,
    buf: Vec<u8>,
    channel: Option<Channel>,
}

impl ControlStream {
    pub fn new(stream: TcpStream) -> ControlStream {
        ControlStream {
            stream,
            buf: Vec::with_capacity(4096),
            channel: None,
        }
    }

    /// From now on every frame is sealed and checked with this channel.
    pub fn secure(&mut self, channel: Channel) {
        self.channel = Some(channel);
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Send one message as a frame.
    pub fn send<M: Serialize>(&mut self, msg: &M) -> Result<(), ControlError> {
        let mut body = Vec::new();
        codec::encode_into(msg, &mut body)?;
        if let Some(c) = &mut self.channel {
            c.seal(&mut body);
        }
        if body.len() > frame::MAX_FRAME {
            return Err(ProtoError::FrameTooLarge {
                len: body.len(),
                max: frame::MAX_FRAME,
            }
            .into());
        }
        let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&body);
        self.stream.write_all(&bytes).map_err(ControlError::Io)
    }

    /// Receive one message, waiting at most `timeout` in all.
    pub fn recv<M>(
        &mut self,
        decode: impl Fn(&[u8]) -> Result<M, ProtoError>,
        timeout: Duration,
    ) -> Result<M, ControlError> {
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((body, used)) = frame::split(&self.buf)? {
                let body = body.to_vec();
                self.buf.drain(..used);
                let body = match &mut self.channel {
                    Some(c) => c
                        .open(&body)
                        .map_err(|e| ControlError::Refused(e.to_string()))?
                        .to_vec(),
                    None => body,
                };
                return Ok(decode(&body)?);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ControlError::Timeout(timeout));
            }
            self.stream
                .set_read_timeout(Some(deadline - now))
                .map_err(ControlError::Io)?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ControlError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if crate::error::timed_out(&e) => {
                    return Err(ControlError::Timeout(timeout));
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(ControlError::Closed);
                }
                Err(e) => return Err(ControlError::Io(e)),
            }
        }
    }
}
