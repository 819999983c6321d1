//! What people look at: `--json-stream` read line by line, `--plot`'s SVG
//! rendered and read back against the figures it came from, and the
//! progress line on a terminal (and only there).

use std::{
    io::Read,
    os::fd::{AsFd, OwnedFd},
    process::{Command, Stdio},
    time::Duration,
};

use harness::{Netserver, bin, run_with_deadline};
use serde_json::Value;

fn temp(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rsnetperf-{tag}-{}", std::process::id()))
}

#[test]
fn json_stream_lines_parse_and_the_last_holds_the_document() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&[
            "-l",
            "2",
            "-D",
            "0.5",
            "--json-stream",
            "--",
            "--flows",
            "2",
        ])
        .ok();
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"start"), "{events:?}");
    assert_eq!(events.last(), Some(&"end"), "{events:?}");
    assert_eq!(lines[0]["test"], "TCP_STREAM");
    let interims: Vec<&Value> = lines.iter().filter(|l| l["event"] == "interim").collect();
    assert!(
        interims.len() >= 3,
        "a sample every 0.5 s of 2 s: {events:?}"
    );
    assert!(
        interims
            .iter()
            .all(|l| l["iteration"] == 1 && l["flows"].as_array().unwrap().len() == 2)
    );
    let iterations: Vec<&Value> = lines.iter().filter(|l| l["event"] == "iteration").collect();
    assert_eq!(iterations.len(), 1);
    // the end's document is the --json document of this very run: its
    // interim samples are the streamed ones, its iteration the streamed one
    let doc = &lines.last().unwrap()["document"];
    assert_eq!(doc["schema"], "rsnetperf-result/1");
    let kept = doc["interim"].as_array().unwrap();
    assert_eq!(kept.len(), interims.len());
    for (k, s) in kept.iter().zip(&interims) {
        for field in ["index", "rate", "units", "interval", "ending", "flows"] {
            assert_eq!(k[field], s[field], "{field}");
        }
    }
    assert_eq!(doc["iterations"][0]["value"], iterations[0]["value"]);
    assert_eq!(doc["result"]["value"], iterations[0]["value"]);
    // the same fields as --json prints
    let json: Value =
        serde_json::from_str(&ns.netperf(&["-l", "1", "--json"]).ok().stdout).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(doc), keys(&json));
    assert_eq!(out.stderr, "", "nothing on stderr when piped");
}

/// The points of the SVG's polylines of this stroke colour.
fn polylines(svg: &str, stroke: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| p.split('>').next())
        .filter(|p| p.contains(&format!("stroke=\"{stroke}\"")))
        .filter_map(|p| {
            let pts = p.split("points=\"").nth(1)?.split('"').next()?;
            Some(
                pts.split_whitespace()
                    .filter_map(|xy| {
                        let (x, y) = xy.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect(),
            )
        })
        .collect()
}

/// A picture drawn by a real renderer is not blank.
fn rendered_is_not_blank(svg: &std::path::Path) {
    if Command::new("rsvg-convert")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("NETPERF_REQUIRE_NETNS").as_deref() != Ok("1"),
            "rsvg-convert (librsvg2-bin) is not installed"
        );
        eprintln!("!!! SKIPPED rendering: rsvg-convert is not installed");
        return;
    }
    let png = svg.with_extension("png");
    let st = Command::new("rsvg-convert")
        .args(["-f", "png", "-o"])
        .arg(&png)
        .arg(svg)
        .status()
        .unwrap();
    assert!(st.success(), "rsvg-convert failed on {}", svg.display());
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let ink = pixels
        .chunks(px)
        .filter(|p| p.iter().take(3).any(|&c| c < 200))
        .count();
    let total = pixels.len() / px;
    assert!(
        ink * 100 > total && ink * 2 < total,
        "{ink} of {total} pixels drawn: blank, or all ink"
    );
    let _ = std::fs::remove_file(png);
}

