//! `netperf mesh --push URL`: the mesh's figures pushed to a Prometheus
//! Pushgateway, the Prometheus convention for a batch job's results: one
//! PUT of the text exposition format to `URL/metrics/job/netperf_mesh`
//! (the job's previous group replaced), which a Prometheus then scrapes
//! from the gateway (with `honor_labels: true`, so that the labels are
//! the mesh's).
//!
//! Metrics (every one labelled `test`):
//! - `netperf_mesh_pair_value{from,to,units}`: each measured pair's
//!   headline;
//! - `netperf_mesh_pair_ok{from,to}`: 1 for a pair measured, 0 for one
//!   that failed or was skipped;
//! - `netperf_mesh_pair_change{from,to,verdict}`: with `--baseline`, each
//!   compared pair's change (now / base - 1), its verdict a label;
//! - `netperf_mesh_changes`: how many pairs changed beyond the noise;
//! - `netperf_mesh_duration_seconds`, `netperf_mesh_hosts_down`,
//!   `netperf_mesh_host_down{host}` (1 for each host still down at the
//!   end), `netperf_mesh_last_run_timestamp_seconds`.

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs},
    time::Duration,
};

use anyhow::{Context as _, Result, anyhow, bail};

/// Where to push: a Pushgateway's host, port and path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

impl Target {
    /// `http://HOST[:PORT][/PREFIX]` (the Pushgateway's port, 9091, by
    /// default).
    pub fn parse(url: &str) -> Result<Target> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => bail!(
                "--push: '{url}': {scheme}:// is not spoken here; a Pushgateway's plain http:// (put a TLS proxy in front of it for more)"
            ),
            None => url,
        };
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
            None => (rest, String::new()),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, tail) = v6
                .split_once(']')
                .ok_or_else(|| anyhow!("--push: '{url}': an unclosed '['"))?;
            (h.to_string(), tail.strip_prefix(':').unwrap_or("9091"))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (authority.to_string(), "9091"),
            }
        };
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| anyhow!("--push: '{url}': '{port}' is not a port"))?;
        if host.is_empty() {
            bail!("--push: '{url}': no host");
        }
        if path.contains(['?', '#', ' ']) {
            bail!("--push: '{url}': a path with a query or a space");
        }
        Ok(Target {
            host,
            port,
            prefix: path,
        })
    }

    /// The group's path on the gateway.
    pub fn path(&self) -> String {
        format!("{}/metrics/job/netperf_mesh", self.prefix)
    }
}

/// A label value as the text format writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The figures of one mesh, for the exposition.
#[derive(Debug, Default)]
pub struct Figures {
    pub test: String,
    pub units: String,
    /// (from, to, value or none).
    pub pairs: Vec<(String, String, Option<f64>)>,
    /// (from, to, change, verdict), with `--baseline`.
    pub changes: Vec<(String, String, f64, String)>,
    pub duration: f64,
    pub hosts_down: Vec<String>,
    pub finished_unix: f64,
}

impl Figures {
    /// With `--baseline`'s verdicts: every compared pair's change.
    pub fn with_changes(mut self, judged: &[super::baseline::Judged]) -> Figures {
        self.changes = judged
            .iter()
            .map(|j| {
                (
                    j.from.clone(),
                    j.to.clone(),
                    j.change,
                    j.verdict.to_string(),
                )
            })
            .collect();
        self
    }

    /// The pairs that changed beyond the noise.
    fn changed(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| matches!(c.3.as_str(), "SLOWER" | "FASTER"))
            .count()
    }
}

