//! `--plot FILE.svg` and `netperf plot RUN.json [FILE.svg]`: a run drawn
//! from its `--json` document (the typed [`Document`]), so that a saved run
//! draws as a live one does. Panels, each where the run has its figures:
//! throughput over time (the interims: their sum and each flow), each
//! iteration's result with the confidence interval (when there are
//! several), the latency percentiles of a request/response test, UDP's
//! datagrams each way, TCP's round-trip time at each end, and the
//! queueing delay each way (`--one-way`, under load), and the share of
//! datagrams that arrived CE-marked each interval (`--ecn`). Axes are in
//! a unit scaled to the figures (70 Gbit/s, not 70000 10^6bits/s),
//! legends stand beside the data, not on it. Drawn with plotters' SVG
//! backend: text is SVG text, no font files are read.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use plotters::prelude::*;

use crate::output::json_types::{Document, RemoteInterim};
use crate::report::Sample;

/// Width of the picture, the height of each panel, and the room right of
/// each panel's data for its legend, in pixels.
const WIDTH: u32 = 960;
const PANEL: u32 = 320;
const LEGEND: u32 = 200;

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
    /// Queueing delay each way over time, milliseconds: up (toward the
    /// netserver) and down, every probe.
    pub one_way: Option<(Series, Series)>,
    /// `--ecn`: the share of datagrams that arrived CE-marked, percent, by
    /// interval (its start, seconds): up and down, where measured.
    pub ecn: Option<(Series, Series)>,
}

impl Panels {
    /// The panels of a `--json` document (schema rsnetperf-result/1).
    pub fn of(doc: &Document) -> Result<Panels> {
        if doc.schema != crate::output::json::SCHEMA {
            bail!(
                "not a netperf --json document (its schema is not {})",
                crate::output::json::SCHEMA
            );
        }
        let mut title = format!("{} to {}", doc.test, doc.options.host);
        if let Some(u) = &doc.udp {
            title.push_str(&format!(
                ", {} datagrams lost of {} ({:.2}%)",
                u.lost, u.sent, u.lost_percent
            ));
        }
        let start = doc.interim.first().map(|s| s.ending - s.interval);
        Ok(Panels {
            title,
            units: doc.result.units.clone(),
            over_time: start.map(|t0| over_time(&doc.interim, t0)),
            iterations: doc
                .iterations
                .iter()
                .map(|i| (i.iteration as f64, i.value))
                .collect(),
            interval: doc
                .confidence
                .as_ref()
                .map(|c| (c.mean - c.half_width, c.mean + c.half_width)),
            latency: doc.latency_usec.as_ref().map(|l| {
                vec![
                    (50.0, l.p50),
                    (90.0, l.p90),
                    (99.0, l.p99),
                    (99.9, l.p999),
                    (100.0, l.max),
                ]
            }),
            datagrams: start
                .filter(|_| doc.test == "UDP_STREAM")
                .and_then(|t0| datagrams(&doc.interim, &doc.remote_interim, t0)),
            rtt: rtt(&doc.interim, &doc.remote_interim, start.unwrap_or(0.0)),
            one_way: doc.one_way.as_ref().map(|w| {
                let way = |g: fn(&crate::output::json_types::OneWaySampleJson) -> f64| {
                    w.series
                        .iter()
                        .map(|s| (s.at_seconds, g(s) / 1e3))
                        .collect()
                };
                (way(|s| s.up_usec), way(|s| s.down_usec))
            }),
            ecn: doc.ecn.as_ref().and_then(ecn_series),
        })
    }

    /// Whether each iteration's result is drawn: when there are several.
    fn several(&self) -> bool {
        self.iterations.len() > 1
    }

