//! netperf 2.7's classic tables, line for line: the banner, the titles, the
//! data rows, and the extra blocks of `-v 2`. Scripts parse these; their
//! shape must not change.

use std::fmt::Write as _;

use proto::{Direction, TestKind};

use super::{Endpoints, Figures};
use crate::cli::{TestName, Units};
use crate::{cli::Plan, family::Measurement};

/// The test's title as netperf 2.7 names it: by the name `-t` gave (so
/// `-t TCP_STREAM -- -T udp` is still a "TCP STREAM" test), and OMNI's by
/// its direction.
pub fn title(plan: &Plan) -> &'static str {
    match plan.name {
        TestName::TcpStream => "MIGRATED TCP STREAM TEST",
        TestName::TcpMaerts => "MIGRATED TCP MAERTS TEST",
        TestName::UdpStream => "MIGRATED UDP STREAM TEST",
        TestName::TcpRr => "MIGRATED TCP REQUEST/RESPONSE TEST",
        TestName::UdpRr => "MIGRATED UDP REQUEST/RESPONSE TEST",
        TestName::TcpCrr => "MIGRATED TCP Connect/Request/Response TEST",
        TestName::TcpSendfile => "TCP SENDFILE TEST",
        TestName::TcpCc => "TCP Connect/Close TEST",
        TestName::TcpMss => "TCP MSS TEST",
        TestName::Omni => match plan.test {
            TestKind::TcpCc => "OMNI Connection TEST",
            TestKind::TcpCrr => "OMNI Connect|Send|Recv TEST",
            k => match k.direction() {
                Direction::Send => "OMNI Send TEST",
                Direction::Receive => "OMNI Receive TEST",
                Direction::RequestResponse => "OMNI Send|Recv TEST",
            },
        },
        TestName::LocCpu | TestName::RemCpu | TestName::Uuid => "",
    }
}

/// The first line, printed before the test runs.
pub fn banner(plan: &Plan, ep: &Endpoints) -> String {
    let mut s = format!(
        "{} from {} ({}) port 0 {} to {} ({}) port 0 {}",
        title(plan),
        ep.local_name,
        ep.local_addr,
        ep.family(),
        ep.remote_name,
        ep.remote_addr,
        ep.family()
    );
    if let Some(c) = &plan.confidence {
        let _ = write!(
            s,
            " : +/-{:.3}% @ {:2}% conf. {}",
            c.width * 50.0,
            level_text(c.level),
            if c.result_only { " on result only" } else { "" }
        );
    }
    if plan.local.nodelay || plan.remote.nodelay {
        s.push_str(" : nodelay");
    }
    if plan.copy_avoidance {
        s.push_str(" : copy avoidance");
    }
    s.push_str(" : demo");
    if matches!(plan.name, TestName::TcpRr | TestName::UdpRr) {
        let _ = write!(s, " : first burst {}", plan.burst);
    }
    if plan.local.cpu_bind.is_some() || plan.remote.cpu_bind.is_some() {
        s.push_str(" : cpu bind");
    }
    s.push('\n');
    s
}

