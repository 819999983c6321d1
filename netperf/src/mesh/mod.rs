//! `netperf mesh`: a test between every ordered pair of a lab's
//! netservers (started with `--fleet`), run by the netservers themselves
//! in rounds in which no host is in two tests at once; a matrix on the
//! terminal, CSV, JSON and an SVG heatmap, and the hosts or links that
//! stand out by a robust rule ([`outliers`]).
//!
//! - [`options`]: the command line; [`schedule`]: which pairs run
//!   together (a round-robin tournament, incast, fan-out, a given list);
//! - [`run`]: the rounds, each pair a third-party test of its sending
//!   netserver, hosts that come back tried again; [`outliers`]: the rule;
//!   [`render`]: matrix, CSV, SVG;
//! - [`baseline`]: each pair against an earlier mesh by compare's rule
//!   (`--baseline`); [`push`]: the figures to a Prometheus Pushgateway.
//!
//! The controller holds one round's tests at a time and writes each
//! result to its files as it comes: connections and memory grow with a
//! round's ⌊N/2⌋ tests, not with the mesh (the matrix of figures aside).

pub mod baseline;
pub mod options;
pub mod outliers;
pub mod push;
pub mod render;
pub mod run;
pub mod schedule;

use std::{
    fs::File,
    io::{BufWriter, Write},
};

use anyhow::{Context as _, Result, anyhow, bail};
use engine::timer::StopFlag;
use serde_json::{Value, json};

use options::{Asked, MeshOptions, Pattern};
use outliers::Finding;
use schedule::{Directions, Round};

/// `netperf mesh ARGS`: the exit status: without `--baseline`, 0 when
/// every pair was measured, else 1; with it, compare's
/// ([`baseline::status`]).
pub fn main(args: &[String]) -> Result<u8> {
    let o = match options::parse(args)? {
        Asked::Help => {
            print!("{}", options::USAGE);
            return Ok(0);
        }
        Asked::Run(o) => *o,
    };
    let (o, rounds) = plan(o)?;
    // a test a netserver cannot be asked (an option a third-party test
    // does not take) fails here, named, before any netserver is asked
    run::request(&o)?;
    // a key file that cannot be read fails here, not at every pair
    if let Some(k) = &o.key_file {
        engine::auth::Key::from_file(k).map_err(|e| anyhow!("{e}"))?;
    }
    // and so does a baseline that cannot be read
    let base = o.baseline.as_deref().map(baseline::load).transpose()?;
    if let Some(b) = &base
        && !b.test.eq_ignore_ascii_case(&o.test)
    {
        bail!(
            "--baseline: it is a mesh of {} and this one of {}: a changed test is not compared",
            b.test,
            o.test
        );
    }
    let tests: usize = rounds.iter().map(|r| r.tests.len()).sum();
    let widest = rounds.iter().map(|r| r.tests.len()).max().unwrap_or(0);
    eprintln!(
        "netperf mesh: {} hosts, {tests} tests of {} s ({}) in {} rounds of at most {widest}: about {} s",
        o.hosts.len(),
        o.length,
        o.test,
        rounds.len(),
        rounds.len() as u64 * u64::from(o.length)
    );
    let stop = StopFlag::new();
    client::interrupt::install();
    let _guard = client::interrupt::stop_on_interrupt(&stop);
    let mut files = Files::open(&o, rounds.len())?;
    let n = o.hosts.len();
    let mut cells = Vec::with_capacity(tests);
    let mut samples: Vec<((String, String), Vec<f64>)> = Vec::new();
    let began = std::time::Instant::now();
    let ended = run::run(&o, &rounds, &stop, &mut |out| {
        if let Some(r) = &out.result {
            let names = (
                o.hosts[out.pair.from].name.clone(),
                o.hosts[out.pair.to].name.clone(),
            );
            samples.push((names, baseline::samples(r)));
        }
        cells.push(render::Cell {
            from: out.pair.from,
            to: out.pair.to,
            value: out.throughput,
            error: out.error.clone(),
        });
        if let Some(e) = &out.error {
            eprintln!(
                "netperf mesh: {} -> {}: {e}",
                o.hosts[out.pair.from].name, o.hosts[out.pair.to].name
            );
        }
        files.pair(&o, out)
    })?;
    let (values, failed) = render::matrices(n, &cells);
    let findings = outliers::find(&values, &outliers::Rule::default());
    let names: Vec<String> = o.hosts.iter().map(|h| h.name.clone()).collect();
    let unit = unit_of(&o.test);
    print!(
        "{}",
        render::matrix_text(&names, &values, &failed, unit, &findings)
    );
    for &h in &ended.down {
        println!("host {} did not answer: its tests were skipped", names[h]);
    }
    if ended.interrupted {
        println!("interrupted: the mesh ended before its last round");
    }
    let all = cells.len() == tests && cells.iter().all(|c| c.error.is_none());
    let judged = base.as_ref().map(|b| against(b, &samples, o.effect, unit));
    files.finish(&o, &names, &values, &findings, &ended, judged.as_ref())?;
    if let Some(url) = &o.push {
        let f = push::Figures {
            test: o.test.clone(),
            units: unit.to_string(),
            pairs: cells
                .iter()
                .map(|c| (names[c.from].clone(), names[c.to].clone(), c.value))
                .collect(),
            duration: began.elapsed().as_secs_f64(),
            hosts_down: ended.down.iter().map(|&h| names[h].clone()).collect(),
            finished_unix: engine::clock::unix_secs(),
            ..push::Figures::default()
        }
        .with_changes(judged.as_ref().map_or(&[][..], |(j, _)| j));
        push::push(url, &f)?;
        eprintln!("netperf mesh: pushed to {url}");
    }
    Ok(match &judged {
        Some((j, _)) => baseline::status(j, all && !ended.interrupted),
        None => u8::from(!all || ended.interrupted),
    })
}