    /// Draw the panels as one SVG picture.
    pub fn svg(&self) -> Result<String> {
        let mut buf = String::new();
        let n = [
            self.over_time.is_some(),
            self.several(),
            self.latency.is_some(),
            self.datagrams.is_some(),
            self.rtt.is_some(),
            self.one_way.is_some(),
            self.ecn.is_some(),
        ]
        .into_iter()
        .filter(|&b| b)
        .count()
        .max(1);
        {
            let root =
                SVGBackend::with_string(&mut buf, (WIDTH, PANEL * n as u32)).into_drawing_area();
            draw(self, &root, n).map_err(|e| anyhow!("drawing the plot: {e}"))?;
            root.present()
                .map_err(|e| anyhow!("drawing the plot: {e}"))?;
        }
        Ok(buf)
    }
}

/// The interims as seconds since `start` and rates: their sum and each
/// flow's.
fn over_time(interim: &[Sample], start: f64) -> (Series, Vec<Series>) {
    let mut flows: Vec<Series> = Vec::new();
    for s in interim {
        for (i, r) in s.flows.iter().enumerate() {
            if flows.len() <= i {
                flows.resize(i + 1, Vec::new());
            }
            if let Some(series) = flows.get_mut(i) {
                series.push((s.ending - start, *r));
            }
        }
    }
    let sum = interim.iter().map(|s| (s.ending - start, s.rate)).collect();
    (sum, flows)
}

/// Datagrams a second: ours sent in each interim interval, and the
/// netserver's received between its reports.
fn datagrams(interim: &[Sample], remote: &[RemoteInterim], start: f64) -> Option<(Series, Series)> {
    let sent: Series = interim
        .iter()
        .map(|s| (s.ending - start, s.calls as f64 / s.interval.max(1e-9)))
        .collect();
    let mut received = Vec::new();
    let mut last = (0.0, 0.0);
    for r in remote {
        let (t, n) = (r.elapsed_seconds, r.calls as f64);
        if t > last.0 {
            received.push((t, (n - last.1).max(0.0) / (t - last.0)));
        }
        last = (t, n);
    }
    (!received.is_empty()).then_some((sent, received))
}

/// The round-trip time (ms) of each data connection over time: ours, and
/// the netserver's.
fn rtt(
    interim: &[Sample],
    remote: &[RemoteInterim],
    start: f64,
) -> Option<(Vec<Series>, Vec<Series>)> {
    let ours = rtt_of(interim.iter().map(|s| (s.ending - start, &s.tcp)));
    let theirs = rtt_of(remote.iter().map(|r| (r.elapsed_seconds, &r.tcp)));
    (!ours.is_empty() || !theirs.is_empty()).then_some((ours, theirs))
}

/// Each connection's rtt in samples (time, TCP_INFO of each connection).
fn rtt_of<'a>(samples: impl Iterator<Item = (f64, &'a Vec<proto::TcpSample>)>) -> Vec<Series> {
    let mut flows: Vec<Series> = Vec::new();
    for (t, tcp) in samples {
        for (i, s) in tcp.iter().enumerate() {
            if flows.len() <= i {
                flows.resize(i + 1, Vec::new());
            }
            if let Some(f) = flows.get_mut(i) {
                f.push((t, f64::from(s.rtt_us) / 1000.0));
            }
        }
    }
    flows
}

/// A unit scaled to the figures: the factor the document's values are
/// multiplied by, and the unit's name (`10^6bits/s` at 70000 is 70
/// Gbit/s; `Trans/s` at 45000 is 45 kTrans/s).
pub fn scaled(units: &str, top: f64) -> (f64, String) {
    // the unit as a multiple of a base unit, the steps of its prefixes,
    // and whether it is a word (k Trans/s)
    let (base, name, step, word) = match units {
        "10^0bits/s" => (1.0, "bit/s", 1000.0, false),
        "10^3bits/s" => (1e3, "bit/s", 1000.0, false),
        "10^6bits/s" => (1e6, "bit/s", 1000.0, false),
        "10^9bits/s" => (1e9, "bit/s", 1000.0, false),
        "Bytes/s" => (1.0, "B/s", 1024.0, false),
        "KBytes/s" => (1024.0, "B/s", 1024.0, false),
        "MBytes/s" => (1024.0 * 1024.0, "B/s", 1024.0, false),
        "GBytes/s" => (1024.0 * 1024.0 * 1024.0, "B/s", 1024.0, false),
        "Trans/s" | "datagrams/s" => (1.0, units, 1000.0, true),
        _ => return (1.0, units.to_string()),
    };
    let prefixes = if step == 1024.0 {
        ["", "Ki", "Mi", "Gi", "Ti"]
    } else {
        ["", "k", "M", "G", "T"]
    };
    let mut i = 0;
    let mut per = 1.0;
    while top * base / (per * step) >= 1.0 && i + 1 < prefixes.len() {
        per *= step;
        i += 1;
    }
    let gap = if word && i > 0 { " " } else { "" };
    (base / per, format!("{}{gap}{name}", prefixes[i]))
}

