//! `--flows N`: many data connections in one test, on event loops at both
//! ends; the aggregate, the per-flow spread and fairness; exact counts.

use harness::{Netserver, bin, fields, footprint, netperf_at, num};

fn json(port: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = netperf_at(port, &a);
    assert!(out.success(), "{out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn flows(side: &serde_json::Value, key: &str) -> Vec<u64> {
    side["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .map(|f| f[key].as_u64().unwrap())
        .collect()
}

/// Eight TCP_STREAM flows: every flow's bytes agree at both ends, and the
/// aggregate is their sum over the common interval.
#[test]
fn eight_stream_flows_add_up_to_the_byte() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &["-t", "TCP_STREAM", "-l", "2", "--", "--flows", "8"],
    );
    let sent = flows(&d["local"], "bytes_sent");
    let got = flows(&d["remote"], "bytes_received");
    assert_eq!(sent.len(), 8);
    assert_eq!(sent, got, "each flow, both ends");
    assert!(sent.iter().all(|&b| b > 0), "{sent:?}");
    let total: u64 = got.iter().sum();
    assert_eq!(d["remote"]["bytes_received"].as_u64().unwrap(), total);
    let secs = d["result"]["elapsed_seconds"].as_f64().unwrap();
    let value = d["result"]["value"].as_f64().unwrap();
    let want = total as f64 * 8.0 / 1e6 / secs;
    assert!((value - want).abs() < want * 1e-9, "{value} vs {want}");
    assert_eq!(d["local"]["flow_count"], 8);
}

/// A hundred TCP_RR flows: every flow makes progress, totals match at both
/// ends; the output has the aggregate row, then the spread and fairness.
#[test]
fn a_hundred_rr_flows_all_make_progress() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(&port, &["-t", "TCP_RR", "-l", "2", "--", "--flows", "100"]);
    let ours = flows(&d["local"], "transactions");
    let theirs = flows(&d["remote"], "transactions");
    assert_eq!(ours.len(), 100);
    assert!(ours.iter().all(|&t| t > 0), "{ours:?}");
    assert_eq!(ours, theirs);
    assert_eq!(
        d["latency_usec"]["count"].as_u64().unwrap(),
        ours.iter().sum::<u64>(),
        "latency merged over every flow's transactions"
    );
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "--", "--flows", "20"]);
    assert!(out.success(), "{out}");
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("20 flows:"))
        .unwrap_or_else(|| panic!("no spread line: {out}"));
    let jain = num(fields(line).last().unwrap());
    assert!(jain > 0.0 && jain <= 1.0, "{line}");
}

/// `-P 0` prints the aggregate row alone; `-v 2` a row per flow.
#[test]
fn terse_and_verbose_output() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_STREAM",
            "-l",
            "1",
            "-P",
            "0",
            "--",
            "--flows",
            "3",
        ],
    );
    assert!(out.success(), "{out}");
    assert_eq!(out.stdout.trim().lines().count(), 1, "{out}");
    assert_eq!(fields(&out.stdout).len(), 5);
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_MAERTS",
            "-l",
            "1",
            "-v",
            "2",
            "--",
            "--flows",
            "3",
        ],
    );
    assert!(out.success(), "{out}");
    let rows: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Flow "))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(fields(r)[0], i.to_string());
        assert!(num(fields(r)[3]) > 0.0, "{r}");
    }
}

/// A count shared out among the flows, exactly.
#[test]
fn a_byte_count_is_shared_out_exactly() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &["-t", "TCP_STREAM", "-l", "-1000003", "--", "--flows", "4"],
    );
    let got = flows(&d["remote"], "bytes_received");
    assert_eq!(got.iter().sum::<u64>(), 1_000_003);
    assert_eq!(got, [250_001, 250_001, 250_001, 250_000]);
}

