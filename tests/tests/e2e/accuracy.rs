//! Our figures against the kernel's own counters, between two network
//! namespaces (doc/testing.md): UDP loss to the datagram, rates through a
//! token-bucket shaper within 1%, pacing within 1% with no loss.

use std::time::Duration;

use harness::{
    Netserver,
    attempts::{Miss, attempts},
    bin, fields,
    netns::{A4, A6, Hosts},
    num, run_with_deadline,
};

/// netserver in host A, on a fixed data port so rules can match it.
fn server(h: &Hosts, addr: &str) -> Netserver {
    h.netserver(addr, &["--data-ports", "50000-50000"])
}

/// netperf in host B, with a command line written as one string, at
/// `-v 3` for our loss lines.
fn netperf_in_b(h: &Hosts, args: &str) -> harness::Output {
    let mut cmd = h.command(&h.b, &bin("netperf"));
    cmd.args(["-v", "3"]).args(args.split_whitespace());
    run_with_deadline(cmd, Duration::from_secs(60)).ok()
}

/// The loss line: (lost, sent, socket-buffer drops).
fn loss(stdout: &str) -> (u64, u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Lost "))
        .unwrap_or_else(|| panic!("no loss line in:\n{stdout}"));
    let w = fields(line);
    // Lost X of N datagrams (P%): D dropped by the receiving socket's buffer, ...
    assert_eq!(w[6 + 1], "dropped", "{line}");
    (num(w[1]) as u64, num(w[3]) as u64, num(w[6]) as u64)
}

/// The second UDP_STREAM row's throughput: what arrived.
fn received_rate(stdout: &str) -> f64 {
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    num(fields(rows[1]).last().unwrap())
}

/// Drop a random 1% of the test's 1024-byte datagrams (UDP length 1032)
/// at A's input hook, counted in `nptest`'s `dropped`; the hellos (36
/// bytes) are left alone.
fn drop_one_percent(h: &Hosts) {
    h.nft(
        &h.a,
        "table inet nptest {
           counter dropped { }
           chain input {
             type filter hook input priority 0; policy accept;
             udp dport 50000 udp length 1032 numgen random mod 100 0 counter name \"dropped\" drop
           }
         }",
    );
}

fn udp_loss_is_exact(addr: &str, test: &str, extra: &str) {
    let Some(h) = Hosts::new(test) else { return };
    let ns = server(&h, addr);
    drop_one_percent(&h);
    let v6 = addr.contains(':');
    let in_errors = h.udp_counter(&h.a, "InErrors", v6);
    // A small receive buffer on the server makes its socket drop too.
    // `-l -N` is a byte count, as in netperf 2.7: 200,000 datagrams.
    let port = ns.port().to_string();
    let bytes = 200_000 * 1024;
    let out = netperf_in_b(
        &h,
        &format!(
            "-H {addr} -p {port} -t UDP_STREAM -l -{bytes} -- -m 1024 -S ,16K --rate 400m {extra}"
        ),
    );
    let in_errors = h.udp_counter(&h.a, "InErrors", v6) - in_errors;
    let dropped = h.nft_counter(&h.a, "nptest", "dropped");
    let (lost, sent, rcvbuf) = loss(&out.stdout);
    eprintln!(
        "sent {sent}, lost {lost}: nft dropped {dropped}, UDP InErrors {in_errors}, we attribute {rcvbuf} to the socket buffer"
    );
    assert_eq!(sent, 200_000, "{out}");
    assert!(
        dropped > 1000,
        "the 1% rule should drop about 2000: {dropped}"
    );
    assert_eq!(
        lost,
        dropped + in_errors,
        "loss must equal the kernel's counts\n{out}"
    );
    assert_eq!(
        rcvbuf, in_errors,
        "socket-buffer share must equal InErrors\n{out}"
    );
}

#[test]
fn udp_loss_matches_kernel_counters_ipv4() {
    udp_loss_is_exact(A4, "udp_loss_matches_kernel_counters_ipv4", "");
}

/// The same with `--batch`: sendmmsg and recvmmsg of 32 datagrams a call
/// count every datagram as one call each would.
#[test]
fn udp_loss_matches_kernel_counters_batched() {
    udp_loss_is_exact(A4, "udp_loss_matches_kernel_counters_batched", "--batch 32");
}