/// A tick's number: no more digits than it needs.
fn tick(v: &f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Room above the largest value, so that no line runs along the frame.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0f64, f64::max);
    if m > 0.0 { m * 1.1 } else { 1.0 }
}

/// A series scaled by `k`.
fn times(s: &Series, k: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    s.iter().map(move |&(x, y)| (x, y * k))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;
type Drawn = std::result::Result<(), Box<dyn std::error::Error + 'static>>;
/// Ticks on the x axis: how many, and their labels.
type Ticks<'f> = (usize, &'f dyn Fn(&f64) -> String);

/// A panel's chart: its caption, its axes (ranges, descriptions, tick
/// labels as short as they can be).
fn panel<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    (x, y): (std::ops::Range<f64>, std::ops::Range<f64>),
    (x_desc, y_desc): (&str, &str),
    (x_labels, x_format): Ticks<'_>,
) -> std::result::Result<Chart<'a, 'b>, Box<dyn std::error::Error + 'static>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(x_labels)
        .x_label_formatter(x_format)
        .y_label_formatter(&tick)
        .draw()?;
    Ok(chart)
}

/// How a legend's entry shows its series.
#[derive(Clone, Copy)]
enum Mark {
    Line(ShapeStyle),
    Dot(ShapeStyle),
    Band(ShapeStyle),
}

/// The series' names beside the data (never on it): one a row, each after
/// its mark.
fn key(area: &Area<'_>, entries: &[(String, Mark)]) -> Drawn {
    for (row, (label, mark)) in entries.iter().enumerate() {
        let y = 56 + 18 * row as i32;
        match *mark {
            Mark::Line(s) => area.draw(&PathElement::new(vec![(4, y), (28, y)], s))?,
            Mark::Dot(s) => area.draw(&Circle::new((16, y), 5, s))?,
            Mark::Band(s) => area.draw(&Rectangle::new([(4, y - 5), (28, y + 5)], s))?,
        }
        area.draw(&Text::new(label.as_str(), (36, y - 7), ("sans-serif", 13)))?;
    }
    Ok(())
}

/// Ticks on a time axis.
const SECONDS: Ticks<'static> = (10, &tick);

