//! What netperf made of a test ([`ClientSummary`]), checked before a
//! netserver records it.

use super::*;

/// Bytes one flow's sending and receiving queues may hold (the largest
/// socket buffer a test may ask, [`Limits`]'s default): what one end may
/// have counted that the other did not when the test ended.
const IN_FLIGHT_PER_FLOW: u64 = 512 * 1024 * 1024;

/// How much shorter than half the netserver's interval a client's may be
/// (the spans the two clocks cover differ by a round trip and a wake).
const SPAN_SLACK_NS: u64 = 1_000_000;

/// No test's interval, at either end, is shorter than this (a system
/// call takes longer).
const SHORTEST_NS: u64 = 100;

/// What netperf made of a test, sent after its results to a netserver
/// whose hello names `summary` (the netserver's `--record` writes it
/// beside its own figures). Nothing answers it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClientSummary {
    /// netperf's own counters over its measured interval (per-flow
    /// counters left out: `flow_count` and `spread` say enough).
    pub local: SideResults,
    /// Round trips of a request/response test.
    pub latency: Option<LatencyFigures>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
}

impl ClientSummary {
    /// What a client says of its test, checked field by field before a
    /// record takes it: its interval within the longest test `limits`
    /// allow, CPU figures percentages, round trips finite, non-negative and
    /// in order, names short and printable. Per-flow counters are left
    /// out (the record keeps `flow_count` and `spread`). An error names the
    /// field at fault.
    pub fn validated(mut self, limits: &Limits) -> Result<ClientSummary, SpecError> {
        let bad = |field: &str, problem: &str| Err(SpecError::new(field, problem));
        let l = &self.local;
        let longest = limits
            .max_duration_ms
            .saturating_mul(1_000_000)
            .saturating_add(60_000_000_000);
        if l.elapsed_ns > longest {
            return bad(
                "local.elapsed_ns",
                "longer than this netserver lets a test run",
            );
        }
        if let Some(tcp) = &l.tcp
            && !is_name(&tcp.cong_control)
        {
            return bad(
                "local.tcp.cong_control",
                "not a congestion control's name (at most 16 printable characters)",
            );
        }
        if let Some(c) = &l.cpu {
            let shares = [
                c.util,
                c.user,
                c.system,
                c.iowait,
                c.irq,
                c.softirq,
                c.peak_util,
            ];
            if shares.iter().any(|v| !(0.0..=100.0).contains(v)) {
                return bad("local.cpu", "a utilisation that is not a percentage");
            }
            if !c.method.is_ascii_graphic() {
                return bad("local.cpu.method", "not a method letter");
            }
        }
        if let Some(t) = &self.latency {
            let v = [t.min_us, t.p50_us, t.p90_us, t.p99_us, t.max_us];
            // a day in microseconds: no round trip is longer
            let ok = |x: f64| (0.0..=8.64e10).contains(&x);
            if !v.iter().all(|x| ok(*x))
                || !ok(t.mean_us)
                || !v.windows(2).all(|w| matches!(w, [a, b] if a <= b))
            {
                return bad(
                    "latency",
                    "round trips that are not finite, non-negative and in order",
                );
            }
        }
        self.local.flows = Vec::new();
        Ok(self)
    }

    /// The summary held against what the netserver measured of the same
    /// test (`server`, of a test of `kind` with `flows` data connections):
    /// the client's interval like the server's (half to twice it, a
    /// millisecond less and a second more, never under 100 ns),
    /// no more bytes received than the server sent, no fewer
    /// sent than it received (and over TCP no more than its receive
    /// queues and the network could hold besides), no more transactions
    /// than the server answered. A client's rate is thereby bounded by
    /// the netserver's own figures; a summary out of them is left out,
    /// naming the field.
    pub fn checked_against(
        self,
        server: &SideResults,
        kind: TestKind,
        flows: u32,
    ) -> Result<ClientSummary, SpecError> {
        let bad = |field: &str, problem: String| Err(SpecError::new(field, problem));
        let (c, sv) = (&self.local, server);
        // the two clocks cover different spans (the client's from its
        // first send, the server's from its accept): on a test of
        // microseconds that is more than half; no test of either end is
        // shorter than 100 ns
        let (lo, hi) = (
            (sv.elapsed_ns / 2)
                .saturating_sub(SPAN_SLACK_NS)
                .max(SHORTEST_NS),
            sv.elapsed_ns
                .saturating_mul(2)
                .saturating_add(1_000_000_000),
        );
        if !(lo..=hi).contains(&c.elapsed_ns) {
            return bad(
                "local.elapsed_ns",
                format!(
                    "{} ns, where the netserver measured {} ns",
                    c.elapsed_ns, sv.elapsed_ns
                ),
            );
        }
        // bytes a flow's queues and path may hold that one end counted and
        // the other did not (send and receive buffers, at most)
        let in_flight = u64::from(flows.max(1)).saturating_mul(2 * IN_FLIGHT_PER_FLOW);
        if c.bytes_received > sv.bytes_sent {
            return bad(
                "local.bytes_received",
                format!(
                    "{} bytes, more than the netserver sent ({})",
                    c.bytes_received, sv.bytes_sent
                ),
            );
        }
        let sent_cap = match kind.protocol() {
            Protocol::Tcp => sv.bytes_received.saturating_add(in_flight),
            // datagrams may be lost on the way: what arrived says nothing
            // of an upper bound but the elapsed time's at 1 Tbit/s
            Protocol::Udp => c.elapsed_ns.saturating_mul(125).max(sv.bytes_received),
        };
        if c.bytes_sent < sv.bytes_received || c.bytes_sent > sent_cap {
            return bad(
                "local.bytes_sent",
                format!(
                    "{} bytes, where the netserver received {} (and at most {sent_cap} could have been sent)",
                    c.bytes_sent, sv.bytes_received
                ),
            );
        }
        let answered = sv.transactions.saturating_add(u64::from(flows.max(1)));
        if kind.is_rr() && c.transactions > answered {
            return bad(
                "local.transactions",
                format!(
                    "{}, more than the netserver answered ({})",
                    c.transactions, sv.transactions
                ),
            );
        }
        Ok(self)
    }
}

