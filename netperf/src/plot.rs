//! `--plot FILE.svg` and `netperf plot RUN.json [FILE.svg]`: a run drawn
//! from its `--json` document, so that a saved run draws as a live one
//! does. Panels, each where the run has its figures: throughput over time
//! (the `-D` interims: their sum and each flow), every iteration's result
//! with the confidence interval, and the latency percentiles of a
//! request/response test. Drawn with plotters' SVG backend: text is SVG
//! text, no font files are read.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use plotters::prelude::*;
use serde_json::Value;

/// Width of the picture, and the height of each panel, in pixels.
const WIDTH: u32 = 960;
const PANEL: u32 = 320;

/// A line of points, in the panel's units.
pub type Series = Vec<(f64, f64)>;

/// What a document gives to draw.
#[derive(Debug, Default, PartialEq)]
pub struct Panels {
    pub title: String,
    pub units: String,
    /// Throughput over time: the interims' sum (seconds since the start,
    /// rate), and each flow's.
    pub over_time: Option<(Series, Vec<Series>)>,
    /// Each iteration's result, and the interval around their mean.
    pub iterations: Series,
    pub interval: Option<(f64, f64)>,
    /// Latency percentiles, microseconds: (percentile, value).
    pub latency: Option<Series>,
    /// UDP_STREAM: datagrams a second we sent and the netserver received,
    /// over time (the gap between them is the loss).
    pub datagrams: Option<(Series, Series)>,
    /// TCP_INFO's round-trip time of each data connection over time,
    /// milliseconds: ours (from our interim samples) and the netserver's
    /// (from its reports).
    pub rtt: Option<(Vec<Series>, Vec<Series>)>,
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

impl Panels {
    /// The panels of a `--json` document (schema rsnetperf-result/1).
    pub fn of(doc: &Value) -> Result<Panels> {
        if doc.get("schema").and_then(Value::as_str) != Some(crate::output::json::SCHEMA) {
            bail!(
                "not a netperf --json document (its schema is not {})",
                crate::output::json::SCHEMA
            );
        }
        let units = doc["result"]["units"].as_str().unwrap_or("").to_string();
        let mut title = format!(
            "{} to {}",
            doc["test"].as_str().unwrap_or("?"),
            doc["options"]["host"].as_str().unwrap_or("?")
        );
        if let Some(u) = doc.get("udp").filter(|u| !u.is_null()) {
            title.push_str(&format!(
                ", {} datagrams lost of {} ({:.2}%)",
                u["lost"].as_u64().unwrap_or(0),
                u["sent"].as_u64().unwrap_or(0),
                u["lost_percent"].as_f64().unwrap_or(0.0)
            ));
        }
        let interim = doc["interim"].as_array().cloned().unwrap_or_default();
        let over_time = over_time(&interim);
        let iterations = doc["iterations"]
            .as_array()
            .map(|its| {
                its.iter()
                    .filter_map(|i| Some((num(&i["iteration"])?, num(&i["value"])?)))
                    .collect()
            })
            .unwrap_or_default();
        let interval = doc
            .get("confidence")
            .filter(|c| !c.is_null())
            .and_then(|c| {
                let (mean, half) = (num(&c["mean"])?, num(&c["half_width"])?);
                Some((mean - half, mean + half))
            });
        let latency = doc.get("latency_usec").filter(|l| !l.is_null()).map(|l| {
            [
                (50.0, "p50"),
                (90.0, "p90"),
                (99.0, "p99"),
                (99.9, "p999"),
                (100.0, "max"),
            ]
            .iter()
            .filter_map(|&(p, k)| Some((p, num(&l[k])?)))
            .collect()
        });
        let remote = doc["remote_interim"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let datagrams = (doc["test"] == "UDP_STREAM")
            .then(|| datagrams(&interim, &remote))
            .flatten();
        Ok(Panels {
            title,
            units,
            over_time,
            iterations,
            interval,
            latency,
            datagrams,
            rtt: rtt(&interim, &remote),
        })
    }

    /// Draw the panels as one SVG picture.
    pub fn svg(&self) -> Result<String> {
        let mut buf = String::new();
        let n = 1
            + u32::from(self.over_time.is_some())
            + u32::from(self.latency.is_some())
            + u32::from(self.datagrams.is_some())
            + u32::from(self.rtt.is_some());
        {
            let root = SVGBackend::with_string(&mut buf, (WIDTH, PANEL * n)).into_drawing_area();
            draw(self, &root, n as usize).map_err(|e| anyhow!("drawing the plot: {e}"))?;
            root.present()
                .map_err(|e| anyhow!("drawing the plot: {e}"))?;
        }
        Ok(buf)
    }
}

/// The interims as seconds since the start and rates: their sum and each
/// flow's.
fn over_time(interim: &[Value]) -> Option<(Series, Vec<Series>)> {
    let first = interim.first()?;
    let start = num(&first["ending"])? - num(&first["interval"])?;
    let mut sum = Vec::new();
    let mut flows: Vec<Series> = Vec::new();
    for s in interim {
        let (Some(end), Some(rate)) = (num(&s["ending"]), num(&s["rate"])) else {
            continue;
        };
        let t = end - start;
        sum.push((t, rate));
        for (i, f) in s["flows"].as_array().into_iter().flatten().enumerate() {
            if flows.len() <= i {
                flows.resize(i + 1, Vec::new());
            }
            if let (Some(series), Some(r)) = (flows.get_mut(i), num(f)) {
                series.push((t, r));
            }
        }
    }
    Some((sum, flows))
}

/// Datagrams a second: ours sent in each interim interval, and the
/// netserver's received between its reports.
fn datagrams(interim: &[Value], remote: &[Value]) -> Option<(Series, Series)> {
    let first = interim.first()?;
    let start = num(&first["ending"])? - num(&first["interval"])?;
    let sent: Series = interim
        .iter()
        .filter_map(|s| {
            let t = num(&s["ending"])? - start;
            Some((t, num(&s["calls"])? / num(&s["interval"])?.max(1e-9)))
        })
        .collect();
    let mut received = Vec::new();
    let mut last = (0.0, 0.0);
    for r in remote {
        let (Some(t), Some(n)) = (num(&r["elapsed_seconds"]), num(&r["calls"])) else {
            continue;
        };
        if t > last.0 {
            received.push((t, (n - last.1).max(0.0) / (t - last.0)));
        }
        last = (t, n);
    }
    (!received.is_empty()).then_some((sent, received))
}

/// The round-trip time (ms) of each data connection over time: ours, and
/// the netserver's.
fn rtt(interim: &[Value], remote: &[Value]) -> Option<(Vec<Series>, Vec<Series>)> {
    let start = interim
        .first()
        .and_then(|s| Some(num(&s["ending"])? - num(&s["interval"])?))
        .unwrap_or(0.0);
    let ours = rtt_of(interim, |s| Some(num(&s["ending"])? - start));
    let theirs = rtt_of(remote, |r| num(&r["elapsed_seconds"]));
    (!ours.is_empty() || !theirs.is_empty()).then_some((ours, theirs))
}

/// Each connection's rtt in samples that carry `tcp`, at `time_of`.
fn rtt_of(samples: &[Value], time_of: impl Fn(&Value) -> Option<f64>) -> Vec<Series> {
    let mut flows: Vec<Series> = Vec::new();
    for r in samples {
        let Some(t) = time_of(r) else {
            continue;
        };
        for (i, s) in r["tcp"].as_array().into_iter().flatten().enumerate() {
            if flows.len() <= i {
                flows.resize(i + 1, Vec::new());
            }
            if let (Some(f), Some(us)) = (flows.get_mut(i), num(&s["rtt_us"])) {
                f.push((t, us / 1000.0));
            }
        }
    }
    flows
}

/// Room above the largest value, so that no line runs along the frame.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0f64, f64::max);
    if m > 0.0 { m * 1.1 } else { 1.0 }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A panel's frame: its caption, and room for the axes' labels.
fn panel<'a, 'b>(area: &'a Area<'b>, caption: &str) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80);
    b
}
type Drawn = std::result::Result<(), Box<dyn std::error::Error + 'static>>;

