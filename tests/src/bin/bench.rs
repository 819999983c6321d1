//! Benchmarks that print figures, side by side with a peer, as ratios.
//! They assert nothing about speed: this machine is shared and noisy.
//!
//! Run with `bench/run [--runs N] [--secs S]` (which builds the release
//! binaries first). Peers: `sockperf` ping-pong when it is installed, and a
//! reference netperf 2.7 when `NETPERF_REF` names the directory holding its
//! `netperf` and `netserver` (built under /tmp; never committed).
//!
//! Runs alternate (ours, peer, ours, peer ...); each pair gives a ratio;
//! the median and the spread of the ratios are printed.
//!
//! `BENCH_BASELINE=dir` (a directory holding an earlier build's `netperf`
//! and `netserver`) compares this build with that one instead: TCP_STREAM,
//! TCP_CRR and TCP_RR throughput ratios this/earlier, alternating, and both
//! builds' system calls and instructions per TCP_RR transaction. That is
//! how a change to the data path shows it costs nothing.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use harness::{Netserver, fields, free_port, num, run_with_deadline};

struct Opts {
    runs: usize,
    secs: u64,
    /// Only the many-flows benchmark.
    flows: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        runs: 5,
        secs: 3,
        flows: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).map(|s| s.parse::<u64>().unwrap_or(0));
        match args[i].as_str() {
            "--flows" => {
                o.flows = true;
                i += 1;
                continue;
            }
            "--runs" => o.runs = v.unwrap_or(5).max(1) as usize,
            "--secs" => o.secs = v.unwrap_or(3).max(1),
            other => {
                eprintln!("bench: unknown argument {other}; use --runs N --secs S [--flows]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    o
}

/// Our release binaries, next to this one.
fn ours(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let p = exe.parent().expect("dir").join(name);
    assert!(
        p.exists(),
        "{} missing: run bench/run, which builds it",
        p.display()
    );
    p
}

fn run(cmd: Command) -> String {
    let out = run_with_deadline(cmd, Duration::from_secs(300));
    assert!(out.success(), "benchmark run failed: {out}");
    out.stdout
}

/// Transactions per second from netperf (ours or netperf 2.7) at -v 0.
fn netperf_tps(bin: &Path, port: u16, test: &str, secs: u64, extra: &[&str]) -> f64 {
    let mut c = Command::new(bin);
    c.args([
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        test,
        "-l",
        &secs.to_string(),
        "-P",
        "0",
        "-v",
        "0",
    ]);
    if !extra.is_empty() {
        c.arg("--").args(extra);
    }
    num(fields(&run(c))[0])
}

/// Round trips per second from sockperf ping-pong (its valid duration).
fn sockperf_tps(port: u16, tcp: bool, secs: u64) -> f64 {
    let mut c = Command::new("sockperf");
    c.args([
        "pp",
        "-i",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        &secs.to_string(),
        "-m",
        "14",
    ]);
    if tcp {
        c.arg("--tcp");
    }
    let out = run_with_deadline(c, Duration::from_secs(120));
    let text = format!("{}{}", out.stdout, out.stderr);
    let line = text
        .lines()
        .find(|l| l.contains("[Valid Duration]"))
        .unwrap_or_else(|| panic!("sockperf said:\n{text}"));
    let grab = |key: &str| -> f64 {
        let rest = line.split(key).nth(1).expect("field");
        num(rest
            .trim_start_matches('=')
            .split([' ', ';'])
            .next()
            .unwrap_or("0")
            .trim_end_matches("sec"))
    };
    grab("ReceivedMessages") / grab("RunTime")
}

struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

fn spread(mut v: Vec<f64>) -> Spread {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Spread {
        median,
        min: v[0],
        max: v[n - 1],
    }
}

/// Alternate `a` and `b`; return medians of each and the spread of a/b.
fn alternate(
    runs: usize,
    mut a: impl FnMut() -> f64,
    mut b: impl FnMut() -> f64,
) -> (f64, f64, Spread) {
    let (mut av, mut bv, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let x = a();
        let y = b();
        av.push(x);
        bv.push(y);
        ratios.push(x / y);
    }
    (spread(av).median, spread(bv).median, spread(ratios))
}

fn row(test: &str, peer: &str, (a, b, r): (f64, f64, Spread)) {
    println!(
        "{test:<12} {:>12.0} {peer:<14} {:>12.0}   {:>6.3}  ({:.3} .. {:.3})",
        a, b, r.median, r.min, r.max
    );
}

/// The arguments of a terse TCP_RR of exactly `n` transactions against the
/// netserver at 127.0.0.1:`port`, with `extra` test options.
fn rr_count_args(port: u16, n: u64, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "TCP_RR",
        "-l",
        &format!("-{n}"),
        "-P",
        "0",
        "-v",
        "0",
    ]
    .map(String::from)
    .into();
    if !extra.is_empty() {
        a.push("--".into());
        a.extend(extra.iter().map(|s| s.to_string()));
    }
    a
}

/// System calls per transaction of a TCP_RR client over 10,000 transactions.
fn syscalls_per_transaction(bin: &Path, port: u16) -> Option<f64> {
    let file = std::env::temp_dir().join(format!("bench-strace-{}-{port}", std::process::id()));
    let mut c = Command::new("strace");
    c.args(["-c", "-f", "-o"]).arg(&file).arg(bin);
    c.args(rr_count_args(port, 10_000, &[]));
    let out = run_with_deadline(c, Duration::from_secs(120));
    let report = std::fs::read_to_string(&file).ok()?;
    let _ = std::fs::remove_file(&file);
    if !out.success() {
        return None;
    }
    report
        .lines()
        .find(|l| l.trim_end().ends_with(" total"))
        .map(|l| num(fields(l)[3]) / 10_000.0)
}

/// CPU time (user + system) of a netperf run per transaction, in
/// microseconds: less sensitive to a noisy neighbour than throughput.
fn cpu_per_transaction(bin: &Path, port: u16, n: u64, extra: &[&str]) -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let cpu = || {
        let u = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e6 + tv.tv_usec() as f64;
        t(u.user_time()) + t(u.system_time())
    };
    let before = cpu();
    let mut c = Command::new(bin);
    c.args(rr_count_args(port, n, extra));
    run(c);
    (cpu() - before) / n as f64
}

