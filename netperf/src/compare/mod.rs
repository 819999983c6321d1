//! `netperf compare`: did it change? Two runs (or two setups run here,
//! interleaved) judged SAME, SLOWER, FASTER or UNKNOWN from the noise
//! measured in their samples, figure by figure, with what differs between
//! their environments said first; an exit status for CI.
//!
//! # Layout
//! - [`stats`]: the rule's statistics (Mann-Whitney U and
//!   Kolmogorov-Smirnov as scipy 1.10 computes them, the bootstrap
//!   interval of the change, the SAME threshold, two clusters).
//! - [`docs`]: `--json` documents read back, their figures' samples and
//!   their environments.
//! - [`interleave`]: `--a`/`--b`: both command lines run here in ABBA
//!   blocks until the rule decides or the time is up.
//! - this file: the command line, the verdict lines and the exit status.

pub mod docs;
mod interleave;
pub mod stats;

use std::{io::Write, path::PathBuf, process::ExitCode};

use anyhow::{Result, anyhow, bail};
use serde_json::json;

use docs::{Figure, Run};
use stats::Verdict;

/// How `netperf compare` is used.
pub const USAGE: &str = "Usage: netperf compare [options] BASE.json NEW.json
       netperf compare [options] --a 'NETPERF ARGS' --b 'NETPERF ARGS'

Judges whether NEW differs from BASE, figure by figure (the test's
throughput or transaction rate; for request/response tests also latency
p50 and p99): SAME, SLOWER, FASTER or UNKNOWN (collect more samples), from
the measured noise: two-sided Mann-Whitney U and Kolmogorov-Smirnov (the
smaller p), a bootstrap 95% interval of the change of medians.

BASE and NEW are netperf --json documents (each iteration of -i is a
sample), or files of several (one a line, as --json-stream or a shell loop
appends them). With --a and --b, both command lines run here in turn (ABBA
blocks), a sample each run, until every figure is decided or --max-time.

Options:
  --a ARGS, --b ARGS  two netperf command lines (global options, --, test options)
  --effect PCT        the smallest change worth calling (default 2)
  --max-time SECS     with --a/--b, the longest to keep sampling (default 300)
  --json FILE         the verdicts as JSON
  -h, --help          this text

Exit status: 0 SAME, 1 SLOWER (any figure), 2 FASTER (none slower),
3 UNKNOWN, 4 and up errors.
";

/// What was asked.
#[derive(Debug, Default)]
struct Options {
    files: Vec<PathBuf>,
    a: Option<String>,
    b: Option<String>,
    effect: f64,
    max_time: u64,
    json: Option<PathBuf>,
    help: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        effect: 0.02,
        max_time: 300,
        ..Options::default()
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| anyhow!("{name}: needs a value"))
        };
        match name {
            "-h" | "--help" => o.help = true,
            "--a" => o.a = Some(value()?),
            "--b" => o.b = Some(value()?),
            "--effect" => o.effect = effect(&value()?)?,
            "--max-time" => {
                let v = value()?;
                o.max_time = v
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| anyhow!("--max-time: '{v}' is not a number of seconds"))?;
            }
            "--json" => o.json = Some(PathBuf::from(value()?)),
            _ if name.starts_with('-') && name.len() > 1 => {
                bail!("unknown option {name} (netperf compare -h lists them)")
            }
            _ => o.files.push(PathBuf::from(a)),
        }
    }
    if o.help {
        return Ok(o);
    }
    match (o.files.len(), &o.a, &o.b) {
        (2, None, None) | (0, Some(_), Some(_)) => Ok(o),
        (_, Some(_), None) | (_, None, Some(_)) => bail!("--a and --b go together"),
        (0, None, None) => bail!("nothing to compare: BASE.json NEW.json, or --a ARGS --b ARGS"),
        (n, None, None) => bail!("two documents to compare, BASE and NEW ({n} given)"),
        _ => bail!("either two documents or --a/--b, not both"),
    }
}

/// `--effect PCT` (compare's and the mesh's): a fraction, from a
/// percentage between 0 and 100.
pub fn effect(v: &str) -> Result<f64> {
    let pct: f64 = v
        .trim_end_matches('%')
        .parse()
        .map_err(|_| anyhow!("--effect: '{v}' is not a percentage"))?;
    if !(pct > 0.0 && pct < 100.0) {
        bail!("--effect: {v} is not between 0 and 100 (percent)");
    }
    Ok(pct / 100.0)
}

/// `netperf compare ...`: the exit status.
pub fn main(args: &[String]) -> ExitCode {
    match compare(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("netperf compare: {e:#}");
            ExitCode::from(4)
        }
    }
}

