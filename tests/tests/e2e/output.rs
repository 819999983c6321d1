//! Output selectors, interim results, CPU utilisation and JSON.

use std::time::Duration;

use harness::{Netserver, fields, netperf, netperf_at, num};

fn keys(stdout: &str) -> Vec<(&str, &str)> {
    stdout.lines().filter_map(|l| l.split_once('=')).collect()
}

/// flent's command line: -P 0 -v 0 -D -0.2 ... -- -k LIST. At least 10
/// interim blocks with increasing endings, then the requested keys.
#[test]
fn flent_style_keyval_with_interim_results() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let out = netperf(&[
            "-P", "0", "-v", "0", "-D", "-0.2", "-4", "-H", "127.0.0.1", "-p", &port, "-t", test, "-l", "3",
            "-f", "m", "--", "-k", "THROUGHPUT,LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL,TRANSPORT_MSS,LOCAL_TRANSPORT_RETRANS,REMOTE_TRANSPORT_RETRANS",
        ])
        .ok();
        let kv = keys(&out.stdout);
        let interim: Vec<f64> = kv
            .iter()
            .filter(|(k, _)| k.starts_with("NETPERF_INTERIM_RESULT["))
            .map(|(_, v)| num(v))
            .collect();
        let endings: Vec<f64> = kv
            .iter()
            .filter(|(k, _)| k.starts_with("NETPERF_ENDING["))
            .map(|(_, v)| num(v))
            .collect();
        assert!(
            interim.len() >= 10,
            "{test}: {} interim results\n{out}",
            interim.len()
        );
        assert_eq!(interim.len(), endings.len());
        // Millisecond stamps: the final, partial interval (netperf's
        // demo_interval_final) can end within the same millisecond as the
        // last full one.
        assert!(
            endings.windows(2).all(|w| w[1] >= w[0]),
            "{test}: endings go backwards\n{out}"
        );
        assert!(
            endings.last() > endings.first(),
            "{test}: endings do not advance\n{out}"
        );
        for (i, (k, v)) in kv
            .iter()
            .filter(|(k, _)| k.starts_with("NETPERF_UNITS["))
            .enumerate()
        {
            assert_eq!(*k, format!("NETPERF_UNITS[{i}]"));
            assert_eq!(*v, "10^6bits/s");
        }
        let get = |name: &str| kv.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        assert!(num(get("THROUGHPUT").expect("THROUGHPUT")) > 0.0, "{out}");
        assert!(
            !get("LOCAL_CONG_CONTROL")
                .expect("LOCAL_CONG_CONTROL")
                .is_empty(),
            "{out}"
        );
        assert!(
            !get("REMOTE_CONG_CONTROL")
                .expect("REMOTE_CONG_CONTROL")
                .is_empty(),
            "{out}"
        );
        assert!(
            num(get("TRANSPORT_MSS").expect("TRANSPORT_MSS")) > 0.0,
            "{out}"
        );
        assert!(
            get("LOCAL_TRANSPORT_RETRANS").is_some() && get("REMOTE_TRANSPORT_RETRANS").is_some()
        );
        assert_eq!(out.stderr, "", "{out}");
    }
}

#[test]
fn interim_results_for_rr_in_human_and_csv_styles() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "-D", "0.25"]).ok();
    let interim: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("Interim result: "))
        .collect();
    assert!(interim.len() >= 3, "{out}");
    assert!(interim[0].contains(" Trans/s over 0.25"), "{out}");
    let out = netperf_at(
        &port,
        &[
            "-t", "TCP_RR", "-l", "1", "-D", "0.25", "-P", "0", "--", "-o",
        ],
    )
    .ok();
    let csv: Vec<Vec<&str>> = out.stdout.lines().map(|l| l.split(',').collect()).collect();
    assert!(csv.len() >= 4, "{out}");
    assert_eq!(csv[0][1], "Trans/s", "{out}");
}

/// -c -C: CPU columns with utilisation between 0 and 100.
#[test]
fn cpu_utilisation_and_service_demand() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-l", "1", "-c", "-C"]).ok();
    assert!(
        out.stdout.contains("Utilization       Service Demand"),
        "{out}"
    );
    let row = out.stdout.lines().last().unwrap();
    let f = fields(row);
    assert_eq!(f.len(), 9, "{out}");
    for cpu in [num(f[5]), num(f[6])] {
        assert!((0.0..=100.0).contains(&cpu) && cpu > 0.0, "{out}");
    }
    assert!(num(f[7]) > 0.0 && num(f[8]) > 0.0, "{out}");
    let out = ns
        .netperf(&["-l", "1", "-t", "TCP_RR", "-C", "-P", "0"])
        .ok();
    let f = fields(out.stdout.lines().next().unwrap());
    assert_eq!(num(f[6]), -1.0, "local CPU not measured: {out}");
    assert!((0.0..=100.0).contains(&num(f[7])), "{out}");
}

