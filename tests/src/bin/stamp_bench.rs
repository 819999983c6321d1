//! How many STAMP test packets a second `netserver --stamp` reflects on
//! loopback: the reflector on CPU 0, this sender on CPU 1 (taskset), the
//! sender keeping a window of test packets in flight with sendmmsg and
//! reading reflections with recvmmsg, as many as the reflector answers.
//! Prints each run's figure and the median with min..max; the reflector's
//! system calls a reflection (strace -c -f) once; asserts nothing.
//!
//! With `--burst N` the sender hands the kernel N test packets a message
//! (UDP_SEGMENT), each still its own datagram, as a NIC's receive
//! coalescing (GRO) hands a busy reflector packets that came back to back:
//! the reflector then reads them coalesced and answers them the same way.
//!
//! `--other ADDR:PORT` measures another implementation's reflector,
//! already running (put it on CPU 0), the same way, and nothing else.
//!
//! bench/stamp [--runs N] [--secs S] [--window W] [--size OCTETS] [--burst N]
//!             [--other ADDR:PORT]

use std::{
    net::{SocketAddr, UdpSocket},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use engine::sys::MsgBatch;
use proto::rfc_stamp::{Mode, SenderPacket};

const BATCH: usize = 64;

struct Args {
    runs: usize,
    secs: f64,
    window: usize,
    size: usize,
    burst: usize,
    /// Another reflector, already running (on CPU 0): measured alone.
    other: Option<SocketAddr>,
}

fn args() -> Args {
    let mut a = Args {
        runs: 5,
        secs: 3.0,
        window: 1024,
        size: 44,
        burst: 1,
        other: None,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let next = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--runs" => a.runs = next.parse().expect("--runs N"),
            "--secs" => a.secs = next.parse().expect("--secs S"),
            "--window" => a.window = next.parse().expect("--window W"),
            "--size" => a.size = next.parse::<usize>().expect("--size OCTETS").max(44),
            "--burst" => a.burst = next.parse::<usize>().expect("--burst N").clamp(1, 64),
            "--other" => a.other = Some(next.parse().expect("--other ADDR:PORT")),
            other => panic!(
                "{other}: bench/stamp [--runs N] [--secs S] [--window W] [--size OCTETS] [--burst N] [--other ADDR:PORT]"
            ),
        }
        i += 2;
    }
    a
}

fn release(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/release")
        .join(name)
}