fn compare(args: &[String]) -> Result<u8> {
    let o = parse(args)?;
    if o.help {
        print!("{USAGE}");
        return Ok(0);
    }
    let (base, new) = match (&o.a, &o.b) {
        (Some(a), Some(b)) => interleave::run(a, b, o.effect, o.max_time)?,
        _ => {
            let base = docs::load(&o.files[0])?;
            let new = docs::load(&o.files[1])?;
            (base, new)
        }
    };
    let judged = judge(&base, &new, o.effect)?;
    let mut out = std::io::stdout().lock();
    for line in docs::environment_differences(&base, &new) {
        writeln!(out, "environment: {line}")?;
    }
    for j in &judged {
        writeln!(out, "{}", line(j))?;
        for note in &j.notes {
            writeln!(out, "  {note}")?;
        }
    }
    let overall = overall(&judged);
    writeln!(out, "verdict: {}", overall.0)?;
    if let Some(path) = &o.json {
        let doc = json!({
            "base": o.files.first().map(|p| p.display().to_string()).or(o.a.clone()),
            "new": o.files.get(1).map(|p| p.display().to_string()).or(o.b.clone()),
            "test": base.test,
            "effect": o.effect,
            "environment_differences": docs::environment_differences(&base, &new),
            "figures": judged.iter().map(figure_json).collect::<Vec<_>>(),
            "verdict": overall.0,
        });
        std::fs::write(path, format!("{doc:#}\n"))
            .map_err(|e| anyhow!("--json {}: {e}", path.display()))?;
    }
    Ok(overall.1)
}

/// One figure judged.
#[derive(Debug)]
pub struct Judged {
    pub figure: Figure,
    pub base: Vec<f64>,
    pub new: Vec<f64>,
    pub j: stats::Judgement,
    /// SAME, SLOWER, FASTER or UNKNOWN.
    pub verdict: &'static str,
    pub notes: Vec<String>,
    /// The figure's unit.
    pub units: String,
}

/// Every figure the two runs have in common, judged; a changed test or
/// unit refused, naming it.
pub fn judge(base: &Run, new: &Run, effect: f64) -> Result<Vec<Judged>> {
    if base.test != new.test {
        bail!(
            "BASE is {} and NEW is {}: a changed test is not compared (compare runs of one test)",
            base.test,
            new.test
        );
    }
    if base.units != new.units {
        bail!(
            "BASE is in {} and NEW in {}: a changed unit is not compared (give both the same -f)",
            base.units,
            new.units
        );
    }
    let mut out = Vec::new();
    for figure in Figure::ALL {
        let (Some(b), Some(n)) = (base.samples(figure), new.samples(figure)) else {
            continue;
        };
        let j = stats::judge(&b, &n, effect);
        let mut notes = Vec::new();
        if b.len() < 3 || n.len() < 3 {
            notes.push(format!(
                "{} and {} samples: run more (-i 10, or more documents a file)",
                b.len(),
                n.len()
            ));
        }
        for (side, s) in [("BASE", &b), ("NEW", &n)] {
            if let Some((lo, hi)) = stats::bimodal(s) {
                notes.push(format!(
                    "{side}'s samples fall in two clusters (bimodal), about {} and {}: the median stands between two behaviours",
                    short(lo),
                    short(hi)
                ));
            }
        }
        let verdict = match j.verdict {
            Verdict::Same => "SAME",
            Verdict::Unknown => "UNKNOWN",
            Verdict::Different if (j.change > 0.0) == figure.higher_is_better() => "FASTER",
            Verdict::Different => "SLOWER",
        };
        out.push(Judged {
            units: match figure {
                Figure::Headline => base.units.clone(),
                _ => "us".into(),
            },
            figure,
            base: b,
            new: n,
            j,
            verdict,
            notes,
        });
    }
    if out.is_empty() {
        bail!("BASE and NEW have no figure in common");
    }
    Ok(out)
}

/// The whole comparison's verdict and exit status: SLOWER if any figure
/// is, else FASTER if any is, else UNKNOWN if any is, else SAME.
pub fn overall(judged: &[Judged]) -> (&'static str, u8) {
    let any = |v: &str| judged.iter().any(|j| j.verdict == v);
    if any("SLOWER") {
        ("SLOWER", 1)
    } else if any("FASTER") {
        ("FASTER", 2)
    } else if any("UNKNOWN") {
        ("UNKNOWN", 3)
    } else {
        ("SAME", 0)
    }
}