/// Each pair against the baseline: the changed ones' lines (or that none
/// changed) and what could not be compared, printed under the matrix.
fn against(
    b: &baseline::Baseline,
    samples: &[((String, String), Vec<f64>)],
    effect: f64,
    unit: &str,
) -> (Vec<baseline::Judged>, Vec<String>) {
    // (a mesh's headline is a rate: more is better)
    let (judged, notes) = baseline::judge(b, samples, effect, true);
    for j in judged.iter().filter(|j| j.changed()) {
        println!("{}", j.line(unit));
    }
    if !judged.iter().any(baseline::Judged::changed) {
        println!(
            "no pair changed beyond the noise against the baseline ({} compared, {:.0}% the smallest change named)",
            judged.len(),
            effect * 100.0
        );
    }
    for n in &notes {
        println!("baseline: {n}");
    }
    (judged, notes)
}

/// The headline's unit, as the matrix says it.
fn unit_of(test: &str) -> &'static str {
    match test.to_ascii_uppercase().as_str() {
        "TCP_RR" | "UDP_RR" | "TCP_CRR" | "TCP_CC" => "Trans/s",
        "RPM" => "RPM",
        _ => "10^6bits/s",
    }
}

/// The hosts and the rounds the options ask for.
fn plan(mut o: MeshOptions) -> Result<(MeshOptions, Vec<Round>)> {
    let pairs = match &o.pairs_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--pairs: cannot read {}", path.display()))?;
            if o.hosts.is_empty() {
                o.hosts = names_in(&text)?;
            }
            let names: Vec<String> = o.hosts.iter().map(|h| h.name.clone()).collect();
            Some(
                schedule::parse_pairs(&text, &names)
                    .map_err(|e| anyhow!("--pairs {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let n = o.hosts.len();
    if n < 2 {
        bail!("mesh: {n} host: a mesh needs two netservers at least");
    }
    let index = |name: &str| {
        o.hosts
            .iter()
            .position(|h| h.name == name || h.addr == name)
            .ok_or_else(|| anyhow!("--pattern: '{name}' is not one of the hosts"))
    };
    let rounds = match (&pairs, &o.pattern) {
        (Some(p), _) => schedule::given(p),
        (None, Pattern::Incast(h)) => schedule::incast(n, index(h)?),
        (None, Pattern::Fanout(h)) => schedule::fanout(n, index(h)?),
        (None, Pattern::Mesh) if o.both => schedule::full_mesh(n, Directions::Both),
        (None, Pattern::Mesh) => schedule::full_mesh(n, Directions::InTurn),
    };
    Ok((o, rounds))
}

/// The hosts a pairs file names, in the order it first names them.
fn names_in(text: &str) -> Result<Vec<options::Host>> {
    let mut names: Vec<String> = Vec::new();
    for (_, words) in text.lines().filter_map(schedule::line_words) {
        for w in words.into_iter().filter(|w| !w.is_empty()) {
            if !names.iter().any(|n| n == w) {
                names.push(w.to_string());
            }
        }
    }
    names.iter().map(|w| options::host(w, 12865)).collect()
}

/// The output files, written as the results come.
struct Files {
    csv: Option<BufWriter<File>>,
    json: Option<BufWriter<File>>,
    first_pair: bool,
}

fn create(path: &std::path::Path, what: &str) -> Result<BufWriter<File>> {
    Ok(BufWriter::new(File::create(path).with_context(|| {
        format!("{what}: cannot create {}", path.display())
    })?))
}

impl Files {
    fn open(o: &MeshOptions, rounds: usize) -> Result<Files> {
        let mut csv = o.csv.as_deref().map(|p| create(p, "--csv")).transpose()?;
        if let Some(w) = &mut csv {
            writeln!(w, "{}", render::csv_header())?;
        }
        let mut json = o.json.as_deref().map(|p| create(p, "--json")).transpose()?;
        if let Some(w) = &mut json {
            let head = json!({
                "schema": "rsnetperf-mesh/1",
                "test": o.test,
                "length_seconds": o.length,
                "test_options": o.test_options,
                "pattern": match &o.pattern {
                    Pattern::Mesh if o.both => "mesh, both directions at once".to_string(),
                    Pattern::Mesh => "mesh".to_string(),
                    Pattern::Incast(h) => format!("incast:{h}"),
                    Pattern::Fanout(h) => format!("fanout:{h}"),
                },
                "hosts": o.hosts.iter().map(|h| json!({"name": h.name, "address": h.addr, "port": h.port})).collect::<Vec<_>>(),
                "rounds": rounds,
            });
            // the head's fields, then the pairs as they come
            let text = head.to_string();
            write!(w, "{},\"pairs\":[", text.trim_end_matches('}'))?;
        }
        Ok(Files {
            csv,
            json,
            first_pair: true,
        })
    }

    fn pair(&mut self, o: &MeshOptions, out: &run::Outcome) -> Result<()> {
        let (from, to) = (&o.hosts[out.pair.from].name, &o.hosts[out.pair.to].name);
        if let Some(w) = &mut self.csv {
            let row = render::CsvRow {
                round: out.round,
                from: from.clone(),
                to: to.clone(),
                throughput: out.throughput,
                unit: out.units.clone(),
                start: out.start,
                end: out.end,
                error: out.error.clone(),
            };
            writeln!(w, "{}", render::csv_line(&row))?;
            w.flush()?;
        }
        if let Some(w) = &mut self.json {
            let p = json!({
                "from": from,
                "to": to,
                "round": out.round,
                "start": out.start,
                "end": out.end,
                "throughput": out.throughput,
                "units": out.units,
                "error": out.error,
                "result": out.result.clone().unwrap_or(Value::Null),
            });
            let sep = if self.first_pair { "" } else { "," };
            write!(w, "{sep}{p}")?;
            w.flush()?;
            self.first_pair = false;
        }
        Ok(())
    }

    fn finish(
        &mut self,
        o: &MeshOptions,
        names: &[String],
        values: &[Vec<Option<f64>>],
        findings: &[Finding],
        ended: &run::Ended,
        judged: Option<&(Vec<baseline::Judged>, Vec<String>)>,
    ) -> Result<()> {
        if let Some(w) = &mut self.json {
            let mut tail = json!({
                "outliers": findings.iter().map(|f| finding_json(f, names)).collect::<Vec<_>>(),
                "hosts_down": ended.down.iter().map(|&h| names[h].clone()).collect::<Vec<_>>(),
                "interrupted": ended.interrupted,
            });
            if let Some((j, notes)) = judged {
                tail["changes"] = j
                    .iter()
                    .filter(|j| j.changed())
                    .map(baseline::Judged::json)
                    .collect();
                tail["baseline"] = json!({
                    "file": o.baseline.as_ref().map(|p| p.display().to_string()),
                    "effect": o.effect,
                    "compared": j.len(),
                    "unknown": j.iter().filter(|j| j.verdict == "UNKNOWN").count(),
                    "notes": notes,
                });
            }
            let text = tail.to_string();
            writeln!(w, "],{}", text.trim_start_matches('{'))?;
            w.flush()?;
        }
        if let Some(path) = &o.plot {
            let title = format!("netperf mesh: {} ({} s)", o.test, o.length);
            let svg = render::svg_heatmap(names, values, unit_of(&o.test), &title, findings);
            std::fs::write(path, svg)
                .with_context(|| format!("--plot: cannot write {}", path.display()))?;
        }
        Ok(())
    }
}

/// An outlier as the JSON names it.
fn finding_json(f: &Finding, names: &[String]) -> Value {
    match *f {
        Finding::Host {
            host,
            direction,
            median,
            typical,
        } => json!({
            "kind": "host",
            "host": names[host],
            "direction": match direction {
                outliers::Direction::Sending => "sending",
                outliers::Direction::Receiving => "receiving",
            },
            "median": median,
            "typical": typical,
            "text": render::describe(f, names),
        }),
        Finding::Link {
            from,
            to,
            value,
            expected,
        } => json!({
            "kind": "link",
            "from": names[from],
            "to": names[to],
            "value": value,
            "expected": expected,
            "text": render::describe(f, names),
        }),
    }
}
