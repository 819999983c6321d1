//! `--json` documents read back for `netperf compare`: each figure's
//! samples (every iteration's headline; a document's latency percentiles)
//! and what each run's environment was.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use serde_json::Value;

/// The figures compared, each in its own direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// Throughput, or transactions a second: more is faster.
    Headline,
    /// Round-trip latency percentiles: more is slower.
    P50,
    P99,
}

impl Figure {
    pub const ALL: [Figure; 3] = [Figure::Headline, Figure::P50, Figure::P99];

    pub fn name(self) -> &'static str {
        match self {
            Figure::Headline => "throughput",
            Figure::P50 => "latency_p50",
            Figure::P99 => "latency_p99",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self == Figure::Headline
    }
}

/// One side of a comparison: a test's samples from one or more documents.
#[derive(Debug, Default, Clone)]
pub struct Run {
    pub test: String,
    pub units: String,
    /// Every iteration's headline (or each document's, without -i).
    pub headline: Vec<f64>,
    /// Each document's latency percentiles (request/response tests).
    pub p50: Vec<f64>,
    pub p99: Vec<f64>,
    /// The first document's environment, as (name, value) pairs.
    pub environment: Vec<(String, String)>,
}

impl Run {
    /// A figure's samples, where the run has it.
    pub fn samples(&self, f: Figure) -> Option<Vec<f64>> {
        let s = match f {
            Figure::Headline => &self.headline,
            Figure::P50 => &self.p50,
            Figure::P99 => &self.p99,
        };
        (!s.is_empty()).then(|| s.clone())
    }

    /// Add a document's samples; its test and units must be the run's.
    pub fn add(&mut self, doc: &Value, whence: &str) -> Result<()> {
        if doc.get("schema").and_then(Value::as_str) != Some(client::output::json::SCHEMA) {
            bail!(
                "{whence}: not a netperf --json document (no \"schema\": \"{}\")",
                client::output::json::SCHEMA
            );
        }
        let test = doc["test"].as_str().unwrap_or_default().to_string();
        let units = doc["result"]["units"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if self.test.is_empty() {
            self.test = test;
            self.units = units;
            self.environment = environment(&doc["environment"]);
        } else if self.test != test || self.units != units {
            bail!(
                "{whence}: a {test} document in {units} among {} documents in {}: one test a file",
                self.test,
                self.units
            );
        }
        let iterations: Vec<f64> = doc["iterations"]
            .as_array()
            .map(|its| its.iter().filter_map(|i| i["value"].as_f64()).collect())
            .unwrap_or_default();
        if iterations.is_empty() {
            let v = doc["result"]["value"]
                .as_f64()
                .ok_or_else(|| anyhow!("{whence}: the document has no result value"))?;
            self.headline.push(v);
        } else {
            self.headline.extend(iterations);
        }
        if let Some(l) = doc["latency_usec"].as_object() {
            if let Some(p) = l.get("p50").and_then(Value::as_f64) {
                self.p50.push(p);
            }
            if let Some(p) = l.get("p99").and_then(Value::as_f64) {
                self.p99.push(p);
            }
        }
        Ok(())
    }
}

/// A file of one `--json` document, or of several (one a line).
pub fn load(path: &Path) -> Result<Run> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let name = path.display().to_string();
    let mut run = Run::default();
    if let Ok(doc) = serde_json::from_str::<Value>(&text) {
        run.add(&doc, &name)?;
        return Ok(run);
    }
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let doc: Value = serde_json::from_str(l).map_err(|e| {
            anyhow!(
                "{name}: line {}: not a netperf --json document ({e})",
                i + 1
            )
        })?;
        // --json-stream's lines are events: its last carries the document,
        // the others (start, interim, iteration) are skipped
        let doc = match (doc.get("event"), doc.get("document")) {
            (Some(_), Some(d)) => d.clone(),
            (Some(_), None) => continue,
            (None, _) => doc,
        };
        run.add(&doc, &format!("{name}: line {}", i + 1))?;
    }
    if run.test.is_empty() {
        bail!("{name}: no netperf --json document in it");
    }
    Ok(run)
}

