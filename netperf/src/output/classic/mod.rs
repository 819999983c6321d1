//! netperf 2.7's classic tables, line for line: the banner, the titles, the
//! data rows, and the extra blocks of `-v 2`. Scripts parse these; their
//! shape must not change.
//!
//! Per family: [`rr`] (TCP_RR, UDP_RR, TCP_CRR, TCP_CC), [`stream`]
//! (TCP_STREAM, TCP_MAERTS, TCP_SENDFILE), [`udp`] (UDP_STREAM); here
//! what they share: the banner, titles, confidence lines, CPU columns.

use std::fmt::Write as _;

use proto::{Direction, TestKind};

use super::{Endpoints, Out, Reporter, Results, Server};
use crate::cli::{TestName, Units};
use crate::{
    output::run_info::Test,
    report::{Figures, Measurement},
};

pub mod flows;
mod rpm;
mod rr;
pub use rr::{one_way_lines, under_load_lines};
mod stream;
mod udp;

pub use rpm::rpm;
pub use rr::{rr, udp_rr_loss_line};
pub use stream::{path_lines, receiver, share, stream};
pub use udp::{udp_loss_line, udp_stream};

/// The test's title as netperf 2.7 names it: by the name `-t` gave (so
/// `-t TCP_STREAM -- -T udp` is still a "TCP STREAM" test), and OMNI's by
/// its direction.
pub fn title(t: &Test) -> &'static str {
    match t.name {
        TestName::TcpStream => "MIGRATED TCP STREAM TEST",
        TestName::TcpMaerts => "MIGRATED TCP MAERTS TEST",
        TestName::UdpStream => "MIGRATED UDP STREAM TEST",
        TestName::TcpRr => "MIGRATED TCP REQUEST/RESPONSE TEST",
        TestName::UdpRr => "MIGRATED UDP REQUEST/RESPONSE TEST",
        TestName::TcpCrr => "MIGRATED TCP Connect/Request/Response TEST",
        TestName::TcpSendfile => "TCP SENDFILE TEST",
        TestName::TcpCc => "TCP Connect/Close TEST",
        TestName::TcpMss => "TCP MSS TEST",
        TestName::Omni => match t.kind() {
            TestKind::TcpCc => "OMNI Connection TEST",
            TestKind::TcpCrr => "OMNI Connect|Send|Recv TEST",
            k => match k.direction() {
                Direction::Send => "OMNI Send TEST",
                Direction::Receive => "OMNI Receive TEST",
                Direction::RequestResponse => "OMNI Send|Recv TEST",
            },
        },
        TestName::Rpm => "MIGRATED TCP RESPONSIVENESS (RPM) TEST",
        TestName::Stamp => "STAMP (RFC 8762) TEST",
        TestName::LocCpu | TestName::RemCpu | TestName::Uuid => "",
    }
}

/// netperf 2.7's tables, and our lines after them (on a terminal, `-v 3`).
#[derive(Debug)]
pub struct Classic {
    pub out: Out,
}

impl Reporter for Classic {
    fn begin(&mut self, t: &Test, server: &Server) -> anyhow::Result<()> {
        print_banner(&self.out, t, server)
    }

    fn iteration(&mut self, t: &Test, i: u32, f: &Figures) {
        print_iteration(&self.out, t, i, f);
    }

    fn finish(&mut self, r: &Results<'_>) -> anyhow::Result<()> {
        let (t, last) = (r.test, r.last);
        if let Some(v) = r.verdict
            && !v.confident
        {
            self.out.emit(confidence_warning(v).as_bytes())?;
        }
        self.out
            .emit(table(t, last, r.figures, t.extras).as_bytes())?;
        // ours: --ecn's counts and verdict (a terminal, -v 3)
        if let Some(e) = last.ecn(&t.spec).filter(|_| t.extras) {
            let lines: String = e.lines().iter().map(|l| format!("{l}\n")).collect();
            self.out.emit(lines.as_bytes())?;
        }
        // ours, asked for by an option of ours
        self.out
            .emit(under_load_lines(last, r.figures).as_bytes())?;
        // ours: under load (our option), asked for, or where scripts do
        // not read (TCP_RR -D's probes by default are in the JSON only)
        if t.verbosity > 0
            && (last.scenario.is_some() || t.one_way_asked || t.extras || t.name == TestName::Stamp)
        {
            let mut lines = one_way_lines(last);
            if t.name == TestName::Stamp {
                lines = lines.replace("toward the netserver", "toward the reflector");
            }
            self.out.emit(lines.as_bytes())?;
        }
        print_confidence(&self.out, r)
    }
}