fn draw(p: &Panels, root: &Area<'_>, n: usize) -> Drawn {
    root.fill(&WHITE)?;
    let root = root.titled(&p.title, ("sans-serif", 22))?;
    let areas: Vec<(Area<'_>, Area<'_>)> = root
        .split_evenly((n, 1))
        .into_iter()
        .map(|a| a.split_horizontally(WIDTH - LEGEND))
        .collect();
    let mut areas = areas.iter();
    if let Some((sum, flows)) = &p.over_time
        && let Some((area, side)) = areas.next()
    {
        draw_over_time(area, side, &p.units, sum, flows)?;
    }
    if p.several()
        && let Some((area, side)) = areas.next()
    {
        draw_iterations(area, side, &p.units, &p.iterations, p.interval)?;
    }
    if let Some(lat) = &p.latency
        && let Some((area, _)) = areas.next()
    {
        draw_latency(area, lat)?;
    }
    if let Some((sent, received)) = &p.datagrams
        && let Some((area, side)) = areas.next()
    {
        draw_datagrams(area, side, sent, received)?;
    }
    if let Some(rtt) = &p.rtt
        && let Some((area, side)) = areas.next()
    {
        draw_rtt(area, side, rtt)?;
    }
    if let Some((up, down)) = &p.one_way
        && let Some((area, side)) = areas.next()
    {
        let ways = Ways {
            title: "Queueing delay each way (probes, no common clock)",
            axes: ("seconds since the first probe", "milliseconds"),
            up,
            down,
            dots: false,
        };
        draw_ways(area, side, &ways)?;
    }
    if let Some((up, down)) = &p.ecn
        && let Some((area, side)) = areas.next()
    {
        let ways = Ways {
            title: "ECN: datagrams that arrived CE-marked, each interval",
            axes: ("seconds since the first datagram", "% CE"),
            up,
            down,
            dots: true,
        };
        draw_ways(area, side, &ways)?;
    }
    Ok(())
}

/// `--ecn`'s CE share by interval, each way measured (UDP: TCP has none).
fn ecn_series(e: &crate::output::json_types::EcnJson) -> Option<(Series, Series)> {
    let way = |w: &Option<crate::output::json_types::EcnWayJson>| -> Series {
        w.iter()
            .flat_map(|w| &w.intervals)
            .map(|i| (i.start_seconds, i.ce_fraction * 100.0))
            .collect()
    };
    let (up, down) = (way(&e.up), way(&e.down));
    (!up.is_empty() || !down.is_empty()).then_some((up, down))
}

/// A panel of two series over time, up and down (either may be empty),
/// with dots at each point when `dots`.
struct Ways<'s> {
    title: &'s str,
    axes: (&'s str, &'s str),
    up: &'s Series,
    down: &'s Series,
    dots: bool,
}

fn draw_ways(area: &Area<'_>, side: &Area<'_>, w: &Ways<'_>) -> Drawn {
    let all = || w.up.iter().chain(w.down);
    let x_end = all().map(|p| p.0).fold(1e-3, f64::max);
    let y_top = top(all().map(|p| p.1.max(0.0)));
    let mut chart = panel(area, w.title, (0.0..x_end, 0.0..y_top), w.axes, SECONDS)?;
    let mut entries = Vec::new();
    for (i, (s, label)) in [(w.up, "up: toward the netserver"), (w.down, "down")]
        .into_iter()
        .enumerate()
    {
        if s.is_empty() {
            continue;
        }
        let c = flow_colour(i).stroke_width(2);
        chart.draw_series(LineSeries::new(s.iter().copied(), c))?;
        if w.dots {
            chart.draw_series(s.iter().map(|&p| Circle::new(p, 3, c)))?;
        }
        entries.push((label.to_string(), Mark::Line(c)));
    }
    key(side, &entries)
}

fn draw_datagrams(area: &Area<'_>, side: &Area<'_>, sent: &Series, received: &Series) -> Drawn {
    let all = || sent.iter().chain(received);
    let x_end = all().map(|p| p.0).fold(1e-3, f64::max);
    let (k, unit) = scaled("datagrams/s", all().map(|p| p.1).fold(0.0, f64::max));
    let y_top = top(all().map(|p| p.1 * k));
    let mut chart = panel(
        area,
        "UDP datagrams over time: the gap is the loss",
        (0.0..x_end, 0.0..y_top),
        ("seconds since the start", &unit),
        SECONDS,
    )?;
    let (blue, green) = (BLUE.stroke_width(2), GREEN.stroke_width(2));
    chart.draw_series(LineSeries::new(times(sent, k), blue))?;
    chart.draw_series(LineSeries::new(times(received, k), green))?;
    key(
        side,
        &[
            ("sent".into(), Mark::Line(blue)),
            ("received by the netserver".into(), Mark::Line(green)),
        ],
    )
}

