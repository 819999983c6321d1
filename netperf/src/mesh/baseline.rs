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
/// when there were several, else every interim rate, else the headline.
pub fn samples(result: &Value) -> Vec<f64> {
    let of = |key: &str, field: &str| -> Vec<f64> {
        result[key]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x[field].as_f64()).collect())
            .unwrap_or_default()
    };
    let iterations = of("iterations", "value");
    if iterations.len() > 1 {
        return iterations;
    }
    let interim = of("interim", "rate");
    if interim.len() > 1 {
        return interim;
    }
    result["result"]["value"].as_f64().into_iter().collect()
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
        let r = json!({"iterations": [{"value": 1.0}, {"value": 2.0}], "interim": [{"rate": 5.0}, {"rate": 6.0}], "result": {"value": 9.0}});
        assert_eq!(samples(&r), [1.0, 2.0]);
        let r = json!({"iterations": [{"value": 1.0}], "interim": [{"rate": 5.0}, {"rate": 6.0}], "result": {"value": 9.0}});
        assert_eq!(samples(&r), [5.0, 6.0]);
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
