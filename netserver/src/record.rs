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
}

/// A side's counters for the record: the per-flow counters left out
/// (`flow_count` and `spread` stay).
fn side(r: &SideResults) -> Value {
    let mut r = r.clone();
    r.flows.clear();
    serde_json::to_value(&r).unwrap_or(Value::Null)
}

/// The record's line.
pub(crate) fn line(f: &Finished, client: Option<&ClientSummary>) -> String {
    let kind = f.spec.kind;
    let local = client.map(|c| &c.local);
    // the interval and the count netperf's result is a rate of: netperf's
    // own where it told them, else the netserver's
    let elapsed_ns = local.map_or(f.server.elapsed_ns, |l| l.elapsed_ns);
    let elapsed = elapsed_ns as f64 / 1e9;
    let (count, units) = match kind {
        TestKind::TcpStream | TestKind::UdpStream => {
            (f.server.bytes_received as f64 * 8.0, "bits/s")
        }
        TestKind::TcpMaerts | TestKind::UdpMaerts => (
            local.map_or(f.server.bytes_sent, |l| l.bytes_received) as f64 * 8.0,
            "bits/s",
        ),
        TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr | TestKind::TcpCc => (
            local.map_or(f.server.transactions, |l| l.transactions) as f64,
            "transactions/s",
        ),
    };
    let throughput = if elapsed > 0.0 { count / elapsed } else { 0.0 };
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
        TestKind::UdpRr => client.map(|c| json!({ "transactions_lost": c.lost })),
        _ => None,
    };
    let latency = client
        .and_then(|c| c.latency)
        .and_then(|l| serde_json::to_value(l).ok());
    json!({
        "time": rfc3339(f.end),
        "start": rfc3339(f.start),
        "session": f.session,
        "peer": f.peer.to_string(),
        "dialect": dialect_label(f.dialect),
        "test": kind.name(),
        "options": serde_json::to_value(&f.spec).unwrap_or(Value::Null),
        "elapsed_s": elapsed,
        "throughput": { "value": throughput, "units": units },
        "loss": loss,
        "latency": latency,
        "local": local.map(side),
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
        };
        let client = ClientSummary {
            local: SideResults {
                elapsed_ns: 1_000_000_000,
                bytes_sent: 1_010_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&line(&f, Some(&client))).unwrap();
        assert_eq!(v["test"], "UDP_STREAM");
        assert_eq!(v["session"], 7);
        assert_eq!(v["time"], "1970-01-01T00:00:02.000Z");
        // the rate over netperf's interval, of what arrived
        assert_eq!(v["throughput"]["value"], 8_000_000.0);
        assert_eq!(v["loss"]["datagrams_lost"], 10);
        assert_eq!(v["local"]["bytes_sent"], 1_010_000);
        assert_eq!(v["remote"]["bytes_received"], 1_000_000);
        // a client that told nothing: the netserver's own interval
        let v: Value = serde_json::from_str(&line(&f, None)).unwrap();
        assert_eq!(v["throughput"]["value"], 4_000_000.0);
        assert!(v["local"].is_null());
    }
}
