//! The stream tests: both roles of each, TCP and UDP side by side.
//!
//! - [`tcp`]: TCP_STREAM and TCP_MAERTS ([`send`] and [`receive`]).
//! - [`udp`]: UDP_STREAM, with exact loss accounting.
//! - [`rx`]: how a TCP receiver takes its bytes (copy, discard, mapped pages).

pub mod rx;
pub mod tcp;
pub mod udp;
pub mod zc;

pub use tcp::{Outcome, Until, receive, send};
