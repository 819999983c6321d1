//! Rendering of mesh results: a text matrix for the terminal, CSV lines for
//! files and spreadsheets, and a self-contained SVG heatmap.
//!
//! Matrices are indexed `values[from][to]`: rows are senders and columns are
//! receivers throughout.

use std::fmt::Write as _;

use super::outliers::{Direction, Finding};

/// The outcome of one test, as collected while a mesh runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Index of the sending host.
    pub from: usize,
    /// Index of the receiving host.
    pub to: usize,
    /// Measured throughput, if the test produced one.
    pub value: Option<f64>,
    /// Why the test failed, if it did.
    pub error: Option<String>,
}

/// Builds the value and failure matrices for `n` hosts from test outcomes.
///
/// A cell with a value sets that entry (a later value replaces an earlier
/// one, e.g. for a pair run twice); a cell with an error and no value marks
/// the entry failed. Cells naming hosts outside `0..n` are ignored.
#[must_use]
pub fn matrices(n: usize, cells: &[Cell]) -> (Vec<Vec<Option<f64>>>, Vec<Vec<bool>>) {
    let mut values = vec![vec![None; n]; n];
    let mut failed = vec![vec![false; n]; n];
    for c in cells.iter().filter(|c| c.from < n && c.to < n) {
        if let Some(v) = c.value {
            values[c.from][c.to] = Some(v);
        } else if c.error.is_some() {
            failed[c.from][c.to] = true;
        }
    }
    (values, failed)
}

/// Formats a throughput: no decimals from 100 up, one from 10, two below.
fn number(v: f64) -> String {
    if !v.is_finite() {
        return "?".to_string();
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn value_at(values: &[Vec<Option<f64>>], from: usize, to: usize) -> Option<f64> {
    values.get(from).and_then(|r| r.get(to)).copied().flatten()
}

fn failed_at(failed: &[Vec<bool>], from: usize, to: usize) -> bool {
    failed
        .get(from)
        .and_then(|r| r.get(to))
        .copied()
        .unwrap_or(false)
}

/// Shortens `s` to at most `width` characters, marking a cut with `~`.
fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

fn host_name(hosts: &[String], i: usize) -> String {
    hosts.get(i).cloned().unwrap_or_else(|| format!("#{i}"))
}

/// One finding in words, e.g. `host h3 receives at 33.1 against a typical 95.2`.
#[must_use]
pub fn describe(finding: &Finding, hosts: &[String]) -> String {
    match *finding {
        Finding::Host {
            host,
            direction,
            median,
            typical,
        } => {
            let verb = match direction {
                Direction::Sending => "sends",
                Direction::Receiving => "receives",
            };
            format!(
                "host {} {verb} at {} against a typical {}",
                host_name(hosts, host),
                number(median),
                number(typical)
            )
        }
        Finding::Link {
            from,
            to,
            value,
            expected,
        } => format!(
            "link {} -> {}: {} against an expected {}",
            host_name(hosts, from),
            host_name(hosts, to),
            number(value),
            number(expected)
        ),
    }
}

/// The throughput matrix as a text table, followed by the findings in words.
///
/// Rows are senders and columns receivers. Entries show the value (right
/// aligned), `-` on the diagonal, `fail` for a failed test without a value and
/// `.` for a test not measured. Columns are at least 8 characters wide and
/// widen to fit the values and the host names up to 16 characters; longer
/// names are cut and end in `~`. After
/// the table comes one line per finding, or `no outliers`.
#[must_use]
pub fn matrix_text(
    hosts: &[String],
    values: &[Vec<Option<f64>>],
    failed: &[Vec<bool>],
    unit: &str,
    findings: &[Finding],
) -> String {
    let n = hosts.len();
    let texts: Vec<Vec<String>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        "-".to_string()
                    } else if let Some(v) = value_at(values, i, j) {
                        number(v)
                    } else if failed_at(failed, i, j) {
                        "fail".to_string()
                    } else {
                        ".".to_string()
                    }
                })
                .collect()
        })
        .collect();
    let width = texts
        .iter()
        .flatten()
        .map(|t| t.chars().count())
        .max()
        .unwrap_or(0)
        .max(8)
        // a name's width, up to 16 (an address with its port fits)
        .max(
            hosts
                .iter()
                .map(|h| h.chars().count())
                .max()
                .unwrap_or(0)
                .min(16),
        );
    let label = hosts
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 24);

    let mut out = String::new();
    if unit.is_empty() {
        out.push_str("rows send, columns receive\n");
    } else {
        let _ = writeln!(out, "rows send, columns receive ({unit})");
    }
    let _ = write!(out, "{:label$}", "");
    for h in hosts {
        let _ = write!(out, " {:>width$}", truncate(h, width));
    }
    out.push('\n');
    for (h, row) in hosts.iter().zip(&texts) {
        let _ = write!(out, "{:<label$}", truncate(h, label));
        for t in row {
            let _ = write!(out, " {t:>width$}");
        }
        out.push('\n');
    }
    out.push('\n');
    if findings.is_empty() {
        out.push_str("no outliers\n");
    }
    for f in findings {
        let _ = writeln!(out, "{}", describe(f, hosts));
    }
    out
}

