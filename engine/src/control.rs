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
    /// The server is netperf 2.7's netserver (it answered our hello in its
    /// own protocol), and this conversation must speak ours.
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

    /// The protocol core, to queue requests.
    pub fn core(&mut self) -> &mut ClientConn {
        self.since = Instant::now();
        &mut self.core
    }

    /// The socket alone (the conversation dropped).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// The core, to read what the netserver said of itself.
    pub fn peer(&self) -> &ClientConn {
        &self.core
    }

    /// End the conversation as its dialect does: our `Bye`, sent; or
    /// netperf 2.7's half-close, and a moment (2 s at most) for the
    /// netserver's end.
    pub fn close(&mut self) {
        self.core.bye();
        let _ = self.flush();
        if self.core.half_closes() {
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
            let _ = self.stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut b = [0u8; 64];
            while matches!(self.stream.read(&mut b), Ok(n) if n > 0) {}
        }
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
