//! The client's side of every test: one driver ([`lifecycle`]) runs each
//! of them, and each family (one file) implements the small
//! [`lifecycle::Family`] trait for what differs: how its data connections
//! open, its data phase, how its counts must agree. One flow is the case
//! N = 1 of a family's N flows.
//!
//! # Layout
//! - [`lifecycle`]: the one driver, the request built once, the prepared
//!   data socket.
//! - [`stream`]: TCP_STREAM, TCP_MAERTS, TCP_SENDFILE, TCP_MSS.
//! - [`rr`]: TCP_RR (and what request/response families share).
//! - [`crr`]: TCP_CRR, TCP_CC.
//! - [`udp`]: UDP_STREAM (we send), netperf 2.7's UDP receive test, UDP_RR.
//! - [`stamp`]: one-way delay probes beside a test (UDP_STAMP).
//! - [`context`]: what a run carries ([`Context`]: the observers it
//!   tells, as trait objects), and the rules the families share (counts
//!   shared out, threads, the timer).
//! - [`sampler`]: interim samples during a data phase.
//! - this file: which family a plan's test is.
//!
//! Dependencies go one way: this file uses the families, the families use
//! [`lifecycle`], and it uses [`context`]; what they measure is
//! [`crate::report`]'s, below them all.

pub mod context;
pub mod crr;
pub mod lifecycle;
pub mod rr;
pub mod sampler;
pub mod stamp;
pub mod stream;
pub mod udp;

use anyhow::{Result, bail};
use proto::TestKind;

pub use context::{Context, Phase, open_files_limit, raise_open_files, threads};
pub(crate) use lifecycle::Family;
pub use lifecycle::{preflight, spec_for};

use crate::{
    control::Control,
    plan::{Plan, TestName},
    report::Measurement,
};

/// Run one iteration of the plan's test: its family, driven by the one
/// lifecycle.
pub fn run_once(plan: &Plan, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    lifecycle::run_once(plan, d, ctx, family_for(plan)?)
}

/// What the other end cannot run of the plan, where its capabilities are
/// known before connecting (`--iperf3`: an iperf3 server's): refused by
/// name before anything connects, as the lifecycle would refuse it after.
pub fn refuse_before_connecting(plan: &Plan, caps: &proto::Capabilities) -> Result<()> {
    lifecycle::refuse_lacking(plan, &*family_for(plan)?, caps)?;
    let family = match plan.family {
        optparse::value::AddrFamily::V6 => proto::Family::V6,
        _ => proto::Family::V4,
    };
    lifecycle::refuse_spec(&spec_for(plan, family)?, caps)
}

/// The family of the plan's test.
fn family_for(plan: &Plan) -> Result<Box<dyn Family>> {
    if (plan.flows > 1 || plan.window.is_some())
        && matches!(plan.name, TestName::TcpSendfile | TestName::TcpMss)
    {
        bail!(
            "--flows, --warmup, --cooldown: {} runs one flow, as netperf 2.7 does (TCP_STREAM takes them)",
            plan.name.name()
        );
    }
    if plan.window.is_some()
        && !matches!(
            plan.test,
            TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpRr
        )
    {
        bail!(
            "--warmup/--cooldown: {} runs with no window; they are for TCP_STREAM, TCP_MAERTS and TCP_RR",
            plan.name.name()
        );
    }
    Ok(match plan.test {
        TestKind::TcpStream | TestKind::TcpMaerts => Box::new(stream::Streams::default()),
        TestKind::TcpRr => Box::new(rr::TcpRr::default()),
        TestKind::TcpCrr | TestKind::TcpCc => Box::new(crr::Crr::default()),
        TestKind::UdpStream => Box::new(udp::UdpSend::default()),
        TestKind::UdpMaerts => Box::new(udp::UdpReceive::default()),
        TestKind::UdpRr => Box::new(udp::UdpRr::default()),
        TestKind::UdpStamp => bail!("UDP_STAMP's probes run only beside a test (--one-way)"),
    })
}