#[test]
fn bad_flow_options_name_the_option() {
    let ns = Netserver::start(&["--max-flows", "10"]);
    let port = ns.port().to_string();
    for (args, want) in [
        (&["--flows", "0"][..], "--flows"),
        (&["--threads", "0"][..], "--threads"),
        (&["--cpus", "9999"][..], "--cpus"),
        (&["--flows", "11"][..], "--max-flows"),
    ] {
        let mut a = vec!["-t", "TCP_RR", "-l", "1", "--"];
        a.extend_from_slice(args);
        let out = netperf_at(&port, &a);
        assert!(!out.success(), "{args:?}: {out}");
        assert!(out.stderr.contains(want), "{args:?}: {out}");
    }
    // TCP_SENDFILE sends one flow from a file; a window is for the TCP
    // stream and RR tests
    let out = netperf_at(
        &port,
        &["-t", "TCP_SENDFILE", "-l", "1", "--", "--flows", "2"],
    );
    assert!(!out.success() && out.stderr.contains("--flows"), "{out}");
    let out = netperf_at(
        &port,
        &["-t", "UDP_STREAM", "-l", "1", "--", "--warmup", "1"],
    );
    assert!(!out.success() && out.stderr.contains("--warmup"), "{out}");
}

/// Our flow selectors: the count, the spread and Jain's index, beside the
/// aggregate; OMNI spells a many-flow TCP_STREAM too.
#[test]
fn flow_selectors_and_omni() {
    let ns = Netserver::start(&[]);
    let sel = "THROUGHPUT,FLOWS,FLOW_MIN_THROUGHPUT,FLOW_MEDIAN_THROUGHPUT,FLOW_MAX_THROUGHPUT,FLOW_FAIRNESS";
    let row = |args: &[&str]| -> Vec<f64> {
        let out = ns.netperf(args).ok();
        let line = out.stdout.lines().last().unwrap_or("").to_string();
        line.split(',').map(num).collect()
    };
    let v = row(&[
        "-t",
        "TCP_STREAM",
        "-l",
        "1",
        "--",
        "-o",
        sel,
        "--flows",
        "4",
    ]);
    let (total, n, lo, med, hi, jain) = (v[0], v[1], v[2], v[3], v[4], v[5]);
    assert_eq!(n, 4.0);
    assert!(lo > 0.0 && lo <= med && med <= hi, "{v:?}");
    assert!(
        lo * 4.0 <= total * 1.000001 && total <= hi * 4.0 * 1.000001,
        "{v:?}"
    );
    assert!(jain > 0.25 && jain <= 1.0, "{v:?}");
    // one flow: the spread is the result itself
    let v = row(&["-t", "TCP_RR", "-l", "1", "--", "-o", sel]);
    assert_eq!((v[1], v[5]), (1.0, 1.0), "{v:?}");
    assert!(v[2] == v[0] && v[4] == v[0], "{v:?}");
    // OMNI -d send is TCP_STREAM, with its flows
    let v = row(&[
        "-t", "OMNI", "-l", "1", "--", "-d", "send", "-o", sel, "--flows", "3",
    ]);
    assert_eq!(v[1], 3.0, "{v:?}");
    assert!(v[2] > 0.0, "{v:?}");
}

/// `--warmup` and `--cooldown`: the traffic runs for all three, the
/// figures cover only the measured interval (`-l`), and the ends still
/// agree on the whole run to the byte (else the test fails).
#[test]
fn warmup_and_cooldown_stay_out_of_the_figures() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let started = std::time::Instant::now();
    let d = json(
        &port,
        &[
            "-t",
            "TCP_STREAM",
            "-l",
            "1",
            "--",
            "--flows",
            "2",
            "--warmup",
            "1",
            "--cooldown",
            "0.5",
        ],
    );
    let wall = started.elapsed().as_secs_f64();
    assert!(wall >= 2.5, "the traffic ran {wall} s");
    let secs = d["result"]["elapsed_seconds"].as_f64().unwrap();
    assert!((0.9..1.2).contains(&secs), "measured {secs} s");
    assert_eq!(d["options"]["warmup_seconds"], 1.0);
    assert_eq!(d["options"]["cooldown_seconds"], 0.5);
    let got: u64 = flows(&d["remote"], "bytes_received").iter().sum();
    let value = d["result"]["value"].as_f64().unwrap();
    let want = got as f64 * 8.0 / 1e6 / secs;
    assert!((value - want).abs() < want * 1e-9, "{value} vs {want}");
    // one flow, TCP_RR: a window without --flows
    let d = json(&port, &["-t", "TCP_RR", "-l", "1", "--", "--warmup", "0.5"]);
    assert!(d["local"]["transactions"].as_u64().unwrap() > 0);
    // a count has no interval to measure
    let out = netperf_at(&port, &["-l", "-1000000", "--", "--warmup", "1"]);
    assert!(!out.success() && out.stderr.contains("--warmup"), "{out}");
}