#[test]
fn plot_draws_the_interims_it_was_given() {
    let ns = Netserver::start(&[]);
    let svg_path = temp("plot.svg");
    let out = ns
        .netperf(&[
            "-l",
            "3",
            "-D",
            "0.5",
            "--json",
            "--plot",
            svg_path.to_str().unwrap(),
            "--",
            "--flows",
            "2",
        ])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.contains("Throughput over time") && svg.contains("seconds since the start"));
    // the sum: the black line with a point a sample
    let samples = doc["interim"].as_array().unwrap();
    let sum = polylines(&svg, "#000000")
        .into_iter()
        .max_by_key(|l| l.len())
        .unwrap();
    assert_eq!(sum.len(), samples.len(), "a point a sample");
    let all: Vec<_> = polylines(&svg, "#000000")
        .into_iter()
        .filter(|l| l.len() > 2)
        .collect();
    assert_eq!(all.len(), 1, "one black line of data: {all:?}");
    // every point where the axes put its sample: the axes' scale from the
    // first and last points, every other point within a pixel of it
    let start = samples[0]["ending"].as_f64().unwrap() - samples[0]["interval"].as_f64().unwrap();
    let data: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            (
                s["ending"].as_f64().unwrap() - start,
                s["rate"].as_f64().unwrap(),
            )
        })
        .collect();
    let (lo, hi) = (
        data.iter()
            .enumerate()
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .unwrap()
            .0,
        data.iter()
            .enumerate()
            .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .unwrap()
            .0,
    );
    assert_ne!(data[lo].1, data[hi].1, "rates that differ: {data:?}");
    let (n, first) = (data.len() - 1, 0);
    let sx = (sum[n].0 - sum[first].0) / (data[n].0 - data[first].0);
    let sy = (sum[hi].1 - sum[lo].1) / (data[hi].1 - data[lo].1);
    for (p, d) in sum.iter().zip(&data) {
        let x = sum[first].0 + (d.0 - data[first].0) * sx;
        let y = sum[lo].1 + (d.1 - data[lo].1) * sy;
        assert!(
            (p.0 - x).abs() <= 1.0 && (p.1 - y).abs() <= 1.0,
            "{p:?} is not ({x}, {y}) for {d:?}"
        );
    }
    assert!(
        sy < 0.0,
        "a higher rate is drawn higher up: {sum:?} {data:?}"
    );
    // each flow a line of its own colour, as many points
    let flows = samples[0]["flows"].as_array().unwrap().len();
    assert_eq!(flows, 2);
    rendered_is_not_blank(&svg_path);

    // the same document, saved, draws the same picture
    let saved = temp("plot.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let again = temp("plot-again.svg");
    let mut cmd = Command::new(bin("netperf"));
    cmd.arg("plot").arg(&saved).arg(&again);
    let o = run_with_deadline(cmd, Duration::from_secs(30)).ok();
    assert!(o.stderr.contains("drew"), "{o}");
    assert_eq!(std::fs::read_to_string(&again).unwrap(), svg);
    for f in [svg_path, saved, again] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn plot_of_a_request_response_confidence_run() {
    let ns = Netserver::start(&[]);
    let svg_path = temp("plot-rr.svg");
    let out = ns
        .netperf(&[
            "-t",
            "TCP_RR",
            "-l",
            "1",
            "-I",
            "99,50",
            "-i",
            "3,3",
            "--json",
            "--plot",
            svg_path.to_str().unwrap(),
        ])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    for words in [
        "Result of each iteration",
        "Round-trip latency",
        "confidence interval",
        "99.9",
    ] {
        assert!(svg.contains(words), "{words}");
    }
    // an iteration a dot (and the legend's), the latency line's five points
    assert_eq!(doc["iterations"].as_array().unwrap().len(), 3);
    assert_eq!(svg.matches("<circle").count(), 3 + 1 + 5, "{svg}");
    assert_eq!(
        polylines(&svg, "#FF0000").iter().map(Vec::len).max(),
        Some(5)
    );
    rendered_is_not_blank(&svg_path);
    let _ = std::fs::remove_file(svg_path);
}

#[test]
fn a_bad_plot_input_is_named() {
    let f = temp("not-a-run.json");
    std::fs::write(&f, "{\"hello\": 1}").unwrap();
    let mut cmd = Command::new(bin("netperf"));
    cmd.arg("plot").arg(&f);
    let o = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2), "{o}");
    assert!(o.stderr.contains("not a netperf --json document"), "{o}");
    let _ = std::fs::remove_file(f);
}

/// Run netperf with its stderr on a pseudo-terminal and its stdout piped;
/// what the terminal showed.
fn on_a_terminal(port: u16, args: &[&str]) -> (String, String) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave: OwnedFd = pty.slave;
    let mut cmd = Command::new(bin("netperf"));
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave.as_fd().try_clone_to_owned().unwrap()));
    let mut child = cmd.spawn().unwrap();
    drop(slave);
    drop(cmd);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the last writer closes the terminal
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child.wait().unwrap();
    (reader.join().unwrap(), stdout)
}

#[test]
fn progress_shows_on_a_terminal_and_not_when_piped() {
    let ns = Netserver::start(&[]);
    let (tty, stdout) = on_a_terminal(ns.port(), &["-l", "4", "-P", "0"]);
    assert!(tty.contains("\r\u{1b}[Knetperf: TCP_STREAM, "), "{tty:?}");
    assert!(tty.contains(" s of 4 s, "), "{tty:?}");
    assert!(tty.contains("10^6bits/s"), "{tty:?}");
    assert!(
        tty.ends_with("\r\u{1b}[K"),
        "the line is cleared at the end: {tty:?}"
    );
    // stdout has netperf 2.7's row alone
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let piped = ns.netperf(&["-l", "4", "-P", "0"]).ok();
    assert_eq!(
        piped.stderr, "",
        "no progress when stderr is not a terminal"
    );
}