fn draw_rtt(
    area: &Area<'_>,
    side: &Area<'_>,
    (ours, theirs): &(Vec<Series>, Vec<Series>),
) -> Drawn {
    let all = || ours.iter().chain(theirs).flatten();
    let x_end = all().map(|p| p.0).fold(1e-3, f64::max);
    let y_top = top(all().map(|p| p.1));
    let mut chart = panel(
        area,
        "TCP round-trip time (TCP_INFO), each end",
        (0.0..x_end, 0.0..y_top),
        ("seconds since each end's side began", "milliseconds"),
        SECONDS,
    )?;
    let mut entries = Vec::new();
    for (who, flows, width) in [("netperf", ours, 2), ("netserver", theirs, 1)] {
        for (i, f) in flows.iter().enumerate() {
            let style = flow_colour(i).stroke_width(width);
            chart.draw_series(LineSeries::new(f.iter().copied(), style))?;
            if i < 6 {
                entries.push((format!("flow {i}, {who}"), Mark::Line(style)));
            }
        }
    }
    key(side, &entries)
}

/// The colour of the `i`th flow's line (the sum is black): dark and
/// saturated enough to read on white, and told apart from their
/// neighbours.
pub fn flow_colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(0x1b, 0x5e, 0xab), // blue
        RGBColor(0xd9, 0x5f, 0x02), // orange
        RGBColor(0x1b, 0x9e, 0x4a), // green
        RGBColor(0xb2, 0x18, 0x2b), // red
        RGBColor(0x6a, 0x3d, 0x9a), // purple
        RGBColor(0x8c, 0x51, 0x0a), // brown
        RGBColor(0xc5, 0x1b, 0x7d), // magenta
        RGBColor(0x01, 0x66, 0x5e), // teal
    ];
    COLOURS[i % COLOURS.len()]
}

fn draw_over_time(
    area: &Area<'_>,
    side: &Area<'_>,
    units: &str,
    sum: &Series,
    flows: &[Series],
) -> Drawn {
    let x_end = sum.last().map_or(1.0, |p| p.0).max(1e-3);
    let (k, unit) = scaled(units, sum.iter().map(|p| p.1).fold(0.0, f64::max));
    let y_top = top(sum.iter().map(|p| p.1 * k));
    let mut chart = panel(
        area,
        "Throughput over time",
        (0.0..x_end, 0.0..y_top),
        ("seconds since the start", &unit),
        SECONDS,
    )?;
    let black = BLACK.stroke_width(2);
    let mut entries = vec![(
        if flows.is_empty() {
            "throughput"
        } else {
            "sum of the flows"
        }
        .to_string(),
        Mark::Line(black),
    )];
    for (i, f) in flows.iter().enumerate() {
        let colour = flow_colour(i).stroke_width(1);
        chart.draw_series(LineSeries::new(times(f, k), colour))?;
        // a legend for the first few flows; the others' lines speak alone
        if i < 12 {
            entries.push((format!("flow {i}"), Mark::Line(colour)));
        }
    }
    chart.draw_series(LineSeries::new(times(sum, k), black))?;
    key(side, &entries)
}

fn draw_iterations(
    area: &Area<'_>,
    side: &Area<'_>,
    units: &str,
    its: &Series,
    interval: Option<(f64, f64)>,
) -> Drawn {
    let n = its.len().max(1) as f64;
    let largest = its.iter().map(|p| p.1).chain(interval.map(|i| i.1));
    let (k, unit) = scaled(units, largest.clone().fold(0.0, f64::max));
    let y_top = top(largest.map(|v| v * k));
    let mut chart = panel(
        area,
        "Result of each iteration",
        (0.5..n + 0.5, 0.0..y_top),
        ("iteration", &unit),
        (its.len().clamp(1, 30), &tick),
    )?;
    let mut entries = Vec::new();
    if let Some((lo, hi)) = interval {
        let band = BLUE.mix(0.15).filled();
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.5, lo * k), (n + 0.5, hi * k)],
            band,
        )))?;
        entries.push(("confidence interval".to_string(), Mark::Band(band)));
    }
    chart.draw_series(
        its.iter()
            .map(|&(i, v)| Circle::new((i, v * k), 5, BLUE.filled())),
    )?;
    entries.push(("result".to_string(), Mark::Dot(BLUE.filled())));
    key(side, &entries)
}