/// User-space instructions per TCP_RR transaction (callgrind, stable on a
/// noisy machine): the difference between 11,000 and 1,000 transactions.
fn instructions_per_transaction(bin: &Path, port: u16, extra: &[&str]) -> Option<f64> {
    let count = |n: u64| -> Option<f64> {
        let file = std::env::temp_dir().join(format!("bench-cg-{}-{n}", std::process::id()));
        let mut c = Command::new("valgrind");
        c.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", file.display()))
            .arg(bin);
        c.args(rr_count_args(port, n, extra));
        let out = run_with_deadline(c, Duration::from_secs(300));
        let _ = std::fs::remove_file(&file);
        let line = out.stderr.lines().find(|l| l.contains("Collected :"))?;
        Some(num(line.rsplit(':').next()?.trim()))
    };
    Some((count(11_000)? - count(1_000)?) / 10_000.0)
}

/// CPU seconds (user + system) of the reaped children of this process.
fn children_cpu() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

/// CPU seconds of process `pid` and its reaped children (/proc/pid/stat).
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // fields after the command's closing parenthesis; utime is the 14th
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|w| w.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11..15).map_or(0.0, |s| s.iter().sum::<f64>());
    ticks / 100.0
}

/// One measured run: its figure and the CPU seconds each end spent.
struct Sample {
    figure: f64,
    client_cpu: f64,
    server_cpu: f64,
}

fn sampled(server_pid: u32, f: impl FnOnce() -> f64) -> Sample {
    let (c0, s0) = (children_cpu(), process_cpu(server_pid));
    let figure = f();
    Sample {
        figure,
        client_cpu: children_cpu() - c0,
        server_cpu: process_cpu(server_pid) - s0,
    }
}

/// Aggregate Mbit/s of `iperf3 -P n` with `len`-byte writes (its receiver's
/// figure, as netperf reports the receiver's).
fn iperf3_mbps(port: u16, n: usize, len: &str, secs: u64) -> f64 {
    let mut c = Command::new("iperf3");
    c.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t"])
        .arg(secs.to_string())
        .args(["-P", &n.to_string(), "-l", len, "-J"]);
    let out = run(c);
    let v: serde_json::Value = serde_json::from_str(&out).expect("iperf3 -J output");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("sum_received")
        / 1e6
}

