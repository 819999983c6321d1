//! Attempts at a figure that a starved run rightly gets wrong.
//!
//! A rate through a shaper, or a queue's delay under load, comes out right
//! only if the programs kept the link busy: a run starved of CPU (by other
//! processes, or by the host of this virtual machine taking its CPUs, which
//! shared hosts do in bursts) comes out rightly low or late. So such a test
//! runs its attempt until one comes out right, counting the CPU time the
//! host took during each (the steal column of `/proc/stat`): three misses
//! fail it, but a miss with [`EXCUSING_STEAL_MS`] or more stolen does not
//! count, up to [`MOST`] attempts. A miss that starving cannot explain (a
//! rate above the shaper's) fails at once. Every attempt is printed with
//! the time stolen. Excusing only buys attempts, never a pass: a figure
//! that is wrong every time fails.

use std::time::Duration;

/// Steal during an attempt above which a miss does not count: 40 ms is 1%
/// of a 4-second run on one CPU (a token bucket's burst absorbs a shorter
/// stall).
pub const EXCUSING_STEAL_MS: u64 = 40;

/// Attempts in all, counted or not.
pub const MOST: u32 = 8;

/// Misses that fail a test.
const COUNTED: u32 = 3;

/// CPU time the host has taken from this machine so far (the steal
/// counters of /proc/stat, as the engine's CPU meter reads them, summed
/// over CPUs), in milliseconds.
pub fn stolen_ms() -> u64 {
    let ticks: u64 = engine::cpu::snapshot().map_or(0, |s| s.cpus.iter().map(|c| c.steal).sum());
    let hz = engine::sys::clock_ticks().max(1) as u64;
    ticks * 1000 / hz
}

/// A miss: whether starving cannot explain it (it fails at once), and what
/// to show.
#[derive(Debug)]
pub struct Miss {
    pub impossible: bool,
    pub shown: String,
}

impl Miss {
    /// A miss a starved run could make.
    pub fn starved(shown: String) -> Miss {
        Miss {
            impossible: false,
            shown,
        }
    }
}

/// Run `attempt` (given its number) until it comes out right, as the
/// module says; its value then.
pub fn attempts<T>(test: &str, mut attempt: impl FnMut(u32) -> Result<T, Miss>) -> T {
    let (mut misses, mut counted) = (Vec::new(), 0);
    for n in 1..=MOST {
        let before = stolen_ms();
        let got = attempt(n);
        let stolen = stolen_ms().saturating_sub(before);
        let miss = match got {
            Ok(v) => {
                eprintln!("{test}: attempt {n}: right, {stolen} ms stolen by the host");
                return v;
            }
            Err(m) => m,
        };
        eprintln!("{test}: attempt {n}: missed, {stolen} ms stolen by the host");
        assert!(
            !miss.impossible,
            "{test}: attempt {n}, a miss no starved run makes:\n{}",
            miss.shown
        );
        if stolen < EXCUSING_STEAL_MS {
            counted += 1;
        }
        misses.push(format!(
            "attempt {n} ({stolen} ms stolen by the host):\n{}",
            miss.shown
        ));
        if counted == COUNTED {
            break;
        }
        // a burst of load passes
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!(
        "{test}: {counted} misses with under {EXCUSING_STEAL_MS} ms stolen by the host, {} attempts:\n{}",
        misses.len(),
        misses.join("\n")
    );
}
