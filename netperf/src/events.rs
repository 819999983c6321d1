//! `--json-stream`: one JSON object a line on stdout as the run goes, so a
//! pipeline can read it live. Every line has an `event`: `start` (what is
//! run, against whom), `interim` (each `-D` interval, with each flow's
//! rate), `iteration` (each run's figures), and `end`, whose `document` is
//! the `--json` document of the run. doc/json.md has the fields.

use std::{
    io::Write,
    sync::{
        Mutex,
        atomic::{AtomicU32, Ordering},
    },
};

use serde_json::{Value, json};

use crate::output::Figures;

/// The stream's writer, shared by the run and the interim reporter.
#[derive(Debug, Default)]
pub struct Events {
    /// One line at a time, whoever writes.
    out: Mutex<()>,
    /// The iteration running now (from 1).
    iteration: AtomicU32,
}

impl Events {
    /// Write one event as a line; a closed stdout is left to the run's
    /// own output to report.
    fn line(&self, v: &Value) {
        let Ok(_turn) = self.out.lock() else {
            return;
        };
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut out, v);
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }

    pub fn start(&self, test: &str, command_line: &str, host: &str, server: &str) {
        self.line(&json!({
            "event": "start",
            "schema": crate::output::json::SCHEMA,
            "test": test,
            "command_line": command_line,
            "host": host,
            "server_software": server,
        }));
    }

    /// An iteration begins.
    pub fn begin_iteration(&self, i: u32) {
        self.iteration.store(i, Ordering::Relaxed);
    }

    /// An interim sample (its fields as `--json`'s `interim` has them).
    pub fn interim(&self, sample: Value) {
        let mut v = json!({
            "event": "interim",
            "iteration": self.iteration.load(Ordering::Relaxed),
        });
        if let (Value::Object(o), Value::Object(sample)) = (&mut v, sample) {
            o.extend(sample);
        }
        self.line(&v);
    }

    pub fn iteration(&self, i: u32, f: &Figures, units: &str) {
        self.line(&json!({
            "event": "iteration",
            "iteration": i,
            "elapsed_seconds": f.elapsed,
            "value": f.result,
            "units": units,
            "local_cpu_util": f.local_cpu,
            "remote_cpu_util": f.remote_cpu,
        }));
    }

    /// The last line: the run's `--json` document.
    pub fn end(&self, document: Value) {
        self.line(&json!({ "event": "end", "document": document }));
    }
}