/// UDP_STREAM `--flows`: a count in whole datagrams shared out exactly;
/// each flow received on a socket of its own, counted at both ends.
#[test]
fn udp_stream_flows_share_a_count_exactly() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "-100000",
            "--",
            "-m",
            "1000",
            "--flows",
            "3",
        ],
    );
    assert_eq!(flows(&d["local"], "send_calls"), [34, 33, 33]);
    let got = flows(&d["remote"], "recv_calls");
    assert_eq!(got.len(), 3);
    // loopback at this pace loses nothing
    assert_eq!(got, [34, 33, 33], "{d}");
    assert_eq!(d["remote"]["udp"]["received"], 100);
    let out = netperf_at(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "1",
            "-v",
            "2",
            "--",
            "-m",
            "1024",
            "--flows",
            "2",
        ],
    );
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains("2 flows: per flow min"), "{out}");
}

/// UDP_RR `--flows`: a count of transactions shared out exactly, each flow
/// answered on a socket of its own, latency over every transaction.
#[test]
fn udp_rr_flows_share_a_count_exactly() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &["-t", "UDP_RR", "-l", "-1001", "--", "--flows", "4"],
    );
    let ours = flows(&d["local"], "transactions");
    assert_eq!(ours, [251, 250, 250, 250]);
    assert_eq!(
        flows(&d["remote"], "transactions"),
        ours,
        "loopback loses none"
    );
    assert_eq!(d["latency_usec"]["count"], 1001);
}

/// Five hundred UDP flows, each on a port of its own, each counted at
/// both ends. (Their sockets once took ephemeral ports with SO_REUSEADDR,
/// which lets the kernel hand out a port that another such socket holds:
/// a flow sharing a port with another, or with some other program's
/// socket, had its hello taken by a socket that was not its netserver's,
/// and 400 flows failed on a machine that had run the suite.)
#[test]
fn five_hundred_udp_flows_each_have_a_port() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &["-t", "UDP_RR", "-l", "-5000", "--", "--flows", "500"],
    );
    let ours = flows(&d["local"], "transactions");
    assert_eq!(ours, vec![10; 500]);
    assert_eq!(flows(&d["remote"], "transactions"), ours);
}

/// TCP_CRR `--flows`: each flow opens its connections from its own share
/// of the port range; the netserver counts every flow's transactions by
/// the flow its connections name, and both ends agree flow by flow.
#[test]
fn crr_flows_count_every_flows_connections() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let d = json(
        &port,
        &["-t", "TCP_CRR", "-l", "-402", "--", "--flows", "4"],
    );
    let ours = flows(&d["local"], "transactions");
    assert_eq!(ours, [101, 101, 100, 100]);
    assert_eq!(flows(&d["remote"], "transactions"), ours);
    assert_eq!(d["latency_usec"]["count"], 402);
    let out = netperf_at(&port, &["-t", "TCP_CRR", "-l", "1", "--", "--flows", "2"]);
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains("2 flows: per flow min"), "{out}");
}