/// A figure's line: base and new medians, the change and its interval,
/// p, the samples, the verdict.
fn line(j: &Judged) -> String {
    format!(
        "{:<12} base {} new {} {}  change {:+.2}% [{:+.2}%, {:+.2}%]  p {:.2e}  n {}/{}  {}",
        j.figure.name(),
        short(stats::median(&j.base)),
        short(stats::median(&j.new)),
        j.units,
        j.j.change * 100.0,
        j.j.change_low * 100.0,
        j.j.change_high * 100.0,
        j.j.p,
        j.base.len(),
        j.new.len(),
        j.verdict
    )
}

fn figure_json(j: &Judged) -> serde_json::Value {
    let side = |s: &Vec<f64>| json!({ "n": s.len(), "median": stats::median(s), "samples": s });
    json!({
        "name": j.figure.name(),
        "units": j.units,
        "base": side(&j.base),
        "new": side(&j.new),
        "change": j.j.change,
        "change_low": j.j.change_low,
        "change_high": j.j.change_high,
        "p_mwu": j.j.p_mwu,
        "p_ks": j.j.p_ks,
        "p": j.j.p,
        "same_threshold": j.j.same_threshold,
        "verdict": j.verdict,
        "notes": j.notes,
    })
}

/// A figure with about six significant digits.
fn short(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(test: &str, values: &[f64], p50: &[f64]) -> Run {
        Run {
            test: test.into(),
            units: "10^6bits/s".into(),
            headline: values.to_vec(),
            p50: p50.to_vec(),
            p99: p50.iter().map(|v| v * 2.0).collect(),
            environment: Vec::new(),
        }
    }

    #[test]
    fn slower_faster_same_and_unknown_by_direction() {
        let base: Vec<f64> = (0..10).map(|i| 1000.0 + f64::from(i)).collect();
        let slower: Vec<f64> = base.iter().map(|v| v * 0.9).collect();
        let j = judge(
            &run("TCP_STREAM", &base, &[]),
            &run("TCP_STREAM", &slower, &[]),
            0.02,
        )
        .unwrap();
        assert_eq!((j.len(), j[0].verdict), (1, "SLOWER"));
        assert_eq!(overall(&j), ("SLOWER", 1));
        let j = judge(
            &run("TCP_STREAM", &slower, &[]),
            &run("TCP_STREAM", &base, &[]),
            0.02,
        )
        .unwrap();
        assert_eq!(overall(&j), ("FASTER", 2));
        let j = judge(
            &run("TCP_STREAM", &base, &[]),
            &run("TCP_STREAM", &base, &[]),
            0.02,
        )
        .unwrap();
        assert_eq!(overall(&j), ("SAME", 0));
        // two samples: unknown, and said why
        let j = judge(
            &run("TCP_STREAM", &base[..2], &[]),
            &run("TCP_STREAM", &base[..2], &[]),
            0.02,
        )
        .unwrap();
        assert_eq!(overall(&j), ("UNKNOWN", 3));
        assert!(j[0].notes[0].contains("run more"), "{:?}", j[0].notes);
        // latency: more is slower
        let lat: Vec<f64> = (0..10).map(|i| 50.0 + f64::from(i) * 0.1).collect();
        let worse: Vec<f64> = lat.iter().map(|v| v * 1.2).collect();
        let j = judge(
            &run("TCP_RR", &base, &lat),
            &run("TCP_RR", &base, &worse),
            0.02,
        )
        .unwrap();
        let p50 = j.iter().find(|j| j.figure == Figure::P50).unwrap();
        assert_eq!(p50.verdict, "SLOWER");
        // a changed test is refused, naming both
        let e = judge(
            &run("TCP_STREAM", &base, &[]),
            &run("TCP_RR", &base, &[]),
            0.02,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("TCP_STREAM") && e.to_string().contains("TCP_RR"),
            "{e}"
        );
    }

    #[test]
    fn the_command_line_is_checked() {
        let p = |a: &[&str]| parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(p(&["a.json"]).is_err());
        assert!(p(&["--a", "-l 1"]).is_err());
        assert!(p(&["--effect", "0", "a", "b"]).is_err());
        assert!(p(&["--bogus", "a", "b"]).is_err());
        let o = p(&["--effect", "5", "a", "b"]).unwrap();
        assert!((o.effect - 0.05).abs() < 1e-12);
        let o = p(&["--a", "-l 1", "--b=-l 2", "--max-time", "60"]).unwrap();
        assert_eq!(
            (o.a.as_deref(), o.b.as_deref(), o.max_time),
            (Some("-l 1"), Some("-l 2"), 60)
        );
    }
}
