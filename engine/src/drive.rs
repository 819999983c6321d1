//! Which driver runs a test's flows: one choice, made from the test's spec
//! ([`proto::TestSpec::driver`]: io_uring when asked, event loops for many
//! flows or a window, one flow's blocking calls otherwise), used by both
//! ends, and here the call that runs flows on the driver chosen.

pub use proto::Driver;

use std::net::TcpStream;

use crate::{
    error::EngineError,
    evloop::{Plan, Report},
    live::Live,
    timer::StopFlag,
};

/// Run TCP stream or request/response flows on `driver`'s threads (a
/// blocking one flow runs on the event loops' lone-flow mode: its calls
/// block as a single flow's do).
pub fn flows(
    driver: Driver,
    conns: Vec<TcpStream>,
    plan: &Plan,
    stop: &StopFlag,
    live: &Live,
) -> Result<Report, EngineError> {
    match driver {
        Driver::Uring { .. } => crate::uring::run(conns, plan, stop, live),
        Driver::Loops { .. } | Driver::Blocking => crate::evloop::run(conns, plan, stop, live),
    }
}