/// --json tells the congestion control each side's socket held, read
/// back: a `-K` the kernel refused shows the default it ran, and both ends
/// warn on stderr (ours) and in the log (the netserver's).
#[test]
fn json_tells_the_congestion_control_the_sockets_held() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap_or_default()
        .trim()
        .to_string();
    if default.is_empty() {
        eprintln!("!!! SKIPPED: no /proc/sys/net/ipv4/tcp_congestion_control");
        return;
    }
    let out = netperf_at(
        &port,
        &["-l", "1", "--json", "--", "-K", "nosuchcc,nosuchcc"],
    )
    .ok();
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    assert_eq!(doc["options"]["local"]["cong_control"], default.as_str());
    assert_eq!(doc["options"]["remote"]["cong_control"], default.as_str());
    assert!(out.stderr.contains("-K nosuchcc"), "{}", out.stderr);
    assert!(
        ns.wait_for_log("-K nosuchcc", Duration::from_secs(3)),
        "{}",
        ns.log()
    );
}

/// --json: one document, the same figures as the table.
#[test]
fn json_document() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &["-l", "1", "--json", "-D", "0.2", "-i", "3,3", "-c"],
    )
    .ok();
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    assert_eq!(doc["schema"], "rsnetperf-result/1");
    assert_eq!(doc["test"], "TCP_STREAM");
    let iterations = doc["iterations"].as_array().unwrap();
    assert_eq!(iterations.len(), 3);
    // each iteration's value is the table's formula over its own counters
    for it in iterations {
        let bytes = it["remote"]["bytes_received"].as_f64().unwrap();
        let secs = it["elapsed_seconds"].as_f64().unwrap();
        let value = it["value"].as_f64().unwrap();
        assert!(
            (value - bytes * 8.0 / 1e6 / secs).abs() < 1e-6 * value,
            "{it}"
        );
        assert_eq!(it["local"]["bytes_sent"], it["remote"]["bytes_received"]);
    }
    let mean: f64 = iterations
        .iter()
        .map(|i| i["value"].as_f64().unwrap())
        .sum::<f64>()
        / 3.0;
    assert!((doc["result"]["value"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    assert_eq!(doc["confidence"]["iterations"], 3);
    assert!(doc["interim"].as_array().unwrap().len() >= 6, "{out}");
    let cpu = doc["result"]["local_cpu_util"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&cpu));

    let out = netperf_at(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            // netperf 2.7 counts bytes: 5000 datagrams of 512
            "-2560000",
            "--json",
            "--",
            "-m",
            "512",
        ],
    )
    .ok();
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    let udp = &doc["udp"];
    assert_eq!(udp["sent"], 5000);
    assert_eq!(
        udp["lost"].as_u64().unwrap(),
        5000 - udp["received"].as_u64().unwrap()
    );
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "-1000", "--json"]).ok();
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    assert_eq!(doc["local"]["transactions"], 1000);
    assert_eq!(doc["latency_usec"]["count"], 1000);
}

#[test]
fn csv_defaults_and_listing() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-l", "1", "--", "-o"]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[1],
        "Local Send Socket Size Final,Remote Recv Socket Size Final,Local Send Size,Elapsed Time (sec),Throughput,Throughput Units"
    );
    assert_eq!(lines[2].split(',').count(), 6, "{out}");
    let out = netperf(&["--", "-o", "?"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.starts_with("OUTPUT_NONE,") && out.stdout.trim_end().ends_with(",OUTPUT_END"),
        "{out}"
    );
    let out = netperf(&["--", "-O", "?"]);
    assert!(out.stdout.lines().any(|l| l == "THROUGHPUT"), "{out}");
}

/// A misspelled selector does not fail the run; -v 2 names it.
#[test]
fn unknown_selectors_are_tolerated() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &["-l", "1", "-P", "0", "--", "-k", "THROUGHPUT,THRUPUT"],
    )
    .ok();
    assert!(out.stdout.starts_with("THROUGHPUT="), "{out}");
    assert_eq!(out.stdout.lines().count(), 1, "{out}");
    assert_eq!(out.stderr, "");
    let out = netperf_at(
        &port,
        &[
            "-l",
            "1",
            "-P",
            "0",
            "-v",
            "2",
            "--",
            "-o",
            "THROUGHPUT,THRUPUT,PROTOCOL",
        ],
    )
    .ok();
    assert!(
        out.stderr.contains("unknown output selector 'THRUPUT'"),
        "{out}"
    );
    let v = out.stdout.trim_end();
    assert!(v.ends_with(",, TCP"), "{out}");
}

/// -F fills the send buffers from a file; -Y sets TOS; -B brands; all
/// reach the selectors.
#[test]
fn wrapper_options() {
    let ns = Netserver::start(&[]);
    let fill = std::env::temp_dir().join(format!("fill-{}", std::process::id()));
    std::fs::write(&fill, b"0123456789abcdef").unwrap();
    let out = ns.netperf(&["-l",
        "1",
        "-P",
        "0",
        "-F",
        fill.to_str().unwrap(),
        "-Y",
        "0x10,0x20",
        "-B",
        "run7",
        "-T",
        "0,0",
        "--",
        "-k",
        "LOCAL_FILL_FILE,LOCAL_SOCKET_TOS,REMOTE_SOCKET_TOS,RESULT_BRAND,LOCAL_CPU_BIND,THROUGHPUT",
    ])
    .ok();
    let _ = std::fs::remove_file(&fill);
    assert!(
        out.stdout
            .contains(&format!("LOCAL_FILL_FILE={}", fill.display())),
        "{out}"
    );
    assert!(out.stdout.contains("LOCAL_SOCKET_TOS=0x10\nREMOTE_SOCKET_TOS=0x20\nRESULT_BRAND=\"run7\"\nLOCAL_CPU_BIND=0\n"), "{out}");
}