/// The banner, when headers are on (netperf's classic and selector
/// outputs).
pub fn print_banner(out: &Out, t: &Test, server: &Server) -> anyhow::Result<()> {
    if t.headers {
        out.emit(banner(t, &Endpoints::new(t, server.remote)).as_bytes())?;
    }
    Ok(())
}

/// Each iteration of a confidence run (ours; netperf 2.7 prints nothing):
/// on stdout with our other lines (a terminal, -v 3), else on stderr when
/// that is a terminal.
pub fn print_iteration(out: &Out, t: &Test, i: u32, f: &Figures) {
    use std::io::IsTerminal as _;
    let line = iteration_line(t, i, f);
    if t.extras {
        out.quietly(line.as_bytes());
    } else if std::io::stderr().is_terminal() {
        eprint!("{line}");
    }
}

/// Our confidence line after the figures (on a terminal, `-v 3`).
pub fn print_confidence(out: &Out, r: &Results<'_>) -> anyhow::Result<()> {
    match r.verdict {
        Some(v) if r.test.extras => out.emit(confidence_line(r.test, r.runs.len(), v).as_bytes()),
        _ => Ok(()),
    }
}

/// The first line, printed before the test runs.
pub fn banner(t: &Test, ep: &Endpoints) -> String {
    let mut s = format!(
        "{} from {} ({}) port {} {} to {} ({}) port {} {}",
        title(t),
        ep.local_name,
        ep.local_addr,
        t.ours.data_port.unwrap_or(0),
        ep.family(),
        ep.remote_name,
        ep.remote_addr,
        t.spec.data_port.unwrap_or(0),
        ep.family()
    );
    if let Some(c) = &t.confidence {
        let _ = write!(
            s,
            " : +/-{:.3}% @ {:2}% conf. {}",
            c.width * 50.0,
            level_text(c.level),
            if c.result_only { " on result only" } else { "" }
        );
    }
    if t.nodelay() {
        s.push_str(" : nodelay");
    }
    if t.ours.copy_avoidance {
        s.push_str(" : copy avoidance");
    }
    s.push_str(" : demo");
    if matches!(t.name, TestName::TcpRr | TestName::UdpRr) {
        let _ = write!(s, " : first burst {}", t.ours.burst);
    }
    if t.cpu_bind() {
        s.push_str(" : cpu bind");
    }
    s.push('\n');
    s
}

/// One iteration of a confidence run, as it finishes (ours).
pub fn iteration_line(t: &Test, i: u32, f: &Figures) -> String {
    let mut s = format!(
        "Iteration {i}: {:.2} {}/sec, elapsed {:.2} s",
        f.result,
        t.units.label(),
        f.elapsed
    );
    if let Some(c) = f.local_cpu {
        let _ = write!(s, ", local CPU {c:.2}%");
    }
    if let Some(c) = f.remote_cpu {
        let _ = write!(s, ", remote CPU {c:.2}%");
    }
    s.push('\n');
    s
}

