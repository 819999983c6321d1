//! CPU utilisation from /proc/stat, as netperf's "procstat" method ('S').
//!
//! A snapshot of every CPU's tick counters is taken at the start and at the
//! end of the measured interval. Each CPU's utilisation is 100% minus its
//! idle share of the ticks in between (netperf counts iowait as busy, and so
//! do we); the system figure is the mean over the CPUs, and the busiest CPU
//! is reported too.
//!
//! A test's own CPU time is counted apart ([`Account`]): every thread that
//! runs its flows adds what it used, so one test's figure is not its
//! neighbours' on a netserver running many.

use std::{
    cell::RefCell,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use proto::{CpuStats, OwnCpu};

/// One CPU's counters (USER_HZ ticks), as the `cpuN` lines list them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl Ticks {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
            + self.guest
            + self.guest_nice
    }

    fn since(&self, before: &Ticks) -> Ticks {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Ticks {
            user: d(self.user, before.user),
            nice: d(self.nice, before.nice),
            system: d(self.system, before.system),
            idle: d(self.idle, before.idle),
            iowait: d(self.iowait, before.iowait),
            irq: d(self.irq, before.irq),
            softirq: d(self.softirq, before.softirq),
            steal: d(self.steal, before.steal),
            guest: d(self.guest, before.guest),
            guest_nice: d(self.guest_nice, before.guest_nice),
        }
    }
}

/// Every CPU's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub cpus: Vec<Ticks>,
}

/// Parse the `cpuN` lines of /proc/stat.
pub fn parse(stat: &str) -> Snapshot {
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let f = |i: usize| v.get(i).copied().unwrap_or(0);
            Ticks {
                user: f(0),
                nice: f(1),
                system: f(2),
                idle: f(3),
                iowait: f(4),
                irq: f(5),
                softirq: f(6),
                steal: f(7),
                guest: f(8),
                guest_nice: f(9),
            }
        })
        .collect();
    Snapshot { cpus }
}

/// The counters now (the platform's: /proc/stat on Linux), or `None` if
/// they cannot be read.
pub fn snapshot() -> Option<Snapshot> {
    crate::sys::cpu_ticks().map(|cpus| Snapshot { cpus })
}

/// Number of CPUs the kernel lists.
pub fn count() -> u32 {
    // Read /proc/stat at most once every 10 s: netserver tells every
    // session, and CPUs come and go rarely (hotplug).
    use std::sync::atomic::{AtomicU64, Ordering};
    static CACHED: AtomicU64 = AtomicU64::new(0);
    let now = crate::clock::now_ns() / 1_000_000_000;
    let c = CACHED.load(Ordering::Relaxed);
    let (when, n) = (c >> 32, (c & 0xffff_ffff) as u32);
    if n > 0 && now.saturating_sub(when) < 10 {
        return n;
    }
    // (where no meter reads, as the scheduler counts them)
    let n = match snapshot() {
        Some(s) if !s.cpus.is_empty() => s.cpus.len() as u32,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };
    CACHED.store((now << 32) | u64::from(n), Ordering::Relaxed);
    n
}

/// The rate of our CPU meter, as netperf 2.7's LOC_CPU and REM_CPU print
/// it: /proc/stat counts in clock ticks, so its rate is the tick rate
/// (nothing to calibrate, unlike netperf's idle-loop methods).
pub fn meter_rate() -> u32 {
    u32::try_from(crate::sys::clock_ticks()).unwrap_or(100)
}