/// One result row of the CSV output.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvRow {
    /// Index of the round the test ran in.
    pub round: usize,
    /// Name of the sending host.
    pub from: String,
    /// Name of the receiving host.
    pub to: String,
    /// Measured throughput; empty in the CSV when missing.
    pub throughput: Option<f64>,
    /// Unit of `throughput`.
    pub unit: String,
    /// Start of the test, in seconds (from any fixed origin).
    pub start: f64,
    /// End of the test, in seconds (same origin as `start`).
    pub end: f64,
    /// Why the test failed, if it did.
    pub error: Option<String>,
}

/// Quotes a CSV field per RFC 4180 when it holds a comma, quote or newline.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number with at most 3 decimals and no trailing zeros; empty if missing.
fn csv_number(v: Option<f64>) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return String::new();
    };
    let mut s = format!("{v:.3}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" { "0".to_string() } else { s }
}

/// The CSV header line (without line end), written once before the rows.
#[must_use]
pub fn csv_header() -> &'static str {
    "round,from,to,throughput,unit,start,end,error"
}

/// One CSV line (without line end) for a result, for writing rows as they
/// come in.
#[must_use]
pub fn csv_line(r: &CsvRow) -> String {
    [
        r.round.to_string(),
        csv_field(&r.from),
        csv_field(&r.to),
        csv_number(r.throughput),
        csv_field(&r.unit),
        csv_number(Some(r.start)),
        csv_number(Some(r.end)),
        csv_field(r.error.as_deref().unwrap_or("")),
    ]
    .join(",")
}

/// A whole CSV document: the header and one line per row, each ending in `\n`.
#[must_use]
pub fn csv(rows: &[CsvRow]) -> String {
    let mut out = String::from(csv_header());
    out.push('\n');
    for r in rows {
        out.push_str(&csv_line(r));
        out.push('\n');
    }
    out
}

/// Escapes the XML special characters of `s`.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// Colour of position `t` (0 = lowest, 1 = highest) on a light-to-dark blue
/// sequential scale.
fn colour(t: f64) -> String {
    const LOW: [f64; 3] = [247.0, 251.0, 255.0];
    const MID: [f64; 3] = [107.0, 174.0, 214.0];
    const HIGH: [f64; 3] = [8.0, 48.0, 107.0];
    let pos = if t.is_nan() { 0.5 } else { t.clamp(0.0, 1.0) };
    let (start, stop, frac) = if pos <= 0.5 {
        (LOW, MID, pos * 2.0)
    } else {
        (MID, HIGH, pos * 2.0 - 1.0)
    };
    let channel = |i: usize| (start[i] + (stop[i] - start[i]) * frac).round();
    format!("rgb({:.0},{:.0},{:.0})", channel(0), channel(1), channel(2))
}

const FLAG: &str = "#e6550d";
const CHAR_W: usize = 7;
const LABEL_MAX: usize = 32;
const NOTE: &str =
    "grey: same host; white with a cross: not measured or failed; orange outline: flagged outlier";

/// Positions and sizes of the heatmap's parts, in pixels.
struct Layout {
    n: usize,
    cell_w: usize,
    cell_h: usize,
    left: usize,
    top: usize,
    legend_x: usize,
    legend_h: usize,
    width: usize,
    height: usize,
}