/// The same through io_uring: batched sendmsg submissions, a multishot
/// recvmsg into provided buffers; loss exact to the datagram.
#[test]
fn udp_loss_matches_kernel_counters_io_uring() {
    udp_loss_is_exact(
        A4,
        "udp_loss_matches_kernel_counters_io_uring",
        "--io-uring",
    );
}

#[test]
fn udp_loss_matches_kernel_counters_ipv6() {
    udp_loss_is_exact(A6, "udp_loss_matches_kernel_counters_ipv6", "");
}

/// UDP_STREAM `--flows 4` through the same 1% random drop: each flow's loss
/// (what it sent less what its socket took in) adds up to the kernel's
/// counts, every flow loses some, and the receivers' socket drops are
/// UDP's InErrors.
#[test]
fn udp_flows_loss_matches_kernel_counters() {
    let Some(h) = Hosts::new("udp_flows_loss_matches_kernel_counters") else {
        return;
    };
    let ns = server(&h, A4);
    drop_one_percent(&h);
    let in_errors = h.udp_counter(&h.a, "InErrors", false);
    let port = ns.port().to_string();
    let bytes = 4 * 50_000 * 1024;
    let out = netperf_in_b(
        &h,
        &format!(
            "--json -H {A4} -p {port} -t UDP_STREAM -l -{bytes} -- -m 1024 -S ,16K --rate 400m --flows 4"
        ),
    );
    let in_errors = h.udp_counter(&h.a, "InErrors", false) - in_errors;
    let dropped = h.nft_counter(&h.a, "nptest", "dropped");
    let d: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    let per = |side: &str, key: &str| -> Vec<u64> {
        d[side]["flows"]
            .as_array()
            .expect("flows")
            .iter()
            .map(|f| f[key].as_u64().unwrap())
            .collect()
    };
    let sent = per("local", "send_calls");
    let got = per("remote", "recv_calls");
    let lost: Vec<u64> = sent.iter().zip(&got).map(|(s, g)| s - g).collect();
    let rcvbuf = d["remote"]["udp"]["rcvbuf_drops"].as_u64().unwrap();
    eprintln!(
        "sent {sent:?}, lost {lost:?}: nft dropped {dropped}, UDP InErrors {in_errors}, socket drops {rcvbuf}"
    );
    assert_eq!(sent, [50_000; 4], "{out}");
    assert!(
        lost.iter().all(|&l| l > 100),
        "every flow loses about 1%: {lost:?}"
    );
    assert_eq!(lost.iter().sum::<u64>(), dropped + in_errors, "{out}");
    assert_eq!(rcvbuf, in_errors, "{out}");
}

/// A 200 Mbit/s token bucket on B's side of the link. Its bucket holds
/// 10 ms of tokens (256 KB): the tokens a full bucket cannot take are
/// lost, and with 2.6 ms (64 KB) a qdisc timer running that late on a
/// busy shared VM cost up to 2.5% of the rate; the bucket lets at most its
/// size through above the rate, 0.2% of a 5 s test.
fn shape(h: &Hosts) {
    h.exec(
        &h.b,
        &[
            "tc", "qdisc", "replace", "dev", &h.dev_b, "root", "tbf", "rate", "200mbit", "burst",
            "256kb", "latency", "20ms",
        ],
    );
}

fn within(got: f64, want: f64, pct: f64) -> bool {
    (got - want).abs() <= want * pct / 100.0
}

/// netserver in A, netperf in B sending through the 200 Mbit/s shaper:
/// runs `args` (after -H and -p) until its `figure` comes out within 1%
/// of `want`, as [`attempts`] allows: a figure that is wrong fails every
/// time; a run starved of CPU (by other processes or by the host; the
/// link then idles for a while, and the figure is rightly low) gets
/// another chance; a figure above the shaper's rate fails at once.
fn through_the_shaper(test: &str, want: f64, args: &str, figure: impl Fn(&harness::Output) -> f64) {
    let Some(h) = Hosts::new(test) else { return };
    shape(&h);
    let ns = server(&h, A4);
    let port = ns.port();
    attempts(test, |_| {
        let out = netperf_in_b(&h, &format!("-H {A4} -p {port} {args}"));
        let got = figure(&out);
        eprintln!("{test}: {got:.2}, expected {want:.2}");
        if within(got, want, 1.0) {
            return Ok(());
        }
        Err(Miss {
            impossible: got > want * 1.01,
            shown: format!("{got} is not within 1% of {want}\n{out}"),
        })
    });
}

