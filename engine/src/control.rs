//! The client's blocking driver of a control connection: it moves bytes
//! between the socket and [`proto::conn::ClientConn`], which owns the
//! framing, the sealing and the deadlines. (The daemon drives its control
//! connections from a mio loop instead.)

use std::{
    io::{self, Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

use proto::{
    ClientError, ClientEvent, ProtoError,
    conn::{ClientConn, ClientConnError},
};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ControlError {
    #[error("control connection: {0}")]
    Io(#[source] io::Error),
    #[error("the peer closed the control connection")]
    Closed,
    /// What was awaited, and how long we waited.
    #[error("no {what} within {secs} s", what = .0, secs = .1.as_secs_f64())]
    Timeout(&'static str, Duration),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// The server refused or broke the conversation.
    #[error("{0}")]
    Session(ClientError),
    /// The server is netperf 2.7's netserver: it answered our hello in its
    /// own protocol.
    #[error("the netserver speaks netperf 2.7's protocol")]
    Netperf2,
}

impl From<ClientConnError> for ControlError {
    fn from(e: ClientConnError) -> Self {
        match e {
            ClientConnError::Session(ClientError::Protocol(p)) => ControlError::Proto(p),
            ClientConnError::Session(s) => ControlError::Session(s),
            ClientConnError::Timeout(what) => ControlError::Timeout(what, Duration::ZERO),
            ClientConnError::Netperf2 => ControlError::Netperf2,
        }
    }
}

/// A control connection and its protocol core.
#[derive(Debug)]
pub struct ControlStream {
    stream: TcpStream,
    core: ClientConn,
    /// When the current wait began (for the timeout's message).
    since: Instant,
}

impl ControlStream {
    pub fn new(stream: TcpStream, core: ClientConn) -> ControlStream {
        ControlStream {
            stream,
            core,
            since: Instant::now(),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The socket, and what arrived and was not consumed.
    pub fn into_parts(mut self) -> (TcpStream, Vec<u8>) {
        let rest = self.core.take_input();
        (self.stream, rest)
    }

    /// The protocol core, to queue requests.
    pub fn core(&mut self) -> &mut ClientConn {
        self.since = Instant::now();
        &mut self.core
    }

    pub fn session(&self) -> &proto::ClientSession {
        self.core.session()
    }

    /// Send what the core queued.
    pub fn flush(&mut self) -> Result<(), ControlError> {
        let out = self.core.output();
        let n = out.len();
        if n > 0 {
            self.stream.write_all(out).map_err(ControlError::Io)?;
            self.core.consumed(n);
        }
        Ok(())
    }

    /// After the data path failed: whether the netserver said why (an
    /// error message arriving within `wait`, such as "shutting down").
    pub fn server_error_within(&mut self, wait: Duration) -> Option<proto::ErrorMsg> {
        let said = |e: ClientConnError| match e {
            ClientConnError::Session(proto::ClientError::Server(m)) => Some(m),
            _ => None,
        };
        let deadline = Instant::now() + wait;
        let mut chunk = [0u8; 4096];
        loop {
            match self.core.process() {
                Err(e) => return said(e),
                Ok(Some(_)) => return None,
                Ok(None) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                return None;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => match self.core.handle_bytes(chunk.get(..n).unwrap_or_default()) {
                    Err(e) => return said(e),
                    Ok(Some(_)) => return None,
                    Ok(None) => {}
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }

    /// Send what is queued, then read until the core has something to say
    /// or its deadline passes.
    pub fn next_event(&mut self) -> Result<ClientEvent, ControlError> {
        self.flush()?;
        if let Some(e) = self.core.process()? {
            return Ok(e);
        }
        let mut chunk = [0u8; 4096];
        loop {
            let now = Instant::now();
            if let Err(e) = self.core.handle_timeout(now) {
                return Err(match e {
                    ClientConnError::Timeout(what) => {
                        ControlError::Timeout(what, now.duration_since(self.since))
                    }
                    e => e.into(),
                });
            }
            let wait = self.core.poll_timeout().map(|(d, _)| {
                d.saturating_duration_since(now)
                    .max(Duration::from_millis(1))
            });
            self.stream
                .set_read_timeout(wait)
                .map_err(ControlError::Io)?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ControlError::Closed),
                Ok(n) => {
                    let got = self.core.handle_bytes(chunk.get(..n).unwrap_or_default())?;
                    // an answer to a challenge goes out at once
                    self.flush()?;
                    if let Some(e) = got {
                        return Ok(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if crate::error::timed_out(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(ControlError::Closed);
                }
                Err(e) => return Err(ControlError::Io(e)),
            }
        }
    }
}
