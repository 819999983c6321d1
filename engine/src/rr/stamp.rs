//! One-way delay probes (`UDP_STAMP`, see [`proto::stamp`]): the client
//! sends a probe every `every`, whether or not earlier ones were answered
//! (a queue's delay must not slow the probing), and keeps each answer's
//! four times; the netserver stamps each probe with its receive and send
//! times on its own clock.

use std::{io, time::Duration, time::Instant};

use proto::stamp::{self, Stamps};

use super::RrOutcome;
use crate::{
    EngineError, clock, error::no_datagram, flow::Ended, live::Live, stream::udp::Link,
    stream::udp::transient, timer::StopFlag,
};

/// The client's side: a probe every `every` until `stop` or `halt()`,
/// each answer handed to `keep`. Answers still on their way at the end
/// are counted lost.
pub fn stamp_requester(
    link: Link<'_>,
    every: Duration,
    stop: &StopFlag,
    halt: &dyn Fn() -> bool,
    keep: &mut dyn FnMut(Stamps),
    live: &Live,
) -> Result<RrOutcome, EngineError> {
    let sock = link.socket();
    let every_ns = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX).max(1);
    let mut out = RrOutcome::default();
    let mut probe = [0u8; stamp::LEN];
    let mut answer = [0u8; stamp::LEN + 1];
    let start = Instant::now();
    let mut seq = 0u64;
    let mut next = clock::now_ns();
    loop {
        if stop.is_set() || halt() {
            break;
        }
        let now = clock::now_ns();
        if now >= next {
            seq += 1;
            stamp::write_probe(&mut probe, seq, clock::now_ns());
            match link.send(&probe) {
                Ok(n) => {
                    out.counters.send_calls += 1;
                    out.counters.bytes_sent += n as u64;
                }
                Err(e) if transient(&e) => {}
                Err(e) => return Err(EngineError::io("UDP send (a probe)", e)),
            }
            // on schedule; after a stall, from now
            next = if now - next > every_ns {
                now + every_ns
            } else {
                next + every_ns
            };
            continue;
        }
        let wait = Duration::from_nanos((next - now).max(100_000));
        sock.set_read_timeout(Some(wait))
            .map_err(|e| EngineError::io("setting the receive timeout", e))?;
        match link.recv(&mut answer) {
            Ok(Some(n)) => {
                let t4 = clock::now_ns();
                out.counters.recv_calls += 1;
                out.counters.bytes_received += n as u64;
                if let Some(s) = answer.get(..n).and_then(|b| stamp::read_answer(b, t4)) {
                    if s.seq >= 1 && s.seq <= seq {
                        out.counters.transactions += 1;
                        live.publish_transactions(out.counters.transactions);
                        keep(s);
                    }
                }
            }
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if no_datagram(&e) => {}
            Err(e) => return Err(EngineError::io("UDP receive (a probe's answer)", e)),
        }
    }
    out.lost = seq.saturating_sub(out.counters.transactions);
    out.elapsed = start.elapsed();
    Ok(out)
}

/// The netserver's side: each probe answered with its receive and send
/// times on `clock` (the monotonic clock's nanoseconds; a test's skewed
/// one), until `stop`.
pub fn stamp_responder(
    link: Link<'_>,
    clock: &dyn Fn() -> u64,
    stop: &StopFlag,
    live: &Live,
) -> Result<Ended, EngineError> {
    let sock = link.socket();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| EngineError::io("setting a receive timeout", e))?;
    let mut buf = [0u8; stamp::LEN + 1];
    let mut out = Ended::default();
    let start = Instant::now();
    loop {
        match link.recv(&mut buf) {
            Ok(Some(n)) => {
                let t2 = clock();
                out.counters.recv_calls += 1;
                out.counters.bytes_received += n as u64;
                let Some(len) = stamp::answer_in_place(&mut buf, n, t2, clock()) else {
                    continue;
                };
                match link.send(buf.get(..len).unwrap_or_default()) {
                    Ok(m) => {
                        out.counters.send_calls += 1;
                        out.counters.bytes_sent += m as u64;
                        out.counters.transactions += 1;
                        live.publish_transactions(out.counters.transactions);
                    }
                    Err(e) if transient(&e) => {}
                    Err(e) => return Err(EngineError::io("UDP send (a probe's answer)", e)),
                }
            }
            Ok(None) => {
                if stop.is_set() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if no_datagram(&e) => {
                if stop.is_set() {
                    break;
                }
            }
            Err(e) => return Err(EngineError::io("UDP receive (a probe)", e)),
        }
    }
    out.elapsed = start.elapsed();
    Ok(out)
}

/// A clock running `ppm` parts per million fast from `base` (a test's
/// skew between two hosts' clocks; 0: the monotonic clock itself).
pub fn skewed(ppm: f64, base: u64) -> impl Fn() -> u64 {
    move || {
        let now = clock::now_ns();
        if ppm == 0.0 {
            return now;
        }
        let since = now.saturating_sub(base) as f64;
        base + (since * (1.0 + ppm * 1e-6)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::udp_pair;
    use std::{sync::atomic::AtomicBool, sync::atomic::Ordering, thread};

    /// Probes go out on schedule and every answer carries the
    /// netserver's two times between the client's two.
    #[test]
    fn probes_are_answered_with_both_ends_times() {
        let (a, b) = udp_pair();
        let stop = StopFlag::new();
        let done = AtomicBool::new(false);
        let live = Live::new();
        let mut kept = Vec::new();
        let out = thread::scope(|s| {
            let r = s.spawn(|| {
                let clock = skewed(0.0, 0);
                stamp_responder(Link::connected(&b), &clock, &stop, &Live::new())
            });
            let t0 = Instant::now();
            let halt = || t0.elapsed() >= Duration::from_millis(300);
            let out = stamp_requester(
                Link::connected(&a),
                Duration::from_millis(10),
                &StopFlag::new(),
                &halt,
                &mut |s| kept.push(s),
                &live,
            );
            done.store(true, Ordering::Relaxed);
            stop.set();
            let served = r.join().unwrap().unwrap();
            (out.unwrap(), served)
        });
        let (out, served) = out;
        assert!((25..=32).contains(&out.counters.send_calls), "{out:?}");
        assert!(
            kept.len() as u64 >= out.counters.send_calls - 2,
            "{}",
            kept.len()
        );
        assert!(served.counters.transactions >= kept.len() as u64);
        for s in &kept {
            assert!(s.t1 <= s.t2 && s.t2 <= s.t3 && s.t3 <= s.t4, "{s:?}");
        }
        assert_eq!(
            out.lost,
            out.counters.send_calls - out.counters.transactions
        );
    }

    #[test]
    fn a_skewed_clock_runs_fast_by_its_parts_per_million() {
        let base = clock::now_ns();
        let c = skewed(100.0, base);
        thread::sleep(Duration::from_millis(200));
        // the skewed clock read between two reads of the real one: what
        // it is ahead lies between the two differences (a wake-up lost
        // between the reads only widens the bracket; the narrowest of
        // five is kept)
        let (lo, hi) = (0..5)
            .map(|_| {
                let before = clock::now_ns();
                let skewed_now = c();
                let after = clock::now_ns();
                (
                    skewed_now as i64 - after as i64,
                    skewed_now as i64 - before as i64,
                )
            })
            .min_by_key(|(lo, hi)| hi - lo)
            .unwrap();
        // 100 ppm of 200 ms (and what the sleep overslept) = 20 us or more
        assert!(hi >= 15_000 && lo < 40_000, "{lo}..{hi} ns ahead");
    }
}