/// netperf's warning when the iterations ran out before confidence.
pub fn confidence_warning(v: &crate::confidence::Verdict) -> String {
    let pct =
        |i: Option<&crate::confidence::Interval>| i.map_or(0.0, |i| 100.0 * i.relative_width());
    format!(
        "!!! WARNING\n\
         !!! Desired confidence was not achieved within the specified iterations.\n\
         !!! This implies that there was variability in the test environment that\n\
         !!! must be investigated before going further.\n\
         !!! Confidence intervals: Throughput      : {:4.3}%\n\
         !!!                       Local CPU util  : {:4.3}%\n\
         !!!                       Remote CPU util : {:4.3}%\n\n",
        pct(Some(&v.result)),
        pct(v.local_cpu.as_ref()),
        pct(v.remote_cpu.as_ref())
    )
}

/// Our line after the table: iterations, mean, half-width in units and in
/// percent of the mean, and the level.
pub fn confidence_line(t: &Test, n: usize, v: &crate::confidence::Verdict) -> String {
    let Some(c) = &t.confidence else {
        return String::new();
    };
    let i = &v.result;
    format!(
        "Confidence: {n} iterations, mean {:.2} {}/sec +/- {:.2} (+/-{:.3}%) at {}% confidence{}\n",
        i.mean,
        t.units.label(),
        i.half_width,
        50.0 * i.relative_width(),
        level_text(c.level),
        if v.confident {
            ""
        } else {
            "; not within the requested width"
        }
    )
}

/// A confidence level as netperf prints it: an integer when it is one.
pub fn level_text(level: f64) -> String {
    if level.fract() == 0.0 {
        format!("{}", level as i64)
    } else {
        format!("{level}")
    }
}

/// What follows the row when headers are off: the `-B` brand.
fn brand(t: &Test) -> &str {
    match (&t.brand, t.headers) {
        (Some(b), false) => b,
        _ => "",
    }
}

/// The result table of a test with a classic table. `extras`: our lines
/// that netperf 2.7 does not print (on a terminal, or at `-v 3`).
pub fn table(t: &Test, m: &Measurement, f: &Figures, extras: bool) -> String {
    match t.name {
        TestName::TcpStream | TestName::TcpMaerts | TestName::TcpSendfile => {
            stream(t, m, f) + &flows::block(t, m) + &our_path(t, m, extras)
        }
        TestName::UdpStream => {
            udp_stream(t, m, f, extras) + &flows::block(t, m) + &our_path(t, m, extras)
        }
        TestName::TcpRr | TestName::UdpRr | TestName::TcpCrr | TestName::TcpCc => {
            rr(t, m, f, extras) + &flows::block(t, m)
        }
        TestName::TcpMss => mss(t, m),
        TestName::Rpm => rpm(t, m, f),
        // ours (netperf 2.7 has no STAMP): the round trips' table, then
        // the session's counts
        TestName::Stamp => {
            rr(t, m, f, extras)
                + &m.stamp
                    .map(|s| format!("{}\n", s.line()))
                    .unwrap_or_default()
        }
        TestName::Omni | TestName::LocCpu | TestName::RemCpu | TestName::Uuid => String::new(),
    }
}

/// How the data moved, where our options chose it: on a terminal or at
/// `-v 3` only.
fn our_path(t: &Test, m: &Measurement, extras: bool) -> String {
    if extras {
        path_lines(t, m)
    } else {
        String::new()
    }
}

/// TCP_MSS: the data connection's maximum segment size.
pub fn mss(t: &Test, m: &Measurement) -> String {
    let mut s = String::new();
    if t.verbosity > 0 && t.headers {
        s.push_str("Maximum\nSegment\nSize (bytes)\n\n");
    }
    let _ = writeln!(s, "{} {}", m.mss.map_or(-1, i64::from), brand(t));
    s
}

/// Whether CPU columns are shown (`-c` or `-C`).
fn with_cpu(t: &Test) -> bool {
    t.local_cpu || t.spec.measure_cpu
}

/// The CPU-method letter netperf prints after `%`: `S` for the /proc/stat
/// method we measure with, `U` (unknown) for a side that was not measured.
fn method(measured: bool) -> char {
    if measured { 'S' } else { 'U' }
}

/// A figure netperf prints as -1 when it was not measured.
fn or_minus_one(v: Option<f64>) -> f64 {
    v.unwrap_or(-1.0)
}