/// Utilisation between two snapshots. `num_cpus` (netperf's `-n`), when not
/// 0, limits the measurement to the first `num_cpus` CPUs.
pub fn utilisation(start: &Snapshot, end: &Snapshot, num_cpus: u32) -> CpuStats {
    let n = match num_cpus {
        0 => end.cpus.len(),
        k => (k as usize).min(end.cpus.len()),
    };
    let mut s = CpuStats {
        method: 'S',
        num_cpus: n as u32,
        ..CpuStats::default()
    };
    if n == 0 {
        return s;
    }
    let mut peak = (0u32, -1.0f64);
    for (i, (a, b)) in start.cpus.iter().zip(&end.cpus).take(n).enumerate() {
        let d = b.since(a);
        let total = d.total();
        if total == 0 {
            continue;
        }
        let pct = |x: u64| 100.0 * x as f64 / total as f64;
        let busy = 100.0 - pct(d.idle);
        s.util += busy;
        s.user += pct(d.user + d.nice);
        s.system += pct(d.system);
        s.iowait += pct(d.iowait);
        s.irq += pct(d.irq);
        s.softirq += pct(d.softirq);
        if busy > peak.1 {
            peak = (i as u32, busy);
        }
    }
    let nf = n as f64;
    s.util /= nf;
    s.user /= nf;
    s.system /= nf;
    s.iowait /= nf;
    s.irq /= nf;
    s.softirq /= nf;
    s.peak_cpu = peak.0;
    s.peak_util = peak.1.max(0.0);
    s
}

/// netperf's service demand: microseconds of CPU per unit of work (a KB,
/// `divisor` 1024, or a transaction, `divisor` 1), with all CPUs counted.
pub fn service_demand(util_pct: f64, num_cpus: u32, units: f64, divisor: f64, elapsed: f64) -> f64 {
    if units <= 0.0 || elapsed <= 0.0 {
        return 0.0;
    }
    let per_second = units / divisor / elapsed;
    util_pct * 10_000.0 / per_second * f64::from(num_cpus.max(1))
}

/// The CPU time of one test's threads: a thread counts toward the account
/// it has entered, from entering until leaving (the guard's drop). Threads
/// the test's thread starts to run its flows ([`carried`]) enter its
/// account too.
#[derive(Debug, Default)]
pub struct Account {
    user_ns: AtomicU64,
    system_ns: AtomicU64,
    /// A thread that entered could not read its time.
    unread: AtomicBool,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Account>>> = const { RefCell::new(None) };
}

/// A thread's stay in an account: its time since entering is added when
/// it is dropped, and the account it was in before is its again.
#[must_use]
#[derive(Debug)]
pub struct Entered {
    account: Arc<Account>,
    start: Option<(u64, u64)>,
    before: Option<Arc<Account>>,
}

impl Account {
    /// The calling thread counts toward `account` until the guard drops.
    pub fn enter(account: &Arc<Account>) -> Entered {
        let before = CURRENT.with(|c| c.replace(Some(account.clone())));
        Entered {
            account: account.clone(),
            start: crate::sys::thread_cpu_ns(),
            before,
        }
    }

    /// The time counted so far, or `None` where a thread's could not be
    /// read (a platform that does not count a thread's time).
    pub fn used(&self) -> Option<OwnCpu> {
        (!self.unread.load(Ordering::Relaxed)).then(|| OwnCpu {
            user_ns: self.user_ns.load(Ordering::Relaxed),
            system_ns: self.system_ns.load(Ordering::Relaxed),
        })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        match (self.start, crate::sys::thread_cpu_ns()) {
            (Some((u0, s0)), Some((u1, s1))) => {
                let a = &self.account;
                a.user_ns
                    .fetch_add(u1.saturating_sub(u0), Ordering::Relaxed);
                a.system_ns
                    .fetch_add(s1.saturating_sub(s0), Ordering::Relaxed);
            }
            _ => {
                self.account.unread.store(true, Ordering::Relaxed);
            }
        }
        let before = self.before.take();
        CURRENT.with(|c| *c.borrow_mut() = before);
    }
}