/// A congestion control's name as Linux allows one (TCP_CA_NAME_MAX 16).
fn is_name(s: &str) -> bool {
    s.len() <= 16 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// A request/response test's round trips, microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyFigures {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    fn server(elapsed_ns: u64, received: u64, sent: u64, transactions: u64) -> SideResults {
        SideResults {
            elapsed_ns,
            bytes_received: received,
            bytes_sent: sent,
            transactions,
            ..SideResults::default()
        }
    }

    fn said(elapsed_ns: u64, sent: u64, received: u64, transactions: u64) -> ClientSummary {
        ClientSummary {
            local: server(elapsed_ns, received, sent, transactions),
            ..ClientSummary::default()
        }
    }

    /// A client's summary is held against the netserver's own figures of
    /// the same test: an honest one passes; the attack's 1.48e29 bit/s
    /// (bytes the server never saw, or an interval of nanoseconds) is
    /// left out naming the field.
    #[test]
    fn a_clients_rates_are_bounded_by_the_netservers_figures() {
        let sv = server(10_000_000_000, 10_000_000_000, 0, 0);
        let ok = said(10_001_000_000, 10_004_000_000, 0, 0);
        assert!(ok.checked_against(&sv, TestKind::TcpStream, 1).is_ok());
        for (forged, field) in [
            (said(10_000_000_000, u64::MAX, 0, 0), "local.bytes_sent"),
            (said(1, 10_004_000_000, 0, 0), "local.elapsed_ns"),
            (
                said(4_000_000_000, 10_004_000_000, 0, 0),
                "local.elapsed_ns",
            ),
            (
                said(10_000_000_000, 5_000_000_000, 0, 0),
                "local.bytes_sent",
            ),
            (
                said(10_000_000_000, 10_000_000_000, 1, 0),
                "local.bytes_received",
            ),
        ] {
            let e = forged
                .checked_against(&sv, TestKind::TcpStream, 1)
                .unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        // a test of microseconds: the client's span may be well under
        // half the server's, not under 100 ns
        let sv = server(5_239, 1, 0, 0);
        assert!(
            said(2_221, 1, 0, 0)
                .checked_against(&sv, TestKind::TcpStream, 1)
                .is_ok()
        );
        let e = said(1, 1, 0, 0)
            .checked_against(&sv, TestKind::TcpStream, 1)
            .unwrap_err();
        assert_eq!(e.field, "local.elapsed_ns");
        // UDP: a sender may have sent far more than arrived, not more than
        // 1 Tbit/s over its interval
        let sv = server(10_000_000_000, 1_000_000, 0, 0);
        assert!(
            said(10_000_000_000, 900_000_000, 0, 0)
                .checked_against(&sv, TestKind::UdpStream, 1)
                .is_ok()
        );
        assert!(
            said(10_000_000_000, 2_000_000_000_000, 0, 0)
                .checked_against(&sv, TestKind::UdpStream, 1)
                .is_err()
        );
        // RR: no more transactions than the netserver answered
        let sv = server(10_000_000_000, 100, 100, 100);
        assert!(
            said(10_000_000_000, 100, 100, 100)
                .checked_against(&sv, TestKind::TcpRr, 1)
                .is_ok()
        );
        let e = said(10_000_000_000, 100, 100, 1_000_000)
            .checked_against(&sv, TestKind::TcpRr, 1)
            .unwrap_err();
        assert_eq!(e.field, "local.transactions");
    }
}
