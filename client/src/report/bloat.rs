//! Each load flow's bloat: the bytes it had in flight over its
//! bandwidth-delay product, the minimum round trip it saw times the rate
//! the kernel last measured it delivering (TCP_INFO's delivery rate), at
//! each reading of its sending end's TCP_INFO. 1 is a flow that keeps
//! just the path full; a flow with a queue of k round trips' worth reads
//! about 1 + k. The minimum round trip is the least of the path's idle
//! round trip (the test's idle phase, measured before the load began) and
//! the smoothed RTTs the flow's readings held: a flow's first reading
//! comes after its slow start has begun to fill the queue, so its own
//! least is not the path's.

use proto::TcpSample;

/// One flow's bloat over time, and its summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowBloat {
    /// Up: we send (TCP_STREAM); down: the netserver does.
    pub up: bool,
    /// The flow's number in its direction's load.
    pub flow: usize,
    /// The least round trip seen, microseconds.
    pub min_rtt_us: u32,
    /// (seconds since the Unix epoch, bloat) at each reading that had a
    /// delivery rate.
    pub series: Vec<(f64, f64)>,
    pub median: f64,
    pub max: f64,
}

/// The bloat of one flow from its readings (time, TCP_INFO) and the
/// path's idle round trip (`idle_rtt_us`, where measured); `None`
/// without a reading that measured a delivery rate.
pub fn of_flow(
    up: bool,
    flow: usize,
    readings: &[(f64, TcpSample)],
    idle_rtt_us: Option<u32>,
) -> Option<FlowBloat> {
    let min_rtt_us = readings
        .iter()
        .map(|(_, t)| t.rtt_us)
        .chain(idle_rtt_us)
        .filter(|r| *r > 0)
        .min()?;
    let series: Vec<(f64, f64)> = readings
        .iter()
        .filter(|(_, t)| t.delivery_rate > 0)
        .map(|(at, t)| {
            let bdp = f64::from(min_rtt_us) / 1e6 * t.delivery_rate as f64;
            (*at, t.bytes_in_flight as f64 / bdp.max(1.0))
        })
        .collect();
    let mut v: Vec<f64> = series.iter().map(|p| p.1).collect();
    v.sort_by(f64::total_cmp);
    let median = *v.get(v.len() / 2)?;
    let max = *v.last()?;
    Some(FlowBloat {
        up,
        flow,
        min_rtt_us,
        series,
        median,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(rtt_us: u32, rate: u64, in_flight: u64) -> TcpSample {
        TcpSample {
            rtt_us,
            delivery_rate: rate,
            bytes_in_flight: in_flight,
            ..TcpSample::default()
        }
    }

    #[test]
    fn a_queue_of_k_round_trips_reads_about_one_plus_k() {
        // 12.5 MB/s (100 Mbit/s), 1 ms path: a BDP of 12,500 bytes; then
        // 9 ms of queue: 10 ms round trips, 125,000 bytes in flight
        let r = [
            (0.0, reading(1_000, 12_500_000, 12_500)),
            (0.1, reading(10_000, 12_500_000, 125_000)),
            (0.2, reading(10_000, 12_500_000, 125_000)),
            (0.3, reading(10_000, 0, 125_000)),
        ];
        let b = of_flow(true, 0, &r, None).unwrap();
        assert_eq!(b.min_rtt_us, 1_000);
        assert_eq!(b.series.len(), 3);
        assert!(
            (b.median - 10.0).abs() < 1e-9 && (b.max - 10.0).abs() < 1e-9,
            "{b:?}"
        );
        assert!((b.series[0].1 - 1.0).abs() < 1e-9);
        assert_eq!(of_flow(true, 0, &[], Some(5)), None);
        // the flow's first reading already queued: the idle round trip
        // is the path's
        let b = of_flow(true, 0, &r[1..], Some(1_000)).unwrap();
        assert!((b.median - 10.0).abs() < 1e-9, "{b:?}");
        let b = of_flow(true, 0, &r[1..], None).unwrap();
        assert!((b.median - 1.0).abs() < 1e-9, "{b:?}");
    }
}