/// The account the calling thread is in, for a thread it starts to enter
/// (`Account::enter`) so that its time counts where its starter's does.
pub fn carried() -> Option<Arc<Account>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Start `f` on a scoped thread that counts toward the calling thread's
/// account: how a test's thread starts the helpers that run its flows.
pub fn spawn_scoped<'scope, T: Send + 'scope>(
    sc: &'scope std::thread::Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, T> {
    let account = carried();
    sc.spawn(move || {
        let _in = account.as_ref().map(Account::enter);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  100 0 100 800 0 0 0 0 0 0\n\
cpu0 50 0 50 400 0 0 0 0 0 0\n\
cpu1 50 0 50 400 0 0 0 0 0 0\n\
intr 12345\n";
    // cpu0: +30 user +20 sys +50 idle (50% busy); cpu1: +10 idle (0% busy)
    const B: &str = "cpu  100 0 100 800 0 0 0 0 0 0\n\
cpu0 80 0 70 450 0 0 0 0 0 0\n\
cpu1 50 0 50 410 0 0 0 0 0 0\n";

    #[test]
    fn parses_per_cpu_lines_only() {
        let s = parse(A);
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[0].user, 50);
        assert_eq!(s.cpus[1].idle, 400);
    }

    #[test]
    fn utilisation_is_the_mean_busy_share() {
        let u = utilisation(&parse(A), &parse(B), 0);
        assert!((u.util - 25.0).abs() < 1e-9, "{}", u.util);
        assert!((u.user - 15.0).abs() < 1e-9);
        assert!((u.system - 10.0).abs() < 1e-9);
        assert_eq!(u.num_cpus, 2);
        assert_eq!(u.peak_cpu, 0);
        assert!((u.peak_util - 50.0).abs() < 1e-9);
        assert_eq!(u.method, 'S');
        // -n 1: the first CPU only
        let u = utilisation(&parse(A), &parse(B), 1);
        assert!((u.util - 50.0).abs() < 1e-9);
        assert_eq!(u.num_cpus, 1);
    }

    #[test]
    fn service_demand_as_netperf() {
        // 50% of 2 CPUs for 10 s moving 10 GB (10485760 KB): 10 CPU-seconds
        // over 10485760 KB = 0.9537 us/KB.
        let sd = service_demand(50.0, 2, 10.0 * 1024.0 * 1024.0 * 1024.0, 1024.0, 10.0);
        assert!((sd - 0.953_674).abs() < 1e-5, "{sd}");
        // per transaction: 25% of 4 CPUs, 1 s, 100000 transactions: 10 us
        assert!((service_demand(25.0, 4, 100_000.0, 1.0, 1.0) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn real_proc_stat() {
        let a = snapshot().unwrap();
        assert!(!a.cpus.is_empty());
        let u = utilisation(&a, &snapshot().unwrap(), 0);
        assert!((0.0..=100.0).contains(&u.util));
    }

    /// Busy for `ms` of this thread's CPU time (however busy the machine).
    #[cfg(any(target_os = "linux", target_os = "freebsd", windows))]
    fn spin(ms: u64) {
        let used = || crate::sys::thread_cpu_ns().map_or(0, |(u, s)| u + s);
        let end = used() + ms * 1_000_000;
        let mut x = 0u64;
        while used() < end {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[cfg(any(target_os = "linux", target_os = "freebsd", windows))]
    #[test]
    fn an_account_counts_its_threads_and_no_others() {
        let a = Arc::new(Account::default());
        let outsider = std::thread::spawn(|| spin(300));
        {
            let _in = Account::enter(&a);
            spin(100);
            // a thread started inside carries the account into its own
            let carried = carried();
            std::thread::spawn(move || {
                let _in = carried.as_ref().map(Account::enter);
                spin(100);
            })
            .join()
            .unwrap();
        }
        spin(50);
        outsider.join().unwrap();
        let used = a.used().expect("this platform counts a thread's time");
        let ms = (used.user_ns + used.system_ns) / 1_000_000;
        // 200 ms spun inside; the outsider's 300 and the 50 after leaving
        // not counted
        assert!((200..=240).contains(&ms), "{ms} ms counted");
        assert!(carried().is_none(), "the thread left the account");
        let (total, user, system) = used.percent_of(1_000_000_000);
        assert!((total - user - system).abs() < 1e-9 && (20.0..=24.0).contains(&total));
    }
}