/// The honest sum of `n` netperf processes started together: each one's
/// figure added, as users of netperf add them (their intervals overlap
/// only roughly).
fn concurrent_netperfs(bin: &Path, port: u16, test: &str, n: usize, secs: u64) -> f64 {
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let bin = bin.to_path_buf();
            let test = test.to_string();
            std::thread::spawn(move || netperf_tps(&bin, port, &test, secs, &[]))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
}

/// No peer for this row.
fn no_sample() -> Sample {
    Sample {
        figure: f64::NAN,
        client_cpu: 0.0,
        server_cpu: 0.0,
    }
}

/// One row of the flows tables: `n`, both medians, the ratios' spread, and
/// each side's client and server CPU microseconds per unit of work (`per`:
/// figure * seconds / per = units, so 8 gives megabytes from Mbit/s).
fn flows_row(
    o: &Opts,
    n: usize,
    per: f64,
    mut ours: impl FnMut() -> Sample,
    mut peer: impl FnMut() -> Sample,
) {
    let (mut a, mut b, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..o.runs {
        let x = ours();
        let y = peer();
        ratios.push(x.figure / y.figure);
        a.push(x);
        b.push(y);
    }
    let med = |v: &[Sample]| spread(v.iter().map(|s| s.figure).collect()).median;
    let cpu = |v: &[Sample], client: bool| -> f64 {
        let total: f64 = v
            .iter()
            .map(|s| if client { s.client_cpu } else { s.server_cpu })
            .sum();
        let work: f64 = v.iter().map(|s| s.figure * o.secs as f64 / per).sum();
        if work > 0.0 { total * 1e6 / work } else { 0.0 }
    };
    let r = spread(ratios);
    println!(
        "{n:>6} {:>10.0} {:>11.0}  {:>6.3}  ({:.3} .. {:.3})  {:>9.2} {:>9.2}  {:>9.2} {:>9.2}",
        med(&a),
        med(&b),
        r.median,
        r.min,
        r.max,
        cpu(&a, true),
        cpu(&a, false),
        cpu(&b, true),
        cpu(&b, false),
    );
}

fn flows_header(unit: &str, peer: &str) {
    println!(
        "{:>6} {:>10} {:>11}  {:>6}  {:<17}  {:>19}  {:>19}",
        "N",
        "ours",
        peer,
        "ratio",
        "spread",
        format!("CPU {unit} ours c/s"),
        "peer c/s"
    );
}

/// netperf 2.7's netserver from `NETPERF_REF`, on a free port.
fn reference_server() -> Option<(PathBuf, u16, Guard)> {
    let dir = PathBuf::from(std::env::var_os("NETPERF_REF")?);
    let port = free_port();
    let g = spawn(Command::new(dir.join("netserver")).args([
        "-D",
        "-p",
        &port.to_string(),
        "-L",
        "127.0.0.1",
    ]));
    std::thread::sleep(Duration::from_millis(500));
    Some((dir, port, g))
}

/// Many flows in one run (`--flows N`) beside iperf3 `-P N` (TCP_STREAM,
/// same write size) and N concurrent netperf 2.7 processes (TCP_RR, with
/// NETPERF_REF), with each end's CPU time per megabyte or transaction.
fn flows(o: &Opts, netperf: &Path, ns: &Netserver) {
    let port = ns.port();
    let secs = o.secs;
    println!(
        "rsnetperf many-flows benchmark: {} alternating runs of {secs} s each, loopback, {} CPUs\n",
        o.runs,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let have_iperf3 = Command::new("iperf3").arg("--version").output().is_ok();
    let iperf_port = free_port();
    let iperf = have_iperf3.then(|| {
        let g = spawn(Command::new("iperf3").args(["-s", "-p", &iperf_port.to_string()]));
        std::thread::sleep(Duration::from_millis(500));
        g
    });
    println!("TCP_STREAM -m 128K --flows N, 10^6bits/s, beside iperf3 -P N -l 128K:");
    flows_header("us/MB", "iperf3");
    for n in [1usize, 2, 8, 100] {
        let nflows = n.to_string();
        flows_row(
            o,
            n,
            8.0,
            || {
                sampled(ns.pid(), || {
                    netperf_tps(
                        netperf,
                        port,
                        "TCP_STREAM",
                        secs,
                        &["-m", "128K", "--flows", &nflows],
                    )
                })
            },
            || match &iperf {
                Some(g) => sampled(g.0.id(), || iperf3_mbps(iperf_port, n, "128K", secs)),
                None => no_sample(),
            },
        );
    }
    drop(iperf);

    let reference = reference_server();
    println!(
        "\nTCP_RR --flows N, transactions/s, beside N concurrent netperf 2.7 processes (their figures added):"
    );
    flows_header("us/tx", "netperf x N");
    for n in [1usize, 2, 8, 100, 1000] {
        let nflows = n.to_string();
        flows_row(
            o,
            n,
            1.0,
            || {
                sampled(ns.pid(), || {
                    netperf_tps(netperf, port, "TCP_RR", secs, &["--flows", &nflows])
                })
            },
            // a thousand processes on 2 CPUs measure the scheduler, not
            // the network: the reference runs up to 100
            || match &reference {
                Some((dir, ref_port, g)) if n <= 100 => sampled(g.0.id(), || {
                    concurrent_netperfs(&dir.join("netperf"), *ref_port, "TCP_RR", n, secs)
                }),
                _ => no_sample(),
            },
        );
    }
}

struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> Guard {
    Guard(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    )
}

/// This build beside an earlier one (`BENCH_BASELINE`).
fn baseline(o: &Opts, dir: &Path) {
    let netperf = ours("netperf");
    let mut cmd = Command::new(ours("netserver"));
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1", "-v", "0"]);
    let ns = Netserver::spawn(cmd);
    let port = ns.port();
    let base = dir.join("netperf");
    let mut cmd = Command::new(dir.join("netserver"));
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1", "-v", "0"]);
    let base_ns = Netserver::spawn(cmd);
    let base_port = base_ns.port();
    println!(
        "this build beside {}: {} alternating runs of {} s each, loopback\n",
        dir.display(),
        o.runs,
        o.secs
    );
    println!(
        "{:<12} {:>12} {:>12}   {:>6}  spread",
        "test", "this", "baseline", "ratio"
    );
    for test in ["TCP_STREAM", "TCP_CRR", "TCP_RR"] {
        let (a, b, r) = alternate(
            o.runs,
            || netperf_tps(&netperf, port, test, o.secs, &[]),
            || netperf_tps(&base, base_port, test, o.secs, &[]),
        );
        println!(
            "{test:<12} {a:>12.0} {b:>12.0}   {:>6.3}  ({:.3} .. {:.3})",
            r.median, r.min, r.max
        );
    }
    println!("\nPer TCP_RR transaction on the client:");
    let show = |what: &str, a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => println!(
            "  {what:<26} this {a:.4}, baseline {b:.4} ({:+.2}%)",
            (a / b - 1.0) * 100.0
        ),
        _ => println!("  {what:<26} (strace or valgrind not available)"),
    };
    show(
        "system calls (strace -c)",
        syscalls_per_transaction(&netperf, port),
        syscalls_per_transaction(&base, base_port),
    );
    show(
        "instructions (callgrind)",
        instructions_per_transaction(&netperf, port, &[]),
        instructions_per_transaction(&base, base_port, &[]),
    );
}

fn main() {
    let o = opts();
    if let Some(dir) = std::env::var_os("BENCH_BASELINE") {
        baseline(&o, Path::new(&dir));
        return;
    }
    let netperf = ours("netperf");
    let mut cmd = Command::new(ours("netserver"));
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1", "-v", "0"]);
    let ns = Netserver::spawn(cmd);
    let port = ns.port();
    if o.flows {
        flows(&o, &netperf, &ns);
        return;
    }
    println!(
        "rsnetperf request/response benchmark: {} alternating runs of {} s each, loopback\n",
        o.runs, o.secs
    );
    println!(
        "{:<12} {:>12} {:<14} {:>12}   {:>6}  spread",
        "test", "ours tps", "peer", "peer tps", "ratio"
    );

    // sockperf first: it binds without SO_REUSEADDR, and TCP_CRR leaves
    // TIME_WAIT entries across ports 5000-65535; its ports are below those.
    let have_sockperf = Command::new("sockperf").arg("--version").output().is_ok();
    if have_sockperf {
        for (test, tcp, sp_port) in [("TCP_RR", true, 4711u16), ("UDP_RR", false, 4712)] {
            let mut c = Command::new("sockperf");
            c.args(["sr", "-i", "127.0.0.1", "-p", &sp_port.to_string()]);
            if tcp {
                c.arg("--tcp");
            }
            let _server = spawn(&mut c);
            std::thread::sleep(Duration::from_millis(500));
            let r = alternate(
                o.runs,
                || netperf_tps(&netperf, port, test, o.secs, &[]),
                || sockperf_tps(sp_port, tcp, o.secs),
            );
            row(test, "sockperf pp", r);
        }
    } else {
        println!("(sockperf not installed: apt-get install sockperf)");
    }

    let reference = std::env::var_os("NETPERF_REF").map(PathBuf::from);
    let ref_port = free_port();
    let _ref_server = reference.as_ref().map(|dir| {
        let g = spawn(Command::new(dir.join("netserver")).args([
            "-D",
            "-p",
            &ref_port.to_string(),
            "-L",
            "127.0.0.1",
        ]));
        std::thread::sleep(Duration::from_millis(500));
        g
    });
    if let Some(dir) = &reference {
        let refbin = dir.join("netperf");
        for (test, extra, label) in [
            ("TCP_RR", &[][..], "TCP_RR"),
            ("UDP_RR", &[], "UDP_RR"),
            ("TCP_CRR", &[], "TCP_CRR"),
            ("TCP_RR", &["-b", "8", "-D"], "TCP_RR -b 8"),
            ("UDP_RR", &["-b", "8"], "UDP_RR -b 8"),
        ] {
            let r = alternate(
                o.runs,
                || netperf_tps(&netperf, port, test, o.secs, extra),
                || netperf_tps(&refbin, ref_port, test, o.secs, extra),
            );
            row(label, "netperf 2.7", r);
        }
    } else {
        println!("(no reference netperf: set NETPERF_REF to the directory of a netperf 2.7 build)");
        let r = alternate(
            o.runs,
            || netperf_tps(&netperf, port, "TCP_CRR", o.secs, &[]),
            || 1.0,
        );
        println!("TCP_CRR      {:>12.0}", r.0);
    }

    println!(
        "\nTCP_SENDFILE (sendfile(2), no copy from user space) beside TCP_STREAM, ours, 10^6bits/s:"
    );
    let (sf, st, r) = alternate(
        o.runs,
        || netperf_tps(&netperf, port, "TCP_SENDFILE", o.secs, &[]),
        || netperf_tps(&netperf, port, "TCP_STREAM", o.secs, &[]),
    );
    println!(
        "  TCP_SENDFILE {sf:.0}, TCP_STREAM {st:.0}: ratio {:.3} ({:.3} .. {:.3})",
        r.median, r.min, r.max
    );

    println!("\nCost of timing every transaction (TCP_RR with latency vs --no-latency):");
    let (with, without, r) = alternate(
        o.runs,
        || netperf_tps(&netperf, port, "TCP_RR", o.secs, &[]),
        || netperf_tps(&netperf, port, "TCP_RR", o.secs, &["--no-latency"]),
    );
    println!(
        "  throughput: {with:.0} tps timed, {without:.0} untimed: ratio {:.3} ({:.3} .. {:.3})",
        r.median, r.min, r.max
    );
    let (with, without, r) = alternate(
        o.runs,
        || cpu_per_transaction(&netperf, port, 100_000, &[]),
        || cpu_per_transaction(&netperf, port, 100_000, &["--no-latency"]),
    );
    println!(
        "  client CPU: {with:.3} us per transaction timed, {without:.3} untimed: ratio {:.3} ({:.3} .. {:.3})",
        r.median, r.min, r.max
    );

    println!(
        "\nSystem calls per TCP_RR transaction on the client (strace -c -f, 10,000 transactions):"
    );
    match syscalls_per_transaction(&netperf, port) {
        Some(v) => println!("  ours        {v:.4}"),
        None => println!("  (strace not available)"),
    }
    if let Some(dir) = &reference
        && let Some(v) = syscalls_per_transaction(&dir.join("netperf"), ref_port)
    {
        println!("  netperf 2.7 {v:.4}");
    }

    println!("\nUser-space instructions per TCP_RR transaction on the client (callgrind):");
    match instructions_per_transaction(&netperf, port, &[]) {
        Some(v) => {
            println!("  ours, timed          {v:.0}");
            if let Some(u) = instructions_per_transaction(&netperf, port, &["--no-latency"]) {
                println!("  ours, --no-latency   {u:.0}");
            }
        }
        None => println!("  (valgrind not available)"),
    }
    if let Some(dir) = &reference
        && let Some(v) = instructions_per_transaction(&dir.join("netperf"), ref_port, &[])
    {
        println!("  netperf 2.7          {v:.0}");
    }
}
