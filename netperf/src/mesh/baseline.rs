//! `netperf mesh --baseline OLD.json`: each pair judged against the same
//! pair of an earlier mesh by `netperf compare`'s rule, so that a link
//! that got worse since then is named even when its neighbours got worse
//! with it (the outlier rule compares links of one moment only).
//!
//! A pair's samples are its test's iterations (`-i`), or else its interim
//! rates: a netserver samples a third-party test's rate ten times over its
//! length. Seconds of one test are not independent runs, so the mesh asks
//! for a larger change than compare's 2% before it names one
//! ([`DEFAULT_EFFECT`]).

use std::{collections::BTreeMap, path::Path};

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::compare::stats::{self, Verdict};

/// The smallest change a mesh names, unless `--effect` says otherwise.
pub const DEFAULT_EFFECT: f64 = 0.10;

/// An earlier mesh: its test and each pair's samples, by host names.
#[derive(Debug, Default)]
pub struct Baseline {
    pub test: String,
    pub units: String,
    pub pairs: BTreeMap<(String, String), Vec<f64>>,
}

/// A pair's samples from its result document: every iteration's headline
/// when there were several; else its rate each interim interval (the
/// receiver's where the netserver received and reported it, which its
/// socket buffer does not smooth or burst as the sender's; the first
/// interval, the ramp, and a last partial one left out); else the
/// headline alone.
pub fn samples(result: &Value) -> Vec<f64> {
    let iterations: Vec<f64> = result["iterations"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["value"].as_f64()).collect())
        .unwrap_or_default();
    if iterations.len() > 1 {
        return iterations;
    }
    let rates = interim_rates(result);
    if rates.len() >= 3 {
        return rates;
    }
    result["result"]["value"].as_f64().into_iter().collect()
}

/// Whole intervals only: those at least half the median one.
fn whole<T>(rows: Vec<(f64, T)>) -> Vec<T> {
    let mut lengths: Vec<f64> = rows.iter().map(|r| r.0).collect();
    lengths.sort_by(f64::total_cmp);
    let nominal = lengths.get(lengths.len() / 2).copied().unwrap_or(0.0);
    rows.into_iter()
        .filter(|r| r.0 >= nominal / 2.0 && r.0 > 0.0)
        .map(|r| r.1)
        .collect()
}

