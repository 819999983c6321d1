//! TCP_RR and UDP_RR: the requester's and the responder's loops.
//!
//! A transaction is one request of `req` bytes and one response of `resp`
//! bytes. In the default mode each side makes exactly one send and one
//! receive system call per transaction, as netperf does; the requester reads
//! the clock once per transaction (the end of one transaction is the start of
//! the next) and records the round trip in a [`Latency`](crate::latency::Latency).
//!
//! Burst mode (`-b N`) keeps N more requests in flight. TCP's responses
//! come back in order, so a FIFO of send times gives each one's latency.
//!
//! UDP_RR requests carry as many bytes of their sequence number as fit (up
//! to 8, at least 1) and the responder echoes them, so a late response is
//! never taken for the current one. A request with no response within the
//! receive timeout is counted lost and the test goes on. In burst mode the
//! tag finds the request a response answers, wherever it is in the window
//! (UDP may reorder), and a request older than the timeout is counted lost
//! and its place refilled, so that a loss costs one transaction, not the
//! burst (netperf 2.7's UDP_RR burst stalls once N requests are lost).
//!
//! `spin` mode makes the sockets non-blocking and polls them, to measure the
//! latency floor without the cost of sleeping and waking.
//!
//! - [`tcp`]: over a byte stream, driving [`crate::flow::RrRequest`] and
//!   [`crate::flow::RrRespond`].
//! - [`udp`]: over datagrams, tagged.
//! - [`window`]: the requests in flight and their send times.

use std::time::Duration;

use proto::FlowCounters;

use crate::latency::LatencySummary;

pub mod stamp;
pub mod tcp;
pub mod udp;
pub mod window;

pub use stamp::{stamp_requester, stamp_responder};
pub use tcp::{tcp_requester, tcp_responder};
pub use udp::{udp_requester, udp_responder};

/// Bytes of a UDP_RR message that carry the transaction's tag.
pub use proto::test::udp_rr_tag_len as tag_len;

/// When the requester stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    Stopped,
    Transactions(u64),
}

impl Until {
    /// The transaction limit, if any.
    pub fn limit(self) -> Option<u64> {
        match self {
            Until::Stopped => None,
            Until::Transactions(n) => Some(n),
        }
    }
}

/// The requester's settings.
#[derive(Clone, Copy, Debug)]
pub struct Requester {
    pub req: usize,
    pub resp: usize,
    /// Extra requests in flight.
    pub burst: u32,
    pub until: Until,
    /// Record each transaction's latency.
    pub timing: bool,
    pub spin: bool,
}

/// What the requester counted.
#[derive(Debug, Default, Clone)]
pub struct RrOutcome {
    pub counters: FlowCounters,
    /// UDP: transactions with no response in time.
    pub lost: u64,
    /// UDP: responses that arrived for an earlier, given-up request.
    pub stale: u64,
    pub elapsed: Duration,
    pub latency: Option<LatencySummary>,
    /// The histogram behind `latency` (UDP_RR), for merging many flows'
    /// exactly.
    pub histogram: Option<Box<crate::latency::Latency>>,
    /// TCP_CRR and TCP_CC: the maximum segment size of the first
    /// connection (what netperf 2.7 reports for them).
    pub mss: Option<u32>,
    /// UDP_RR with `--ecn`: the codepoints of the answers, as they came.
    pub ecn: Option<proto::ecn::EcnReport>,
}

impl RrOutcome {
    pub fn transactions(&self) -> u64 {
        self.counters.transactions
    }

    /// The requester's side of the results.
    pub fn results(&self) -> proto::SideResults {
        proto::SideResults {
            ecn: self.ecn.clone(),
            ..proto::SideResults::of_flow(&self.counters, crate::flow::nanos(self.elapsed))
        }
    }
}

#[cfg(test)]
pub(crate) fn params(until: Until) -> Requester {
    Requester {
        req: 64,
        resp: 1024,
        burst: 0,
        until,
        timing: true,
        spin: false,
    }
}