fn draw(p: &Panels, root: &Area<'_>, n: usize) -> Drawn {
    root.fill(&WHITE)?;
    let root = root.titled(&p.title, ("sans-serif", 22))?;
    let areas = root.split_evenly((n, 1));
    let mut areas = areas.iter();
    if let Some((sum, flows)) = &p.over_time
        && let Some(area) = areas.next()
    {
        draw_over_time(area, &p.units, sum, flows)?;
    }
    if let Some(area) = areas.next() {
        draw_iterations(area, &p.units, &p.iterations, p.interval)?;
    }
    if let Some(lat) = &p.latency
        && let Some(area) = areas.next()
    {
        draw_latency(area, lat)?;
    }
    if let Some((sent, received)) = &p.datagrams
        && let Some(area) = areas.next()
    {
        draw_datagrams(area, sent, received)?;
    }
    if let Some(rtt) = &p.rtt
        && let Some(area) = areas.next()
    {
        draw_rtt(area, rtt)?;
    }
    Ok(())
}

fn draw_datagrams(area: &Area<'_>, sent: &Series, received: &Series) -> Drawn {
    let x_end = sent
        .iter()
        .chain(received)
        .map(|p| p.0)
        .fold(1e-3, f64::max);
    let y_top = top(sent.iter().chain(received).map(|p| p.1));
    let mut chart = panel(area, "UDP datagrams over time: the gap is the loss")
        .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the start")
        .y_desc("datagrams/s")
        .draw()?;
    chart
        .draw_series(LineSeries::new(sent.iter().copied(), BLUE.stroke_width(2)))?
        .label("sent")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            received.iter().copied(),
            GREEN.stroke_width(2),
        ))?
        .label("received by the netserver")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN.stroke_width(2)));
    legend(&mut chart)?;
    Ok(())
}