impl Layout {
    fn new(
        hosts: &[String],
        values: &[Vec<Option<f64>>],
        range: Option<(f64, f64)>,
        unit: &str,
        title: &str,
    ) -> Self {
        let n = hosts.len();
        let labels = hosts
            .iter()
            .map(|h| h.chars().count().min(LABEL_MAX))
            .max()
            .unwrap_or(1);
        let value_chars = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter_map(|(i, j)| value_at(values, i, j))
            .map(|v| number(v).len())
            .max()
            .unwrap_or(1);
        let cell_w = (value_chars * CHAR_W + 12).max(48);
        let cell_h = 28;
        let left = 24 + 10 + labels * CHAR_W + 8;
        let top = 34 + 20 + labels * CHAR_W + 8;
        let legend_x = left + n * cell_w + 30;
        let legend_h = (n * cell_h).max(120);
        let legend_chars = match range {
            Some((lo, hi)) => {
                (number(lo).len().max(number(hi).len()) + 5).max(unit.chars().count())
            }
            None => 7,
        };
        let width = (legend_x + 16 + 8 + legend_chars * CHAR_W + 20)
            .max(title.chars().count() * 9 + 20)
            .max(NOTE.len() * CHAR_W + 20);
        let height = top + legend_h + 46;
        Layout {
            n,
            cell_w,
            cell_h,
            left,
            top,
            legend_x,
            legend_h,
            width,
            height,
        }
    }

    fn cell_x(&self, j: usize) -> usize {
        self.left + j * self.cell_w
    }

    fn cell_y(&self, i: usize) -> usize {
        self.top + i * self.cell_h
    }
}

/// Titles, axis titles and host labels on both axes.
fn svg_labels(out: &mut String, l: &Layout, hosts: &[String], title: &str, findings: &[Finding]) {
    let flagged = |h: usize, d: Direction| {
        findings.iter().any(
            |f| matches!(*f, Finding::Host { host, direction, .. } if host == h && direction == d),
        )
    };
    let style = |on: bool| {
        if on {
            format!(" fill=\"{FLAG}\" font-weight=\"bold\"")
        } else {
            String::new()
        }
    };
    let _ = writeln!(out, "<title>{}</title>", xml(title));
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{}</text>",
        xml(title)
    );
    let grid_w = l.n * l.cell_w;
    let grid_h = l.n * l.cell_h;
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"50\" text-anchor=\"middle\" font-weight=\"bold\">receiver</text>",
        l.left + grid_w / 2
    );
    let _ = writeln!(
        out,
        "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\" font-weight=\"bold\">sender</text>",
        l.top + grid_h / 2
    );
    for (j, h) in hosts.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text transform=\"translate({} {}) rotate(-90)\" dominant-baseline=\"middle\"{}>{}</text>",
            l.cell_x(j) + l.cell_w / 2,
            l.top - 6,
            style(flagged(j, Direction::Receiving)),
            xml(&truncate(h, LABEL_MAX))
        );
    }
    for (i, h) in hosts.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\"{}>{}</text>",
            l.left - 6,
            l.cell_y(i) + l.cell_h / 2,
            style(flagged(i, Direction::Sending)),
            xml(&truncate(h, LABEL_MAX))
        );
    }
}

