//! netperf 2.7's own known bugs, each left behind, each with a test here or
//! beside the code it concerns:
//! - a day-long run printing "-nan" for the standard deviation and a
//!   negative mean latency (HewlettPackard/netperf#83), and a histogram
//!   whose counts overflow on long runs (a bug neper had, its PR #98):
//!   engine's latency::tests::a_day_of_transactions_and_more (3.4 x 10^10
//!   transactions);
//! - a 0 us latency bucket taken as missing in percentiles (#50): engine's
//!   latency::tests::sub_microsecond_latencies_are_percentiles_too, and
//!   below, end to end;
//! - UDP_RR waiting forever after the first lost datagram: accuracy.rs's
//!   udp_rr_with_loss_finishes_and_counts_it;
//! - netserver removing /dev/null (or an empty log file) when run as root
//!   (#80), and `-D` intervals over 4 seconds (#77): below.

use std::{os::unix::fs::FileTypeExt, time::Duration};

use harness::{Netserver, fields, netperf_at, num};

/// netserver 2.7, run as root without debugging, "unlinks its empty debug
/// file" at exit, and its debug file is then /dev/null. Ours removes no
/// file: /dev/null and an empty log file are still there after it stops,
/// with -N, -d, or --log-file.
#[test]
fn netserver_removes_no_file() {
    let before = std::fs::metadata("/dev/null").unwrap();
    assert!(before.file_type().is_char_device());
    let dir = std::env::temp_dir().join(format!("np-bug80-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("empty.log");
    std::fs::write(&log, "").unwrap();
    let log_arg = log.to_str().unwrap().to_string();
    for extra in [
        vec!["-N"],
        vec!["-d"],
        vec!["-v", "0", "--log-file", log_arg.as_str()],
    ] {
        let mut ns = Netserver::start(&extra);
        netperf_at(&ns.port().to_string(), &["-l", "1", "-P", "0"]).ok();
        assert!(
            ns.signal_and_wait("TERM", Duration::from_secs(10))
                .is_some()
        );
    }
    let after = std::fs::metadata("/dev/null").unwrap();
    assert!(after.file_type().is_char_device(), "/dev/null is gone");
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.rdev(), after.rdev());
    }
    assert!(log.exists(), "the log file is gone");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-D 5`: an interim result every 5 seconds (netperf 2.7's #77: intervals
/// above 4 seconds did not work), each over its interval.
#[test]
fn interim_results_every_five_seconds() {
    let ns = Netserver::start(&[]);
    let out = netperf_at(&ns.port().to_string(), &["-D", "5", "-l", "11"]).ok();
    let interims: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("Interim result:"))
        .collect();
    // two whole intervals, then what was left of the test (as 2.7.1 prints)
    assert_eq!(interims.len(), 3, "{out}");
    let ends: Vec<f64> = interims.iter().map(|l| num(fields(l)[9])).collect();
    for (i, l) in interims.iter().take(2).enumerate() {
        let f = fields(l);
        // "Interim result: R units/s over S seconds ending at T"
        assert!(num(f[2]) > 0.0, "{l}");
        assert!((4.5..5.5).contains(&num(f[5])), "{l}");
        if i == 1 {
            assert!((ends[1] - ends[0] - 5.0).abs() < 0.5, "{out}");
        }
    }
    assert!(num(fields(interims[2])[5]) < 1.5, "{out}");
}

/// Transactions under a microsecond are reported as 0 us in the
/// percentiles, never as missing: a TCP_RR's P50_LATENCY is a number.
#[test]
fn latency_percentiles_are_numbers() {
    let ns = Netserver::start(&[]);
    let out = netperf_at(
        &ns.port().to_string(),
        &[
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "-P",
            "0",
            "--",
            "-o",
            "MIN_LATENCY,P50_LATENCY,P99_LATENCY",
        ],
    )
    .ok();
    let v: Vec<f64> = out.stdout.trim().split(',').map(num).collect();
    assert_eq!(v.len(), 3, "{out}");
    assert!(
        v.iter().all(|x| *x >= 0.0) && v[0] <= v[1] && v[1] <= v[2],
        "{out}"
    );
}