#[test]
fn udp_rate_through_a_shaper() {
    through_the_shaper(
        "udp_rate_through_a_shaper",
        200.0 * 1024.0 / 1066.0,
        "-t UDP_STREAM -l 4 -- -m 1024 -S ,2M",
        |out| received_rate(&out.stdout),
    );
}

#[test]
fn udp_pacing_arrives_at_the_requested_rate() {
    through_the_shaper(
        "udp_pacing_arrives_at_the_requested_rate",
        100.0,
        "-t UDP_STREAM -l 4 -- -m 1024 --rate 100m -S ,2M",
        |out| {
            // Pacing below the shaper's rate loses nothing, on every attempt.
            let (lost, _, _) = loss(&out.stdout);
            assert_eq!(lost, 0, "{out}");
            received_rate(&out.stdout)
        },
    );
}

#[test]
fn tcp_rate_through_a_shaper() {
    through_the_shaper(
        "tcp_rate_through_a_shaper",
        200.0 * 1448.0 / 1514.0,
        "-t TCP_STREAM -l 5 -P 0",
        |out| num(fields(&out.stdout)[4]),
    );
}

/// Many flows through the 200 Mbit/s shaper: four UDP_STREAM flows paced
/// alike (25 Mbit/s each) are identical, and Jain's index says so (>=
/// 0.999) while their sum arrives at the pace; four TCP_STREAM flows fill
/// the shaper together (within 2%, slow start kept out by `--warmup`), with
/// an index in (0, 1] (a FIFO shaper need not split evenly).
#[test]
fn flows_through_a_shaper_sum_up_and_report_fairness() {
    let test = "flows_through_a_shaper_sum_up_and_report_fairness";
    let Some(h) = Hosts::new(test) else { return };
    shape(&h);
    let ns = server(&h, A4);
    let port = ns.port();
    let run = |args: &str| -> (Vec<f64>, harness::Output) {
        let out = netperf_in_b(&h, &format!("-H {A4} -p {port} -P 0 {args}"));
        let line = out.stdout.lines().last().unwrap_or_default().to_string();
        (line.split(',').map(num).collect(), out)
    };
    let tcp_want = 200.0 * 1448.0 / 1514.0;
    attempts(test, |_| {
        let (v, out) = run(
            "-t UDP_STREAM -l 3 -- -m 1024 -S ,2M --rate 100m --flows 4 -o REMOTE_RECV_THROUGHPUT,FLOWS,FLOW_FAIRNESS",
        );
        let (udp, udp_jain) = (v[0], v[2]);
        let (v, out2) =
            run("-t TCP_STREAM -l 3 -- --flows 4 --warmup 1 -o THROUGHPUT,FLOWS,FLOW_FAIRNESS");
        let (tcp, flows, tcp_jain) = (v[0], v[1], v[2]);
        eprintln!(
            "{test}: UDP {udp:.2} Mbit/s, fairness {udp_jain:.5}; TCP {tcp:.2} Mbit/s over {flows} flows, fairness {tcp_jain:.4}"
        );
        assert_eq!(flows, 4.0, "{out2}");
        assert!(tcp_jain > 0.0 && tcp_jain <= 1.0, "{out2}");
        if within(udp, 100.0, 1.0) && udp_jain >= 0.999 && within(tcp, tcp_want, 2.0) {
            return Ok(());
        }
        Err(Miss {
            impossible: udp > 101.0 || tcp > tcp_want * 1.02,
            shown: format!("{out}\n{out2}"),
        })
    });
}

/// An unreachable host is a clear error, at once.
#[test]
fn unreachable_host_is_a_clear_error() {
    let Some(h) = Hosts::new("unreachable_host_is_a_clear_error") else {
        return;
    };
    h.exec(
        &h.b,
        &["ip", "route", "add", "unreachable", "198.18.0.99/32"],
    );
    let mut cmd = h.command(&h.b, &bin("netperf"));
    cmd.args(["-H", "198.18.0.99", "-l", "1"]);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr
            .starts_with("netperf: cannot connect to netserver at 198.18.0.99"),
        "{out}"
    );
    assert!(out.stderr.contains("No route to host"), "{out}");
}