/// One rectangle per cell, with its value or a cross, plus a tooltip.
fn svg_cells(
    out: &mut String,
    l: &Layout,
    hosts: &[String],
    values: &[Vec<Option<f64>>],
    unit: &str,
    range: Option<(f64, f64)>,
) {
    for i in 0..l.n {
        for j in 0..l.n {
            let (left, top, wide, high) = (l.cell_x(j), l.cell_y(i), l.cell_w, l.cell_h);
            let tip = format!("{} -> {}", hosts[i], hosts[j]);
            let value = if i == j { None } else { value_at(values, i, j) };
            let (fill, tip) = match (i == j, value, range) {
                (true, _, _) => ("#bdbdbd".to_string(), format!("{tip}: same host")),
                (false, Some(val), Some((lo, hi))) => {
                    let pos = if hi > lo { (val - lo) / (hi - lo) } else { 0.5 };
                    (colour(pos), format!("{tip}: {} {unit}", number(val)))
                }
                _ => (
                    "#ffffff".to_string(),
                    format!("{tip}: not measured or failed"),
                ),
            };
            let _ = writeln!(
                out,
                "<rect class=\"cell\" x=\"{left}\" y=\"{top}\" width=\"{wide}\" height=\"{high}\" fill=\"{fill}\" stroke=\"#ffffff\"><title>{}</title></rect>",
                xml(&tip)
            );
            match (i == j, value, range) {
                (true, _, _) => {}
                (false, Some(val), Some((lo, hi))) => {
                    let pos = if hi > lo { (val - lo) / (hi - lo) } else { 0.5 };
                    let ink = if pos > 0.5 { "#ffffff" } else { "#000000" };
                    let _ = writeln!(
                        out,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" dominant-baseline=\"middle\" font-size=\"11\" fill=\"{ink}\">{}</text>",
                        left + wide / 2,
                        top + high / 2,
                        number(val)
                    );
                }
                _ => {
                    let _ = writeln!(
                        out,
                        "<path d=\"M{} {} L{} {} M{} {} L{} {}\" stroke=\"#bbbbbb\"/>",
                        left + 6,
                        top + 6,
                        left + wide - 6,
                        top + high - 6,
                        left + wide - 6,
                        top + 6,
                        left + 6,
                        top + high - 6
                    );
                }
            }
        }
    }
}

/// Outlines of flagged hosts (whole row or column) and flagged links.
fn svg_flags(out: &mut String, l: &Layout, findings: &[Finding]) {
    for finding in findings {
        let (left, top, wide, high) = match *finding {
            Finding::Host {
                host,
                direction: Direction::Sending,
                ..
            } if host < l.n => (l.left, l.cell_y(host), l.n * l.cell_w, l.cell_h),
            Finding::Host {
                host,
                direction: Direction::Receiving,
                ..
            } if host < l.n => (l.cell_x(host), l.top, l.cell_w, l.n * l.cell_h),
            Finding::Link { from, to, .. } if from < l.n && to < l.n => {
                (l.cell_x(to), l.cell_y(from), l.cell_w, l.cell_h)
            }
            _ => continue,
        };
        let _ = writeln!(
            out,
            "<rect class=\"flag\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{FLAG}\" stroke-width=\"3\"/>",
            left + 1,
            top + 1,
            wide.saturating_sub(2),
            high.saturating_sub(2)
        );
    }
}

/// The colour bar with its minimum and maximum, and the key to the symbols.
fn svg_legend(out: &mut String, l: &Layout, unit: &str, range: Option<(f64, f64)>) {
    let (x, y, bar) = (l.legend_x, l.top, l.legend_h);
    let _ = writeln!(
        out,
        "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
    );
    for step in 0..=4u8 {
        let offset = f64::from(step) / 4.0;
        let _ = writeln!(
            out,
            "<stop offset=\"{offset}\" stop-color=\"{}\"/>",
            colour(offset)
        );
    }
    let _ = writeln!(out, "</linearGradient></defs>");
    match range {
        Some((lo, hi)) => {
            let _ = writeln!(
                out,
                "<rect class=\"legend\" x=\"{x}\" y=\"{y}\" width=\"16\" height=\"{bar}\" fill=\"url(#scale)\" stroke=\"#888888\"/>"
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\">max {}</text>",
                x + 22,
                y + 10,
                number(hi)
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\">min {}</text>",
                x + 22,
                y + bar,
                number(lo)
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                x + 22,
                y + bar / 2 + 4,
                xml(unit)
            );
        }
        None => {
            let _ = writeln!(out, "<text x=\"{x}\" y=\"{}\">no data</text>", y + 10);
        }
    }
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{}\" font-size=\"11\" fill=\"#555555\">{NOTE}</text>",
        y + bar + 30
    );
}

