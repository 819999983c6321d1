//! One netperf invocation: connect, run the test, print it.

use std::{
    fs::File,
    io::{self, Read, Write},
};

use anyhow::{Context as _, Result};

use crate::{
    cli::Plan,
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
    let m = family::run_once(plan, d, &ctx)?;
    let figures = Figures::of(plan, &m);
    out.write_all(classic::table(plan, &m, &figures).as_bytes())?;
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
