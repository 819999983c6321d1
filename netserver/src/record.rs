//! `--record FILE`: one JSON line after each completed test, with both
//! ends' figures as netperf received them: netperf's own (which a client of
//! ours sends after the results, [`proto::ClientSummary`]) and the
//! netserver's results. Lines go through a [`crate::log::Logger`] of their
//! own, so the log's rules hold: SIGHUP reopens the file, a stalled disk
//! never stalls the control loop, dropped lines are counted.

use std::{net::SocketAddr, time::SystemTime};

use proto::{ClientSummary, SideResults, TestKind, TestSpec, dialect::Dialect};
use serde_json::{Value, json};

use crate::{log::rfc3339, metrics::dialect_label};

/// A test whose results went out, waiting (briefly) for what the client
/// made of it.
#[derive(Debug)]
pub(crate) struct Finished {
    pub session: u64,
    pub peer: SocketAddr,
    pub dialect: Dialect,
    pub spec: TestSpec,
    pub start: SystemTime,
    pub end: SystemTime,
    pub server: SideResults,
    /// A UDP sender's datagrams, as the client said when it was done.
    pub datagrams_sent: Option<u64>,
    /// The turn it ran in (`--schedule exclusive`): the client host whose
    /// turn it was, and when the turn began.
    pub turn: Option<(std::net::IpAddr, SystemTime)>,
}

/// A side's counters for the record: the per-flow counters left out
/// (`flow_count` and `spread` stay).
fn side(r: &SideResults) -> Value {
    let mut r = r.clone();
    r.flows.clear();
    serde_json::to_value(&r).unwrap_or(Value::Null)
}

/// What one side's counts make of a test: its rate over its own interval.
fn rate(kind: TestKind, r: &SideResults, units: &'static str) -> Value {
    let count = match kind {
        TestKind::TcpStream | TestKind::UdpStream => {
            r.bytes_received.max(r.bytes_sent) as f64 * 8.0
        }
        TestKind::TcpMaerts | TestKind::UdpMaerts => {
            r.bytes_sent.max(r.bytes_received) as f64 * 8.0
        }
        TestKind::TcpRr
        | TestKind::UdpRr
        | TestKind::TcpCrr
        | TestKind::TcpCc
        | TestKind::UdpStamp => r.transactions as f64,
    };
    let elapsed = r.elapsed_ns as f64 / 1e9;
    let value = if elapsed > 0.0 { count / elapsed } else { 0.0 };
    json!({ "value": value, "units": units })
}

/// The record's line. Its headline (`elapsed_s`, `throughput`) is the
/// netserver's own: what it moved over its own interval (what it received
/// of a stream sent to it, what it sent of one it sent, its transactions).
/// What the client said of the test (`client`, `local`) stands beside
/// it, checked field by field first
/// ([`proto::ClientSummary::validated`]); a summary that fails the check
/// is left out, and `client` says why.
pub(crate) fn line(
    f: &Finished,
    client: Option<&Result<ClientSummary, proto::SpecError>>,
) -> String {
    let kind = f.spec.kind;
    let units = if kind.is_rr() {
        "transactions/s"
    } else {
        "bits/s"
    };
    let summary = client.and_then(|c| c.as_ref().ok());
    let loss = match kind {
        TestKind::UdpStream => {
            let received = f.server.udp.as_ref().map_or(0, |u| u.received);
            f.datagrams_sent.map(|sent| {
                json!({
                    "datagrams_sent": sent,
                    "datagrams_received": received,
                    "datagrams_lost": sent.saturating_sub(received),
                })
            })
        }
        _ => None,
    };
    let said = match client {
        None => Value::Null,
        Some(Err(e)) => json!({ "invalid": e.to_string() }),
        Some(Ok(c)) => json!({
            "elapsed_s": c.local.elapsed_ns as f64 / 1e9,
            "throughput": rate(kind, &c.local, units),
            "latency": c.latency.and_then(|l| serde_json::to_value(l).ok()),
            "transactions_lost": (kind == TestKind::UdpRr).then_some(c.lost),
        }),
    };
    json!({
        "time": rfc3339(f.end),
        "start": rfc3339(f.start),
        "session": f.session,
        "peer": f.peer.to_string(),
        "dialect": dialect_label(f.dialect),
        "test": kind.name(),
        "options": serde_json::to_value(&f.spec).unwrap_or(Value::Null),
        "elapsed_s": f.server.elapsed_ns as f64 / 1e9,
        "throughput": rate(kind, &f.server, units),
        "loss": loss,
        "turn": f.turn.map(|(host, since)| json!({ "host": host.to_string(), "start": rfc3339(since) })),
        "client": said,
        "local": summary.map(|c| side(&c.local)),
        "remote": side(&f.server),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Family;

    #[test]
    fn both_ends_figures_in_one_line() {
        let f = Finished {
            session: 7,
            peer: "127.0.0.1:40000".parse().unwrap(),
            dialect: Dialect::Native,
            spec: TestSpec::new(TestKind::UdpStream, Family::V4),
            start: SystemTime::UNIX_EPOCH,
            end: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(2),
            server: SideResults {
                bytes_received: 1_000_000,
                elapsed_ns: 2_000_000_000,
                udp: Some(proto::UdpRecvStats {
                    received: 990,
                    out_of_order: 0,
                    duplicates: 0,
                    foreign: 0,
                    rcvbuf_drops: 0,
                    drops_source: proto::DropSource::Socket,
                    jitter_ns: 0,
                }),
                ..Default::default()
            },
            datagrams_sent: Some(1000),
            turn: None,
        };
        let client = ClientSummary {
            local: SideResults {
                elapsed_ns: 1_000_000_000,
                bytes_sent: 1_010_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let limits = proto::Limits::default();
        let said = client.clone().validated(&limits);
        let v: Value = serde_json::from_str(&line(&f, Some(&said))).unwrap();
        assert_eq!(v["test"], "UDP_STREAM");
        assert_eq!(v["session"], 7);
        assert_eq!(v["time"], "1970-01-01T00:00:02.000Z");
        // the netserver's rate over its own interval, of what arrived
        assert_eq!(v["throughput"]["value"], 4_000_000.0);
        assert_eq!(v["elapsed_s"], 2.0);
        // the client's beside it, marked as the client's
        assert_eq!(v["client"]["throughput"]["value"], 8_080_000.0);
        assert_eq!(v["loss"]["datagrams_lost"], 10);
        assert_eq!(v["local"]["bytes_sent"], 1_010_000);
        assert_eq!(v["remote"]["bytes_received"], 1_000_000);
        // a client that told nothing
        let v: Value = serde_json::from_str(&line(&f, None)).unwrap();
        assert_eq!(v["throughput"]["value"], 4_000_000.0);
        assert!(v["local"].is_null() && v["client"].is_null());
        // a forged summary: a 60 KB name, absurd figures: left out, and why
        let mut forged = client;
        forged.local.tcp = Some(proto::TcpStats {
            cong_control: "x".repeat(60_000),
            ..Default::default()
        });
        let said = forged.validated(&limits);
        let text = line(&f, Some(&said));
        assert!(text.len() < 4_000, "{} bytes", text.len());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["local"].is_null());
        assert!(
            v["client"]["invalid"]
                .as_str()
                .unwrap()
                .starts_with("local.tcp.cong_control"),
            "{v}"
        );
        assert_eq!(v["throughput"]["value"], 4_000_000.0);
    }
}
