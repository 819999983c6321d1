//! `-t RPM`: the responsiveness test's table, selectors and JSON, its RPM
//! recomputed from the probes it reports as the draft computes it, on
//! both address families; its bad options named. One load flow a
//! direction: on loopback a flow takes a CPU, and the tests beside these
//! need theirs (the ramp runs through a bottleneck, in bottleneck.rs).

use harness::{Netserver, keyval, run_with_deadline};
use serde_json::Value;

/// The draft's 95% single-sided trimmed mean.
fn tm(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let keep = ((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len());
    v[..keep].iter().sum::<f64>() / keep as f64
}

fn foreign(probes: &[Value]) -> f64 {
    let col = |k: &str| -> Vec<f64> {
        probes
            .iter()
            .map(|p| p[k].as_f64().unwrap() / 1000.0)
            .collect()
    };
    60_000.0 / ((tm(col("connect_usec")) + tm(col("response_usec"))) / 2.0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn rpm_is_the_drafts_figure_of_the_probes_it_reports() {
    for ns in [Netserver::start(&[]), Netserver::start_v6(&[])] {
        let host = ns.addr().ip().to_string();
        let out = ns
            .netperf(&[
                "-H", &host, "-t", "RPM", "-l", "5", "--json", "--", "-d", "both", "--flows", "1",
            ])
            .ok();
        let doc: Value = serde_json::from_str(&out.stdout).unwrap();
        // the document names the test as -t did, not its probes' TCP_CRR
        assert_eq!(doc["test"], "RPM");
        let r = &doc["rpm"];
        let idle = r["idle_probes"].as_array().unwrap();
        let loaded = r["loaded_probes"].as_array().unwrap();
        // a probe every 50 ms at most: about 40 idle ones in 2 s
        assert!(
            (20..=41).contains(&idle.len()),
            "{} idle probes",
            idle.len()
        );
        assert!(loaded.len() >= 20, "{} loaded probes", loaded.len());
        assert!(close(r["idle_rpm"].as_f64().unwrap(), foreign(idle)), "{r}");
        // the result is of the last 4 seconds' probes and self samples
        let from = r["final_from_seconds"].as_f64().unwrap();
        let last: Vec<Value> = loaded
            .iter()
            .filter(|p| p["at_seconds"].as_f64().unwrap() >= from)
            .cloned()
            .collect();
        assert!(!last.is_empty() && last.len() < loaded.len(), "{from}");
        let f = foreign(&last);
        assert!(close(r["foreign_rpm"].as_f64().unwrap(), f), "{r}");
        let samples = r["self_samples"].as_array().unwrap();
        assert!(!samples.is_empty(), "the load's TCP_INFO was read: {r}");
        // read while the probes ran, in time order
        let times: Vec<f64> = samples
            .iter()
            .map(|s| s["at_seconds"].as_f64().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        let own: Vec<f64> = samples
            .iter()
            .filter(|s| s["at_seconds"].as_f64().unwrap() >= from)
            .map(|s| s["rtt_usec"].as_f64().unwrap() / 1000.0)
            .collect();
        let s = 60_000.0 / tm(own);
        assert!(close(r["self_rpm"].as_f64().unwrap(), s), "{r}");
        let rpm = (f + s) / 2.0;
        assert!(close(r["rpm"].as_f64().unwrap(), rpm), "{r}");
        assert!(
            close(doc["result"]["value"].as_f64().unwrap(), rpm),
            "{doc}"
        );
        assert_eq!(doc["result"]["units"], "RPM");
        assert!(
            ["Low", "Medium", "High"].contains(&r["confidence"].as_str().unwrap()),
            "{r}"
        );
        // the netserver answered every probe (the lifecycle checked it)
        let u = &doc["under_load"];
        assert_eq!(u["load_flows"], 1);
        assert!(u["load_up_mbps"].as_f64().unwrap() > 0.0, "{u}");
        assert!(u["load_down_mbps"].as_f64().unwrap() > 0.0, "{u}");
    }
}

#[test]
fn rpm_piped_table_and_selectors() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-t", "RPM", "-l", "2", "--", "-d", "up", "--flows", "1"])
        .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with("MIGRATED TCP RESPONSIVENESS (RPM) TEST from "),
        "{}",
        out.stdout
    );
    assert!(lines[1].starts_with("Idle     Loaded   Loaded   Self"));
    let row: Vec<&str> = lines[5].split_whitespace().collect();
    assert_eq!(row.len(), 8, "{}", lines[5]);
    // only up: no down load
    assert_eq!(row[5], "-1.00", "{}", lines[5]);
    assert!(row[4].parse::<f64>().unwrap() > 0.0);
    let result = lines
        .iter()
        .find(|l| l.starts_with("Responsiveness: "))
        .unwrap();
    assert!(result.contains(&format!("{} RPM (", row[7])), "{result}");
    // no --under-load lines: the table has the load
    assert!(!out.stdout.contains("Under load ("), "{}", out.stdout);

    let out = ns
        .netperf(&[
            "-t",
            "RPM",
            "-l",
            "2",
            "-P",
            "0",
            "--",
            "-d",
            "down",
            "--flows",
            "1",
            "-k",
            "RPM,IDLE_RPM,FOREIGN_RPM,SELF_RPM,RPM_CONFIDENCE,IDLE_P50_LATENCY,LOADED_P50_LATENCY,LOADED_P99_LATENCY,LOAD_THROUGHPUT",
        ])
        .ok();
    for k in [
        "RPM",
        "IDLE_RPM",
        "FOREIGN_RPM",
        "SELF_RPM",
        "IDLE_P50_LATENCY",
        "LOADED_P50_LATENCY",
        "LOADED_P99_LATENCY",
        "LOAD_THROUGHPUT",
    ] {
        assert!(keyval(&out.stdout, k) > 0.0, "{k}: {}", out.stdout);
    }
    assert!(out.stdout.contains("RPM_CONFIDENCE="), "{}", out.stdout);
}

#[test]
fn rpm_bad_options_are_named() {
    for (args, needle) in [
        (
            &["-t", "RPM", "--", "-d", "sideways"][..],
            "-d: 'sideways' is not a direction of the load",
        ),
        (
            &["-t", "RPM", "--", "--flows", "17"][..],
            "at most 16 flows",
        ),
        (&["-t", "RPM", "-l", "1"][..], "2 s or more"),
        (
            &["-t", "RPM", "--", "--under-load", "2"][..],
            "RPM loads the path itself",
        ),
    ] {
        let mut c = std::process::Command::new(harness::bin("netperf"));
        c.args(["-H", "127.0.0.1", "-p", "1"]).args(args);
        let out = run_with_deadline(c, std::time::Duration::from_secs(20));
        assert!(!out.success(), "{args:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

/// Ctrl-C stops every test RPM runs at once (its probes and each load
/// flow), and the figures so far are printed, as for any test.
#[test]
fn ctrl_c_ends_the_probes_and_the_load() {
    let ns = Netserver::start(&[]);
    let child = std::process::Command::new(harness::bin("netperf"))
        .args(["-H", "127.0.0.1", "-p", &ns.port().to_string()])
        .args(["-t", "RPM", "-l", "30", "--", "-d", "up", "--flows", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // idle 2 s, warm-up 2 s, then a few seconds of probes
    std::thread::sleep(std::time::Duration::from_secs(7));
    let started = std::time::Instant::now();
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Responsiveness: "), "{text}");
    // well before the 30 s it asked for
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}