/// UDP_RR through a rule that drops 1% of the requests: the test finishes
/// on time, and every dropped request is a lost transaction.
#[test]
fn udp_rr_with_loss_finishes_and_counts_it() {
    let Some(h) = Hosts::new("udp_rr_with_loss_finishes_and_counts_it") else {
        return;
    };
    let ns = server(&h, A4);
    // 1-byte requests: UDP length 9 (the 36-byte hello is left alone).
    h.nft(
        &h.a,
        "table inet nptest {
           counter dropped { }
           chain input {
             type filter hook input priority 0; policy accept;
             udp dport 50000 udp length 9 numgen random mod 100 0 counter name \"dropped\" drop
           }
         }",
    );
    let port = ns.port();
    // One transaction in flight, then a burst of 17: netperf 2.7's burst
    // would stall after 16 losses; ours counts each and refills its place.
    for (burst, test_secs) in [("0", 2), ("16", 2)] {
        let before = h.nft_counter(&h.a, "nptest", "dropped");
        let started = std::time::Instant::now();
        let out = netperf_in_b(
            &h,
            &format!("-H {A4} -p {port} -t UDP_RR -l {test_secs} -- -e 0.02 -b {burst}"),
        );
        let took = started.elapsed();
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("Lost "))
            .unwrap_or_else(|| panic!("no loss line: {out}"));
        let lost = num(fields(line)[1]) as u64;
        let dropped = h.nft_counter(&h.a, "nptest", "dropped") - before;
        eprintln!("UDP_RR -b {burst}: {line}; the rule dropped {dropped} requests; took {took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert!(dropped > 16, "{out}");
        // Every dropped request is a lost transaction; a response later
        // than the 20 ms timeout on a busy machine would add one more.
        assert!(
            lost >= dropped && lost <= dropped + dropped / 10 + 3,
            "lost {lost}, dropped {dropped}\n{out}"
        );
        let rate = num(fields(
            out.stdout
                .lines()
                .find(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                .unwrap(),
        )[5]);
        assert!(rate > 0.0, "{out}");
    }
}

/// netserver sends UDP only to the address that presented the test's
/// token: an intruder spraying the data port from host B gets nothing back
/// (an nftables counter on A's output), while a real UDP_RR runs.
#[test]
fn no_udp_to_an_address_without_the_token() {
    let Some(h) = Hosts::new("no_udp_to_an_address_without_the_token") else {
        return;
    };
    let ns = server(&h, A4);
    h.nft(
        &h.a,
        "table inet nptest {
           counter leaked { }
           counter answered { }
           chain output {
             type filter hook output priority 0; policy accept;
             udp sport 50000 udp dport 40000 counter name \"leaked\"
             udp sport 50000 counter name \"answered\"
           }
         }",
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let netns_path = format!("/var/run/netns/{}", h.b);
    let intruder = std::thread::spawn(move || {
        // This thread moves into host B's network namespace.
        let f = std::fs::File::open(&netns_path).expect("netns file");
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let s = std::net::UdpSocket::bind("198.18.0.2:40000").expect("bind in B");
        let mut sent = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            // a hello with a wrong token, and plain junk
            let _ = s.send_to(&[0xAA; 36], "198.18.0.1:50000");
            let _ = s.send_to(&[0x01; 1], "198.18.0.1:50000");
            sent += 2;
            std::thread::sleep(Duration::from_micros(500));
        }
        sent
    });
    let port = ns.port();
    let out = netperf_in_b(&h, &format!("-H {A4} -p {port} -t UDP_RR -l 2 -- -e 0.05"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sprayed = intruder.join().unwrap();
    let leaked = h.nft_counter(&h.a, "nptest", "leaked");
    let answered = h.nft_counter(&h.a, "nptest", "answered");
    eprintln!(
        "intruder sent {sprayed} datagrams; netserver answered {answered} to netperf, {leaked} to the intruder"
    );
    assert!(sprayed > 100);
    assert!(answered > 1000, "the real test ran: {out}");
    assert_eq!(leaked, 0, "netserver sent to the intruder");
}