fn draw_rtt(area: &Area<'_>, (ours, theirs): &(Vec<Series>, Vec<Series>)) -> Drawn {
    let all = || ours.iter().chain(theirs).flatten();
    let x_end = all().map(|p| p.0).fold(1e-3, f64::max);
    let y_top = top(all().map(|p| p.1));
    let mut chart = panel(area, "TCP round-trip time (TCP_INFO), each end")
        .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("seconds since each end's side began")
        .y_desc("milliseconds")
        .draw()?;
    for (who, flows, width) in [("netperf", ours, 2), ("netserver", theirs, 1)] {
        for (i, f) in flows.iter().enumerate() {
            let style = flow_colour(i).stroke_width(width);
            chart
                .draw_series(LineSeries::new(f.iter().copied(), style))?
                .label(format!("flow {i}, {who}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
    }
    legend(&mut chart)?;
    Ok(())
}

/// The series' names, in a box.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> Drawn {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The colour of the `i`th flow's line (the sum is black).
pub fn flow_colour(i: usize) -> RGBColor {
    let c = Palette99::pick(i + 1).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

fn draw_over_time(area: &Area<'_>, units: &str, sum: &Series, flows: &[Series]) -> Drawn {
    let x_end = sum.last().map_or(1.0, |p| p.0).max(1e-3);
    let y_top = top(sum.iter().map(|p| p.1));
    let mut chart =
        panel(area, "Throughput over time").build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the start")
        .y_desc(units)
        .draw()?;
    for (i, f) in flows.iter().enumerate() {
        let colour = flow_colour(i);
        let s = chart.draw_series(LineSeries::new(f.iter().copied(), colour))?;
        // a legend for the first few flows; the others' lines speak alone
        if i < 8 {
            s.label(format!("flow {i}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
    }
    chart
        .draw_series(LineSeries::new(sum.iter().copied(), BLACK.stroke_width(2)))?
        .label(if flows.is_empty() {
            "throughput"
        } else {
            "sum of the flows"
        })
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    legend(&mut chart)?;
    Ok(())
}

fn draw_iterations(
    area: &Area<'_>,
    units: &str,
    its: &Series,
    interval: Option<(f64, f64)>,
) -> Drawn {
    let n = its.len().max(1) as f64;
    let y_top = top(its.iter().map(|p| p.1).chain(interval.map(|i| i.1)));
    let mut chart =
        panel(area, "Result of each iteration").build_cartesian_2d(0.5..n + 0.5, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("iteration")
        .y_desc(units)
        .x_labels(its.len().clamp(1, 30))
        .draw()?;
    if let Some((lo, hi)) = interval {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.5, lo), (n + 0.5, hi)],
                BLUE.mix(0.15).filled(),
            )))?
            .label("confidence interval")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 20, y + 5)], BLUE.mix(0.15).filled())
            });
    }
    chart
        .draw_series(its.iter().map(|&p| Circle::new(p, 5, BLUE.filled())))?
        .label("result")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, BLUE.filled()));
    legend(&mut chart)?;
    Ok(())
}