/// `netserver --stamp` on 127.0.0.1:port, on CPU 0 (under `prefix`, as
/// strace), its stdout read until its STAMP line.
fn reflector(port: u16, prefix: &[&str]) -> Child {
    let ns = release("netserver");
    let mut cmd = Command::new(prefix.first().copied().unwrap_or("taskset"));
    let rest: Vec<&str> = if prefix.is_empty() {
        vec!["-c", "0"]
    } else {
        prefix[1..].to_vec()
    };
    cmd.args(rest)
        .arg(&ns)
        .args(["-D", "-p", "0", "-L", "127.0.0.1", "--stamp"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--stamp-rate", "100000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("netserver");
    // (strace's start is slower)
    std::thread::sleep(Duration::from_millis(if prefix.is_empty() {
        700
    } else {
        2000
    }));
    child
}

/// Reflections a second over `secs` (the first half second left out),
/// keeping `window` test packets in flight; and every reflection read.
fn run(to: SocketAddr, a: &Args) -> (f64, u64) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.connect(to).expect("connect");
    let s2 = socket2::SockRef::from(&sock);
    let _ = s2.set_recv_buffer_size(8 << 20);
    let _ = s2.set_send_buffer_size(8 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    // BATCH messages of `burst` test packets each
    let burst = a.burst;
    let msgs = (BATCH / burst).max(1);
    let mut tx = MsgBatch::sending(msgs, a.size * burst, None);
    let mut rx = MsgBatch::receiving(BATCH, 2048);
    let pkt = SenderPacket::default().encode(Mode::Unauthenticated, None);
    for i in 0..msgs {
        if burst > 1 {
            tx.set_segment(i, Some(a.size as u16));
        }
        let s = tx.slot_mut(i);
        for k in 0..burst {
            s[k * a.size..k * a.size + pkt.len()].copy_from_slice(&pkt);
        }
    }
    let lens = vec![a.size * burst; msgs];
    let per_call = (msgs * burst) as u64;
    let (mut sent, mut got) = (0u64, 0u64);
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(a.secs);
    let mut measured_from = None;
    let mut at_start = 0;
    while Instant::now() < until {
        // a second's warm-up left out of the figure
        if measured_from.is_none() && start.elapsed() > Duration::from_millis(500) {
            measured_from = Some(Instant::now());
            at_start = got;
        }
        let room = (a.window as u64).saturating_sub(sent - got);
        if room >= per_call {
            for i in 0..msgs {
                let s = tx.slot_mut(i);
                for k in 0..burst {
                    let seq = (sent + (i * burst + k) as u64) as u32;
                    s[k * a.size..k * a.size + 4].copy_from_slice(&seq.to_be_bytes());
                }
            }
            if let Ok(n) = tx.send(&sock, &lens) {
                sent += (n * burst) as u64;
            }
        }
        match rx.recv(&sock, BATCH) {
            Ok(n) => got += n as u64,
            // a lost window: start it again
            Err(_) => sent = got,
        }
    }
    let from = measured_from.unwrap_or(start);
    ((got - at_start) as f64 / from.elapsed().as_secs_f64(), got)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The kernel's floor: the same batches echoed back untouched (no STAMP
/// rules, no clock, no sessions), as fast as recvmmsg and sendmmsg go; what
/// the kernel coalesced (UDP_GRO) sent back as it came (UDP_SEGMENT), as
/// the reflector does.
fn echo_server(port: u16) -> ! {
    let sock = UdpSocket::bind(("127.0.0.1", port)).expect("bind");
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
    let _ = engine::sys::opt::udp_gro(&sock);
    let slot = 65_536;
    let mut rx = MsgBatch::receiving(BATCH, slot);
    let mut tx = MsgBatch::replying(BATCH, slot);
    let mut lens = Vec::with_capacity(BATCH);
    loop {
        let Ok(n) = rx.recv(&sock, BATCH) else {
            continue;
        };
        lens.clear();
        for i in 0..n {
            let (b, from, gro) = rx.received(i);
            let Some(from) = from else { continue };
            let len = b.len();
            let j = lens.len();
            tx.slot_mut(j)[..len].copy_from_slice(b);
            tx.set_to(j, from);
            tx.set_segment(j, gro.filter(|&g| g < len).map(|g| g as u16));
            lens.push(len);
        }
        let _ = tx.send(&sock, &lens);
    }
}

/// This sender on CPU 1 (the reflector being on CPU 0).
fn pin_to_cpu1() {
    let _ = Command::new("taskset")
        .args(["-p", "-c", "1", &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status();
}

/// The least and the most of `v`.
fn spread(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    )
}

fn main() {
    if let Some(port) = std::env::args().skip_while(|a| a != "--echo-server").nth(1) {
        echo_server(port.parse().expect("--echo-server PORT"));
    }
    let a = args();
    if let Some(to) = a.other {
        pin_to_cpu1();
        let mut figures: Vec<f64> = (0..a.runs).map(|_| run(to, &a).0).collect();
        let (min, max) = spread(&figures);
        println!(
            "reflector at {to}: median {:.0} ({min:.0} .. {max:.0}) reflections/s over {} runs",
            median(&mut figures),
            a.runs
        );
        return;
    }
    let port = 18620;
    let mut ns = reflector(port, &[]);
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    pin_to_cpu1();
    let mut figures = Vec::new();
    for r in 0..a.runs {
        let (f, _) = run(to, &a);
        println!("run {}: {:.0} reflections/s", r + 1, f);
        figures.push(f);
    }
    let _ = ns.kill();
    let _ = ns.wait();
    // the floor: a bare echo on the same CPU, the same sender
    let echo_port = port + 2;
    let mut echo = Command::new("taskset")
        .args(["-c", "0"])
        .arg(std::env::current_exe().expect("this program"))
        .args(["--echo-server", &echo_port.to_string()])
        .spawn()
        .expect("the echo");
    std::thread::sleep(Duration::from_millis(500));
    let to_echo: SocketAddr = format!("127.0.0.1:{echo_port}").parse().unwrap();
    let mut floor: Vec<f64> = (0..a.runs).map(|_| run(to_echo, &a).0).collect();
    let _ = echo.kill();
    let _ = echo.wait();
    let (min, max) = spread(&figures);
    println!(
        "STAMP reflections/s, {} octets, window {}, {} a message: median {:.0} ({:.0} .. {:.0}) over {} runs of {} s",
        a.size,
        a.window,
        a.burst,
        median(&mut figures),
        min,
        max,
        a.runs,
        a.secs
    );
    let (fmin, fmax) = spread(&floor);
    println!(
        "a bare recvmmsg/sendmmsg echo on the same CPU (the kernel's floor): median {:.0} ({fmin:.0} .. {fmax:.0})",
        median(&mut floor)
    );
    // the reflector's system calls a reflection, under strace (slower:
    // counts only)
    let out = std::env::temp_dir().join("stamp_bench.strace");
    let mut traced = reflector(
        port + 1,
        &[
            "strace",
            "-f",
            "-c",
            "-o",
            out.to_str().unwrap(),
            "taskset",
            "-c",
            "0",
        ],
    );
    let to2: SocketAddr = format!("127.0.0.1:{}", port + 1).parse().unwrap();
    let one = Args {
        runs: 1,
        secs: 2.0,
        ..a
    };
    let (_, reflected) = run(to2, &one);
    // the traced netserver (strace's child) ends on SIGINT, and strace
    // with it, writing its counts
    let _ = Command::new("pkill")
        .args(["-INT", "-P", &traced.id().to_string()])
        .status();
    let _ = traced.wait();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let calls = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
            .unwrap_or(0)
    };
    let (r, s) = (calls("recvmmsg"), calls("sendmmsg"));
    println!(
        "under strace: {reflected} reflections read; recvmmsg {r}, sendmmsg {s}: {:.3} system calls a reflection",
        (r + s) as f64 / (reflected.max(1)) as f64
    );
}
