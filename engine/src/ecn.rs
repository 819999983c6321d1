//! ECN at a receiving end (`--ecn`): each datagram's codepoint, as the
//! kernel hands it with the datagram (IP_RECVTOS / IPV6_RECVTCLASS),
//! counted in total and by interval from the first; and TCP's ECN from a
//! sender's TCP_INFO.

use std::time::Instant;

use proto::ecn::{Codepoint, EcnCounts, EcnReport, EcnSeries, TcpEcn};

/// A receiver's count of codepoints.
#[derive(Debug, Clone)]
pub struct EcnTally {
    counts: EcnCounts,
    series: EcnSeries,
    first: Option<Instant>,
    /// Datagrams that came without a codepoint (none should: the socket
    /// asked for it).
    unread: u64,
}

impl EcnTally {
    pub fn new(interval_ms: u32) -> EcnTally {
        EcnTally {
            counts: EcnCounts::default(),
            series: EcnSeries::new(interval_ms),
            first: None,
            unread: 0,
        }
    }

    /// One datagram of the test, arrived at `now` with `tos`.
    #[inline]
    pub fn observe(&mut self, tos: Option<u8>, now: Instant) {
        let Some(tos) = tos else {
            self.unread += 1;
            return;
        };
        let cp = Codepoint::of_tos(tos);
        let first = *self.first.get_or_insert(now);
        self.counts.add(cp);
        self.series
            .add(now.duration_since(first).as_millis() as u64, cp);
    }

    pub fn counts(&self) -> EcnCounts {
        self.counts
    }

    /// Datagrams counted without a codepoint.
    pub fn unread(&self) -> u64 {
        self.unread
    }

    pub fn report(&self) -> EcnReport {
        EcnReport {
            received: Some(self.counts),
            series: Some(self.series.clone()),
            tcp: None,
        }
    }
}

/// Ask `sock` to hand each datagram's codepoint with it.
pub fn ask_codepoints(sock: &std::net::UdpSocket) -> Result<(), crate::EngineError> {
    let v6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
    crate::sys::opt::recv_codepoint(sock, v6)
        .map_err(|e| crate::EngineError::io("--ecn: asking for each datagram's codepoint", e))
}

/// This host's net.ipv4.tcp_ecn, where it has one.
pub fn tcp_ecn_sysctl() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_ecn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// TCP's ECN on these connections, from their TCP_INFO.
pub fn tcp_report<'a, S: crate::sys::Sock + 'a>(
    socks: impl IntoIterator<Item = &'a S>,
) -> Result<TcpEcn, crate::EngineError> {
    let mut t = TcpEcn {
        sysctl: tcp_ecn_sysctl(),
        ..TcpEcn::default()
    };
    for s in socks {
        let (negotiated, delivered, ce) = crate::sys::tcp_ecn(s)
            .map_err(|e| crate::EngineError::io("--ecn: reading TCP_INFO", e))?;
        t.connections += 1;
        t.negotiated += u32::from(negotiated);
        t.delivered += delivered;
        t.delivered_ce += ce;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_codepoint_and_interval() {
        let mut t = EcnTally::new(100);
        let t0 = Instant::now();
        t.observe(Some(0x02), t0);
        t.observe(Some(0x03), t0 + std::time::Duration::from_millis(150));
        t.observe(Some(0xb8), t0 + std::time::Duration::from_millis(160));
        t.observe(None, t0);
        let r = t.report();
        let c = r.received.unwrap();
        assert_eq!((c.ect0, c.ce, c.not_ect, c.ect1), (1, 1, 1, 0));
        assert_eq!(t.unread(), 1);
        let s = r.series.unwrap();
        assert_eq!(s.intervals.len(), 2);
        assert_eq!(s.intervals[1].ce, 1);
        assert_eq!(s.intervals[1].not_ect, 1);
    }
}