/// The netserver's own figures every interval, from its side of the test:
/// the last report is its whole count, to the byte and the datagram.
#[test]
fn the_netservers_interim_reports_add_up_to_its_results() {
    let ns = Netserver::start(&[]);
    let svg_path = temp("plot-udp.svg");
    let out = ns
        .netperf(&[
            "-t",
            "UDP_STREAM",
            "-l",
            "3",
            "-D",
            "0.5",
            "--json",
            "--plot",
            svg_path.to_str().unwrap(),
            "--",
            "-m",
            "1024",
            "--rate",
            "100m",
        ])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let reports = doc["remote_interim"].as_array().unwrap();
    assert!(
        reports.len() >= 5,
        "a report every 0.5 s of 3 s: {reports:?}"
    );
    let last = reports.last().unwrap();
    assert_eq!(last["calls"], doc["udp"]["received"], "datagrams received");
    assert_eq!(last["bytes"], doc["remote"]["bytes_received"]);
    let times: Vec<f64> = reports
        .iter()
        .map(|r| r["elapsed_seconds"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert!((times[0] - 0.5).abs() < 0.1, "{times:?}");
    // drawn: what we sent and what it received, a point a report
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.contains("UDP datagrams over time"));
    let received = polylines(&svg, "#00FF00")
        .into_iter()
        .max_by_key(|l| l.len())
        .unwrap();
    assert_eq!(received.len(), reports.len());
    rendered_is_not_blank(&svg_path);
    let _ = std::fs::remove_file(svg_path);

    // TCP: each flow's TCP_INFO in each report, the last the whole count
    let out = ns
        .netperf(&["-l", "2", "-D", "0.5", "--json", "--", "--flows", "2"])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let reports = doc["remote_interim"].as_array().unwrap();
    assert!(reports.len() >= 3, "{reports:?}");
    for r in reports {
        let tcp = r["tcp"].as_array().unwrap();
        assert_eq!(tcp.len(), 2, "{r}");
        assert!(
            tcp.iter()
                .all(|t| t["rtt_us"].as_u64().unwrap() > 0 && t["cwnd"].as_u64().unwrap() > 0)
        );
    }
    assert_eq!(
        reports.last().unwrap()["bytes"],
        doc["remote"]["bytes_received"]
    );
    // and ours: each of our samples carries each flow's TCP_INFO
    let ours = doc["interim"].as_array().unwrap();
    assert!(ours.len() >= 3, "{ours:?}");
    for s in ours {
        let tcp = s["tcp"].as_array().unwrap();
        assert_eq!(tcp.len(), 2, "{s}");
        assert!(tcp.iter().all(|t| t["rtt_us"].as_u64().unwrap() > 0));
    }
    // the sender's delivery rate, the rate it moved data at, and bytes in
    // flight while it sends
    assert!(
        ours.iter()
            .any(|s| s["tcp"][0]["delivery_rate"].as_u64().unwrap() > 0)
    );
    // (of any flow at any sample: a receiver the machine starves of CPU
    // closes its window, and a flow then has nothing in flight)
    assert!(ours.iter().any(|s| {
        s["tcp"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["bytes_in_flight"].as_u64().unwrap() > 0)
    }));
    // request/response: its transactions
    let out = ns
        .netperf(&["-t", "TCP_RR", "-l", "2", "-D", "0.5", "--json"])
        .ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let reports = doc["remote_interim"].as_array().unwrap();
    assert_eq!(
        reports.last().unwrap()["transactions"],
        doc["remote"]["transactions"]
    );
    // without -D, --json or --plot nothing is asked of the netserver
    let out = ns.netperf(&["-l", "1", "--json"]).ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["remote_interim"].as_array().unwrap().len(), 0);
}

/// TCP_INFO over the run, summarised in selectors: each end's least,
/// median and most round trip over its interim samples; none without `-D`.
#[test]
fn round_trip_selectors_summarise_the_run() {
    let ns = Netserver::start(&[]);
    let names = [
        "LOCAL_TRANSPORT_RTT_MIN",
        "LOCAL_TRANSPORT_RTT_MEDIAN",
        "LOCAL_TRANSPORT_RTT_MAX",
        "REMOTE_TRANSPORT_RTT_MIN",
        "REMOTE_TRANSPORT_RTT_MEDIAN",
        "REMOTE_TRANSPORT_RTT_MAX",
    ];
    let k = names.join(",");
    let values = |args: &[&str]| -> Vec<i64> {
        let out = ns.netperf(args).ok();
        names
            .iter()
            .map(|n| harness::keyval(&out.stdout, n) as i64)
            .collect()
    };
    let v = values(&[
        "-l", "2", "-D", "0.25", "-P", "0", "--", "--flows", "2", "-k", &k,
    ]);
    assert!(v.iter().all(|&x| x > 0), "{v:?}");
    assert!(v[0] <= v[1] && v[1] <= v[2], "ours: {v:?}");
    assert!(v[3] <= v[4] && v[4] <= v[5], "the netserver's: {v:?}");
    let none = values(&["-l", "1", "-P", "0", "--", "-k", &k]);
    assert!(none.iter().all(|&x| x == -1), "{none:?}");
}
