//! What the daemon admits, in one place, each counted before anything is
//! allocated for it: control sessions in all and by address
//! ([`Census`]), buffer memory ([`MemoryBudget`]), file descriptors and the
//! tests an address runs ([`Descriptors`]), test workers ([`Workers`]), and
//! the pace at which wrong keys are refused ([`Failures`]), and the turns
//! tests take (`--schedule exclusive`, [`Turns`]). Whatever turns a
//! session or a test away is one [`Refusal`], mapped in one place to the
//! client's words and code and to the metric.

mod census;
mod descriptors;
mod failures;
mod memory;
mod refusal;
mod turns;
mod workers;

pub use census::SessionCaps;
pub(crate) use census::{Census, SessionCap};
pub use descriptors::FdShares;
pub(crate) use descriptors::{Descriptors, FdReservation};
pub(crate) use failures::Failures;
pub use memory::{MemoryBudget, Reservation};
pub(crate) use refusal::Refusal;
pub use turns::Schedule;
pub(crate) use turns::{Turn, Turns};
pub(crate) use workers::{WorkerSlot, Workers};