/// One iteration of a confidence run, as it finishes (ours).
pub fn iteration_line(plan: &Plan, i: u32, f: &Figures) -> String {
    let mut s = format!(
        "Iteration {i}: {:.2} {}/sec, elapsed {:.2} s",
        f.result,
        plan.units().label(),
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
pub fn confidence_line(plan: &Plan, n: usize, v: &crate::confidence::Verdict) -> String {
    let Some(c) = &plan.confidence else {
        return String::new();
    };
    let i = &v.result;
    format!(
        "Confidence: {n} iterations, mean {:.2} {}/sec +/- {:.2} (+/-{:.3}%) at {}% confidence{}\n",
        i.mean,
        plan.units().label(),
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
fn brand(plan: &Plan) -> &str {
    match (&plan.brand, plan.headers) {
        (Some(b), false) => b,
        _ => "",
    }
}

/// The result table of a test with a classic table. `extras`: our lines
/// that netperf 2.7 does not print (on a terminal, or at `-v 3`).
pub fn table(plan: &Plan, m: &Measurement, f: &Figures, extras: bool) -> String {
    match plan.name {
        TestName::TcpStream | TestName::TcpMaerts | TestName::TcpSendfile => stream(plan, m, f),
        TestName::UdpStream => udp_stream(plan, m, f, extras),
        TestName::TcpRr | TestName::UdpRr | TestName::TcpCrr | TestName::TcpCc => {
            rr(plan, m, f, extras)
        }
        TestName::TcpMss => mss(plan, m),
        TestName::Omni | TestName::LocCpu | TestName::RemCpu | TestName::Uuid => String::new(),
    }
}

/// TCP_MSS: the data connection's maximum segment size.
pub fn mss(plan: &Plan, m: &Measurement) -> String {
    let mut s = String::new();
    if plan.verbosity > 0 && plan.headers {
        s.push_str("Maximum\nSegment\nSize (bytes)\n\n");
    }
    let _ = writeln!(s, "{} {}", m.mss.map_or(-1, i64::from), brand(plan));
    s
}

/// TCP_CRR and TCP_CC print the same table.
fn is_crr(plan: &Plan) -> bool {
    matches!(plan.name, TestName::TcpCrr | TestName::TcpCc)
}

/// TCP_RR, UDP_RR, TCP_CRR and TCP_CC.
pub fn rr(plan: &Plan, m: &Measurement, f: &Figures, extras: bool) -> String {
    let mut s = String::new();
    // TCP_CRR's and TCP_CC's rows carry no brand in netperf.
    let crr = is_crr(plan);
    let brand = if crr { "" } else { brand(plan) };
    if plan.verbosity == 0 {
        if with_cpu(plan) {
            let sd = or_minus_one(if plan.local_cpu {
                f.local_sd
            } else {
                f.remote_sd
            });
            if crr {
                let _ = writeln!(s, "{sd:6.3}");
            } else {
                let _ = writeln!(s, "{sd:6.3} S {brand}");
            }
        } else if crr {
            let _ = writeln!(s, "{:7.2}", f.result);
        } else {
            let _ = writeln!(s, "{:7.2} {}", f.result, brand);
        }
        return s;
    }
    if with_cpu(plan) {
        rr_cpu(plan, m, f, brand, &mut s);
    } else {
        rr_plain(plan, m, f, brand, &mut s);
    }
    if plan.verbosity > 1 {
        match plan.name {
            TestName::TcpRr => s.push_str(&rr_detail(plan, m)),
            TestName::TcpCrr | TestName::TcpCc => s.push_str(&crr_detail(plan)),
            _ => {}
        }
    }
    if extras {
        if plan.test == TestKind::UdpRr {
            s.push_str(&udp_rr_loss_line(plan, m));
        }
        s.push_str(&latency_lines(m));
    }
    s
}

/// TCP_CRR's and TCP_CC's `-v 2` block: where the buffers sat.
fn crr_detail(plan: &Plan) -> String {
    format!(
        "\nAlignment      Offset\n\
         Local  Remote  Local  Remote\n\
         Send   Recv    Send   Recv\n\
         {:5}  {:5}   {:5}  {:5}\n",
        plan.local.send_align,
        plan.remote.recv_align,
        plan.local.send_offset,
        plan.remote.recv_offset
    )
}

/// The RR table with CPU columns.
fn rr_cpu(plan: &Plan, m: &Measurement, f: &Figures, brand: &str, s: &mut String) {
    let crr = is_crr(plan);
    if plan.headers {
        let units = plan.units();
        let per_tr = units == Units::Transactions || crr;
        let _ = write!(
            s,
            "Local /Remote\n\
             Socket Size   Request Resp.  Elapsed {}CPU    CPU    S.dem   S.dem\n\
             Send   Recv   Size    Size   Time    {} local  remote local   remote\n\
             bytes  bytes  bytes   bytes  secs.   per sec  {}    {}    {}   {}\n\n",
            if per_tr { "Trans.   " } else { "Tput     " },
            if per_tr {
                "Rate    ".to_string()
            } else {
                format!("{:<8.8}", units.label())
            },
            if crr {
                "%  ".to_string()
            } else {
                format!("% {}", method(plan.local_cpu))
            },
            if crr {
                "%  ".to_string()
            } else {
                format!("% {}", method(plan.remote_cpu))
            },
            if per_tr { "us/Tr" } else { "us/KB" },
            if per_tr { "us/Tr" } else { "us/KB" },
        );
    }
    let gap = if plan.name == TestName::TcpRr {
        "  "
    } else {
        "   "
    };
    let _ = write!(
        s,
        "{:<6} {:<6} {:<6}  {:<6} {:<6.2}  {:<6.2}{gap}{:<6.2} {:<6.2} {:<6.3}  {:<6.3}",
        m.local_send_buf,
        m.local_recv_buf,
        plan.request_size,
        plan.response_size,
        f.elapsed,
        f.result,
        or_minus_one(f.local_cpu),
        or_minus_one(f.remote_cpu),
        or_minus_one(f.local_sd),
        or_minus_one(f.remote_sd),
    );
    if crr {
        s.push('\n');
    } else {
        let _ = writeln!(s, " {brand}");
    }
    let _ = writeln!(s, "{:<6} {:<6}", m.remote_send_buf, m.remote_recv_buf);
}

/// The RR table without CPU columns.
fn rr_plain(plan: &Plan, m: &Measurement, f: &Figures, brand: &str, s: &mut String) {
    let units = plan.units();
    if plan.headers {
        if units == Units::Transactions || is_crr(plan) {
            s.push_str(
                "Local /Remote\n\
                 Socket Size   Request  Resp.   Elapsed  Trans.\n\
                 Send   Recv   Size     Size    Time     Rate         \n\
                 bytes  Bytes  bytes    bytes   secs.    per sec   \n\n",
            );
        } else {
            let _ = write!(
                s,
                "Local /Remote\n\
                 Socket Size   Request  Resp.   Elapsed  \n\
                 Send   Recv   Size     Size    Time     Throughput \n\
                 bytes  Bytes  bytes    bytes   secs.    {}/sec   \n\n",
                units.label()
            );
        }
    }
    let _ = writeln!(
        s,
        "{:<6} {:<6} {:<6}   {:<6}  {:<6.2}   {:7.2}   {}",
        m.local_send_buf,
        m.local_recv_buf,
        plan.request_size,
        plan.response_size,
        f.elapsed,
        f.result,
        brand
    );
    let _ = writeln!(s, "{:<6} {:<6}", m.remote_send_buf, m.remote_recv_buf);
}

/// UDP_RR: transactions that got no response in time.
pub fn udp_rr_loss_line(plan: &Plan, m: &Measurement) -> String {
    let done = m.local.transactions;
    let tried = done + m.lost;
    let pct = if tried == 0 {
        0.0
    } else {
        m.lost as f64 * 100.0 / tried as f64
    };
    let timeout = plan
        .recv_timeout
        .unwrap_or(crate::family::rr::DEFAULT_UDP_TIMEOUT)
        .as_secs_f64();
    format!(
        "Lost {} of {tried} transactions ({pct:.3}%): no response within {timeout:.3} s\n",
        m.lost
    )
}

/// Our latency percentiles of the _RR tests.
fn latency_lines(m: &Measurement) -> String {
    let mut s = String::new();
    if let Some(l) = &m.latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        let _ = write!(
            s,
            "\nLatency (usec)       min       mean        p50        p90        p99      p99.9        max     stddev\n\
             {:14} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3} {:10.3}\n",
            "",
            us(l.min),
            l.mean / 1000.0,
            us(l.p50),
            us(l.p90),
            us(l.p99),
            us(l.p999),
            us(l.max),
            l.stddev / 1000.0
        );
    }
    s
}

/// TCP_RR's `-v 2` block: the round trip and the throughput both ways.
fn rr_detail(plan: &Plan, m: &Measurement) -> String {
    let mut s = String::new();
    let rate = if m.elapsed > 0.0 {
        m.local.transactions as f64 / m.elapsed
    } else {
        0.0
    };
    let units = match plan.units() {
        Units::Transactions => Units::Bits('m'),
        u => u,
    };
    let rtt = if rate > 0.0 {
        1e6 / rate * f64::from(1 + plan.effective_burst())
    } else {
        0.0
    };
    let _ = write!(
        s,
        "Alignment      Offset         RoundTrip  Trans    Throughput\n\
         Local  Remote  Local  Remote  Latency    Rate     {:<8.8}/s\n\
         Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n\
         {:5}  {:5}   {:5}  {:5}   {:<6.3}   {:<6.3} {:<6.3}    {:<6.3}\n",
        units.label(),
        plan.local.send_align,
        plan.remote.recv_align,
        plan.local.send_offset,
        plan.remote.recv_offset,
        rtt,
        rate,
        units.rate(rate * f64::from(plan.request_size), 1.0),
        units.rate(rate * f64::from(plan.response_size), 1.0)
    );
    s
}

/// Whether CPU columns are shown (`-c` or `-C`).
fn with_cpu(plan: &Plan) -> bool {
    plan.local_cpu || plan.remote_cpu
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
fn terse_sd(plan: &Plan, f: &Figures) -> String {
    let sd = if plan.local_cpu {
        f.local_sd
    } else {
        f.remote_sd
    };
    format!("{:6.3} S {}\n", or_minus_one(sd), brand(plan))
}

/// TCP_STREAM and TCP_MAERTS.
pub fn stream(plan: &Plan, m: &Measurement, f: &Figures) -> String {
    let mut s = String::new();
    if plan.verbosity == 0 {
        if with_cpu(plan) {
            return terse_sd(plan, f);
        }
        let _ = writeln!(s, "{:7.2} {}", f.result, brand(plan));
        return s;
    }
    if with_cpu(plan) {
        return stream_cpu(plan, m, f);
    }
    if plan.headers {
        let _ = write!(
            s,
            "Recv   Send    Send                          \n\
             Socket Socket  Message  Elapsed              \n\
             Size   Size    Size     Time     Throughput  \n\
             bytes  bytes   bytes    secs.    {}/sec  \n\n",
            plan.units().label()
        );
    }
    let (recv_buf, send_buf, msg) = match plan.name {
        TestName::TcpMaerts => (m.local_recv_buf, m.remote_send_buf, m.remote_send_size),
        _ => (m.remote_recv_buf, m.local_send_buf, m.local_send_size),
    };
    let _ = writeln!(
        s,
        "{:6} {:6} {:6}    {:<6.2}   {:7.2}   {}",
        recv_buf,
        send_buf,
        msg,
        f.elapsed,
        f.result,
        brand(plan)
    );
    if plan.verbosity > 1 {
        s.push_str(&stream_detail(plan, m));
    }
    s
}

/// UDP_STREAM: netperf's two rows (what we sent, what arrived), then, with
/// `extras`, our line on the loss and where it happened.
pub fn udp_stream(plan: &Plan, m: &Measurement, f: &Figures, extras: bool) -> String {
    let mut s = String::new();
    if plan.verbosity == 0 {
        if with_cpu(plan) {
            let sd = if plan.local_cpu {
                f.local_sd
            } else {
                f.remote_sd
            };
            // netperf prints the local side's method letter here even when
            // the figure is the remote side's: `U` with -C alone.
            let _ = writeln!(s, "{:6.2} {}", or_minus_one(sd), method(plan.local_cpu));
        } else {
            let _ = writeln!(s, "{:7.2}", f.send_rate);
        }
        return s;
    }
    if with_cpu(plan) {
        if plan.headers {
            let _ = write!(
                s,
                "Socket  Message  Elapsed      Messages                   CPU      Service\n\
                 Size    Size     Time         Okay Errors   Throughput   Util     Demand\n\
                 bytes   bytes    secs            #      #   {}/sec % {}{}     us/KB\n\n",
                plan.units().label(),
                method(plan.local_cpu),
                method(plan.remote_cpu)
            );
        }
        let _ = write!(
            s,
            "{:6}  {:6}   {:<7.2}   {:7} {:6}    {:7.1}     {:<6.2}   {:<6.3}\n\
             {:6}           {:<7.2}   {:7}           {:7.1}     {:<6.2}   {:<6.3}\n\n",
            m.local_send_buf,
            m.local_send_size,
            f.elapsed,
            m.local.send_calls,
            m.send_errors,
            f.send_rate,
            or_minus_one(f.local_cpu),
            or_minus_one(f.local_sd),
            m.remote_recv_buf,
            f.elapsed,
            m.remote.recv_calls,
            f.recv_rate,
            or_minus_one(f.remote_cpu),
            or_minus_one(f.remote_sd)
        );
    } else {
        udp_stream_plain(plan, m, f, &mut s);
    }
    if extras {
        s.push_str(&udp_loss_line(m));
        if let Some(bps) = plan.rate_bps {
            let u = plan.units();
            let _ = writeln!(
                s,
                "Paced at {:.2} {}/sec requested; sent at {:.2} {}/sec",
                u.rate(bps as f64 / 8.0, 1.0),
                u.label(),
                f.send_rate,
                u.label()
            );
        }
    }
    s
}

/// UDP_STREAM's two rows without CPU columns.
fn udp_stream_plain(plan: &Plan, m: &Measurement, f: &Figures, s: &mut String) {
    if plan.headers {
        let _ = write!(
            s,
            "Socket  Message  Elapsed      Messages                \n\
             Size    Size     Time         Okay Errors   Throughput\n\
             bytes   bytes    secs            #      #   {}/sec\n\n",
            plan.units().label()
        );
    }
    let _ = write!(
        s,
        "{:6}  {:6}   {:<7.2}   {:7} {:6}    {:7.2}\n\
         {:6}           {:<7.2}   {:7}           {:7.2}\n\n",
        m.local_send_buf,
        m.local_send_size,
        f.elapsed,
        m.local.send_calls,
        m.send_errors,
        f.send_rate,
        m.remote_recv_buf,
        f.elapsed,
        m.remote.recv_calls,
        f.recv_rate
    );
}

/// Our line on UDP loss: how many of the datagrams sent did not arrive, how
/// many of those the receiving socket dropped for lack of buffer space, and
/// how many arrived out of order or twice.
pub fn udp_loss_line(m: &Measurement) -> String {
    let sent = m.local.send_calls;
    let Some(u) = &m.remote.udp else {
        return String::new();
    };
    let lost = sent.saturating_sub(u.received);
    let pct = if sent == 0 {
        0.0
    } else {
        lost as f64 * 100.0 / sent as f64
    };
    let drops = match u.drops_source {
        proto::DropSource::Socket => format!(
            "{} dropped by the receiving socket's buffer, {} elsewhere",
            u.rcvbuf_drops,
            lost.saturating_sub(u.rcvbuf_drops)
        ),
        proto::DropSource::Host => format!(
            "{} receive-buffer errors on the receiving host (host-wide count: the socket's own was unavailable)",
            u.rcvbuf_drops
        ),
        proto::DropSource::Unavailable => "receive-buffer drops unknown".to_string(),
    };
    format!(
        "Lost {lost} of {sent} datagrams ({pct:.3}%): {drops}; {} out of order, {} duplicated; jitter {:.3} ms\n",
        u.out_of_order,
        u.duplicates,
        u.jitter_ns as f64 / 1e6
    )
}

/// TCP_STREAM and TCP_MAERTS with CPU columns.
fn stream_cpu(plan: &Plan, m: &Measurement, f: &Figures) -> String {
    let mut s = String::new();
    let maerts = plan.name == TestName::TcpMaerts;
    if plan.headers {
        let _ = write!(
            s,
            "Recv   Send    Send                          Utilization       Service Demand\n\
             Socket Socket  Message  Elapsed              {}\n\
             Size   Size    Size     Time     Throughput  local    remote   local   remote\n\
             bytes  bytes   bytes    secs.    {:<8.8}/s  % {}      % {}      us/KB   us/KB\n\n",
            if maerts {
                "Recv     Send     Recv    Send"
            } else {
                "Send     Recv     Send    Recv"
            },
            plan.units().label(),
            method(plan.local_cpu),
            method(plan.remote_cpu)
        );
    }
    let (recv_buf, send_buf, msg) = if maerts {
        (m.local_recv_buf, m.remote_send_buf, m.remote_send_size)
    } else {
        (m.remote_recv_buf, m.local_send_buf, m.local_send_size)
    };
    let _ = writeln!(
        s,
        "{:6} {:6} {:6}    {:<6.2}     {:7.2}   {:<6.2}   {:<6.2}   {:<6.3}  {:<6.3} {}",
        recv_buf,
        send_buf,
        msg,
        f.elapsed,
        f.result,
        or_minus_one(f.local_cpu),
        or_minus_one(f.remote_cpu),
        or_minus_one(f.local_sd),
        or_minus_one(f.remote_sd),
        brand(plan)
    );
    if plan.verbosity > 1 {
        s.push_str(&stream_detail(plan, m));
    }
    s
}

fn per(bytes: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        bytes as f64 / calls as f64
    }
}

/// `-v 2`: where the buffers sat, bytes per call on each side, and the MSS.
fn stream_detail(plan: &Plan, m: &Measurement) -> String {
    let maerts = plan.name == TestName::TcpMaerts;
    // (our direction, theirs), and what each side moved in how many calls.
    let ((mine, theirs), local, remote) = if maerts {
        (
            ("Recv", "Send"),
            (m.local.bytes_received, m.local.recv_calls),
            (m.remote.bytes_sent, m.remote.send_calls),
        )
    } else {
        (
            ("Send", "Recv"),
            (m.local.bytes_sent, m.local.send_calls),
            (m.local.bytes_sent, m.remote.recv_calls),
        )
    };
    let (la, ra, lo, ro) = if maerts {
        (
            plan.local.recv_align,
            plan.remote.send_align,
            plan.local.recv_offset,
            plan.remote.send_offset,
        )
    } else {
        (
            plan.local.send_align,
            plan.remote.recv_align,
            plan.local.send_offset,
            plan.remote.recv_offset,
        )
    };
    // TCP_SENDFILE prints the bytes moved as C's %6.4g.
    let xfered = if plan.sendfile() {
        super::units::c_g(local.0 as f64, 6, 4)
    } else {
        format!("{:6}", local.0)
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "\nAlignment      Offset         Bytes    Bytes       {mine}s   Bytes    {theirs}s\n\
         Local  Remote  Local  Remote  Xfered   Per                 Per\n\
         {mine}   {theirs}    {mine}   {theirs}             {mine} (avg)          {theirs} (avg)\n\
         {:5}   {:5}  {:5}   {:5} {}  {:6.2}    {:6}   {:6.2} {:6}\n",
        la,
        ra,
        lo,
        ro,
        xfered,
        per(local.0, local.1),
        local.1,
        per(remote.0, remote.1),
        remote.1
    );
    let _ = write!(
        s,
        "\nMaximum\nSegment\nSize (bytes)\n{:6}\n",
        m.mss.map_or(-1, i64::from)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_plan as plan;

    fn measurement() -> Measurement {
        Measurement {
            elapsed: 10.0,
            local_send_buf: 16384,
            local_recv_buf: 131072,
            remote_send_buf: 16384,
            remote_recv_buf: 131072,
            local_send_size: 16384,
            remote_send_size: 16384,
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
        let p = plan(&["-H", "localhost"]);
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
        let p = plan(&["-P", "0", "-B", "mybrand"]);
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
        let p = plan(&["-v", "0"]);
        assert_eq!(stream(&p, &measurement(), &f), "12721.76 \n");
    }

    #[test]
    fn banner_suffixes() {
        let p = plan(&["-I", "99,5", "-t", "TCP_RR", "--", "-D"]);
        assert_eq!(
            banner(&p, &ep(true)),
            "MIGRATED TCP REQUEST/RESPONSE TEST from ::0 (::) port 0 AF_INET6 to localhost (127.0.0.1) port 0 AF_INET6 : +/-2.500% @ 99% conf.  : nodelay : demo : first burst 0\n"
        );
    }

    #[test]
    fn udp_stream_rows_match_netperf() {
        let p = plan(&["-t", "UDP_STREAM", "-P", "0"]);
        let m = Measurement {
            elapsed: 1.0,
            local_send_buf: 212992,
            local_send_size: 65507,
            remote_recv_buf: 212992,
            local: proto::SideResults {
                send_calls: 36086,
                ..Default::default()
            },
            remote: proto::SideResults {
                recv_calls: 13183,
                ..Default::default()
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
            local: proto::SideResults {
                send_calls: 1000,
                ..Default::default()
            },
            remote: proto::SideResults {
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
            ..Measurement::default()
        };
        assert_eq!(
            udp_loss_line(&m),
            "Lost 50 of 1000 datagrams (5.000%): 40 dropped by the receiving socket's buffer, 10 elsewhere; 3 out of order, 1 duplicated; jitter 0.012 ms\n"
        );
    }

    #[test]
    fn rr_table_matches_netperf() {
        let p = plan(&["-t", "TCP_RR"]);
        let m = Measurement {
            local_send_buf: 16384,
            local_recv_buf: 131072,
            remote_send_buf: 16384,
            remote_recv_buf: 131072,
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
        let p = plan(&["-t", "TCP_RR", "-P", "0", "-v", "0"]);
        assert_eq!(rr(&p, &m, &f, false), "36552.37 \n");
        let p = plan(&["-t", "TCP_CRR", "-v", "0"]);
        assert_eq!(rr(&p, &m, &f, false), "36552.37\n");
    }

    #[test]
    fn rr_verbose_block() {
        let p = plan(&["-t", "TCP_RR", "-v", "2", "-P", "0"]);
        let mut m = measurement();
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
        let p = plan(&["-c", "-C", "-H", "localhost"]);
        assert_eq!(
            stream(&p, &m, &cpu_figures()),
            "Recv   Send    Send                          Utilization       Service Demand\n\
             Socket Socket  Message  Elapsed              Send     Recv     Send    Recv\n\
             Size   Size    Size     Time     Throughput  local    remote   local   remote\n\
             bytes  bytes   bytes    secs.    10^6bits/s  % S      % S      us/KB   us/KB\n\n\
             131072  16384  16384    1.00       12369.26   83.54    83.54    1.107   1.107  \n"
        );
        let p = plan(&["-c", "-P", "0"]);
        let mut f = cpu_figures();
        f.remote_cpu = None;
        f.remote_sd = None;
        assert_eq!(
            stream(&p, &m, &f),
            "131072  16384  16384    1.00       12369.26   83.54    -1.00    1.107   -1.000 \n"
        );
        let p = plan(&["-C", "-v", "0"]);
        assert_eq!(stream(&p, &m, &cpu_figures()), " 1.107 S \n");
        let p = plan(&["-t", "TCP_CRR", "-c", "-C"]);
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
        let p = plan(&["-t", "UDP_RR", "-c", "-C", "-P", "0"]);
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
        let text = stream(&plan(&["-c"]), &m, &f);
        assert!(
            text.contains(&format!("{units}% S      % U      us/KB")),
            "{text}"
        );
        let text = stream(&plan(&["-C"]), &m, &f);
        assert!(
            text.contains(&format!("{units}% U      % S      us/KB")),
            "{text}"
        );
        let text = rr(&plan(&["-t", "TCP_RR", "-c"]), &m, &f, false);
        assert!(text.contains("per sec  % S    % U    us/Tr"), "{text}");
        let text = udp_stream(&plan(&["-t", "UDP_STREAM", "-C", "-v", "0"]), &m, &f, false);
        assert_eq!(text, "  1.11 U\n");
        let text = udp_stream(&plan(&["-t", "UDP_STREAM", "-c", "-v", "0"]), &m, &f, false);
        assert_eq!(text, "  1.11 S\n");
        let text = udp_stream(&plan(&["-t", "UDP_STREAM", "-C"]), &m, &f, false);
        assert!(text.contains("/sec % US     us/KB"), "{text}");
    }

    #[test]
    fn verbose_stream_detail() {
        let p = plan(&["-v", "2", "-P", "0"]);
        let mut m = measurement();
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