/// `-v 0` with CPU: the service demand alone (ours if measured, else the
/// netserver's), with the method letter.
fn terse_sd(t: &Test, f: &Figures) -> String {
    let sd = if t.local_cpu { f.local_sd } else { f.remote_sd };
    format!("{:6.3} S {}\n", or_minus_one(sd), brand(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Side;

    use crate::output::testing::asked;

    fn measurement() -> Measurement {
        Measurement {
            elapsed: 10.0,
            local: Side {
                send_buf: 16384,
                recv_buf: 131072,
                send_size: 16384,
                ..Side::default()
            },
            remote: Side {
                send_buf: 16384,
                recv_buf: 131072,
                send_size: 16384,
                ..Side::default()
            },
            ..Measurement::default()
        }
    }

    fn ep(ipv6: bool) -> Endpoints {
        Endpoints {
            local_name: if ipv6 { "::0" } else { "0.0.0.0" }.into(),
            local_addr: if ipv6 { "::" } else { "0.0.0.0" }.into(),
            remote_name: "localhost".into(),
            remote_addr: "127.0.0.1".into(),
            ipv6,
        }
    }

    #[test]
    fn stream_table_matches_netperf() {
        let p = asked(&["-H", "localhost"]);
        let f = Figures {
            elapsed: 10.0,
            result: 11436.35,
            ..Figures::default()
        };
        let text = format!(
            "{}{}",
            banner(&p, &ep(false)),
            stream(&p, &measurement(), &f)
        );
        let expected = "MIGRATED TCP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to localhost (127.0.0.1) port 0 AF_INET : demo\n\
Recv   Send    Send                          \n\
Socket Socket  Message  Elapsed              \n\
Size   Size    Size     Time     Throughput  \n\
bytes  bytes   bytes    secs.    10^6bits/sec  \n\
\n\
131072  16384  16384    10.00    11436.35   \n";
        assert_eq!(text, expected);
    }

    #[test]
    fn brief_and_terse_rows() {
        let f = Figures {
            elapsed: 1.0,
            result: 12721.76,
            ..Figures::default()
        };
        let p = asked(&["-P", "0", "-B", "mybrand"]);
        assert_eq!(
            stream(
                &p,
                &measurement(),
                &Figures {
                    elapsed: 1.0,
                    ..f.clone()
                }
            ),
            "131072  16384  16384    1.00     12721.76   mybrand\n"
        );
        let p = asked(&["-v", "0"]);
        assert_eq!(stream(&p, &measurement(), &f), "12721.76 \n");
    }

    #[test]
    fn banner_suffixes() {
        let p = asked(&["-I", "99,5", "-t", "TCP_RR", "--", "-D"]);
        assert_eq!(
            banner(&p, &ep(true)),
            "MIGRATED TCP REQUEST/RESPONSE TEST from ::0 (::) port 0 AF_INET6 to localhost (127.0.0.1) port 0 AF_INET6 : +/-2.500% @ 99% conf.  : nodelay : demo : first burst 0\n"
        );
    }

    #[test]
    fn udp_stream_rows_match_netperf() {
        let p = asked(&["-t", "UDP_STREAM", "-P", "0"]);
        let m = Measurement {
            elapsed: 1.0,
            local: Side {
                send_buf: 212992,
                send_size: 65507,
                counts: proto::SideResults {
                    send_calls: 36086,
                    ..Default::default()
                },
                ..Side::default()
            },
            remote: Side {
                recv_buf: 212992,
                counts: proto::SideResults {
                    recv_calls: 13183,
                    ..Default::default()
                },
                ..Side::default()
            },
            ..Measurement::default()
        };
        let f = Figures {
            elapsed: 1.0,
            result: 6907.10,
            send_rate: 18906.91,
            recv_rate: 6907.10,
            ..Figures::default()
        };
        assert_eq!(
            udp_stream(&p, &m, &f, false),
            "212992   65507   1.00        36086      0    18906.91\n\
             212992           1.00        13183           6907.10\n\n"
        );
    }

    #[test]
    fn udp_loss_line_attributes_the_loss() {
        let m = Measurement {
            local: Side {
                counts: proto::SideResults {
                    send_calls: 1000,
                    ..Default::default()
                },
                ..Side::default()
            },
            remote: Side {
                counts: proto::SideResults {
                    udp: Some(proto::UdpRecvStats {
                        received: 950,
                        out_of_order: 3,
                        duplicates: 1,
                        foreign: 0,
                        rcvbuf_drops: 40,
                        drops_source: proto::DropSource::Socket,
                        jitter_ns: 12_000,
                    }),
                    ..Default::default()
                },
                ..Side::default()
            },
            ..Measurement::default()
        };
        assert_eq!(
            udp_loss_line(&m),
            "Lost 50 of 1000 datagrams (5.000%): 40 dropped by the receiving socket's buffer, 10 elsewhere; 3 out of order, 1 duplicated; jitter 0.012 ms\n"
        );
    }

    #[test]
    fn rr_table_matches_netperf() {
        let p = asked(&["-t", "TCP_RR"]);
        let m = Measurement {
            local: Side {
                send_buf: 16384,
                recv_buf: 131072,
                ..Side::default()
            },
            remote: Side {
                send_buf: 16384,
                recv_buf: 131072,
                ..Side::default()
            },
            ..Measurement::default()
        };
        let f = Figures {
            elapsed: 1.0,
            result: 36552.37,
            ..Figures::default()
        };
        assert_eq!(
            rr(&p, &m, &f, false),
            "Local /Remote\n\
             Socket Size   Request  Resp.   Elapsed  Trans.\n\
             Send   Recv   Size     Size    Time     Rate         \n\
             bytes  Bytes  bytes    bytes   secs.    per sec   \n\n\
             16384  131072 1        1       1.00     36552.37   \n\
             16384  131072\n"
        );
        let p = asked(&["-t", "TCP_RR", "-P", "0", "-v", "0"]);
        assert_eq!(rr(&p, &m, &f, false), "36552.37 \n");
        let p = asked(&["-t", "TCP_CRR", "-v", "0"]);
        assert_eq!(rr(&p, &m, &f, false), "36552.37\n");
    }

    #[test]
    fn rr_verbose_block() {
        let p = asked(&["-t", "TCP_RR", "-v", "2", "-P", "0"]);
        let mut m = measurement();
        (m.local.asked, m.remote.asked) = (p.local.clone(), p.remote.clone());
        m.elapsed = 1.0;
        m.local.transactions = 32619;
        m.latency = Some(engine::latency::LatencySummary {
            count: 32619,
            min: 21_000,
            mean: 30_000.0,
            p50: 29_000,
            p90: 33_000,
            p99: 45_000,
            p999: 80_000,
            max: 1_200_000,
            stddev: 8_000.0,
        });
        let text = rr(
            &p,
            &m,
            &Figures {
                elapsed: 1.0,
                result: 32619.0,
                ..Figures::default()
            },
            true,
        );
        assert!(
            text.contains("Local  Remote  Local  Remote  Latency    Rate     10^6bits/s\n"),
            "{text}"
        );
        assert!(
            text.contains("    8      8       0      0   30.657   32619.000 0.261     0.261 \n"),
            "{text}"
        );
        assert!(text.contains("     21.000     30.000     29.000     33.000     45.000     80.000   1200.000      8.000\n"), "{text}");
    }

    fn cpu_figures() -> Figures {
        Figures {
            elapsed: 1.0,
            result: 12369.26,
            send_rate: 1340.7,
            recv_rate: 1335.0,
            local_cpu: Some(83.54),
            remote_cpu: Some(83.54),
            local_sd: Some(1.107),
            remote_sd: Some(1.107),
        }
    }

    #[test]
    fn cpu_tables_match_netperf() {
        let m = measurement();
        let p = asked(&["-c", "-C", "-H", "localhost"]);
        assert_eq!(
            stream(&p, &m, &cpu_figures()),
            "Recv   Send    Send                          Utilization       Service Demand\n\
             Socket Socket  Message  Elapsed              Send     Recv     Send    Recv\n\
             Size   Size    Size     Time     Throughput  local    remote   local   remote\n\
             bytes  bytes   bytes    secs.    10^6bits/s  % S      % S      us/KB   us/KB\n\n\
             131072  16384  16384    1.00       12369.26   83.54    83.54    1.107   1.107  \n"
        );
        let p = asked(&["-c", "-P", "0"]);
        let mut f = cpu_figures();
        f.remote_cpu = None;
        f.remote_sd = None;
        assert_eq!(
            stream(&p, &m, &f),
            "131072  16384  16384    1.00       12369.26   83.54    -1.00    1.107   -1.000 \n"
        );
        let p = asked(&["-C", "-v", "0"]);
        assert_eq!(stream(&p, &m, &cpu_figures()), " 1.107 S \n");
        let p = asked(&["-t", "TCP_CRR", "-c", "-C"]);
        let text = rr(&p, &m, &cpu_figures(), false);
        assert!(
            text.starts_with(
                "Local /Remote\n\
             Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n\
             Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n\
             bytes  bytes  bytes   bytes  secs.   per sec  %      %      us/Tr   us/Tr\n\n"
            ),
            "{text}"
        );
        let p = asked(&["-t", "UDP_RR", "-c", "-C", "-P", "0"]);
        let text = rr(&p, &m, &cpu_figures(), false);
        assert!(!text.contains("% U"), "{text}");
        assert_eq!(
            rr(&p, &m, &cpu_figures(), false).lines().next().unwrap(),
            "16384  131072 1       1      1.00    12369.26   83.54  83.54  1.107   1.107  "
        );
    }

    /// netperf marks the side it did not measure with method `U`.
    #[test]
    fn unmeasured_side_gets_method_u() {
        let m = measurement();
        let f = cpu_figures();
        let units = "bytes  bytes   bytes    secs.    10^6bits/s  ";
        let text = stream(&asked(&["-c"]), &m, &f);
        assert!(
            text.contains(&format!("{units}% S      % U      us/KB")),
            "{text}"
        );
        let text = stream(&asked(&["-C"]), &m, &f);
        assert!(
            text.contains(&format!("{units}% U      % S      us/KB")),
            "{text}"
        );
        let text = rr(&asked(&["-t", "TCP_RR", "-c"]), &m, &f, false);
        assert!(text.contains("per sec  % S    % U    us/Tr"), "{text}");
        let text = udp_stream(
            &asked(&["-t", "UDP_STREAM", "-C", "-v", "0"]),
            &m,
            &f,
            false,
        );
        assert_eq!(text, "  1.11 U\n");
        let text = udp_stream(
            &asked(&["-t", "UDP_STREAM", "-c", "-v", "0"]),
            &m,
            &f,
            false,
        );
        assert_eq!(text, "  1.11 S\n");
        let text = udp_stream(&asked(&["-t", "UDP_STREAM", "-C"]), &m, &f, false);
        assert!(text.contains("/sec % US     us/KB"), "{text}");
    }

    #[test]
    fn verbose_stream_detail() {
        let p = asked(&["-v", "2", "-P", "0"]);
        let mut m = measurement();
        (m.local.asked, m.remote.asked) = (p.local.clone(), p.remote.clone());
        m.local.bytes_sent = 2023391232;
        m.local.send_calls = 123498;
        m.remote.recv_calls = 34386;
        m.mss = Some(65483);
        let text = stream(
            &p,
            &m,
            &Figures {
                elapsed: 1.0,
                result: 1.0,
                ..Figures::default()
            },
        );
        assert!(
            text.contains(
                "    8       8      0       0 2023391232  16384.00    123498   58843.46  34386\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("Size (bytes)\n 65483\n"), "{text}");
    }
}
