//! One netperf invocation: connect, run the test, print it.

use std::{
    fs::File,
    io::{self, Read, Write},
};

use anyhow::{Context as _, Result};

use crate::{
    cli::Plan,
    confidence::{self, Sample},
    control,
    family::{self, Context},
    output::{Endpoints, Figures, classic},
};

/// Most bytes read from a `-F` fill file.
const MAX_FILL: u64 = 16 * 1024 * 1024;

pub fn run(plan: &Plan) -> Result<()> {
    let ctx = Context {
        fill: read_fill(plan)?,
    };
    let mut conn = control::connect(plan)?;
    let d = conn.dialect.as_mut();
    let endpoints = Endpoints::new(plan, d.peer());
    family::preflight(plan, engine::sockopt::family_of(&d.peer()))?;
    let mut out = io::stdout().lock();
    if plan.headers {
        out.write_all(classic::banner(plan, &endpoints).as_bytes())?;
        out.flush()?;
    }
    match &plan.confidence {
        None => {
            let m = family::run_once(plan, d, &ctx)?;
            let figures = Figures::of(plan, &m);
            out.write_all(classic::table(plan, &m, &figures).as_bytes())?;
        }
        Some(c) => {
            let (runs, verdict) = confidence::iterate(
                c,
                |_| {
                    let m = family::run_once(plan, d, &ctx)?;
                    let f = Figures::of(plan, &m);
                    let sample = Sample {
                        result: f.result,
                        local_cpu: f.local_cpu,
                        remote_cpu: f.remote_cpu,
                    };
                    Ok((sample, (m, f)))
                },
                |i, _, (_, f)| {
                    // Iterations go to stderr, so that stdout stays what
                    // scripts parse; -v 2 puts them on stdout too.
                    let line = classic::iteration_line(plan, i, f);
                    if plan.verbosity > 1 {
                        let _ = out.write_all(line.as_bytes());
                        let _ = out.flush();
                    } else {
                        eprint!("{line}");
                    }
                },
            )?;
            let all: Vec<Figures> = runs.iter().map(|(_, (_, f))| f.clone()).collect();
            let mean = Figures::mean(&all);
            let Some((_, (last, _))) = runs.last() else {
                anyhow::bail!("no iteration ran");
            };
            if !verdict.confident {
                out.write_all(classic::confidence_warning(&verdict).as_bytes())?;
            }
            out.write_all(classic::table(plan, last, &mean).as_bytes())?;
            if plan.headers {
                out.write_all(classic::confidence_line(plan, runs.len(), &verdict).as_bytes())?;
            }
        }
    }
    out.flush()?;
    d.bye();
    Ok(())
}

fn read_fill(plan: &Plan) -> Result<Vec<u8>> {
    let Some(path) = &plan.fill_file else {
        return Ok(Vec::new());
    };
    let mut data = Vec::new();
    File::open(path)
        .and_then(|f| f.take(MAX_FILL).read_to_end(&mut data))
        .with_context(|| format!("-F {}", path.display()))?;
    if data.is_empty() {
        anyhow::bail!("-F {}: the file is empty", path.display());
    }
    Ok(data)
}
