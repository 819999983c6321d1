//! Benchmarks that print figures, side by side with a peer, as ratios.
//! They assert nothing about speed: this machine is shared and noisy.
//!
//! Run with `bench/run [--runs N] [--secs S] [--write-doc]` (which builds
//! the release binaries first; 7 pairs of 3 s by default). Peers: a
//! reference netperf 2.7 when `NETPERF_REF` names the directory holding its
//! `netperf` and `netserver` (built under /tmp; never committed), iperf3
//! for the stream tests and `sockperf` ping-pong for TCP_RR and UDP_RR when
//! they are installed. Every test, the fast paths (`--batch`, `--gso`,
//! `--zerocopy`, TCP_SENDFILE), system calls per operation on both ends
//! (strace -c), instructions per operation on the client (callgrind), and
//! the netserver's own cost (idle memory and wakeups, memory and threads a
//! session, sessions per second back to back), as one Markdown report;
//! `--write-doc` puts it into doc/performance.md.
//!
//! Runs alternate (ours, peer, ours, peer ...); each pair gives a ratio;
//! the median and the spread of the ratios are printed.
//!
//! `BENCH_BASELINE=dir` (a directory holding an earlier build's `netperf`
//! and `netserver`) compares this build with that one instead: TCP_STREAM,
//! TCP_CRR and TCP_RR throughput ratios this/earlier, alternating; both
//! builds' system calls per TCP_RR transaction and instructions per TCP_RR,
//! TCP_CRR and TCP_STREAM operation; the many-flows rows (TCP_RR, TCP_STREAM,
//! UDP_RR, TCP_CRR) with each end's CPU; and the client's peak memory and
//! threads with 100 and 1,000 flows; and the page-aligned rows (`-m 256K
//! --rx-zerocopy --flows 2`, with and without `--zerocopy`) in a namespace
//! whose loopback carries whole pages (needs root). That is how a change to
//! the data path shows it costs nothing, and a round holds its rows against
//! the one before.
//!
//! `--peers` prints another report: ours beside iperf3 3.21 (`IPERF3_REF`,
//! the directory holding its `iperf3` or `src/iperf3`) and neper
//! (`NEPER_REF`, holding `tcp_stream` and `tcp_rr`), both built from public
//! sources under /tmp and never committed: TCP_STREAM and TCP_MAERTS with
//! 1 to 100 flows, TCP_RR with 2 to 100, every data path of ours beside the
//! plain one with the receiver's CPU per megabyte, `--rx-discard` beside
//! neper's `--skip-rx-copy`, and the page-aligned rows (`--zerocopy
//! --rx-zerocopy`) in a namespace whose loopback carries whole pages
//! (needs root). A peer missing skips its rows, saying so. It is printed
//! only (`--write-doc` does not apply).
//!
//! `--iperf3` prints iperf3's pairings: iperf3's client against `iperf3
//! -s`, our netperf `--iperf3` against it, iperf3's client against our
//! netserver's iperf3 port, and ours against ours; TCP with 128 KiB
//! writes, one stream and eight; throughput and each end's CPU per
//! megabyte (iperf3 from the PATH, or `IPERF3_REF`). Printed only.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use harness::{Netserver, fields, free_port, netns::PageLoop, num, run_with_deadline};

struct Opts {
    runs: usize,
    secs: u64,
    /// Only the many-flows benchmark.
    flows: bool,
    /// Ours beside iperf3 3.21 and neper, and every data path.
    peers: bool,
    /// Only TCP_STREAM and TCP_MAERTS beside netperf 2.7, with their
    /// wake-ups: context switches and receive calls per MB.
    streams: bool,
    /// With --streams: the pinned placements too.
    pin: bool,
    /// iperf3's client and server beside ours, in every pairing.
    iperf3: bool,
    /// Write the report into doc/performance.md.
    write_doc: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        runs: 7,
        secs: 3,
        flows: false,
        peers: false,
        streams: false,
        pin: false,
        iperf3: false,
        write_doc: false,
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
            "--peers" => {
                o.peers = true;
                i += 1;
                continue;
            }
            "--streams" => {
                o.streams = true;
                i += 1;
                continue;
            }
            "--pin" => {
                o.pin = true;
                i += 1;
                continue;
            }
            "--iperf3" => {
                o.iperf3 = true;
                i += 1;
                continue;
            }
            "--write-doc" => {
                o.write_doc = true;
                i += 1;
                continue;
            }
            "--runs" => o.runs = v.unwrap_or(5).max(1) as usize,
            "--secs" => o.secs = v.unwrap_or(3).max(1),
            other => {
                eprintln!(
                    "bench: unknown argument {other}; use --runs N --secs S [--flows | --peers | --streams [--pin] | --iperf3] [--write-doc]"
                );
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
    num(fields(&run(netperf_cmd(bin, port, test, secs, extra)))[0])
}

/// A netperf (ours or an earlier build) timed at `secs`, its data row alone.
fn netperf_cmd(bin: &Path, port: u16, test: &str, secs: u64, extra: &[&str]) -> Command {
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
    c
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
    a: impl FnMut() -> f64,
    mut b: impl FnMut() -> f64,
) -> (f64, f64, Spread) {
    let pairs = rounds(runs, a, &mut [Some(&mut b as &mut dyn FnMut() -> f64)]);
    let col = |f: fn(&(f64, f64)) -> f64| pairs[0].iter().map(f).collect::<Vec<f64>>();
    (
        spread(col(|p| p.0)).median,
        spread(col(|p| p.1)).median,
        spread(col(|p| p.0 / p.1)),
    )
}

/// Alternate `ours` with each peer present, `runs` rounds of ours, peer 1,
/// ours, peer 2 ...: each peer's pairs (ours, its), none for a peer absent.
/// Every pair has a run of ours of its own, next to the peer's in time.
fn rounds<T>(
    runs: usize,
    mut ours: impl FnMut() -> T,
    peers: &mut [Option<&mut dyn FnMut() -> T>],
) -> Vec<Vec<(T, T)>> {
    let mut pairs: Vec<Vec<(T, T)>> = peers.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (peer, v) in peers.iter_mut().zip(&mut pairs) {
            if let Some(peer) = peer {
                let x = ours();
                v.push((x, peer()));
            }
        }
    }
    pairs
}

