//! The stream tests: both roles of each, TCP and UDP side by side.
//!
//! - [`tcp`]: TCP_STREAM and TCP_MAERTS ([`send`] and [`receive`]).
//! - [`udp`]: UDP_STREAM, with exact loss accounting.

pub mod tcp;
pub mod udp;

pub use tcp::{Outcome, Until, receive, send};