fn draw_latency(area: &Area<'_>, lat: &Series) -> Drawn {
    // the percentiles evenly spaced, as the nines are: 50, 90, 99, 99.9, max
    const NAMES: [&str; 5] = ["50", "90", "99", "99.9", "max"];
    let name = |x: &f64| {
        let i = x.round();
        match NAMES.get(i as usize) {
            Some(n) if (x - i).abs() < 1e-6 && i >= 0.0 => (*n).to_string(),
            _ => String::new(),
        }
    };
    let y_top = top(lat.iter().map(|p| p.1));
    let mut chart = panel(
        area,
        "Round-trip latency",
        (-0.5..4.5, 0.0..y_top),
        ("percentile", "microseconds"),
        (11, &name),
    )?;
    let points: Vec<(f64, f64)> = lat
        .iter()
        .enumerate()
        .map(|(i, &(_, v))| (i as f64, v))
        .collect();
    chart.draw_series(LineSeries::new(points.iter().copied(), RED.stroke_width(2)))?;
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, RED.filled())))?;
    Ok(())
}

/// Draw a run's `--json` document (as printed) into `path`.
pub fn draw_document(doc: &str, path: &Path) -> Result<()> {
    let doc: Document = serde_json::from_str(doc).context("the run's JSON document")?;
    let svg = Panels::of(&doc)?.svg()?;
    std::fs::write(path, svg).with_context(|| format!("--plot {}", path.display()))
}

/// `--plot FILE.svg`: the run's picture, drawn before anything is printed.
#[derive(Debug)]
pub struct Plot {
    pub path: std::path::PathBuf,
}

/// `--plot FILE`'s reporter, as the client library's runs make it
/// ([`crate::run::set_plotter`]).
pub fn reporter(path: &Path) -> Box<dyn crate::output::Reporter> {
    Box::new(Plot {
        path: path.to_path_buf(),
    })
}

impl crate::output::Reporter for Plot {
    fn finish(&mut self, r: &crate::output::Results<'_>) -> Result<()> {
        // (as printed, then read: a saved document draws the same picture)
        draw_document(&crate::output::json::render(r)?, &self.path)
    }
}

/// A `--json-stream` capture's last line.
#[derive(serde::Deserialize)]
struct End {
    document: Document,
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
    let doc = match serde_json::from_str::<Document>(&text) {
        Ok(d) => d,
        Err(_) => text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<End>(l).ok())
            .map(|e| e.document)
            .ok_or_else(|| anyhow!("plot: {} holds no netperf --json document", input.display()))?,
    };
    let svg = Panels::of(&doc)
        .with_context(|| format!("plot: {}", input.display()))?
        .svg()?;
    std::fs::write(&output, svg).with_context(|| format!("plot: {}", output.display()))?;
    eprintln!("netperf: drew {}", output.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn units_are_scaled_to_the_figures() {
        let (k, unit) = scaled("10^6bits/s", 70_000.0);
        assert_eq!((70_000.0 * k, unit.as_str()), (70.0, "Gbit/s"));
        assert_eq!(scaled("10^6bits/s", 500.0).1, "Mbit/s");
        assert_eq!(scaled("KBytes/s", 4096.0).1, "MiB/s");
        let (k, unit) = scaled("Trans/s", 45_000.0);
        assert_eq!((45_000.0 * k, unit.as_str()), (45.0, "k Trans/s"));
        assert_eq!(scaled("Trans/s", 900.0).1, "Trans/s");
        assert_eq!(scaled("RPM", 900.0), (1.0, "RPM".to_string()));
    }
}
