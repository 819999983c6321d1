//! What the daemon admits, in one place, each counted before anything is
//! allocated for it: control sessions in all and by address
//! ([`Census`]), buffer memory ([`MemoryBudget`]), file descriptors and the
//! tests an address runs ([`Descriptors`]), test workers ([`Workers`]), and
//! the pace at which wrong keys are refused ([`Failures`]), and the turns
//! tests take (`--schedule exclusive`, [`Turns`]).

mod census;
mod descriptors;
mod failures;
mod memory;
mod turns;
mod workers;

pub use census::SessionCaps;
pub(crate) use census::{Census, Refusal};
pub use descriptors::FdShares;
pub(crate) use descriptors::{Descriptors, FdRefusal, FdReservation};
pub(crate) use failures::Failures;
pub use memory::{MemoryBudget, Reservation};
pub use turns::Schedule;
pub(crate) use turns::{Turn, Turns};
pub(crate) use workers::{WorkerSlot, Workers};