/// An environment's facts as (name, value) pairs, both ends' (the
/// netserver's host facts as `remote.host.kernel` and the like).
fn environment(env: &Value) -> Vec<(String, String)> {
    fn flatten(prefix: &str, v: &Value, depth: usize, out: &mut Vec<(String, String)>) {
        let text = match v {
            Value::Null => return,
            Value::Object(o) if depth < 3 => {
                for (k, v) in o {
                    flatten(&format!("{prefix}.{k}"), v, depth + 1, out);
                }
                return;
            }
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push((prefix.to_string(), text));
    }
    let mut out = Vec::new();
    for end in ["local", "remote"] {
        if env[end].is_object() {
            flatten(end, &env[end], 0, &mut out);
        }
    }
    out
}

/// What differs between two runs' environments, a line each
/// (`local.kernel: 6.1.0 -> 6.8.0`).
pub fn environment_differences(base: &Run, new: &Run) -> Vec<String> {
    let find = |r: &Run, k: &str| {
        r.environment
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let mut keys: Vec<&String> = base
        .environment
        .iter()
        .chain(&new.environment)
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (b, n) = (find(base, k), find(new, k));
            (b != n).then(|| {
                format!(
                    "{k}: {} -> {}",
                    b.as_deref().unwrap_or("(not said)"),
                    n.as_deref().unwrap_or("(not said)")
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(test: &str, values: &[f64], kernel: &str) -> Value {
        serde_json::json!({
            "schema": client::output::json::SCHEMA,
            "test": test,
            "result": { "value": values.iter().sum::<f64>() / values.len() as f64, "units": "10^6bits/s" },
            "iterations": values.iter().map(|v| serde_json::json!({ "value": v })).collect::<Vec<_>>(),
            "latency_usec": if test == "TCP_RR" { serde_json::json!({ "p50": 40.0, "p99": 90.0 }) } else { Value::Null },
            "environment": { "local": { "kernel": kernel, "cpus": 2 }, "remote": { "software": "x", "host": { "kernel": format!("{kernel}-srv"), "gso": true } } },
        })
    }

    #[test]
    fn documents_and_files_of_documents_give_their_samples() {
        let dir = std::env::temp_dir().join(format!("np-compare-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let one = dir.join("one.json");
        std::fs::write(&one, doc("TCP_STREAM", &[1.0, 2.0, 3.0], "6.1").to_string()).unwrap();
        let r = load(&one).unwrap();
        assert_eq!(
            (r.test.as_str(), r.headline.clone()),
            ("TCP_STREAM", vec![1.0, 2.0, 3.0])
        );
        // several, a line each (as --json-stream appends them)
        let many = dir.join("many.jsonl");
        // (and as --json-stream writes them: events, the last carrying the
        // document)
        let lines: Vec<String> = (0..4)
            .map(|i| doc("TCP_RR", &[f64::from(i)], "6.8").to_string())
            .chain([
                "{\"event\":\"start\",\"schema\":\"rsnetperf-result/1\"}".to_string(),
                "{\"event\":\"interim\",\"rate\":1.0}".to_string(),
                serde_json::json!({"event": "end", "document": doc("TCP_RR", &[9.0], "6.8")})
                    .to_string(),
            ])
            .collect();
        std::fs::write(&many, lines.join("\n")).unwrap();
        let r2 = load(&many).unwrap();
        assert_eq!((r2.headline.len(), r2.p50.len()), (5, 5));
        // what differs between them
        let d = environment_differences(&r, &r2);
        assert_eq!(
            d,
            vec![
                "local.kernel: 6.1 -> 6.8".to_string(),
                "remote.host.kernel: 6.1-srv -> 6.8-srv".to_string()
            ]
        );
        // mixed tests, and files that are not documents
        let mixed = dir.join("mixed.jsonl");
        std::fs::write(
            &mixed,
            format!(
                "{}\n{}",
                doc("TCP_RR", &[1.0], "x"),
                doc("TCP_STREAM", &[1.0], "x")
            ),
        )
        .unwrap();
        assert!(
            load(&mixed)
                .unwrap_err()
                .to_string()
                .contains("one test a file")
        );
        let junk = dir.join("junk");
        std::fs::write(&junk, "hello\n").unwrap();
        assert!(
            load(&junk)
                .unwrap_err()
                .to_string()
                .contains("not a netperf --json document")
        );
        std::fs::write(&junk, "{\"a\": 1}").unwrap();
        assert!(
            load(&junk)
                .unwrap_err()
                .to_string()
                .contains("not a netperf --json document")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
