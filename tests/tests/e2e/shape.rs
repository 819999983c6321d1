//! Piped output has netperf 2.7's shape: for each captured case, our
//! netperf runs the same command line against our netserver and prints the
//! same lines, fields and words, numbers aside, with the same exit status.
//!
//! The fixtures (`tests/fixtures/netperf-2.7/`) are netperf 2.7.1's stdout,
//! captured with its netserver on loopback from a netperf built with
//! `--enable-demo` from its public repository (the default build: OMNI and
//! the migrated tests). netperf 2.7 ran each with `-l 1`; we run a count
//! (`-l -N`) where a time would only make CI slower, since the shape does
//! not depend on the length. Left out: cases where netperf 2.7 fails at
//! random (TCP_SENDFILE's end of test, TCP_CRR over UDP), `-D` (how many
//! interim lines depends on time), and what we do differently on purpose
//! (doc/differences.md: `-V`, `-d 1`, unknown test names, help).

use std::collections::BTreeMap;

use harness::{Netserver, free_port, netperf, shape::first_difference};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/netperf-2.7");

struct Case {
    name: String,
    status: i32,
    args: String,
}

fn cases() -> Vec<Case> {
    let index = std::fs::read_to_string(format!("{FIXTURES}/cases.tsv")).expect("cases.tsv");
    index
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let name = f.next().unwrap().to_string();
            let status = f.next().unwrap().parse().unwrap();
            let args = f.next().unwrap().to_string();
            Case { name, status, args }
        })
        .collect()
}

/// Split a command line as a POSIX shell would (the fixtures quote with
/// single quotes only).
fn split(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Run every case whose name starts with one of `prefixes`; fail with
/// every difference at once.
fn check(prefixes: &[&str]) {
    let all = cases();
    let mine: Vec<&Case> = all
        .iter()
        .filter(|c| prefixes.iter().any(|p| c.name.starts_with(p)))
        .collect();
    assert!(!mine.is_empty(), "no cases for {prefixes:?}");
    let v4 = Netserver::start(&[]);
    let v6 = mine
        .iter()
        .any(|c| c.args.contains("{PORT6}"))
        .then(|| Netserver::start_v6(&[]));
    let mut failures = BTreeMap::new();
    for c in &mine {
        let args = c
            .args
            .replace("{PORT}", &v4.port().to_string())
            .replace("{PORT6}", &v6.as_ref().map_or(0, |s| s.port()).to_string())
            .replace("{FREEPORT}", &free_port().to_string());
        let words = split(&args);
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = netperf(&refs);
        let want = std::fs::read_to_string(format!("{FIXTURES}/{}.out", c.name)).unwrap();
        let status = out.status.code().unwrap_or(-1);
        let problem = if status != c.status {
            Some(format!("exit status {status}, netperf 2.7's {}", c.status))
        } else {
            first_difference(&want, &out.stdout).map(|(line, w, g)| {
                format!("line {line}:\n      netperf 2.7: {w}\n      ours:        {g}")
            })
        };
        if let Some(p) = problem {
            failures.insert(
                c.name.clone(),
                format!(
                    "netperf {args}\n    {p}\n    --- ours ---\n{}{}",
                    out.stdout, out.stderr
                ),
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from netperf 2.7's shape:\n{}",
        failures.len(),
        mine.len(),
        failures
            .iter()
            .map(|(n, f)| format!("  {n}: {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn tcp_stream() {
    check(&["tcp_stream", "lowercase_tcp_stream"]);
}

#[test]
fn tcp_maerts() {
    check(&["tcp_maerts"]);
}

#[test]
fn udp_stream() {
    check(&["udp_stream"]);
}

#[test]
fn tcp_rr() {
    check(&["tcp_rr"]);
}

#[test]
fn udp_rr() {
    check(&["udp_rr"]);
}

#[test]
fn tcp_crr_and_tcp_cc() {
    check(&["tcp_crr", "tcp_cc", "bad_tcp_cc"]);
}

#[test]
fn tcp_sendfile_and_tcp_mss() {
    check(&["tcp_sendfile", "tcp_mss"]);
}

#[test]
fn omni_directions() {
    check(&["omni_d_"]);
}

#[test]
fn omni() {
    check(&[
        "omni_v",
        "omni_c",
        "omni_T",
        "omni_r1",
        "omni_o",
        "omni_O",
        "omni_k",
        "omni_i",
        "omni_default",
        "bad_omni",
        "unknown_d",
        "unknown_T",
    ]);
}

#[test]
fn perfkitbenchmarker_command_lines() {
    check(&["pkb_"]);
}

#[test]
fn one_figure_tests_and_errors() {
    check(&["loc_cpu", "rem_cpu", "uuid", "no_listener", "ipv6"]);
}

#[test]
fn every_case_is_checked() {
    let groups = [
        "tcp_stream",
        "lowercase_tcp_stream",
        "tcp_maerts",
        "udp_stream",
        "tcp_rr",
        "udp_rr",
        "tcp_crr",
        "tcp_cc",
        "bad_tcp_cc",
        "tcp_sendfile",
        "tcp_mss",
        "omni_d_",
        "omni_v",
        "omni_c",
        "omni_T",
        "omni_r1",
        "omni_o",
        "omni_O",
        "omni_k",
        "omni_i",
        "omni_default",
        "bad_omni",
        "unknown_d",
        "unknown_T",
        "pkb_",
        "loc_cpu",
        "rem_cpu",
        "uuid",
        "no_listener",
        "ipv6",
    ];
    for c in cases() {
        assert!(
            groups.iter().any(|g| c.name.starts_with(g)),
            "{} is in no group",
            c.name
        );
    }
}