/// A peer's run as `rounds` takes it, if there is that peer.
fn as_peer<'a, T, F: FnMut() -> T + 'a>(
    f: &'a mut Option<F>,
) -> Option<&'a mut (dyn FnMut() -> T + 'a)> {
    f.as_mut().map(|f| f as &mut (dyn FnMut() -> T + 'a))
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
    let v = iperf3_run(
        LOOPBACK,
        Path::new("iperf3"),
        port,
        secs,
        &["-P", &n.to_string(), "-l", len],
    );
    v.and_then(|v| v["end"]["sum_received"]["bits_per_second"].as_f64())
        .map_or(f64::NAN, |b| b / 1e6)
}

/// One iperf3 client run against the server at `port` (`-c host -p port
/// -t secs -J`, then `args`): its JSON report, or None, said on stderr.
fn iperf3_run(
    at: At,
    bin: &Path,
    port: u16,
    secs: u64,
    args: &[&str],
) -> Option<serde_json::Value> {
    let mut c = at.command(bin);
    if at.v6() {
        c.arg("-6");
    }
    c.args(["-c", at.host, "-p", &port.to_string(), "-J", "-t"])
        .arg(secs.to_string())
        .args(args);
    let out = try_run(c, secs)?;
    serde_json::from_str(&out)
        .map_err(|e| eprintln!("bench: iperf3 -J printed no JSON ({e}):\n{out}"))
        .ok()
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
    ours: impl FnMut() -> Sample,
    mut peer: impl FnMut() -> Sample,
) {
    let pairs = rounds(
        o.runs,
        ours,
        &mut [Some(&mut peer as &mut dyn FnMut() -> Sample)],
    );
    let ratios = pairs[0].iter().map(|(x, y)| x.figure / y.figure).collect();
    let (a, b): (Vec<Sample>, Vec<Sample>) = pairs.into_iter().flatten().unzip();
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

/// One pairing of `--iperf3`: who is the client, who the server.
struct Pairing<'a> {
    name: &'static str,
    /// The server's iperf3 port and process.
    port: u16,
    server_pid: u32,
    /// The client: our netperf (`--iperf3`), or iperf3's.
    client: Client<'a>,
}

#[derive(Clone, Copy)]
enum Client<'a> {
    Netperf(&'a Path),
    Iperf3(&'a Path),
}

impl Client<'_> {
    /// One TCP test of `n` streams sending 128 KiB writes for `secs`: the
    /// receiver's Mbit/s as the client reports it (ours: our figure, the
    /// server's bytes over our time; iperf3's: its sum_received).
    fn mbps(self, port: u16, n: usize, secs: u64) -> f64 {
        match self {
            Client::Netperf(bin) => {
                let mut c = netperf_cmd(bin, port, "TCP_STREAM", secs, &[]);
                c.arg("--iperf3")
                    .args(["--", "-m", "128K", "--flows", &n.to_string()]);
                num(fields(&run(c))[0])
            }
            Client::Iperf3(bin) => {
                let v = iperf3_run(
                    LOOPBACK,
                    bin,
                    port,
                    secs,
                    &["-P", &n.to_string(), "-l", "128K"],
                );
                v.and_then(|v| v["end"]["sum_received"]["bits_per_second"].as_f64())
                    .map_or(f64::NAN, |b| b / 1e6)
            }
        }
    }
}

/// `--iperf3`: iperf3's client and server beside ours, in every pairing
/// (iperf3's client against `iperf3 -s`, our netperf `--iperf3` against
/// it, iperf3's client against our netserver's iperf3 port, and ours
/// against ours): TCP with 128 KiB writes, one stream and eight, each
/// pairing's throughput and each end's CPU per megabyte. `IPERF3_REF`
/// names another iperf3 than the one on the PATH.
fn iperf3_pairings(o: &Opts, netperf: &Path) {
    let iperf3 = peer_dir("IPERF3_REF", &["iperf3"])
        .map_or_else(|_| PathBuf::from("iperf3"), |d| d.join("iperf3"));
    let version = said(&iperf3, &["--version"]);
    let Some(version) = version.lines().next().filter(|l| l.starts_with("iperf")) else {
        eprintln!(
            "bench: no iperf3 ({}): install it, or set IPERF3_REF",
            iperf3.display()
        );
        return;
    };
    let i3_port = free_port();
    let i3 =
        spawn(Command::new(&iperf3).args(["-s", "-B", "127.0.0.1", "-p", &i3_port.to_string()]));
    let mut cmd = Command::new(ours("netserver"));
    cmd.args([
        "-D",
        "-p",
        "0",
        "-L",
        "127.0.0.1",
        "-v",
        "0",
        "--iperf3",
        "0",
    ]);
    let ns = Netserver::spawn(cmd);
    let ns_port = ns.iperf3_port();
    std::thread::sleep(Duration::from_millis(500));
    let pairings = [
        (
            "iperf3 -c, iperf3 -s",
            i3_port,
            i3.0.id(),
            Client::Iperf3(&iperf3),
        ),
        (
            "netperf --iperf3, iperf3 -s",
            i3_port,
            i3.0.id(),
            Client::Netperf(netperf),
        ),
        (
            "iperf3 -c, netserver --iperf3",
            ns_port,
            ns.pid(),
            Client::Iperf3(&iperf3),
        ),
        (
            "netperf --iperf3, netserver --iperf3",
            ns_port,
            ns.pid(),
            Client::Netperf(netperf),
        ),
    ]
    .map(|(name, port, server_pid, client)| Pairing {
        name,
        port,
        server_pid,
        client,
    });
    println!(
        "iperf3 pairings: {version}; TCP, the client sending 128 KiB writes; {} rounds of {} s, each client's two pairings next to each other, their order alternating round by round; loopback, {} CPUs",
        o.runs,
        o.secs,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "CPU µs/MB: user + system CPU of the client and of the server process over the megabytes (10^6 bytes) the receiver counted, summed over the runs\n"
    );
    println!(
        "| client, server | streams | Mbit/s median (min .. max) | client CPU µs/MB | server CPU µs/MB |"
    );
    println!("|---|---|---|---|---|");
    for n in [1usize, 8] {
        pairings_rows(o, &pairings, n);
    }
}

/// The rows of `n` streams: every pairing's figures over the rounds,
/// and our server's and client's ratios to iperf3's.
fn pairings_rows(o: &Opts, pairings: &[Pairing<'_>], n: usize) {
    let mut samples: Vec<Vec<Sample>> = pairings.iter().map(|_| Vec::new()).collect();
    // The two pairings of one client run next to each other, which one
    // first alternating round by round (iperf3's client against iperf3
    // -s, then against ours, ours against ours, ours against iperf3 -s;
    // the next round the other way round), so that neither a drift of
    // the machine's speed nor a place in the round favours a server.
    for round in 0..o.runs {
        let order = if round % 2 == 0 {
            [0, 2, 3, 1]
        } else {
            [1, 3, 2, 0]
        };
        for i in order {
            let (Some(p), Some(v)) = (pairings.get(i), samples.get_mut(i)) else {
                continue;
            };
            v.push(sampled(p.server_pid, || p.client.mbps(p.port, n, o.secs)));
            // (iperf3 -s listens again a moment after each test)
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    for (p, v) in pairings.iter().zip(&samples) {
        let s = spread(v.iter().map(|s| s.figure).collect());
        let mb: f64 = v.iter().map(|s| s.figure * o.secs as f64 / 8.0).sum();
        let per_mb = |cpu: f64| if mb > 0.0 { cpu * 1e6 / mb } else { f64::NAN };
        println!(
            "| {} | {n} | {:.0} ({:.0} .. {:.0}) | {:.1} | {:.1} |",
            p.name,
            s.median,
            s.min,
            s.max,
            per_mb(v.iter().map(|s| s.client_cpu).sum()),
            per_mb(v.iter().map(|s| s.server_cpu).sum()),
        );
    }
    // the same client, our server over iperf3's (rounds alternate them)
    for (what, ours, theirs) in [
        ("iperf3 -c: netserver --iperf3 / iperf3 -s", 2, 0),
        ("iperf3 -s: netperf --iperf3 / iperf3 -c", 1, 0),
    ] {
        let r = spread(
            samples[ours]
                .iter()
                .zip(&samples[theirs])
                .map(|(a, b)| a.figure / b.figure)
                .collect(),
        );
        println!(
            "| ratio, {what} | {n} | **{:.2}** ({:.2} .. {:.2}) | | |",
            r.median, r.min, r.max
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
    per_operation_beside((&netperf, port), (&base, base_port));
    println!("\nMany flows, this build beside the baseline (CPU microseconds a unit at each end):");
    let rows: [(&str, &[usize], f64); 4] = [
        ("TCP_RR", &[2, 8, 100], 1.0),
        ("TCP_STREAM", &[1, 2, 8, 100], 8.0),
        ("UDP_RR", &[100, 1000], 1.0),
        ("TCP_CRR", &[100, 1000], 1.0),
    ];
    for (test, ns_, per) in rows {
        println!("\n{test} --flows N:");
        flows_header(if per == 8.0 { "us/MB" } else { "us/tx" }, "baseline");
        for &n in ns_ {
            let nflows = n.to_string();
            let extra: Vec<&str> = if test == "TCP_STREAM" {
                vec!["-m", "128K", "--flows", &nflows]
            } else {
                vec!["--flows", &nflows]
            };
            flows_row(
                o,
                n,
                per,
                || {
                    sampled(ns.pid(), || {
                        netperf_tps(&netperf, port, test, o.secs, &extra)
                    })
                },
                || {
                    sampled(base_ns.pid(), || {
                        netperf_tps(&base, base_port, test, o.secs, &extra)
                    })
                },
            );
        }
    }
    footprints_beside(o, (&netperf, port), (&base, base_port));
    page_rows_beside(o, &netperf, dir);
}

/// The page-aligned rows a later round holds against this one (issue 58):
/// `TCP_STREAM -- -m 256K --rx-zerocopy --flows 2`, with and without
/// zero-copy sends, this build beside the baseline alternating, both
/// netservers in one namespace whose loopback carries whole pages, with
/// each receiver's CPU a megabyte.
fn page_rows_beside(o: &Opts, netperf: &Path, dir: &Path) {
    let Some(l) = PageLoop::new("bench BENCH_BASELINE") else {
        println!("\n(page-aligned rows skipped: no namespace here; they need root and ip)");
        return;
    };
    let at = At {
        ns: Some(&l),
        host: "::1",
    };
    let spawn = |bin: &Path| {
        let mut c = l.command(bin);
        c.args(["-D", "-p", "0", "-L", "::1", "-v", "0"]);
        Netserver::spawn(c)
    };
    let (ns, base_ns) = (spawn(&ours("netserver")), spawn(&dir.join("netserver")));
    let base = dir.join("netperf");
    let (this, earlier) = (
        Ours {
            at,
            netperf,
            ns: &ns,
        },
        Ours {
            at,
            netperf: &base,
            ns: &base_ns,
        },
    );
    println!(
        "\nPage-aligned (a namespace whose loopback MTU is {}, ::1), this build beside the baseline:",
        PageLoop::MTU
    );
    println!(
        "{:<52} {:>9} {:>9} {:>6}  spread        {:>9} {:>9}",
        "TCP_STREAM --", "this", "baseline", "ratio", "us/MB", "base"
    );
    for extra in [
        &["-m", "256K", "--rx-zerocopy", "--flows", "2"][..],
        &["-m", "256K", "--zerocopy", "--rx-zerocopy", "--flows", "2"],
    ] {
        let mut b = Some(|| our_stream(earlier, "TCP_STREAM", o.secs, extra));
        let pairs = rounds(
            o.runs,
            || our_stream(this, "TCP_STREAM", o.secs, extra),
            &mut [as_peer(&mut b)],
        );
        let pairs = &pairs[0];
        let med = |f: &dyn Fn(&(Rx, Rx)) -> f64| spread(pairs.iter().map(f).collect()).median;
        let r = spread(pairs.iter().map(|(a, b)| a.mbps / b.mbps).collect());
        println!(
            "{:<52} {:>9.0} {:>9.0} {:>6.3}  ({:.3} .. {:.3}) {:>9.1} {:>9.1}",
            extra.join(" "),
            med(&|p| p.0.mbps),
            med(&|p| p.1.mbps),
            r.median,
            r.min,
            r.max,
            med(&|p| p.0.cpu * 1e6 / p.0.mb.max(1e-9)),
            med(&|p| p.1.cpu * 1e6 / p.1.mb.max(1e-9)),
        );
    }
}

/// System calls and instructions an operation costs the client, this
/// build (`ours`: netperf and its netserver's port) beside the baseline.
fn per_operation_beside((netperf, port): (&Path, u16), (base, base_port): (&Path, u16)) {
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
        syscalls_per_transaction(netperf, port),
        syscalls_per_transaction(base, base_port),
    );
    println!("\nUser-space instructions per operation on the client (callgrind, two run lengths):");
    for (label, test, counts, unit, extra) in [
        (
            "TCP_RR a transaction",
            "TCP_RR",
            (1_000, 11_000),
            1,
            &[][..],
        ),
        ("TCP_CRR a transaction", "TCP_CRR", (200, 2_200), 1, &[]),
        (
            "TCP_STREAM a 16 KiB send",
            "TCP_STREAM",
            (1_000, 11_000),
            16_384,
            &["-m", "16K"],
        ),
    ] {
        show(
            label,
            instructions(netperf, port, test, counts, unit, extra),
            instructions(base, base_port, test, counts, unit, extra),
        );
    }
}

/// The client's footprint with many flows, this build beside the
/// baseline.
fn footprints_beside(o: &Opts, (netperf, port): (&Path, u16), (base, base_port): (&Path, u16)) {
    println!(
        "\nThe client's footprint with many flows (peak resident memory and threads over the run):"
    );
    println!(
        "{:<8} {:>6}  {:>12} {:>8}  {:>12} {:>8}",
        "test", "N", "this KiB", "threads", "base KiB", "threads"
    );
    for test in ["UDP_RR", "TCP_CRR", "UDP_STREAM"] {
        for n in [100usize, 1000] {
            let extra = ["--flows".to_string(), n.to_string()];
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let (a_rss, a_thr) = footprint_of(netperf, port, test, o.secs, &extra);
            let (b_rss, b_thr) = footprint_of(base, base_port, test, o.secs, &extra);
            println!("{test:<8} {n:>6}  {a_rss:>12} {a_thr:>8}  {b_rss:>12} {b_thr:>8}");
        }
    }
}

/// Run netperf once and watch it: its peak resident memory (KiB) and its
/// most threads at once, from /proc every 50 ms.
fn footprint_of(bin: &Path, port: u16, test: &str, secs: u64, extra: &[&str]) -> (u64, u64) {
    let mut c = netperf_cmd(bin, port, test, secs, extra);
    let Ok(mut child) = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn() else {
        return (0, 0);
    };
    let status = format!("/proc/{}/status", child.id());
    let (mut rss, mut threads) = (0u64, 0u64);
    let deadline = std::time::Instant::now() + Duration::from_secs(secs + 60);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(&status) {
            for line in text.lines() {
                let v = |l: &str| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|n| n.parse::<u64>().ok())
                };
                if line.starts_with("VmHWM:") {
                    rss = rss.max(v(line).unwrap_or(0));
                } else if line.starts_with("Threads:") {
                    threads = threads.max(v(line).unwrap_or(0));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (rss, threads)
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
    if o.flows {
        flows(&o, &netperf, &ns);
        return;
    }
    if o.peers {
        peers(&o, &netperf, &ns, &mut Doc::default());
        return;
    }
    if o.streams {
        match reference_server() {
            Some((dir, rport, _guard)) => stream_wakeups(
                &o,
                (&netperf, ns.port()),
                (&dir.join("netperf"), rport),
                &mut Doc::default(),
            ),
            None => eprintln!("bench --streams: set NETPERF_REF to a netperf 2.7 build"),
        }
        return;
    }
    if o.iperf3 {
        drop(ns);
        iperf3_pairings(&o, &netperf);
        return;
    }
    let mut doc = Doc::default();
    every_test(&o, &netperf, &ns, &mut doc);
    if o.write_doc {
        doc.write(Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/performance.md"));
    }
}

/// The benchmark's report: printed as it goes, and kept, in Markdown, for
/// doc/performance.md (`--write-doc` puts it between the markers there).
#[derive(Default)]
struct Doc(String);

impl Doc {
    fn line(&mut self, l: impl AsRef<str>) {
        println!("{}", l.as_ref());
        self.0.push_str(l.as_ref());
        self.0.push('\n');
    }

    fn write(&self, path: PathBuf) {
        const BEGIN: &str = "<!-- bench/run --write-doc: begin -->";
        const END: &str = "<!-- bench/run --write-doc: end -->";
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            eprintln!("bench: no markers in {}; not written", path.display());
            return;
        };
        let mut out = String::new();
        out.push_str(&text[..b + BEGIN.len()]);
        out.push('\n');
        out.push_str(&self.0);
        out.push_str(&text[e..]);
        match std::fs::write(&path, out) {
            Ok(()) => eprintln!("bench: wrote {}", path.display()),
            Err(e) => eprintln!("bench: {}: {e}", path.display()),
        }
    }
}

/// A netperf (ours or 2.7) at `-P 0 -v 1`: its rows of numbers.
fn netperf_rows(bin: &Path, port: u16, test: &str, secs: u64, extra: &[&str]) -> Vec<Vec<f64>> {
    rows_of(&run(netperf_v1(LOOPBACK, bin, port, test, secs, extra)))
}

/// A netperf (ours or 2.7) at `-P 0 -v 1` against the host of `at`, run
/// where `at` says.
fn netperf_v1(at: At, bin: &Path, port: u16, test: &str, secs: u64, extra: &[&str]) -> Command {
    let mut c = at.command(bin);
    c.args(["-H", at.host, "-p", &port.to_string(), "-t", test])
        .args(["-l", &secs.to_string(), "-P", "0", "-v", "1"]);
    if !extra.is_empty() {
        c.arg("--").args(extra);
    }
    c
}

/// The rows of numbers netperf printed.
fn rows_of(stdout: &str) -> Vec<Vec<f64>> {
    stdout
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| fields(l).iter().map(|w| num(w)).collect())
        .collect()
}

/// Datagrams per second that UDP_STREAM's receiver took in (its row's
/// messages over its elapsed time).
fn udp_received(bin: &Path, port: u16, secs: u64, extra: &[&str]) -> f64 {
    let rows = netperf_rows(bin, port, "UDP_STREAM", secs, extra);
    match rows.get(1).map(Vec::as_slice) {
        Some([_, elapsed, messages, _]) if *elapsed > 0.0 => messages / elapsed,
        _ => f64::NAN,
    }
}

/// iperf3's receiver figure: Mbit/s (TCP), or datagrams per second (UDP).
fn iperf3(port: u16, udp: bool, len: Option<&str>, secs: u64) -> f64 {
    let mut args = vec![];
    if udp {
        args.extend(["-u", "-b", "0"]);
    }
    if let Some(l) = len {
        args.extend(["-l", l]);
    }
    let v = iperf3_run(LOOPBACK, Path::new("iperf3"), port, secs, &args).unwrap_or_default();
    if udp {
        let s = &v["end"]["sum"];
        let packets = s["packets"].as_f64().unwrap_or(f64::NAN);
        let lost = s["lost_packets"].as_f64().unwrap_or(0.0);
        (packets - lost) / s["seconds"].as_f64().unwrap_or(f64::NAN)
    } else {
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6
    }
}

fn table_row(doc: &mut Doc, label: &str, peer: &str, unit: &str, (a, b, r): (f64, f64, Spread)) {
    doc.line(format!(
        "| {label} | {a:.0} | {peer} | {b:.0} | {unit} | **{:.2}** | {:.2} .. {:.2} |",
        r.median, r.min, r.max
    ));
}

/// System calls of a whole run of `args` on each end (strace -c -f of the
/// client, and of the server from its pid, children followed), per `per`
/// operations.
fn syscalls_both_ends(
    bin: &Path,
    server_pid: u32,
    args: &[String],
    per: f64,
) -> Option<(f64, f64)> {
    let id = std::process::id();
    let cfile = std::env::temp_dir().join(format!("bench-sc-c-{id}"));
    let sfile = std::env::temp_dir().join(format!("bench-sc-s-{id}"));
    let mut s = Command::new("strace");
    s.args(["-c", "-f", "-o"])
        .arg(&sfile)
        .args(["-p", &server_pid.to_string()]);
    let mut tracer = spawn(&mut s);
    std::thread::sleep(Duration::from_millis(500));
    let mut c = Command::new("strace");
    c.args(["-c", "-f", "-o"]).arg(&cfile).arg(bin).args(args);
    let out = run_with_deadline(c, Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(300));
    // strace writes its summary when interrupted
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(tracer.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let _ = tracer.0.wait();
    let total = |f: &Path| -> Option<f64> {
        let r = std::fs::read_to_string(f).ok()?;
        let _ = std::fs::remove_file(f);
        // wait calls (epoll_wait, futex, poll) are waits, not work
        let waits: f64 = r
            .lines()
            .filter(|l| {
                let w = fields(l);
                w.last().is_some_and(|n| {
                    matches!(
                        *n,
                        "epoll_wait"
                            | "futex"
                            | "poll"
                            | "ppoll"
                            | "wait4"
                            | "rt_sigtimedwait"
                            | "clock_nanosleep"
                            | "nanosleep"
                            | "pselect6"
                            | "select"
                    )
                })
            })
            .map(|l| num(fields(l)[3]))
            .sum();
        let t = r.lines().find(|l| l.trim_end().ends_with(" total"))?;
        Some((num(fields(t)[3]) - waits) / per)
    };
    let (c, s) = (total(&cfile), total(&sfile));
    if !out.success() {
        return None;
    }
    Some((c?, s?))
}

fn count_args(port: u16, test: &str, count: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["-H", "127.0.0.1", "-p", &port.to_string(), "-t", test]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["-l", count, "-P", "0", "-v", "0"].map(String::from));
    if !extra.is_empty() {
        a.push("--".into());
        a.extend(extra.iter().map(|s| s.to_string()));
    }
    a
}

/// User-space instructions per operation of a client run (callgrind): the
/// difference between `big` and `small` operations, so that start-up
/// cancels out.
fn instructions(
    bin: &Path,
    port: u16,
    test: &str,
    counts: (u64, u64),
    unit: u64,
    extra: &[&str],
) -> Option<f64> {
    let count = |n: u64| -> Option<f64> {
        let file = std::env::temp_dir().join(format!("bench-cg-{}-{n}", std::process::id()));
        let mut c = Command::new("valgrind");
        c.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", file.display()))
            .arg(bin)
            .args(count_args(port, test, &format!("-{}", n * unit), extra));
        let out = run_with_deadline(c, Duration::from_secs(300));
        let _ = std::fs::remove_file(&file);
        let line = out.stderr.lines().find(|l| l.contains("Collected :"))?;
        Some(num(line.rsplit(':').next()?.trim()))
    };
    let (small, big) = counts;
    Some((count(big)? - count(small)?) / (big - small) as f64)
}

/// Resident memory (KiB), threads and context switches of a process.
fn proc_state(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let get = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .map_or(0.0, |l| num(fields(l).get(1).copied().unwrap_or("0")))
    };
    let mut switches = 0.0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let s = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for l in s.lines().filter(|l| l.contains("ctxt_switches")) {
                switches += num(fields(l).get(1).copied().unwrap_or("0"));
            }
        }
    }
    (get("VmRSS:"), get("Threads:"), switches)
}

/// Sessions a netserver serves back to back: `n` one-transaction TCP_RR
/// runs of `bin`, one after another; per second.
fn sessions_per_second(bin: &Path, port: u16, n: usize) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..n {
        let mut c = Command::new(bin);
        c.args(count_args(port, "TCP_RR", "-1", &[]));
        run(c);
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// The daemon's own cost: idle, per session, and sessions per second.
fn daemon_cost(
    doc: &mut Doc,
    o: &Opts,
    netperf: &Path,
    ns: &Netserver,
    reference: Option<&(PathBuf, u16, Guard)>,
) {
    let pid = ns.pid();
    std::thread::sleep(Duration::from_secs(1));
    let (rss0, threads0, sw0) = proc_state(pid);
    std::thread::sleep(Duration::from_secs(10));
    let (_, _, sw1) = proc_state(pid);
    doc.line("");
    doc.line("The daemon's own cost (our netserver):");
    doc.line("");
    doc.line("| | |");
    doc.line("|---|---|");
    doc.line(format!(
        "| idle resident memory | {:.1} MiB |",
        rss0 / 1024.0
    ));
    doc.line(format!("| idle threads | {threads0:.0} |"));
    doc.line(format!(
        "| wakeups per second while idle (context switches over 10 s) | {:.1} |",
        (sw1 - sw0) / 10.0
    ));
    // 16 sessions at once, each in a TCP_RR
    let kids: Vec<_> = (0..16)
        .map(|_| {
            let mut c = Command::new(netperf);
            c.args(count_args(ns.port(), "TCP_RR", "4", &[]));
            spawn(&mut c)
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let (rss, threads, _) = proc_state(pid);
    drop(kids);
    doc.line(format!(
        "| per active session (16 TCP_RR at once) | {:.0} KiB, {:.2} threads |",
        (rss - rss0).max(0.0) / 16.0,
        (threads - threads0) / 16.0
    ));
    std::thread::sleep(Duration::from_secs(2));
    let n = 100 * o.runs.min(3);
    let ours_sps = sessions_per_second(netperf, ns.port(), n);
    match reference {
        Some((dir, port, _)) => {
            let theirs = sessions_per_second(&dir.join("netperf"), *port, n);
            doc.line(format!(
                "| sessions per second, back to back ({n} one-transaction TCP_RR netperf processes) | {ours_sps:.0}; netperf 2.7's netserver with its netperf: {theirs:.0} |"
            ));
        }
        None => doc.line(format!(
            "| sessions per second, back to back ({n} one-transaction TCP_RR netperf processes) | {ours_sps:.0} |"
        )),
    }
}

/// Every test beside netperf 2.7 (NETPERF_REF), the fast paths, iperf3 and
/// sockperf, the system calls and instructions per operation, and the
/// daemon's own cost.
fn every_test(o: &Opts, netperf: &Path, ns: &Netserver, doc: &mut Doc) {
    let port = ns.port();
    let secs = o.secs;
    let reference = reference_server();
    let (date, uname) = (said("date", &["+%Y-%m-%d"]), said("uname", &["-sr"]));
    doc.line(format!(
        "Run of {date} on {uname}, {} CPUs, loopback: {} alternating pairs of {secs} s (ours, peer, ours, peer ...), one long-running netserver for each implementation; ratio = ours / peer per pair, median in bold, min .. max after it.",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        o.runs
    ));
    doc.line("");
    doc.line("| test | ours | peer | peer's | unit | ratio | min .. max |");
    doc.line("|---|---|---|---|---|---|---|");
    let tps = |bin: &Path, port: u16, test: &str, extra: &[&str]| {
        netperf_tps(bin, port, test, secs, extra)
    };
    if let Some((dir, rport, _)) = &reference {
        let refbin = dir.join("netperf");
        let rport = *rport;
        let rows: [(&str, &str, &[&str], &str); 11] = [
            ("TCP_STREAM", "TCP_STREAM", &[], "10^6bits/s"),
            (
                "TCP_STREAM -m 64K",
                "TCP_STREAM",
                &["-m", "64K"],
                "10^6bits/s",
            ),
            ("TCP_MAERTS", "TCP_MAERTS", &[], "10^6bits/s"),
            ("TCP_SENDFILE", "TCP_SENDFILE", &[], "10^6bits/s"),
            ("TCP_RR", "TCP_RR", &[], "trans/s"),
            ("TCP_RR -r 64,64", "TCP_RR", &["-r", "64,64"], "trans/s"),
            ("TCP_RR -b 8 -D", "TCP_RR", &["-b", "8", "-D"], "trans/s"),
            ("UDP_RR", "UDP_RR", &[], "trans/s"),
            ("UDP_RR -b 8", "UDP_RR", &["-b", "8"], "trans/s"),
            ("TCP_CRR", "TCP_CRR", &[], "trans/s"),
            ("TCP_CC", "TCP_CC", &[], "trans/s"),
        ];
        for (label, test, extra, unit) in rows {
            let r = alternate(
                o.runs,
                || tps(netperf, port, test, extra),
                || tps(&refbin, rport, test, extra),
            );
            table_row(doc, label, "netperf 2.7", unit, r);
        }
        let r = alternate(
            o.runs,
            || udp_received(netperf, port, secs, &["-m", "1024"]),
            || udp_received(&refbin, rport, secs, &["-m", "1024"]),
        );
        table_row(
            doc,
            "UDP_STREAM -m 1024 (received)",
            "netperf 2.7",
            "datagrams/s",
            r,
        );
        fast_paths(o, (netperf, port), (&refbin, rport), doc);
    } else {
        doc.line("| (no netperf 2.7: set NETPERF_REF to the directory of a netperf 2.7 build) | | | | | | |");
    }
    // ours beside ours
    let r = alternate(
        o.runs,
        || tps(netperf, port, "TCP_SENDFILE", &[]),
        || tps(netperf, port, "TCP_STREAM", &[]),
    );
    table_row(doc, "TCP_SENDFILE", "our TCP_STREAM", "10^6bits/s", r);
    let r = alternate(
        o.runs,
        || tps(netperf, port, "TCP_STREAM", &["--zerocopy"]),
        || tps(netperf, port, "TCP_STREAM", &[]),
    );
    table_row(
        doc,
        "TCP_STREAM --zerocopy",
        "our TCP_STREAM",
        "10^6bits/s",
        r,
    );
    if let Some((dir, rport, _)) = &reference {
        stream_wakeups(o, (netperf, port), (&dir.join("netperf"), *rport), doc);
    }
    other_peers(o, netperf, port, doc);
    per_operation(doc, netperf, ns, reference.as_ref());
    daemon_cost(doc, o, netperf, ns, reference.as_ref());
}

/// Our fast paths beside netperf 2.7's plain path.
fn fast_paths(
    o: &Opts,
    (netperf, port): (&Path, u16),
    (refbin, rport): (&Path, u16),
    doc: &mut Doc,
) {
    let secs = o.secs;
    doc.line("| *fast paths, ours beside netperf 2.7's plain path* | | | | | | |");
    for (label, extra) in [
        (
            "UDP_STREAM -m 1024 --batch 64",
            &["-m", "1024", "--batch", "64"][..],
        ),
        (
            "UDP_STREAM -m 1024 --gso 64K",
            &["-m", "1024", "--gso", "64K"],
        ),
        (
            "UDP_STREAM -m 1024 --batch 8 --gso 64K",
            &["-m", "1024", "--batch", "8", "--gso", "64K"],
        ),
    ] {
        let r = alternate(
            o.runs,
            || udp_received(netperf, port, secs, extra),
            || udp_received(refbin, rport, secs, &["-m", "1024"]),
        );
        table_row(
            doc,
            label,
            "netperf 2.7 UDP_STREAM -m 1024",
            "datagrams/s",
            r,
        );
    }
    let r = alternate(
        o.runs,
        || netperf_tps(netperf, port, "TCP_STREAM", secs, &["--zerocopy"]),
        || netperf_tps(refbin, rport, "TCP_STREAM", secs, &[]),
    );
    table_row(
        doc,
        "TCP_STREAM --zerocopy",
        "netperf 2.7 TCP_STREAM",
        "10^6bits/s",
        r,
    );
}

/// One stream run at `-v 2`: Mbit/s, the client's voluntary context
/// switches (a reaped child's, from getrusage) and the receiving end's
/// receive calls, each per MB (10^6 bytes) moved.
#[derive(Clone, Copy)]
struct Wakeups {
    mbps: f64,
    switches_per_mb: f64,
    recvs_per_mb: f64,
}

/// `cpu`: the CPU the client is pinned to (taskset), if any.
fn stream_wakeups_run(bin: &Path, port: u16, test: &str, secs: u64, cpu: Option<u32>) -> Wakeups {
    use nix::sys::resource::{UsageWho, getrusage};
    let switches = || {
        getrusage(UsageWho::RUSAGE_CHILDREN).map_or(0.0, |u| u.voluntary_context_switches() as f64)
    };
    let before = switches();
    let plain = netperf_cmd(bin, port, test, secs, &[]);
    let mut c = match cpu {
        Some(cpu) => {
            let mut t = Command::new("taskset");
            t.args(["-c", &cpu.to_string()])
                .arg(bin)
                .args(plain.get_args());
            t
        }
        None => plain,
    };
    c.args(["-v", "2", "-P", "1"]);
    let out = run(c);
    let switched = switches() - before;
    let rows: Vec<Vec<f64>> = out
        .lines()
        .map(|l| fields(l.trim()))
        .filter(|f| !f.is_empty() && f.iter().all(|w| w.parse::<f64>().is_ok()))
        .map(|f| f.iter().map(|w| num(w)).collect())
        .collect();
    // the figures' row, then the alignment row: bytes, then bytes a call
    // and calls for our end, then for the netserver's (TCP_STREAM: we
    // send and it receives; TCP_MAERTS: the other way)
    let mbps = rows.iter().find(|r| r.len() == 5).map_or(0.0, |r| r[4]);
    let recvs_at = if test == "TCP_MAERTS" { 6 } else { 8 };
    let (bytes, recvs) = rows
        .iter()
        .find(|r| r.len() == 9)
        .map_or((0.0, 0.0), |r| (r[4], r[recvs_at]));
    let mb = (bytes / 1e6).max(1e-9);
    Wakeups {
        mbps,
        switches_per_mb: switched / mb,
        recvs_per_mb: recvs / mb,
    }
}

/// TCP_STREAM and TCP_MAERTS, ours and netperf 2.7's, alternating: the
/// throughput, and what it cost in wake-ups: the client's voluntary
/// context switches (the sender in TCP_STREAM, the receiver in
/// TCP_MAERTS) and the receiver's receive calls, per MB.
///
/// With `--pin`, again with both netservers on CPU 0 and the clients on
/// CPU 0 (one CPU: sender and receiver take turns) and on CPU 1 (two: the
/// copy crosses CPUs): where the scheduler places the two ends decides
/// the figure (on loopback the one-CPU placement moves about twice the
/// bytes), so the unpinned rows' spread is mostly placement, which the
/// pinned rows take out.
fn stream_wakeups(
    o: &Opts,
    (ours, port): (&Path, u16),
    (peer, rport): (&Path, u16),
    doc: &mut Doc,
) {
    doc.line("");
    doc.line(
        "| stream (client's switches) | placement | ours Mbit/s | peer's | ratio | min .. max | ours switches/MB | peer's | ours recvs/MB | peer's |",
    );
    doc.line("|---|---|---|---|---|---|---|---|---|---|");
    stream_wakeup_rows(o, (ours, port), (peer, rport), None, doc);
    if !o.pin {
        return;
    }
    // both netservers on CPU 0
    let pinned = |bin: &Path, port: u16| {
        spawn(Command::new("taskset").args(["-c", "0"]).arg(bin).args([
            "-D",
            "-p",
            &port.to_string(),
            "-L",
            "127.0.0.1",
        ]))
    };
    let (p1, p2) = (free_port(), free_port());
    let ns = ours.with_file_name("netserver");
    let rns = peer.with_file_name("netserver");
    let (_a, _b) = (pinned(&ns, p1), pinned(&rns, p2));
    std::thread::sleep(Duration::from_millis(500));
    for cpu in [0, 1] {
        stream_wakeup_rows(o, (ours, p1), (peer, p2), Some(cpu), doc);
    }
}

/// [`stream_wakeups`]' rows, the clients on `cpu` (the netservers on 0).
fn stream_wakeup_rows(
    o: &Opts,
    (ours, port): (&Path, u16),
    (peer, rport): (&Path, u16),
    cpu: Option<u32>,
    doc: &mut Doc,
) {
    let placement = match cpu {
        None => "unpinned",
        Some(0) => "one CPU",
        Some(_) => "two CPUs",
    };
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let mut theirs = || stream_wakeups_run(peer, rport, test, o.secs, cpu);
        let pairs = rounds(
            o.runs,
            || stream_wakeups_run(ours, port, test, o.secs, cpu),
            &mut [Some(&mut theirs as &mut dyn FnMut() -> Wakeups)],
        );
        let pairs = &pairs[0];
        let med = |f: &dyn Fn(&(Wakeups, Wakeups)) -> f64| spread(pairs.iter().map(f).collect());
        let r = med(&|p| p.0.mbps / p.1.mbps);
        doc.line(format!(
            "| {test} | {placement} | {:.0} | {:.0} | **{:.2}** | {:.2} .. {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            med(&|p| p.0.mbps).median,
            med(&|p| p.1.mbps).median,
            r.median,
            r.min,
            r.max,
            med(&|p| p.0.switches_per_mb).median,
            med(&|p| p.1.switches_per_mb).median,
            med(&|p| p.0.recvs_per_mb).median,
            med(&|p| p.1.recvs_per_mb).median,
        ));
    }
}

/// Rows beside iperf3 and sockperf, where they are installed.
fn other_peers(o: &Opts, netperf: &Path, port: u16, doc: &mut Doc) {
    let secs = o.secs;
    let tps = |bin: &Path, port: u16, test: &str, extra: &[&str]| {
        netperf_tps(bin, port, test, secs, extra)
    };
    // iperf3: same write size, and its default
    if Command::new("iperf3").arg("--version").output().is_ok() {
        let iport = free_port();
        let _srv = spawn(Command::new("iperf3").args(["-s", "-p", &iport.to_string()]));
        std::thread::sleep(Duration::from_millis(500));
        let rows: [(&str, &[&str], Option<&str>, bool); 3] = [
            ("TCP_STREAM -m 128K", &["-m", "128K"], None, false),
            ("TCP_STREAM (-m 16K)", &["-m", "16K"], Some("16K"), false),
            (
                "UDP_STREAM -m 1024 (received)",
                &["-m", "1024"],
                Some("1024"),
                true,
            ),
        ];
        for (label, extra, len, udp) in rows {
            let peer = match (len, udp) {
                (None, _) => "iperf3 (its default 128K writes)".to_string(),
                (Some(l), false) => format!("iperf3 -l {l}"),
                (Some(l), true) => format!("iperf3 -u -b 0 -l {l}"),
            };
            let r = alternate(
                o.runs,
                || {
                    if udp {
                        udp_received(netperf, port, secs, extra)
                    } else {
                        tps(netperf, port, "TCP_STREAM", extra)
                    }
                },
                || iperf3(iport, udp, len, secs),
            );
            let unit = if udp { "datagrams/s" } else { "10^6bits/s" };
            table_row(doc, label, &peer, unit, r);
        }
    } else {
        doc.line("| (iperf3 not installed) | | | | | | |");
    }
    if Command::new("sockperf").arg("--version").output().is_ok() {
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
                || tps(netperf, port, test, &[]),
                || sockperf_tps(sp_port, tcp, secs),
            );
            table_row(doc, test, "sockperf pp", "trans/s", r);
        }
    } else {
        doc.line("| (sockperf not installed) | | | | | | |");
    }
}

/// System calls and user-space instructions per operation, ours beside
/// netperf 2.7's.
fn per_operation(
    doc: &mut Doc,
    netperf: &Path,
    ns: &Netserver,
    reference: Option<&(PathBuf, u16, Guard)>,
) {
    let port = ns.port();
    // system calls per operation, both ends
    doc.line("");
    doc.line("System calls per operation besides waits (epoll_wait, futex, poll), `strace -c -f` of a whole run on each end, start-up included:");
    doc.line("");
    doc.line(
        "| run | ours: netperf | ours: netserver | netperf 2.7: netperf | netperf 2.7: netserver |",
    );
    doc.line("|---|---|---|---|---|");
    let ops: [(&str, &str, &str, f64, &[&str]); 4] = [
        (
            "TCP_RR, per transaction (10,000)",
            "TCP_RR",
            "-10000",
            10_000.0,
            &[],
        ),
        (
            "TCP_CRR, per transaction (2,000)",
            "TCP_CRR",
            "-2000",
            2_000.0,
            &[],
        ),
        (
            "TCP_STREAM, per 16 KiB send (10,000)",
            "TCP_STREAM",
            "-163840000",
            10_000.0,
            &["-m", "16K"],
        ),
        (
            "UDP_STREAM, per datagram sent (20,000)",
            "UDP_STREAM",
            "-20480000",
            20_000.0,
            &["-m", "1024", "--rate", "200m"],
        ),
    ];
    for (label, test, count, per, extra) in ops {
        let show = |v: Option<(f64, f64)>| {
            v.map_or(("-".to_string(), "-".to_string()), |(c, s)| {
                (format!("{c:.2}"), format!("{s:.2}"))
            })
        };
        let (oc, os) = show(syscalls_both_ends(
            netperf,
            ns.pid(),
            &count_args(port, test, count, extra),
            per,
        ));
        let (rc, rs) = match reference {
            Some((dir, rport, guard)) => {
                // netperf 2.7 has no --rate: its UDP_STREAM runs unpaced
                let extra: Vec<&str> = extra
                    .iter()
                    .copied()
                    .take_while(|a| *a != "--rate")
                    .collect();
                show(syscalls_both_ends(
                    &dir.join("netperf"),
                    guard.0.id(),
                    &count_args(*rport, test, count, &extra),
                    per,
                ))
            }
            None => ("-".into(), "-".into()),
        };
        doc.line(format!("| {label} | {oc} | {os} | {rc} | {rs} |"));
    }
    instructions_per_operation(doc, netperf, port, reference);
}

/// User-space instructions per operation on the client, ours beside
/// netperf 2.7's (callgrind).
fn instructions_per_operation(
    doc: &mut Doc,
    netperf: &Path,
    port: u16,
    reference: Option<&(PathBuf, u16, Guard)>,
) {
    doc.line("");
    doc.line("User-space instructions per operation on the client (callgrind; the difference between two run lengths, so start-up cancels out):");
    doc.line("");
    doc.line("| run | ours | netperf 2.7 |");
    doc.line("|---|---|---|");
    /// label, test, the two run lengths, bytes an operation, test options
    type Instructed<'a> = (&'a str, &'a str, (u64, u64), u64, &'a [&'a str]);
    let ins: [Instructed; 4] = [
        (
            "TCP_RR, per transaction (piped: no output shows latency)",
            "TCP_RR",
            (1_000, 11_000),
            1,
            &[],
        ),
        (
            "TCP_RR -- -o P50_LATENCY, per transaction (each timed)",
            "TCP_RR",
            (1_000, 11_000),
            1,
            &["-o", "P50_LATENCY"],
        ),
        ("TCP_CRR, per transaction", "TCP_CRR", (200, 2_200), 1, &[]),
        (
            "TCP_STREAM, per 16 KiB send",
            "TCP_STREAM",
            (1_000, 11_000),
            16_384,
            &["-m", "16K"],
        ),
    ];
    for (label, test, counts, unit, extra) in ins {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let a = f(instructions(netperf, port, test, counts, unit, extra));
        let b = match reference {
            Some((dir, rport, _)) => f(instructions(
                &dir.join("netperf"),
                *rport,
                test,
                counts,
                unit,
                extra,
            )),
            _ => "-".to_string(),
        };
        doc.line(format!("| {label} | {a} | {b} |"));
    }
}

/// The first line a command prints ("" when it cannot run): the date, the
/// kernel, a peer's version.
fn said(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

/// Where a run goes: the host its client talks to, and the namespace both
/// ends run in (none: this one).
#[derive(Clone, Copy)]
struct At<'a> {
    ns: Option<&'a PageLoop>,
    host: &'a str,
}

const LOOPBACK: At<'static> = At {
    ns: None,
    host: "127.0.0.1",
};

impl At<'_> {
    /// `program`, inside the namespace if there is one.
    fn command(&self, program: &Path) -> Command {
        match self.ns {
            Some(l) => l.command(program),
            None => Command::new(program),
        }
    }

    fn v6(&self) -> bool {
        self.host.contains(':')
    }
}

/// Run something that may fail here (a path this kernel refuses, a peer
/// that cannot bind): its stdout, or None with what it said on stderr, so
/// that the report goes on.
fn try_run(cmd: Command, secs: u64) -> Option<String> {
    let what = format!("{cmd:?}");
    let out = run_with_deadline(cmd, Duration::from_secs(secs + 120));
    if out.success() {
        Some(out.stdout)
    } else {
        eprintln!("bench: {what} failed: {out}");
        None
    }
}

/// Wait (at most 10 s) until a TCP socket listens on `port` in the
/// namespace of process `pid` (its /proc/PID/net/tcp and tcp6): the peers
/// print nothing when they are ready, and a namespace's ports cannot be
/// probed from here.
fn wait_listening(pid: u32, port: u16) -> bool {
    let local = format!(":{port:04X}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for table in ["tcp", "tcp6"] {
            let t = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
            // local address, remote address, state: 0A is LISTEN
            if t.lines().any(|l| {
                let w = fields(l);
                w.get(1).is_some_and(|a| a.ends_with(&local)) && w.get(3) == Some(&"0A")
            }) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A peer built from public sources (never committed): the directory named
/// by `var` that holds every one of `names`, itself or its `src/` (where an
/// iperf3 build tree has its binary). Err: why its rows are skipped.
fn peer_dir(var: &str, names: &[&str]) -> Result<PathBuf, String> {
    let Some(dir) = std::env::var_os(var) else {
        return Err(format!("{var} is unset"));
    };
    let dir = PathBuf::from(dir);
    [dir.clone(), dir.join("src")]
        .into_iter()
        .find(|d| names.iter().all(|n| d.join(n).is_file()))
        .ok_or_else(|| format!("{var}={} holds no {}", dir.display(), names.join(" and ")))
}

/// One stream run as its receiver saw it: Mbit/s, megabytes received
/// (10^6 bytes), and the receiving process's CPU seconds (user + system).
#[derive(Clone, Copy)]
struct Rx {
    mbps: f64,
    mb: f64,
    cpu: f64,
}

/// Our two ends: where they run, our netperf, and the netserver there.
#[derive(Clone, Copy)]
struct Ours<'a> {
    at: At<'a>,
    netperf: &'a Path,
    ns: &'a Netserver,
}

/// One run of our netperf, as its receiver saw it: the last row's
/// throughput and elapsed time (TCP: the 5th and 4th fields; UDP_STREAM's
/// receiver row: the 4th and 2nd), and the receiver's CPU: the netserver's,
/// or for TCP_MAERTS netperf's own (a reaped child).
fn our_stream(us: Ours, test: &str, secs: u64, extra: &[&str]) -> Rx {
    let Ours { at, netperf, ns } = us;
    let mut elapsed = 0.0;
    let s = sampled(ns.pid(), || {
        let out = try_run(netperf_v1(at, netperf, ns.port(), test, secs, extra), secs);
        let rows = out.map(|o| rows_of(&o)).unwrap_or_default();
        let (mbps, t) = match rows.last().map(Vec::as_slice) {
            Some([_, t, _, mbps]) if test == "UDP_STREAM" => (*mbps, *t),
            Some([_, _, _, t, mbps, ..]) => (*mbps, *t),
            _ => (f64::NAN, 0.0),
        };
        elapsed = t;
        mbps
    });
    Rx {
        mbps: s.figure,
        mb: s.figure * elapsed / 8.0,
        cpu: if test == "TCP_MAERTS" {
            s.client_cpu
        } else {
            s.server_cpu
        },
    }
}

/// iperf3 3.21's server, started once for all its rows, bound to the
/// host; its clients run the same binary.
struct Iperf3 {
    bin: PathBuf,
    port: u16,
    server: Guard,
}

fn iperf3_server(at: At, dir: &Path) -> Option<Iperf3> {
    let bin = dir.join("iperf3");
    let port = free_port();
    let server = spawn(
        at.command(&bin)
            .args(["-s", "-p", &port.to_string(), "-B", at.host]),
    );
    if !wait_listening(server.0.id(), port) {
        eprintln!("bench: {} -s did not listen on port {port}", bin.display());
        return None;
    }
    Some(Iperf3 { bin, port, server })
}

/// One iperf3 run, `-P n -l len` (`reverse`: -R, the server sends), as its
/// receiver saw it (end.sum_received): the server, or with -R the client
/// itself (a reaped child).
fn iperf3_stream(at: At, i: &Iperf3, n: usize, len: &str, secs: u64, reverse: bool) -> Rx {
    let nf = n.to_string();
    let mut args = vec!["-P", &nf, "-l", len];
    if reverse {
        args.push("-R");
    }
    let mut bytes = f64::NAN;
    let s = sampled(i.server.0.id(), || {
        let v = iperf3_run(at, &i.bin, i.port, secs, &args);
        let r = v.as_ref().map(|v| &v["end"]["sum_received"]);
        bytes = r.and_then(|r| r["bytes"].as_f64()).unwrap_or(f64::NAN);
        r.and_then(|r| r["bits_per_second"].as_f64())
            .map_or(f64::NAN, |b| b / 1e6)
    });
    Rx {
        mbps: s.figure,
        mb: bytes / 1e6,
        cpu: if reverse { s.client_cpu } else { s.server_cpu },
    }
}

/// Two distinct free ports: neper's control and data ports.
fn two_free_ports() -> (u16, u16) {
    let a = free_port();
    loop {
        let b = free_port();
        if b != a {
            return (a, b);
        }
    }
}

/// One neper run of `prog` (`tcp_stream` or `tcp_rr`) with `n` flows on
/// `-T 2` threads (`-T 1` for one flow): a server for this run alone (a
/// neper server serves one test, then exits) on free control and data
/// ports, bound to the host, then the client. `both` go to both ends,
/// `server` and `client` to one. The client's figure, and each end's CPU
/// seconds, each read from the reaped child: the client's when it ends,
/// the server's when it follows.
fn neper(
    at: At,
    dir: &Path,
    prog: &str,
    n: usize,
    secs: u64,
    (both, server, client): (&[&str], &[&str], &[&str]),
) -> Sample {
    let bin = dir.join(prog);
    let (cport, dport) = two_free_ports();
    let (nf, threads) = (n.to_string(), n.min(2).to_string());
    let (cport_s, dport_s) = (cport.to_string(), dport.to_string());
    // (neper writes a log file into its working directory unless told to
    // log to stderr)
    let mut common = vec!["--logtostderr", "-H", at.host, "-F", &nf, "-T", &threads];
    common.extend(["-C", &cport_s, "-P", &dport_s]);
    if at.v6() {
        common.push("-6");
    }
    common.extend(both);
    let mut srv = spawn(at.command(&bin).args(&common).args(server));
    if !wait_listening(srv.0.id(), cport) {
        eprintln!("bench: neper {prog} server did not listen on port {cport}");
        return no_sample();
    }
    let c0 = children_cpu();
    let mut c = at.command(&bin);
    c.arg("-c")
        .args(&common)
        .args(["-l", &secs.to_string()])
        .args(client);
    let out = try_run(c, secs);
    let c1 = children_cpu();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut exited = false;
    while !exited && Instant::now() < deadline {
        exited = matches!(srv.0.try_wait(), Ok(Some(_)));
        if !exited {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Sample {
        figure: out.map_or(f64::NAN, |o| neper_figure(&o)),
        client_cpu: c1 - c0,
        server_cpu: if exited {
            children_cpu() - c1
        } else {
            f64::NAN
        },
    }
}

/// neper's figure from its `key=value` lines: `throughput=` where this end
/// measured (tcp_rr; a tcp_stream reader: Mbit/s), else the other end's
/// `remote_throughput=` in bits/s: a tcp_stream client that only sends
/// prints no `throughput=` line.
fn neper_figure(out: &str) -> f64 {
    let key = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse::<f64>().ok())
    };
    key("throughput=")
        .or_else(|| key("remote_throughput=").map(|b| b / 1e6))
        .unwrap_or(f64::NAN)
}

/// neper's tcp_stream as its receiver saw it, `buf`-byte reads and writes:
/// `maerts` (-M at both ends, as neper requires) makes the server the
/// sender; `rx` are options for the receiving end (--skip-rx-copy).
fn neper_stream(
    at: At,
    dir: &Path,
    n: usize,
    secs: u64,
    buf: &str,
    maerts: bool,
    rx: &[&str],
) -> Rx {
    let mut both = vec!["-B", buf];
    if maerts {
        both.push("-M");
    }
    let (server, client) = if maerts { (&[][..], rx) } else { (rx, &[][..]) };
    let s = neper(at, dir, "tcp_stream", n, secs, (&both, server, client));
    Rx {
        mbps: s.figure,
        mb: s.figure * secs as f64 / 8.0,
        cpu: if maerts { s.client_cpu } else { s.server_cpu },
    }
}

/// Median Mbit/s of runs; "-" for none.
fn mbps_cell(v: &[Rx]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    format!("{:.0}", spread(v.iter().map(|r| r.mbps).collect()).median)
}

/// The receiver's CPU microseconds per megabyte over all the runs.
fn cpu_cell(v: &[Rx]) -> String {
    let (cpu, mb) = v.iter().fold((0.0, 0.0), |(c, m), r| (c + r.cpu, m + r.mb));
    if mb > 0.0 {
        format!("{:.1}", cpu * 1e6 / mb)
    } else {
        "-".into()
    }
}

/// The ratios of pairs, ours / peer's: the median in bold, min .. max.
fn ratio_cell(pairs: &[(Rx, Rx)]) -> String {
    if pairs.is_empty() {
        return "-".into();
    }
    let r = spread(pairs.iter().map(|(a, b)| a.mbps / b.mbps).collect());
    format!("**{:.2}** ({:.2} .. {:.2})", r.median, r.min, r.max)
}

fn rx_header(doc: &mut Doc) {
    doc.line("");
    doc.line("| run | Mbit/s | beside | its Mbit/s | ratio (min .. max) | rx CPU µs/MB | beside's rx CPU µs/MB |");
    doc.line("|---|---|---|---|---|---|---|");
}

/// One row of ours (or a path) beside one peer (or the plain path), with
/// each receiver's CPU per megabyte; nothing where the peer is absent.
fn rx_row(doc: &mut Doc, label: &str, peer: &str, pairs: &[(Rx, Rx)]) {
    if pairs.is_empty() {
        return;
    }
    let (a, b): (Vec<Rx>, Vec<Rx>) = pairs.iter().copied().unzip();
    doc.line(format!(
        "| {label} | {} | {peer} | {} | {} | {} | {} |",
        mbps_cell(&a),
        mbps_cell(&b),
        ratio_cell(pairs),
        cpu_cell(&a),
        cpu_cell(&b)
    ));
}

/// The `--peers` report (see the top of this file).
fn peers(o: &Opts, netperf: &Path, ns: &Netserver, doc: &mut Doc) {
    let iperf3 = peer_dir("IPERF3_REF", &["iperf3"]);
    let neper = peer_dir("NEPER_REF", &["tcp_stream", "tcp_rr"]);
    let (date, uname) = (said("date", &["+%Y-%m-%d"]), said("uname", &["-sr"]));
    doc.line("## Ours beside iperf3 3.21 and neper, and every data path");
    doc.line("");
    doc.line(format!(
        "Run of {date} on {uname}, {} CPUs: {} rounds of {} s runs, ours then each peer in turn (ours, iperf3, ours, neper ...), every pair its own run of ours; ratio = ours / peer per pair, median in bold, min .. max after it. rx CPU µs/MB: user + system CPU of the receiving process (netserver, iperf3 -s, neper's server; netperf, the iperf3 -R client and neper's -M client in TCP_MAERTS) over the megabytes (10^6 bytes) it received, summed over the runs.",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        o.runs,
        o.secs
    ));
    doc.line("");
    match &iperf3 {
        Ok(d) => doc.line(format!(
            "- iperf3: {} ({})",
            d.join("iperf3").display(),
            said(d.join("iperf3"), &["--version"])
        )),
        Err(why) => doc.line(format!(
            "- iperf3 skipped: {why} (the directory of an iperf3 3.21 build, e.g. /tmp/iperf-3.21/src): no iperf3 columns in the flows tables nor iperf3 row in the namespace"
        )),
    }
    match &neper {
        Ok(d) => doc.line(format!(
            "- neper: {} (version {})",
            d.display(),
            said(d.join("tcp_stream"), &["--logtostderr", "-v"])
        )),
        Err(why) => doc.line(format!(
            "- neper skipped: {why} (the directory of a neper build holding tcp_stream and tcp_rr, e.g. /tmp/neper): no neper columns in the flows tables, no TCP_RR table, no --skip-rx-copy rows"
        )),
    }
    let iperf3 = iperf3.ok();
    let neper = neper.ok();
    let us = Ours {
        at: LOOPBACK,
        netperf,
        ns,
    };
    if iperf3.is_some() || neper.is_some() {
        let server = iperf3.as_deref().and_then(|d| iperf3_server(LOOPBACK, d));
        for maerts in [false, true] {
            peer_flows(doc, o, us, server.as_ref(), neper.as_deref(), maerts);
        }
    }
    if let Some(d) = &neper {
        peer_rr(doc, o, us, d);
    }
    paths(doc, o, us);
    if let Some(d) = &neper {
        doc.line("");
        doc.line(
            "### Our --rx-discard beside neper's --skip-rx-copy (on its server, the receiver)",
        );
        rx_header(doc);
        for n in [1, 2] {
            discard_beside_skip(doc, o, us, d, n, ("128K", "131072"));
        }
    }
    page_rows(doc, o, netperf, iperf3.as_deref(), neper.as_deref());
}

/// TCP_STREAM or TCP_MAERTS with 1 to 100 flows: ours beside iperf3 -P N
/// (-R) and neper tcp_stream -F N (-M), all writing 128 KiB.
fn peer_flows(
    doc: &mut Doc,
    o: &Opts,
    us: Ours,
    iperf: Option<&Iperf3>,
    neper: Option<&Path>,
    maerts: bool,
) {
    let secs = o.secs;
    // (TCP_MAERTS's netserver sends what `-m ,SIZE` names, as netperf
    // 2.7's: a lone `-m` is our own, unused, send size)
    let (test, r, m, size) = if maerts {
        ("TCP_MAERTS", " -R", " -M", ",128K")
    } else {
        ("TCP_STREAM", "", "", "128K")
    };
    doc.line("");
    doc.line(format!(
        "### {test} -- -m {size} --flows N, beside iperf3 -P N -l 128K{r} and neper tcp_stream -F N -T 2 -B 131072{m} (-T 1 for one flow)"
    ));
    doc.line("");
    doc.line("| N | ours Mbit/s | iperf3 | neper | ours/iperf3 (min .. max) | ours/neper (min .. max) | rx CPU µs/MB: ours | iperf3 | neper |");
    doc.line("|---|---|---|---|---|---|---|---|---|");
    for n in [1usize, 2, 8, 100] {
        let nf = n.to_string();
        let extra = ["-m", size, "--flows", &nf];
        let mut a = iperf.map(|i| move || iperf3_stream(LOOPBACK, i, n, "128K", secs, maerts));
        let mut b =
            neper.map(|d| move || neper_stream(LOOPBACK, d, n, secs, "131072", maerts, &[]));
        let pairs = rounds(
            o.runs,
            || our_stream(us, test, secs, &extra),
            &mut [as_peer(&mut a), as_peer(&mut b)],
        );
        let ours: Vec<Rx> = pairs.iter().flatten().map(|p| p.0).collect();
        let peer = |k: usize| -> Vec<Rx> { pairs[k].iter().map(|p| p.1).collect() };
        doc.line(format!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
            mbps_cell(&ours),
            mbps_cell(&peer(0)),
            mbps_cell(&peer(1)),
            ratio_cell(&pairs[0]),
            ratio_cell(&pairs[1]),
            cpu_cell(&ours),
            cpu_cell(&peer(0)),
            cpu_cell(&peer(1))
        ));
    }
}

/// TCP_RR with 2 to 100 flows beside neper's tcp_rr -F N -T 2.
fn peer_rr(doc: &mut Doc, o: &Opts, us: Ours, neper_dir: &Path) {
    doc.line("");
    doc.line("### TCP_RR -- --flows N, beside neper tcp_rr -F N -T 2");
    doc.line("");
    doc.line("| N | ours trans/s | neper trans/s | ours/neper (min .. max) |");
    doc.line("|---|---|---|---|");
    for n in [2usize, 8, 100] {
        let nf = n.to_string();
        let (a, b, r) = alternate(
            o.runs,
            || {
                netperf_tps(
                    us.netperf,
                    us.ns.port(),
                    "TCP_RR",
                    o.secs,
                    &["--flows", &nf],
                )
            },
            || neper(LOOPBACK, neper_dir, "tcp_rr", n, o.secs, (&[], &[], &[])).figure,
        );
        doc.line(format!(
            "| {n} | {a:.0} | {b:.0} | **{:.2}** ({:.2} .. {:.2}) |",
            r.median, r.min, r.max
        ));
    }
}

/// Every data path of ours beside the plain one, ours alone: in each
/// round the plain run, then a path, then the plain one again and the
/// next path; ratio = path / plain.
fn paths(doc: &mut Doc, o: &Opts, us: Ours) {
    doc.line("");
    doc.line("### Every data path beside the plain one (ours alone; ratio = path / plain)");
    rx_header(doc);
    type Group<'a> = (&'a str, &'a [&'a str], &'a [&'a [&'a str]]);
    let groups: [Group; 4] = [
        (
            "TCP_STREAM",
            &["-m", "128K", "--flows", "1"],
            &[&["--rx-discard"], &["--io-uring"], &["--zerocopy"]],
        ),
        (
            "TCP_STREAM",
            &["-m", "128K", "--flows", "2"],
            &[&["--rx-discard"], &["--io-uring"], &["--zerocopy"]],
        ),
        (
            "TCP_MAERTS",
            &["-m", ",128K", "--flows", "1"],
            &[&["--rx-discard"], &["--io-uring"]],
        ),
        (
            "UDP_STREAM",
            &["-m", "1024"],
            &[&["--io-uring"], &["--batch", "32"]],
        ),
    ];
    for (test, base, ways) in groups {
        let mut runs: Vec<_> = ways
            .iter()
            .map(|way| {
                let extra: Vec<&str> = base.iter().chain(way.iter()).copied().collect();
                move || our_stream(us, test, o.secs, &extra)
            })
            .collect();
        let mut peers: Vec<Option<&mut dyn FnMut() -> Rx>> = runs
            .iter_mut()
            .map(|f| Some(f as &mut dyn FnMut() -> Rx))
            .collect();
        let pairs = rounds(o.runs, || our_stream(us, test, o.secs, base), &mut peers);
        let plain = format!("{test} {}", base.join(" "));
        for (way, pairs) in ways.iter().zip(pairs) {
            // the path first: its ratio to the plain run
            let pairs: Vec<(Rx, Rx)> = pairs.into_iter().map(|(p, w)| (w, p)).collect();
            rx_row(doc, &format!("{plain} {}", way.join(" ")), &plain, &pairs);
        }
    }
}

/// Our `--rx-discard` beside neper's `--skip-rx-copy` on its receiving end
/// (the server), `n` flows, `len`-byte writes (neper's reads and writes:
/// `buf` bytes): one row.
fn discard_beside_skip(
    doc: &mut Doc,
    o: &Opts,
    us: Ours,
    neper_dir: &Path,
    n: usize,
    (len, buf): (&str, &str),
) {
    let nf = n.to_string();
    let extra = ["-m", len, "--rx-discard", "--flows", &nf];
    let mut skip = || neper_stream(us.at, neper_dir, n, o.secs, buf, false, &["--skip-rx-copy"]);
    let pairs = rounds(
        o.runs,
        || our_stream(us, "TCP_STREAM", o.secs, &extra),
        &mut [Some(&mut skip as &mut dyn FnMut() -> Rx)],
    );
    rx_row(
        doc,
        &format!("TCP_STREAM -- {}", extra.join(" ")),
        &format!(
            "neper tcp_stream -F {n} -T {} -B {buf}, server --skip-rx-copy",
            n.min(2)
        ),
        &pairs[0],
    );
}

/// The share of the bytes our receiver mapped in one TCP_STREAM run of
/// `extra` (`--json`: remote.rx_mapped_bytes over remote.bytes_received).
fn mapped_share(us: Ours, secs: u64, extra: &[&str]) -> Option<f64> {
    let mut c = us.at.command(us.netperf);
    c.args(["-H", us.at.host, "-p", &us.ns.port().to_string()])
        .args(["-t", "TCP_STREAM"])
        .args(["-l", &secs.to_string(), "--json", "--"])
        .args(extra);
    let v: serde_json::Value = serde_json::from_str(&try_run(c, secs)?)
        .map_err(|e| eprintln!("bench: netperf --json printed no JSON: {e}"))
        .ok()?;
    let r = &v["remote"];
    Some(r["rx_mapped_bytes"].as_f64()? / r["bytes_received"].as_f64()?)
}

/// The page-aligned rows: in a namespace whose loopback MTU makes an IPv6
/// segment 15 pages, so a receiver can map them, ours with `--zerocopy
/// --rx-zerocopy` beside iperf3, our copy path and our `--rx-discard`;
/// that beside neper's `--skip-rx-copy`; and the share of the bytes our
/// receiver mapped (`--json`). The namespace goes with `PageLoop`'s drop,
/// on every way out.
fn page_rows(
    doc: &mut Doc,
    o: &Opts,
    netperf: &Path,
    iperf3_dir: Option<&Path>,
    neper_dir: Option<&Path>,
) {
    doc.line("");
    doc.line(format!(
        "### Page-aligned: a namespace whose loopback MTU is {} (an IPv6 segment carries 15 pages), everything on ::1",
        PageLoop::MTU
    ));
    let Some(l) = PageLoop::new("bench --peers") else {
        doc.line("");
        doc.line("(page-aligned rows skipped: no namespace here; they need root, ip, nft and tc, stderr says which is missing)");
        return;
    };
    let at = At {
        ns: Some(&l),
        host: "::1",
    };
    let mut cmd = l.command(&ours("netserver"));
    cmd.args(["-D", "-p", "0", "-L", "::1", "-v", "0"]);
    let ns = Netserver::spawn(cmd);
    let us = Ours {
        at,
        netperf,
        ns: &ns,
    };
    let iperf = iperf3_dir.and_then(|d| iperf3_server(at, d));
    let secs = o.secs;
    rx_header(doc);
    let mut mapped = vec![];
    for n in [1usize, 2] {
        let nf = n.to_string();
        let zc = ["-m", "64K", "--zerocopy", "--rx-zerocopy", "--flows", &nf];
        let ours = |extra: &[&str]| our_stream(us, "TCP_STREAM", secs, extra);
        let mut a = iperf
            .as_ref()
            .map(|i| move || iperf3_stream(at, i, n, "128K", secs, false));
        let mut copy = Some(|| ours(&["-m", "64K", "--flows", &nf]));
        let mut discard = Some(|| ours(&["-m", "64K", "--rx-discard", "--flows", &nf]));
        let pairs = rounds(
            o.runs,
            || ours(&zc),
            &mut [as_peer(&mut a), as_peer(&mut copy), as_peer(&mut discard)],
        );
        let label = format!("TCP_STREAM -- {}", zc.join(" "));
        let peers = [
            format!("iperf3 -6 -P {n} -l 128K"),
            format!("ours -- -m 64K --flows {n}"),
            format!("ours -- -m 64K --rx-discard --flows {n}"),
        ];
        for (peer, pairs) in peers.iter().zip(&pairs) {
            rx_row(doc, &label, peer, pairs);
        }
        if let Some(d) = neper_dir {
            discard_beside_skip(doc, o, us, d, n, ("64K", "65536"));
        }
        mapped.push(match mapped_share(us, secs, &zc) {
            Some(s) => format!(
                "{n} flow{}: mapped {:.1}%",
                if n > 1 { "s" } else { "" },
                s * 100.0
            ),
            None => format!("{n} flows: no figure (see stderr)"),
        });
    }
    doc.line("");
    doc.line(format!(
        "Mapped by our receiver with --zerocopy --rx-zerocopy (`--json`: remote.rx_mapped_bytes / remote.bytes_received, one run each): {}.",
        mapped.join("; ")
    ));
}