/// The text exposition of the figures.
pub fn exposition(f: &Figures) -> String {
    let t = escape(&f.test);
    let mut s = String::new();
    let mut family = |name: &str, help: &str, rows: Vec<(String, f64)>| {
        if rows.is_empty() {
            return;
        }
        s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for (labels, v) in rows {
            s.push_str(&format!("{name}{{test=\"{t}\"{labels}}} {v}\n"));
        }
    };
    let pair = |from: &str, to: &str| format!(",from=\"{}\",to=\"{}\"", escape(from), escape(to));
    family(
        "netperf_mesh_pair_value",
        "Each measured pair's result (the test's headline), in its units.",
        f.pairs
            .iter()
            .filter_map(|(a, b, v)| {
                v.map(|v| (format!("{},units=\"{}\"", pair(a, b), escape(&f.units)), v))
            })
            .collect(),
    );
    family(
        "netperf_mesh_pair_ok",
        "1 for a pair measured, 0 for one that failed or was skipped.",
        f.pairs
            .iter()
            .map(|(a, b, v)| (pair(a, b), if v.is_some() { 1.0 } else { 0.0 }))
            .collect(),
    );
    if !f.changes.is_empty() {
        family(
            "netperf_mesh_pair_change",
            "Each pair's change against the baseline mesh (now / base - 1).",
            f.changes
                .iter()
                .map(|(a, b, c, v)| (format!("{},verdict=\"{}\"", pair(a, b), escape(v)), *c))
                .collect(),
        );
    }
    family(
        "netperf_mesh_changes",
        "Pairs that changed beyond the noise against the baseline.",
        vec![(String::new(), f.changed() as f64)],
    );
    family(
        "netperf_mesh_duration_seconds",
        "How long the mesh ran.",
        vec![(String::new(), f.duration)],
    );
    family(
        "netperf_mesh_hosts_down",
        "Hosts that did not answer by the mesh's end.",
        vec![(String::new(), f.hosts_down.len() as f64)],
    );
    family(
        "netperf_mesh_host_down",
        "1 for each host still down at the mesh's end.",
        f.hosts_down
            .iter()
            .map(|h| (format!(",host=\"{}\"", escape(h)), 1.0))
            .collect(),
    );
    family(
        "netperf_mesh_last_run_timestamp_seconds",
        "When the mesh ended, Unix seconds.",
        vec![(String::new(), f.finished_unix)],
    );
    s
}

/// PUT the figures to the gateway: its answer's status, an error unless
/// it took them.
pub fn push(url: &str, f: &Figures) -> Result<()> {
    let t = Target::parse(url)?;
    let body = exposition(f);
    let addr = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .with_context(|| format!("--push: cannot resolve {}", t.host))?
        .next()
        .ok_or_else(|| anyhow!("--push: {} has no address", t.host))?;
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("--push: cannot connect to {addr}"))?;
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    c.set_write_timeout(Some(Duration::from_secs(30)))?;
    let host = if t.host.contains(':') {
        format!("[{}]:{}", t.host, t.port)
    } else {
        format!("{}:{}", t.host, t.port)
    };
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: netperf-mesh/{}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        t.path(),
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    // the status line, and a little of the body to say what went wrong
    let mut answer = Vec::new();
    let _ = c.take(4096).read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| anyhow!("--push: {addr} did not answer as an HTTP server"))?;
    if !(200..300).contains(&status) {
        let why = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
        bail!("--push: the Pushgateway at {addr} answered {status}: {why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://gw:9099/base/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("gw", 9099, "/base")
        );
        assert_eq!(t.path(), "/base/metrics/job/netperf_mesh");
        let t = Target::parse("pushgateway").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("pushgateway", 9091));
        let t = Target::parse("http://[2001:2::1]:1234").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("2001:2::1", 1234));
        assert!(
            Target::parse("https://gw")
                .unwrap_err()
                .to_string()
                .contains("https")
        );
        assert!(Target::parse("http://gw:0").is_err());
    }

    #[test]
    fn the_exposition_names_every_pair() {
        let f = Figures {
            test: "TCP_STREAM".into(),
            units: "10^6bits/s".into(),
            pairs: vec![
                ("a".into(), "b\"x".into(), Some(95.5)),
                ("b\"x".into(), "a".into(), None),
            ],
            changes: vec![("a".into(), "b\"x".into(), -0.4, "SLOWER".into())],
            duration: 12.5,
            hosts_down: vec!["c".into()],
            finished_unix: 1.0e9,
        };
        let s = exposition(&f);
        assert!(s.contains("netperf_mesh_pair_value{test=\"TCP_STREAM\",from=\"a\",to=\"b\\\"x\",units=\"10^6bits/s\"} 95.5\n"), "{s}");
        assert!(
            s.contains("netperf_mesh_pair_ok{test=\"TCP_STREAM\",from=\"b\\\"x\",to=\"a\"} 0\n"),
            "{s}"
        );
        assert!(s.contains("verdict=\"SLOWER\"} -0.4\n"), "{s}");
        assert!(
            s.contains("netperf_mesh_host_down{test=\"TCP_STREAM\",host=\"c\"} 1\n"),
            "{s}"
        );
        assert!(
            s.contains("netperf_mesh_changes{test=\"TCP_STREAM\"} 1\n"),
            "{s}"
        );
        assert_eq!(s.matches("# TYPE").count(), 8);
    }
}
