//! Confidence intervals: -I level,width and -i max,min.

use harness::{Netserver, fields, netperf, netperf_at, num};

/// The iteration lines' results.
fn iterations(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with("Iteration "))
        .map(|l| num(fields(l)[2]))
        .collect()
}

/// The mean result in the table: TCP_RR's rate, the throughput of a TCP
/// stream test, or UDP_STREAM's second row (what arrived).
fn table_result(stdout: &str, test: &str) -> f64 {
    let mut rows = stdout
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()));
    let row = if test == "UDP_STREAM" {
        rows.nth(1)
    } else {
        rows.next()
    }
    .expect("a data row");
    let f = fields(row);
    match test {
        "TCP_RR" => num(f[5]),
        _ => num(f[f.len() - 1]),
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn runs_between_min_and_max_and_prints_the_mean_of_the_iterations() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (test, extra) in [
        ("TCP_STREAM", None),
        ("UDP_STREAM", Some("1024")),
        ("TCP_RR", None),
    ] {
        let mut args = vec![
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            test,
            "-I",
            "99,10",
            "-i",
            "10,3",
            "-l",
            "1",
            // our iteration and confidence lines
            "-v",
            "3",
        ];
        if let Some(m) = extra {
            args.extend(["--", "-m", m]);
        }
        let out = netperf(&args).ok();
        let its = iterations(&out.stdout);
        assert!(
            (3..=10).contains(&its.len()),
            "{test}: {} iterations\n{out}",
            its.len()
        );
        assert!(out.stdout.starts_with("MIGRATED"), "{out}");
        assert!(
            out.stdout
                .lines()
                .next()
                .unwrap()
                .contains(": +/-5.000% @ 99% conf. "),
            "{out}"
        );
        // The printed iterations are rounded to 0.01: their mean is the
        // table's mean to within that rounding.
        let shown = table_result(&out.stdout, test);
        assert!(
            (mean(&its) - shown).abs() <= 0.01,
            "{test}: mean {} vs {shown}\n{out}",
            mean(&its)
        );
        let conf = out
            .stdout
            .lines()
            .find(|l| l.starts_with("Confidence: "))
            .expect("confidence line");
        assert!(
            conf.starts_with(&format!("Confidence: {} iterations, mean ", its.len())),
            "{conf}"
        );
        assert!(conf.contains("at 99% confidence"), "{conf}");
    }
}

#[test]
fn exact_iteration_count() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-i", "5,5", "-l", "1", "-t", "TCP_RR", "-v", "3"])
        .ok();
    assert_eq!(iterations(&out.stdout).len(), 5, "{out}");
}

#[test]
fn unreachable_width_warns_as_netperf_and_exits_zero() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &[
            "-I",
            "99,0.0001",
            "-i",
            "3,3",
            "-l",
            "1",
            "-t",
            "TCP_RR",
            "-v",
            "3",
        ],
    );
    assert!(out.success(), "{out}");
    // (our iteration lines, at -v 3, come as the iterations finish)
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with("Iteration "))
        .collect();
    assert_eq!(lines[1], "!!! WARNING", "{out}");
    assert_eq!(
        lines[2],
        "!!! Desired confidence was not achieved within the specified iterations."
    );
    assert!(
        lines[5].starts_with("!!! Confidence intervals: Throughput      : "),
        "{out}"
    );
    assert!(
        out.stdout.contains("not within the requested width"),
        "{out}"
    );
}

/// netperf 2.7 prints nothing per iteration: piped, at -v 2, neither do
/// we; at -v 3 our lines come.
#[test]
fn iterations_show_at_verbosity_three_only() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-i", "3,3", "-l", "1", "-v", "2", "-t", "TCP_RR"])
        .ok();
    assert_eq!(iterations(&out.stdout).len(), 0, "{out}");
    assert!(!out.stdout.contains("Confidence: "), "{out}");
    assert_eq!(out.stderr, "", "{out}");
    let out = ns
        .netperf(&["-i", "3,3", "-l", "1", "-v", "3", "-t", "TCP_RR"])
        .ok();
    assert_eq!(iterations(&out.stdout).len(), 3, "{out}");
    assert!(out.stdout.contains("Confidence: 3 iterations"), "{out}");
}

#[test]
fn headerless_output_is_the_row_alone() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-i", "3,3", "-I", "99,90", "-l", "1", "-P", "0"])
        .ok();
    // netperf's warning block, if the machine was too noisy, then the row.
    let rest: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with("!!!") && !l.is_empty())
        .collect();
    assert_eq!(rest.len(), 1, "{out}");
    assert_eq!(fields(rest[0]).len(), 5, "{out}");
}

#[test]
fn bad_input_is_refused() {
    for (args, needle) in [
        (vec!["-I", "100,10"], "between 50 and 99.9"),
        // netperf 2.7 exits on a level it cannot read
        (vec!["-I", "x"], "-I: 'x' is not a number"),
    ] {
        let out = netperf(&args);
        assert!(!out.success(), "{args:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {out}");
    }
}