/// A self-contained SVG heatmap of the throughput matrix.
///
/// Rows are senders and columns receivers, one rectangle per cell coloured on
/// a light-to-dark blue scale from the smallest to the largest measured value
/// and labelled with the value; the diagonal is grey and unmeasured cells are
/// white with a cross. Flagged hosts (their whole row or column) and links are
/// outlined in orange, and a legend shows the scale's minimum and maximum.
/// Host names, unit and title are XML-escaped.
#[must_use]
pub fn svg_heatmap(
    hosts: &[String],
    values: &[Vec<Option<f64>>],
    unit: &str,
    title: &str,
    findings: &[Finding],
) -> String {
    let n = hosts.len();
    let measured: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .filter_map(|(i, j)| value_at(values, i, j))
        .filter(|v| v.is_finite())
        .collect();
    let range = measured
        .iter()
        .copied()
        .reduce(f64::min)
        .zip(measured.iter().copied().reduce(f64::max));
    let l = Layout::new(hosts, values, range, unit, title);
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">",
        w = l.width,
        h = l.height
    );
    let _ = writeln!(
        out,
        "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>",
        l.width, l.height
    );
    svg_labels(&mut out, &l, hosts, title, findings);
    svg_cells(&mut out, &l, hosts, values, unit, range);
    svg_flags(&mut out, &l, findings);
    svg_legend(&mut out, &l, unit, range);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_string()).collect()
    }

    fn row(from: &str, throughput: Option<f64>, error: Option<&str>) -> CsvRow {
        CsvRow {
            round: 3,
            from: from.to_string(),
            to: "b".to_string(),
            throughput,
            unit: "10^6bits/s".to_string(),
            start: 1.5,
            end: 11.25,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn csv_quotes_and_lines() {
        let rows = vec![
            row("a", Some(941.123_456), None),
            row("we,ird \"host\"", None, Some("connection refused\nretry")),
            row("c", Some(100.0), None),
        ];
        let text = csv(&rows);
        assert!(text.starts_with("round,from,to,throughput,unit,start,end,error\n"));
        assert_eq!(csv_line(&rows[0]), "3,a,b,941.123,10^6bits/s,1.5,11.25,");
        assert_eq!(
            csv_line(&rows[1]),
            "3,\"we,ird \"\"host\"\"\",b,,10^6bits/s,1.5,11.25,\"connection refused\nretry\""
        );
        assert_eq!(csv_line(&rows[2]), "3,c,b,100,10^6bits/s,1.5,11.25,");
        assert!(text.ends_with('\n'));
        // One record per row (the second spans two physical lines inside quotes).
        assert_eq!(text.lines().count(), 1 + rows.len() + 1);
        assert_eq!(csv_number(Some(-0.0001)), "0");
        assert_eq!(csv_number(Some(f64::NAN)), "");
    }

    type Sample = (Vec<String>, Vec<Vec<Option<f64>>>, Vec<Vec<bool>>);

    fn sample() -> Sample {
        let names = hosts(&["h1", "h2", "a-very-long-host-name.example", "h4"]);
        let cells = vec![
            Cell {
                from: 0,
                to: 1,
                value: Some(941.2),
                error: None,
            },
            Cell {
                from: 1,
                to: 0,
                value: Some(30.25),
                error: None,
            },
            Cell {
                from: 0,
                to: 2,
                value: Some(5.5),
                error: None,
            },
            Cell {
                from: 2,
                to: 3,
                value: None,
                error: Some("timeout".into()),
            },
            Cell {
                from: 3,
                to: 0,
                value: Some(1234.0),
                error: None,
            },
        ];
        let (values, failed) = matrices(4, &cells);
        (names, values, failed)
    }

    #[test]
    fn matrix_text_layout_and_findings() {
        let (names, values, failed) = sample();
        let findings = vec![
            Finding::Host {
                host: 2,
                direction: Direction::Receiving,
                median: 33.1,
                typical: 95.2,
            },
            Finding::Link {
                from: 1,
                to: 0,
                value: 30.2,
                expected: 94.0,
            },
        ];
        let text = matrix_text(&names, &values, &failed, "10^6bits/s", &findings);
        println!("{text}");
        assert!(text.starts_with("rows send, columns receive (10^6bits/s)\n"));
        for h in ["h1", "h2", "h4", "a-very-"] {
            assert!(text.contains(h), "{h}");
        }
        for needle in [" 941 ", "30.2", "5.50", "1234", "fail", " - ", " . "] {
            assert!(text.contains(needle), "{needle:?} missing");
        }
        assert!(text.contains(
            "host a-very-long-host-name.example receives at 33.1 against a typical 95.2"
        ));
        assert!(text.contains("link h2 -> h1: 30.2 against an expected 94.0"));
        assert!(!text.contains("no outliers"));
        // All table lines have the same width.
        let widths: Vec<usize> = text
            .lines()
            .skip(1)
            .take(5)
            .map(|l| l.chars().count())
            .collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
        let calm = matrix_text(&names, &values, &failed, "10^6bits/s", &[]);
        assert!(calm.contains("no outliers"));
        let f = Finding::Host {
            host: 0,
            direction: Direction::Sending,
            median: 150.4,
            typical: 940.0,
        };
        assert_eq!(
            describe(&f, &names),
            "host h1 sends at 150 against a typical 940"
        );
    }

    /// Checks that tags balance, that tags hold no stray `<`, and that every
    /// `&` starts a predefined entity.
    fn well_formed(s: &str) -> Result<(), String> {
        let entities_ok = |t: &str| {
            t.match_indices('&').all(|(i, _)| {
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| t[i..].starts_with(e))
            })
        };
        let mut stack: Vec<String> = Vec::new();
        let mut roots = 0;
        let mut rest = s;
        while let Some(start) = rest.find('<') {
            if !entities_ok(&rest[..start]) {
                return Err(format!("bad entity in {:?}", &rest[..start]));
            }
            let after = &rest[start + 1..];
            let end = after.find('>').ok_or("unterminated tag")?;
            let tag = &after[..end];
            rest = &after[end + 1..];
            if tag.contains('<') || !entities_ok(tag) || tag.matches('"').count() % 2 != 0 {
                return Err(format!("bad tag <{tag}>"));
            }
            if tag.starts_with('?') || tag.starts_with('!') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("unmatched </{name}>"))?;
                if open != name.trim() {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
            } else {
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    let name = tag.split_whitespace().next().ok_or("empty tag")?;
                    stack.push(name.to_string());
                }
            }
        }
        if !rest.trim().is_empty() {
            return Err("text after the root element".into());
        }
        if !stack.is_empty() || roots != 1 {
            return Err(format!("unclosed {stack:?} or {roots} roots"));
        }
        Ok(())
    }

    #[test]
    fn tag_checker_catches_errors() {
        assert!(well_formed("<a><b/></a>").is_ok());
        assert!(well_formed("<a><b></a>").is_err());
        assert!(well_formed("<a>x & y</a>").is_err());
        assert!(well_formed("<a t=\"<\"/>").is_err());
        assert!(well_formed("<a/><b/>").is_err());
    }

    #[test]
    fn svg_is_well_formed_with_escaped_names() {
        let (mut names, values, _) = sample();
        names[1] = "a<b&c".to_string();
        let findings = vec![
            Finding::Host {
                host: 3,
                direction: Direction::Sending,
                median: 10.0,
                typical: 90.0,
            },
            Finding::Host {
                host: 2,
                direction: Direction::Receiving,
                median: 10.0,
                typical: 90.0,
            },
            Finding::Link {
                from: 1,
                to: 0,
                value: 30.2,
                expected: 94.0,
            },
        ];
        let svg = svg_heatmap(&names, &values, "10^6bits/s", "mesh \"lab\" <1>", &findings);
        well_formed(&svg).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert_eq!(svg.matches("<rect class=\"cell\"").count(), 16);
        assert_eq!(svg.matches("<rect class=\"flag\"").count(), 3);
        assert!(svg.contains("a&lt;b&amp;c"));
        assert!(!svg.contains("a<b&c"));
        assert!(svg.contains("mesh &quot;lab&quot; &lt;1&gt;"));
        for needle in [
            ">sender<",
            ">receiver<",
            "max 1234",
            "min 5.50",
            "#bdbdbd",
            "<path",
        ] {
            assert!(svg.contains(needle), "{needle:?} missing");
        }
        let empty = svg_heatmap(&hosts(&["x", "y"]), &[], "u", "t", &[]);
        well_formed(&empty).unwrap();
        assert!(empty.contains("no data"));
        assert_eq!(empty.matches("<rect class=\"cell\"").count(), 4);
    }

    #[test]
    fn colour_scale_ends() {
        assert_eq!(colour(0.0), "rgb(247,251,255)");
        assert_eq!(colour(1.0), "rgb(8,48,107)");
        assert_eq!(colour(f64::NAN), colour(0.5));
        assert_eq!(truncate("abcdefghij", 8), "abcdefg~");
        assert_eq!(number(941.6), "942");
        assert_eq!(number(33.14), "33.1");
        assert_eq!(number(5.0), "5.00");
    }
}