fn draw_latency(area: &Area<'_>, lat: &Series) -> Drawn {
    // the percentiles evenly spaced, as the nines are: 50, 90, 99, 99.9, max
    const NAMES: [&str; 5] = ["50", "90", "99", "99.9", "max"];
    let y_top = top(lat.iter().map(|p| p.1));
    let mut chart = panel(area, "Round-trip latency").build_cartesian_2d(-0.5..4.5, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("microseconds")
        .x_labels(11)
        .x_label_formatter(&|x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && (0.0..=4.0).contains(&i) {
                NAMES
                    .get(i as usize)
                    .map_or(String::new(), |n| (*n).to_string())
            } else {
                String::new()
            }
        })
        .draw()?;
    let points: Vec<(f64, f64)> = lat
        .iter()
        .enumerate()
        .map(|(i, &(_, v))| (i as f64, v))
        .collect();
    chart.draw_series(LineSeries::new(points.iter().copied(), RED.stroke_width(2)))?;
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, RED.filled())))?;
    Ok(())
}

/// `--plot FILE.svg`: the run's picture, drawn before anything is printed.
#[derive(Debug)]
pub struct Plot {
    pub path: std::path::PathBuf,
}

impl crate::output::Reporter for Plot {
    fn finish(&mut self, r: &crate::output::Results<'_>) -> Result<()> {
        // (as printed, then read: a saved document draws the same picture)
        draw_document(&crate::output::json::render(r)?, &self.path)
    }
}

/// Draw a run's `--json` document (as printed) into `path`.
pub fn draw_document(doc: &str, path: &Path) -> Result<()> {
    let v: Value = serde_json::from_str(doc).context("the run's JSON document")?;
    let svg = Panels::of(&v)?.svg()?;
    std::fs::write(path, svg).with_context(|| format!("--plot {}", path.display()))
}

/// `netperf plot RUN.json [FILE.svg]`: draw a saved `--json` document (the
/// picture goes beside it, RUN.svg, unless named).
pub fn main(args: &[String]) -> Result<()> {
    let (input, output) = match args {
        [i] => (Path::new(i), Path::new(i).with_extension("svg")),
        [i, o] => (Path::new(i), Path::new(o).to_path_buf()),
        _ => bail!("usage: netperf plot RUN.json [FILE.svg] (RUN.json from netperf --json)"),
    };
    let text =
        std::fs::read_to_string(input).with_context(|| format!("plot: {}", input.display()))?;
    // a --json-stream capture: its last line's document
    let doc = match serde_json::from_str::<Value>(&text) {
        Ok(v) => v,
        Err(_) => text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["document"].clone())
            .ok_or_else(|| anyhow!("plot: {} holds no netperf --json document", input.display()))?,
    };
    let svg = Panels::of(&doc)
        .with_context(|| format!("plot: {}", input.display()))?
        .svg()?;
    std::fs::write(&output, svg).with_context(|| format!("plot: {}", output.display()))?;
    eprintln!("netperf: drew {}", output.display());
    Ok(())
}