/// The interim rates, in the headline's units, ramp and tail left out.
fn interim_rates(result: &Value) -> Vec<f64> {
    let ours: Vec<(f64, f64, f64)> = result["interim"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    Some((
                        x["interval"].as_f64()?,
                        x["rate"].as_f64()?,
                        x["bytes"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    // our rate's units a byte a second (the headline's, as -f chose)
    let per_byte = ours
        .iter()
        .find(|(i, _, b)| *b > 0.0 && *i > 0.0)
        .map(|(i, r, b)| r / (b / i))
        .filter(|f| f.is_finite() && *f > 0.0);
    let sends = matches!(result["test"].as_str(), Some("TCP_STREAM" | "UDP_STREAM"));
    if let (true, Some(per_byte)) = (sends, per_byte) {
        // the netserver's received bytes, cumulative, at each report
        let theirs: Vec<(f64, f64)> = result["remote_interim"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| Some((x["elapsed_seconds"].as_f64()?, x["bytes"].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default();
        let mut rows = Vec::new();
        let mut last = (0.0, 0.0);
        for (t, b) in theirs {
            if t > last.0 {
                rows.push((t - last.0, (b - last.1) / (t - last.0) * per_byte));
            }
            last = (t, b);
        }
        let rates: Vec<f64> = whole(rows).into_iter().skip(1).collect();
        if rates.len() >= 3 {
            return rates;
        }
    }
    whole(ours.into_iter().map(|(i, r, _)| (i, r)).collect())
        .into_iter()
        .skip(1)
        .collect()
}

/// Read a mesh's `--json` document (schema rsnetperf-mesh/1).
pub fn load(path: &Path) -> Result<Baseline> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--baseline: cannot read {}", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("--baseline {}: not JSON: {e}", path.display()))?;
    if doc["schema"] != "rsnetperf-mesh/1" {
        bail!(
            "--baseline {}: not a netperf mesh --json document (its schema is not rsnetperf-mesh/1)",
            path.display()
        );
    }
    let mut b = Baseline {
        test: doc["test"].as_str().unwrap_or_default().to_string(),
        ..Baseline::default()
    };
    for p in doc["pairs"].as_array().into_iter().flatten() {
        let (Some(from), Some(to)) = (p["from"].as_str(), p["to"].as_str()) else {
            continue;
        };
        let s = samples(&p["result"]);
        if s.is_empty() {
            continue;
        }
        if b.units.is_empty() {
            b.units = p["units"].as_str().unwrap_or_default().to_string();
        }
        b.pairs.insert((from.to_string(), to.to_string()), s);
    }
    Ok(b)
}

/// One pair judged against its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub from: String,
    pub to: String,
    /// The medians of the baseline's samples and of this mesh's.
    pub base: f64,
    pub now: f64,
    /// now / base - 1.
    pub change: f64,
    pub p: f64,
    /// SAME, SLOWER, FASTER or UNKNOWN, as compare says them.
    pub verdict: &'static str,
}

impl Judged {
    /// Whether the pair is named as changed (outside the noise).
    pub fn changed(&self) -> bool {
        matches!(self.verdict, "SLOWER" | "FASTER")
    }

    pub fn json(&self) -> Value {
        json!({
            "from": self.from,
            "to": self.to,
            "base": self.base,
            "now": self.now,
            "change": self.change,
            "p": self.p,
            "verdict": self.verdict,
        })
    }

    /// The line under the matrix.
    pub fn line(&self, units: &str) -> String {
        format!(
            "changed: {} -> {}: {:.2} -> {:.2} {units} ({:+.1}%, p {:.1e}): {}",
            self.from,
            self.to,
            self.base,
            self.now,
            self.change * 100.0,
            self.p,
            self.verdict
        )
    }
}

/// Every pair of `now` (by host names, with its samples) judged against
/// the baseline, higher being better for `higher_is_better` figures; and
/// what could not be compared, said.
pub fn judge(
    base: &Baseline,
    now: &[((String, String), Vec<f64>)],
    effect: f64,
    higher_is_better: bool,
) -> (Vec<Judged>, Vec<String>) {
    let mut judged = Vec::new();
    let mut notes = Vec::new();
    let mut only_now = Vec::new();
    for ((from, to), s) in now {
        let Some(b) = base.pairs.get(&(from.clone(), to.clone())) else {
            only_now.push(format!("{from} -> {to}"));
            continue;
        };
        let j = stats::judge(b, s, effect);
        let verdict = match j.verdict {
            Verdict::Same => "SAME",
            Verdict::Unknown => "UNKNOWN",
            Verdict::Different if (j.change > 0.0) == higher_is_better => "FASTER",
            Verdict::Different => "SLOWER",
        };
        judged.push(Judged {
            from: from.clone(),
            to: to.clone(),
            base: stats::median(b),
            now: stats::median(s),
            change: j.change,
            p: j.p,
            verdict,
        });
    }
    let only_base: Vec<String> = base
        .pairs
        .keys()
        .filter(|k| !now.iter().any(|(n, _)| n == *k))
        .map(|(f, t)| format!("{f} -> {t}"))
        .collect();
    if !only_now.is_empty() {
        notes.push(format!(
            "not in the baseline (not compared): {}",
            only_now.join(", ")
        ));
    }
    if !only_base.is_empty() {
        notes.push(format!(
            "in the baseline, not measured now: {}",
            only_base.join(", ")
        ));
    }
    let unknown = judged.iter().filter(|j| j.verdict == "UNKNOWN").count();
    if unknown > 0 {
        notes.push(format!(
            "{unknown} pair{} could not be told from the noise (UNKNOWN): longer tests, or -i, give more samples",
            if unknown == 1 { "" } else { "s" }
        ));
    }
    (judged, notes)
}

/// The mesh's exit status against a baseline, as compare's: 1 if a pair is
/// slower, else 2 if one is faster, else 3 if one is unknown or was not
/// measured, else 0.
pub fn status(judged: &[Judged], all_measured: bool) -> u8 {
    let any = |v: &str| judged.iter().any(|j| j.verdict == v);
    if any("SLOWER") {
        1
    } else if any("FASTER") {
        2
    } else if any("UNKNOWN") || !all_measured {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(f: &str, t: &str) -> (String, String) {
        (f.to_string(), t.to_string())
    }

    #[test]
    fn samples_are_iterations_then_interims_then_the_headline() {
        let r = json!({"test": "TCP_RR", "iterations": [{"value": 1.0}, {"value": 2.0}], "result": {"value": 9.0}});
        assert_eq!(samples(&r), [1.0, 2.0]);
        // ours: the ramp and the partial tail left out
        let i = |rate: f64, interval: f64| json!({"rate": rate, "interval": interval, "bytes": rate * interval * 1000.0});
        let r = json!({"test": "TCP_RR", "iterations": [{"value": 1.0}],
            "interim": [i(150.0, 0.2), i(5.0, 0.2), i(6.0, 0.2), i(7.0, 0.2), i(1.0, 0.05)],
            "result": {"value": 9.0}});
        assert_eq!(samples(&r), [5.0, 6.0, 7.0]);
        // a stream's: the netserver's received bytes, in our rate's units
        let rep = |t: f64, b: f64| json!({"elapsed_seconds": t, "bytes": b});
        let r = json!({"test": "TCP_STREAM",
            "interim": [i(150.0, 0.2), i(5.0, 0.2), i(6.0, 0.2), i(7.0, 0.2), i(1.0, 0.05)],
            "remote_interim": [rep(0.2, 2000.0), rep(0.4, 3000.0), rep(0.6, 4100.0), rep(0.8, 5300.0), rep(1.0, 6500.0), rep(1.05, 6510.0)],
            "result": {"value": 9.0}});
        let s = samples(&r);
        assert_eq!(s.len(), 4, "{s:?}");
        assert!(
            (s[0] - 5.0).abs() < 1e-9 && (s[1] - 5.5).abs() < 1e-9,
            "{s:?}"
        );
        let r = json!({"iterations": [], "interim": [], "result": {"value": 9.0}});
        assert_eq!(samples(&r), [9.0]);
    }

    #[test]
    fn a_link_forty_percent_down_is_named_alone() {
        let noise = |m: f64, i: usize| m * (1.0 + 0.01 * ((i * 7 % 5) as f64 - 2.0));
        let mut base = Baseline::default();
        let mut now = Vec::new();
        for (f, t) in [("a", "b"), ("b", "a"), ("a", "c"), ("c", "a")] {
            base.pairs
                .insert(pair(f, t), (0..10).map(|i| noise(100.0, i)).collect());
            let m = if (f, t) == ("a", "c") { 60.0 } else { 100.0 };
            now.push((pair(f, t), (0..10).map(|i| noise(m, i + 1)).collect()));
        }
        now.push((pair("c", "b"), vec![1.0, 2.0, 3.0]));
        let (j, notes) = judge(&base, &now, DEFAULT_EFFECT, true);
        let changed: Vec<&Judged> = j.iter().filter(|j| j.changed()).collect();
        assert_eq!(changed.len(), 1, "{j:?}");
        assert_eq!(
            (changed[0].from.as_str(), changed[0].to.as_str()),
            ("a", "c")
        );
        assert_eq!(changed[0].verdict, "SLOWER");
        assert!(
            (changed[0].change + 0.4).abs() < 0.02,
            "{}",
            changed[0].change
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("not in the baseline") && n.contains("c -> b"))
        );
        assert_eq!(status(&j, true), 1);
        assert!(
            changed[0]
                .line("10^6bits/s")
                .starts_with("changed: a -> c: ")
        );
    }
}
