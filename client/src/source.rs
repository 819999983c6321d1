//! Where a run's measurements come from ([`Source`]): a netserver over
//! the control connection (`run`'s), a STAMP reflector (`rfc_stamp`'s),
//! or a test's fake. Apart from `run`, so that a source of its own knows
//! nothing of the run that drives it.

use anyhow::Result;
use proto::TestSpec;

use crate::{family::Context, output::Server, plan::Plan, report::Measurement};

/// Where a run's measurements come from: a netserver over the control
/// connection, or (in tests) a fake.
pub trait Source {
    /// The netserver, as the outputs name it.
    fn server(&self) -> Server;
    /// Check what can be checked before anything is printed or asked;
    /// the request each iteration sends.
    fn preflight(&mut self, plan: &Plan) -> Result<TestSpec>;
    /// Whether it reports more than counters (netperf 2.7's does not).
    fn details(&self) -> bool {
        true
    }
    /// One iteration's measurement.
    fn measure(&mut self, plan: &Plan, ctx: &Context) -> Result<Measurement>;
    /// The run is over.
    fn bye(&mut self) {}
}
