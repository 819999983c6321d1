//! The JSON document's own types for what the protocol carries: each side's
//! options and counters. They are filled from the wire types here, and only
//! here, so that the control protocol can change without changing the
//! schema of doc/json.md (`rsnetperf-result/1`), and the other way round.

use serde::Serialize;

/// One side's socket options, as asked.
#[derive(Serialize, Debug)]
pub struct SideOptions {
    pub send_buf: Option<u32>,
    pub recv_buf: Option<u32>,
    pub send_size: Option<u32>,
    pub recv_size: Option<u32>,
    pub nodelay: bool,
    pub tos: Option<u8>,
    pub cong_control: Option<String>,
    pub priority: Option<u32>,
    pub cpu_bind: Option<u32>,
    pub dont_route: bool,
    pub send_align: u32,
    pub recv_align: u32,
    pub send_offset: u32,
    pub recv_offset: u32,
    pub send_width: Option<u32>,
    pub recv_width: Option<u32>,
}

impl From<&proto::SideSpec> for SideOptions {
    fn from(s: &proto::SideSpec) -> SideOptions {
        SideOptions {
            send_buf: s.send_buf,
            recv_buf: s.recv_buf,
            send_size: s.send_size,
            recv_size: s.recv_size,
            nodelay: s.nodelay,
            tos: s.tos,
            cong_control: s.cong_control.clone(),
            priority: s.priority,
            cpu_bind: s.cpu_bind,
            dont_route: s.dont_route,
            send_align: s.send_align,
            recv_align: s.recv_align,
            send_offset: s.send_offset,
            recv_offset: s.recv_offset,
            send_width: s.send_width,
            recv_width: s.recv_width,
        }
    }
}

/// CPU utilisation of one side.
#[derive(Serialize, Debug)]
pub struct Cpu {
    pub util: f64,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub peak_cpu: u32,
    pub peak_util: f64,
    pub num_cpus: u32,
    pub method: char,
}

/// TCP_INFO at the end of the test.
#[derive(Serialize, Debug)]
pub struct Tcp {
    pub retransmits: u64,
    pub mss: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub cwnd: u32,
    pub cong_control: String,
}

/// What a UDP receiver counted.
#[derive(Serialize, Debug)]
pub struct UdpReceived {
    pub received: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub rcvbuf_drops: u64,
    /// "Socket", "Host" or "Unavailable".
    pub drops_source: &'static str,
    pub jitter_ns: u64,
}

/// One flow's counters.
#[derive(Serialize, Debug)]
pub struct Flow {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
}

/// What one side measured.
#[derive(Serialize, Debug)]
pub struct Side {
    pub elapsed_ns: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub send_calls: u64,
    pub recv_calls: u64,
    pub transactions: u64,
    pub send_errors: u64,
    pub send_buf_end: u32,
    pub recv_buf_end: u32,
    pub cpu: Option<Cpu>,
    pub tcp: Option<Tcp>,
    pub udp: Option<UdpReceived>,
    pub flow_count: u32,
    pub flows: Vec<Flow>,
    pub spread: Option<Spread>,
    /// Data connections the side closed as not the test's (the netserver's
    /// data port), and how many of them came during the measurement.
    pub foreign_connections: ForeignConnections,
    /// Of the bytes received, those that came as mapped pages
    /// (`--rx-zerocopy`; 0 on every other path).
    pub rx_mapped_bytes: u64,
}

/// Data connections turned away from a test's data port.
#[derive(Serialize, Debug)]
pub struct ForeignConnections {
    pub closed: u64,
    pub during_measurement: u64,
}

/// The least and the most one flow moved.
#[derive(Serialize, Debug)]
pub struct Spread {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub min_transactions: u64,
    pub max_transactions: u64,
}

impl From<&proto::SideResults> for Side {
    fn from(r: &proto::SideResults) -> Side {
        Side {
            elapsed_ns: r.elapsed_ns,
            bytes_sent: r.bytes_sent,
            bytes_received: r.bytes_received,
            send_calls: r.send_calls,
            recv_calls: r.recv_calls,
            transactions: r.transactions,
            send_errors: r.send_errors,
            send_buf_end: r.send_buf_end,
            recv_buf_end: r.recv_buf_end,
            cpu: r.cpu.as_ref().map(|c| Cpu {
                util: c.util,
                user: c.user,
                system: c.system,
                iowait: c.iowait,
                irq: c.irq,
                softirq: c.softirq,
                peak_cpu: c.peak_cpu,
                peak_util: c.peak_util,
                num_cpus: c.num_cpus,
                method: c.method,
            }),
            tcp: r.tcp.as_ref().map(|t| Tcp {
                retransmits: t.retransmits,
                mss: t.mss,
                rtt_us: t.rtt_us,
                rttvar_us: t.rttvar_us,
                cwnd: t.cwnd,
                cong_control: t.cong_control.clone(),
            }),
            udp: r.udp.as_ref().map(|u| UdpReceived {
                received: u.received,
                out_of_order: u.out_of_order,
                duplicates: u.duplicates,
                foreign: u.foreign,
                rcvbuf_drops: u.rcvbuf_drops,
                drops_source: match u.drops_source {
                    proto::DropSource::Socket => "Socket",
                    proto::DropSource::SocketCoalesced => "SocketCoalesced",
                    proto::DropSource::Host => "Host",
                    proto::DropSource::Unavailable => "Unavailable",
                },
                jitter_ns: u.jitter_ns,
            }),
            flow_count: r.flow_count,
            flows: r
                .flows
                .iter()
                .map(|f| Flow {
                    bytes_sent: f.bytes_sent,
                    bytes_received: f.bytes_received,
                    send_calls: f.send_calls,
                    recv_calls: f.recv_calls,
                    transactions: f.transactions,
                })
                .collect(),
            spread: r.spread.map(|s| Spread {
                min_bytes: s.min_bytes,
                max_bytes: s.max_bytes,
                min_transactions: s.min_transactions,
                max_transactions: s.max_transactions,
            }),
            foreign_connections: ForeignConnections {
                closed: r.foreign_connections.closed,
                during_measurement: r.foreign_connections.measured,
            },
            rx_mapped_bytes: r.rx.mapped_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's side objects serialize as the wire types did when
    /// the schema was written (same names, same shapes): the JSON does not
    /// move when they do.
    #[test]
    fn sides_keep_the_schema() {
        let mut r = proto::SideResults {
            bytes_sent: 5,
            ..Default::default()
        };
        r.udp = Some(proto::UdpRecvStats {
            received: 1,
            out_of_order: 0,
            duplicates: 0,
            foreign: 0,
            rcvbuf_drops: 0,
            drops_source: proto::DropSource::Host,
            jitter_ns: 9,
        });
        let ours = serde_json::to_value(Side::from(&r)).unwrap();
        assert_eq!(ours["bytes_sent"], 5);
        assert_eq!(ours["udp"]["drops_source"], "Host");
        assert_eq!(ours["udp"]["jitter_ns"], 9);
        assert_eq!(ours["rx_mapped_bytes"], 0);
        let keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 17, "{keys:?}");
        let o = serde_json::to_value(SideOptions::from(&proto::SideSpec::default())).unwrap();
        assert_eq!(o.as_object().unwrap().len(), 16);
    }
}