/// `-D` with `--flows`: the interim figure is the aggregate (netperf's own
/// lines, for flent and the like), and `--json` keeps each flow's rate in
/// every sample; TCP_CRR's interim figures count its transactions.
#[test]
fn interim_results_carry_the_aggregate_and_every_flow() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for test in ["TCP_RR", "UDP_RR", "TCP_CRR", "TCP_STREAM"] {
        let d = json(
            &port,
            &["-t", test, "-l", "2", "-D", "0.5", "--", "--flows", "3"],
        );
        let samples = d["interim"].as_array().expect("interim");
        assert!(samples.len() >= 3, "{test}: {d}");
        for s in samples.iter().take(3) {
            let rate = s["rate"].as_f64().unwrap();
            let flows: Vec<f64> = s["flows"]
                .as_array()
                .unwrap_or_else(|| panic!("{test}: no flows in {s}"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(flows.len(), 3, "{test}: {s}");
            assert!(rate > 0.0, "{test}: {s}");
            let sum: f64 = flows.iter().sum();
            assert!((sum - rate).abs() <= rate * 1e-9, "{test}: {sum} vs {rate}");
        }
    }
    // one flow, TCP_CRR: the interim figures are its transactions
    let d = json(&port, &["-t", "TCP_CRR", "-l", "1", "-D", "0.25"]);
    let first = d["interim"][0]["rate"].as_f64().unwrap_or(0.0);
    assert!(first > 0.0, "{d}");
    assert!(d["interim"][0].get("flows").is_none(), "{d}");
}

/// A thousand flows of UDP_RR, UDP_STREAM and TCP_CRR: every flow counted
/// at both ends, flow by flow, and each end runs them on a few event-loop
/// threads (as many as CPUs), not a thread a flow: the most threads either
/// process had during the run is far below the flows' number.
#[test]
fn a_thousand_flows_of_every_test_on_event_loops() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    for (test, extra) in [
        ("UDP_RR", &[][..]),
        ("UDP_STREAM", &["-m", "1024"][..]),
        // (ports of their own: other tests sweep the default range, and
        // may leave it in TIME_WAIT where they close first)
        ("TCP_CRR", &["-p", "61000,65535"][..]),
    ] {
        let out_path =
            std::env::temp_dir().join(format!("flows-{}-{test}.json", std::process::id()));
        let mut cmd = std::process::Command::new(bin("netperf"));
        cmd.args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "--json",
            "-t",
            test,
            "-l",
            "2",
            "--",
        ])
        .args(extra)
        .args(["--flows", "1000"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(out_path.with_extension("err")).unwrap());
        let mut child = cmd.spawn().unwrap();
        let (mut ours, mut theirs) = (0, 0);
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "{test} hangs"
            );
            ours = ours.max(footprint(child.id()).threads);
            theirs = theirs.max(footprint(ns.pid()).threads);
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let text = std::fs::read_to_string(&out_path).unwrap();
        let err = std::fs::read_to_string(out_path.with_extension("err")).unwrap();
        let _ = std::fs::remove_file(&out_path);
        let _ = std::fs::remove_file(out_path.with_extension("err"));
        assert!(status.success(), "{test}: {status:?}\n{text}\n{err}");
        let d: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (local, remote) = match test {
            "UDP_STREAM" => (
                flows(&d["local"], "bytes_sent"),
                flows(&d["remote"], "bytes_received"),
            ),
            _ => (
                flows(&d["local"], "transactions"),
                flows(&d["remote"], "transactions"),
            ),
        };
        assert_eq!((local.len(), remote.len()), (1000, 1000), "{test}");
        for (i, (a, b)) in local.iter().zip(&remote).enumerate() {
            assert!(*a > 0 && *b > 0, "{test} flow {i}: {a} and {b}");
            match test {
                // the netserver answered every request we saw answered
                "UDP_RR" => assert!(b >= a, "{test} flow {i}: {a} > {b}"),
                // what arrived, of what went
                "UDP_STREAM" => assert!(b <= a, "{test} flow {i}: {b} > {a}"),
                _ => assert_eq!(a, b, "{test} flow {i}"),
            }
        }
        assert!(
            ours <= cpus + 8 && theirs <= cpus + 8,
            "{test}: netperf had up to {ours} threads, netserver {theirs}, for 1000 flows on {cpus} CPUs"
        );
    }
}
