//! `--json-stream`: one JSON object a line on stdout as the run goes, so a
//! pipeline can read it live. Every line has an `event`: `start` (what is
//! run, against whom), `interim` (each `-D` interval, with each flow's
//! rate), `iteration` (each run's figures), and `end`, whose `document` is
//! the `--json` document of the run. doc/json.md has the fields. The
//! interim and iteration lines are an [`Observer`]'s; the start and the end
//! are its reporter's ([`Stream`]).

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use crate::{
    output::{Out, Reporter, Results, Server, Test, json},
    report::{Figures, Observer, Sample},
};

/// `--json-stream`'s reporter: the start line, and the end's document.
#[derive(Debug)]
pub struct Stream(pub std::sync::Arc<Events>);

impl Reporter for Stream {
    fn begin(&mut self, t: &Test, server: &Server) -> anyhow::Result<()> {
        self.0
            .start(t.label(), &t.command_line, &t.host_name, &server.software);
        Ok(())
    }

    fn finish(&mut self, r: &Results<'_>) -> anyhow::Result<()> {
        // (as printed, then read: the numbers are the document's own)
        self.0.end(serde_json::from_str(&json::render(r)?)?);
        Ok(())
    }
}

/// The stream's writer, shared by the run and the interim sampler.
#[derive(Debug)]
pub struct Events {
    out: Out,
    /// The units of the figures, as the iteration lines name them.
    units: String,
    /// The iteration running now (from 1).
    iteration: AtomicU32,
}

impl Events {
    pub fn new(out: Out, units: String) -> Events {
        Events {
            out,
            units,
            iteration: AtomicU32::new(0),
        }
    }

    /// Write one event as a line; a closed stdout is left to the run's
    /// own output to report.
    fn line(&self, v: &Value) {
        if let Ok(mut line) = serde_json::to_vec(v) {
            line.push(b'\n');
            self.out.quietly(&line);
        }
    }

    pub fn start(&self, test: &str, command_line: &str, host: &str, server: &str) {
        self.line(&json!({
            "event": "start",
            "schema": json::SCHEMA,
            "test": test,
            "command_line": command_line,
            "host": host,
            "server_software": server,
        }));
    }

    /// The last line: the run's `--json` document.
    pub fn end(&self, document: Value) {
        self.line(&json!({ "event": "end", "document": document }));
    }
}

impl Observer for Events {
    fn iteration_begins(&self, i: u32) {
        self.iteration.store(i, Ordering::Relaxed);
    }

    /// An interim sample (its fields as `--json`'s `interim` has them).
    fn sample(&self, s: &Sample) {
        let mut v = json!({
            "event": "interim",
            "iteration": self.iteration.load(Ordering::Relaxed),
        });
        if let (Value::Object(o), Ok(Value::Object(sample))) = (&mut v, serde_json::to_value(s)) {
            o.extend(sample);
        }
        self.line(&v);
    }

    fn iteration_ends(&self, i: u32, f: &Figures) {
        self.line(&json!({
            "event": "iteration",
            "iteration": i,
            "elapsed_seconds": f.elapsed,
            "value": f.result,
            "units": self.units,
            "local_cpu_util": f.local_cpu,
            "remote_cpu_util": f.remote_cpu,
        }));
    }
}
