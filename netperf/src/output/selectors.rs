//! netperf 2.7's output selectors (`-o`, `-O`, `-k` after `--`): the omni
//! names, their header lines and formats, and ours.
//!
//! A selection is a list of names, or a file of them; `;` (or a new line in
//! a file) starts another block of the columnar and CSV styles. Names are
//! matched without regard to case. A name netperf does not know is not an
//! error, as in netperf 2.7, and leaves exactly what netperf leaves: nothing
//! with `-k`, an empty CSV field (the next value then starts with a space,
//! and the header line has no column for it) with `-o`, and a one-space
//! column with `-O`.

use std::fmt::Write as _;

use proto::{Direction, TestKind};

use optparse::value::AddrFamily;

use crate::{
    cli::{SelectorStyle, Units},
    confidence::Verdict,
    output::{Out, Reporter, Results, Server, Test, classic},
    report::{Figures, LoadFigures, Measurement, RpmFigures, Side, figures::sd_per_transaction},
};

/// How a value is printed (netperf's printf formats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fmt {
    /// `%s`
    Str,
    /// `"%s"`
    Quoted,
    /// `%d` / `%PRIu64`
    Int,
    /// `%.Nf`
    F(usize),
    /// `%f`
    F6,
    /// `0x%.2x` (of an int: -1 prints as 0xffffffff)
    Hex2,
    /// `0x%.4x`
    Hex4,
    /// `%s/s`
    PerSec,
}

/// A value, or nothing (netperf's NULL display value).
#[derive(Clone, Debug, PartialEq)]
enum Value {
    None,
    Str(String),
    Int(i64),
    F(f64),
}

/// `-o`, `-O`, `-k` (and OMNI's default): the selection in its style.
#[derive(Debug)]
pub struct Selected {
    pub out: Out,
    pub style: SelectorStyle,
    pub selection: Selection,
    pub uuid: String,
}

impl Reporter for Selected {
    fn begin(&mut self, t: &Test, server: &Server) -> anyhow::Result<()> {
        classic::print_banner(&self.out, t, server)
    }

    fn iteration(&mut self, t: &Test, i: u32, f: &Figures) {
        classic::print_iteration(&self.out, t, i, f);
    }

    fn finish(&mut self, r: &Results<'_>) -> anyhow::Result<()> {
        let c = Ctx {
            test: r.test,
            m: r.last,
            f: r.figures,
            confidence: r.verdict.map(|v| (v, r.runs.len())),
            uuid: &self.uuid,
        };
        self.out
            .emit(print(self.style, &self.selection, &c).as_bytes())?;
        classic::print_confidence(&self.out, r)
    }
}

/// Everything a selector may draw on.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub test: &'a Test,
    /// The last iteration's measurement (counts, sizes).
    pub m: &'a Measurement,
    /// The figures printed (the means of the iterations).
    pub f: &'a Figures,
    /// The confidence verdict and iterations run, when `-I`/`-i` was used.
    pub confidence: Option<(&'a Verdict, usize)>,
    pub uuid: &'a str,
}

/// A selector: its name, its four header words, its format, its value.
#[derive(Clone, Copy)]
struct Sel {
    name: &'static str,
    header: [&'static str; 4],
    fmt: Fmt,
    value: Get,
}

/// Where a selector's value comes from.
#[derive(Clone, Copy)]
enum Get {
    Any(fn(&Ctx) -> Value),
    /// A side's (see [`SIDED`]): ours, or the netserver's.
    Side(bool, fn(&Ctx, &SideView) -> Value),
}

impl Sel {
    fn value(&self, c: &Ctx) -> Value {
        match self.value {
            Get::Any(f) => f(c),
            Get::Side(remote, f) => f(c, &SideView::of(c, remote)),
        }
    }
}

/// One side of the run, as a selector of [`SIDED`] sees it.
struct SideView<'a> {
    /// What it measured and the sizes it ran with.
    m: &'a Side,
    /// What the command line asked of it.
    asked: &'a proto::SideSpec,
    /// Its CPU utilisation and service demand, as printed.
    cpu: Option<f64>,
    sd: Option<f64>,
}

impl<'a> SideView<'a> {
    fn of(c: &Ctx<'a>, remote: bool) -> SideView<'a> {
        if remote {
            SideView {
                m: &c.m.remote,
                asked: &c.m.remote.asked,
                cpu: c.f.remote_cpu,
                sd: c.f.remote_sd,
            }
        } else {
            SideView {
                m: &c.m.local,
                asked: &c.m.local.asked,
                cpu: c.f.local_cpu,
                sd: c.f.local_sd,
            }
        }
    }
}

/// A selector of each side, named for both.
struct SideSel {
    names: [&'static str; 2],
    /// The header after "Local" or "Remote".
    header: [&'static str; 3],
    fmt: Fmt,
    value: fn(&Ctx, &SideView) -> Value,
}

/// Every selector: [`SELECTORS`], then each of [`SIDED`] for both sides.
static ALL: std::sync::LazyLock<Vec<Sel>> = std::sync::LazyLock::new(|| {
    let sided = SIDED.iter().flat_map(|s| {
        [("Local", false), ("Remote", true)].map(|(word, remote)| Sel {
            name: s.names[usize::from(remote)],
            header: [word, s.header[0], s.header[1], s.header[2]],
            fmt: s.fmt,
            value: Get::Side(remote, s.value),
        })
    });
    SELECTORS.iter().copied().chain(sided).collect()
});

fn int(v: impl TryInto<i64>) -> Value {
    Value::Int(v.try_into().unwrap_or(i64::MAX))
}

fn opt_int(v: Option<impl TryInto<i64>>) -> Value {
    v.map_or(Value::Int(-1), int)
}

fn f(v: f64) -> Value {
    Value::F(v)
}

fn opt_f(v: Option<f64>) -> Value {
    Value::F(v.unwrap_or(-1.0))
}

fn per(bytes: u64, calls: u64) -> Value {
    Value::F(if calls == 0 {
        0.0
    } else {
        bytes as f64 / calls as f64
    })
}

fn lat(c: &Ctx, g: fn(&engine::latency::LatencySummary) -> f64) -> Value {
    c.m.latency
        .as_ref()
        .map_or(Value::Int(-1), |l| Value::F(g(l)))
}

fn lat_us(c: &Ctx, g: fn(&engine::latency::LatencySummary) -> u64) -> Value {
    c.m.latency
        .as_ref()
        .map_or(Value::Int(-1), |l| int(g(l) / 1000))
}

/// A figure of an `--under-load` run; -1 otherwise.
fn under_load(c: &Ctx, g: impl Fn(&LoadFigures) -> Option<i64>) -> Value {
    match c.m.load().and_then(g) {
        Some(v) => int(v),
        None => Value::Int(-1),
    }
}

/// A percentile of the queueing delay one way (up: toward the
/// netserver) while loaded, microseconds, rounded; -1 where no probes ran
/// beside the test.
fn queue_delay(c: &Ctx, up: bool, g: fn(&crate::report::one_way::Percentiles) -> f64) -> Value {
    let way = c.m.one_way.as_ref().map(|w| if up { w.up } else { w.down });
    match way.and_then(|w| w.loaded) {
        Some(p) => int(g(&p).round() as i64),
        None => Value::Int(-1),
    }
}

/// A figure of a `-t RPM` run, rounded; -1 otherwise.
fn rpm(c: &Ctx, g: fn(&RpmFigures) -> Option<f64>) -> Value {
    match c.m.rpm().and_then(g) {
        Some(v) => int(v.round() as i64),
        None => Value::Int(-1),
    }
}

fn rate_of(c: &Ctx, bytes: u64) -> Value {
    let u = match c.test.units {
        Units::Transactions => Units::Bits('m'),
        u => u,
    };
    f(u.rate(bytes as f64, c.m.elapsed))
}

fn conf_pct(c: &Ctx, g: fn(&Verdict) -> Option<f64>) -> Value {
    match c.confidence {
        Some((v, _)) => f(g(v).unwrap_or(0.0)),
        None => f(-1.0),
    }
}

fn udp<T>(c: &Ctx, g: fn(&proto::UdpRecvStats, u64) -> T) -> Option<T> {
    c.m.remote.udp.as_ref().map(|u| g(u, c.m.local.send_calls))
}

/// A selector: its name, its four header words, its format (a [`Fmt`]),
/// and its value.
macro_rules! sel {
    ($name:literal, [$a:literal, $b:literal, $c:literal, $d:literal],
     $fmt:ident $(($p:literal))? => $v:expr) => {
        Sel {
            name: $name,
            header: [$a, $b, $c, $d],
            fmt: Fmt::$fmt $(($p))?,
            value: Get::Any($v),
        }
    };
}

/// A selector of each side (see [`SIDED`]): its name after `LOCAL_` and
/// `REMOTE_`, or both names; the three header words after "Local" or
/// "Remote", its format, and its value of a side.
macro_rules! side {
    ($name:literal, $h:tt, $fmt:ident $(($p:literal))? => $v:expr) => {
        side!([concat!("LOCAL_", $name), concat!("REMOTE_", $name)], $h, $fmt $(($p))? => $v)
    };
    ([$l:expr, $r:expr], [$b:literal, $c:literal, $d:literal],
     $fmt:ident $(($p:literal))? => $v:expr) => {
        SideSel {
            names: [$l, $r],
            header: [$b, $c, $d],
            fmt: Fmt::$fmt $(($p))?,
            value: $v,
        }
    };
}

/// A selector of each side that netperf 2.7 answers with a fixed value:
/// "Deprecated", or a number in a format.
macro_rules! fixed {
    ($name:literal, $h:tt => $v:literal) => {
        side!($name, $h, Str => |_, _| Value::Str($v.into()))
    };
    ($name:literal, $h:tt => $fmt:ident $v:literal) => {
        side!($name, $h, $fmt => |_, _| int($v))
    };
}

/// Every selector, in netperf's order, then ours.
static SELECTORS: &[Sel] = &[
    sel!("COMMAND_LINE", ["Command", "Line", "", ""], Quoted =>
        |c| Value::Str(c.test.command_line.clone())),
    sel!("UUID", ["Test", "UUID", "", ""], Str => |c| Value::Str(c.uuid.to_string())),
    sel!("RESULT_BRAND", ["Result", "Tag", "", ""], Quoted =>
        |c| c.test.brand.clone().map_or(Value::None, Value::Str)),
    // netperf 2.7 names the socket type before -T changes the protocol.
    sel!("SOCKET_TYPE", ["Socket", "Type", "", ""], Str =>
        |c| Value::Str(c.test.socket_type().into())),
    sel!("DIRECTION", ["Direction", "", "", ""], Str =>
        |c| Value::Str(direction(c.test.kind()).into())),
    sel!("PROTOCOL", ["Protocol", "", "", ""], Str => |c| Value::Str(c.test.protocol_label.into())),
    sel!("ELAPSED_TIME", ["Elapsed", "Time", "(sec)", ""], F(2) => |c| f(c.f.elapsed)),
    sel!("SOURCE_PORT", ["Source", "Port", "", ""], Str =>
        |c| Value::Str(c.test.ours.data_port.unwrap_or(0).to_string())),
    sel!("SOURCE_ADDR", ["Source", "Address", "", ""], Str =>
    |c| Value::Str(match (&c.test.ours.data_local, &c.test.ours.local_host) {
        (Some(a), _) | (None, Some(a)) => a.clone(),
        (None, None) if c.test.ours.family == AddrFamily::V6 => "::0".into(),
        (None, None) => "0.0.0.0".into(),
    })),
    sel!("SOURCE_FAMILY", ["Source", "Family", "", ""], Int =>
    |c| int(match c.test.ours.data_family {
        AddrFamily::Unspec => 0,
        AddrFamily::V4 => i64::from(libc_af::INET),
        AddrFamily::V6 => i64::from(libc_af::INET6),
    })),
    sel!("DEST_PORT", ["Destination", "Port", "", ""], Str =>
        |c| Value::Str(c.test.spec.data_port.unwrap_or(0).to_string())),
    sel!("DEST_ADDR", ["Destination", "Address", "", ""], Str =>
        |c| Value::Str(c.test.ours.data_host.clone().unwrap_or_else(|| c.test.host_name.clone()))),
    sel!("DEST_FAMILY", ["Destination", "Family", "", ""], Int =>
        |c| int(family_number(c.m.remote.addr))),
    sel!("THROUGHPUT", ["Throughput", "", "", ""], F(2) => |c| f(c.f.result)),
    sel!("THROUGHPUT_UNITS", ["Throughput", "Units", "", ""], PerSec =>
        |c| Value::Str(c.test.units.label().into())),
    sel!("CONFIDENCE_LEVEL", ["Confidence", "Level", "Percent", ""], Int =>
        |c| int(c.test.confidence.map_or(0, |k| k.level as i64))),
    sel!("CONFIDENCE_INTERVAL", ["Confidence", "Width", "Target", ""], F6 =>
        |c| f(c.test.confidence.map_or(-1.0, |k| k.width * 100.0))),
    sel!("CONFIDENCE_ITERATION", ["Confidence", "Iterations", "Run", ""], Int =>
        |c| int(c.confidence.map_or(1, |(_, n)| n))),
    sel!("THROUGHPUT_CONFID", ["Throughput", "Confidence", "Width (%)", ""], F(3) =>
        |c| conf_pct(c, |v| Some(100.0 * v.result.relative_width()))),
    sel!("LOCAL_CPU_CONFID", ["Local", "CPU", "Confidence", "Width (%)"], F(3) =>
        |c| conf_pct(c, |v| v.local_cpu.map(|i| 100.0 * i.relative_width()))),
    sel!("REMOTE_CPU_CONFID", ["Remote", "CPU", "Confidence", "Width (%)"], F(3) =>
        |c| conf_pct(c, |v| v.remote_cpu.map(|i| 100.0 * i.relative_width()))),
    sel!("RT_LATENCY", ["Round", "Trip", "Latency", "usec/tran"], F(3) => |c| {
        if !c.test.kind().is_rr() || c.m.local.transactions == 0 {
            return f(-1.0);
        }
        let rate = c.m.local.transactions as f64 / c.m.elapsed;
        // a connection test's transactions are one at a time
        let burst = if c.test.kind().is_connection_test() {
            0
        } else {
            c.test.spec.burst
        };
        f(1e6 / rate * f64::from(1 + burst))
    }),
    sel!("TRANSACTION_RATE", ["Transaction", "Rate", "Tran/s", ""], F(3) => |c| {
        // netperf 2.7 leaves its initial 1.0 on a stream test
        if !c.test.kind().is_rr() {
            f(1.0)
        } else if c.m.elapsed > 0.0 {
            f(c.m.local.transactions as f64 / c.m.elapsed)
        } else {
            f(0.0)
        }
    }),
    sel!("TRANSPORT_MSS", ["Transport", "MSS", "bytes", ""], Int => |c| opt_int(c.m.mss)),
    sel!("REQUEST_SIZE", ["Request", "Size", "Bytes", ""], Int =>
    |c| if c.test.kind().is_rr() && c.test.kind() != TestKind::TcpCc {
        int(c.test.spec.request_size)
    } else {
        int(-1)
    }),
    sel!("RESPONSE_SIZE", ["Response", "Size", "Bytes", ""], Int =>
    |c| if c.test.kind().is_rr() && c.test.kind() != TestKind::TcpCc {
        int(c.test.spec.response_size)
    } else {
        int(-1)
    }),
    sel!("BURST_SIZE", ["Initial", "Burst", "Requests", ""], Int => |c| int(c.test.ours.burst)),
    sel!("LSS_SIZE_END", ["Local", "Send Socket", "Size", "Final"], Int =>
    |c| int(if c.m.local.asked.send_buf.is_some() {
        c.m.local.send_buf
    } else {
        end_or(c.m.local.send_buf_end, c.m.local.send_buf)
    })),
    sel!("LSR_SIZE_END", ["Local", "Recv Socket", "Size", "Final"], Int =>
    |c| int(if c.m.local.asked.recv_buf.is_some() {
        c.m.local.recv_buf
    } else {
        end_or(c.m.local.recv_buf_end, c.m.local.recv_buf)
    })),
    sel!("LOCAL_SEND_SIZE", ["Local", "Send", "Size", ""], Int =>
    |c| match c.test.kind().direction() {
        // netperf 2.7's send size of an _RR test stays 0 (requests
        // have their own)
        Direction::Send => int(c.m.local.send_size),
        _ => int(0),
    }),
    sel!("LOCAL_RECV_SIZE", ["Local", "Recv", "Size", ""], Int =>
    |c| match c.test.kind().direction() {
        Direction::Receive => int(c.m.local.recv_size),
        _ => int(0),
    }),
    sel!("LOCAL_CPU_PEAK_UTIL", ["Local", "Peak", "Per CPU", "Util %"], F(2) =>
        |c| opt_f(c.m.local.cpu.as_ref().map(|u| u.peak_util))),
    sel!("LOCAL_CPU_PEAK_ID", ["Local", "Peak", "Per CPU", "ID"], Int =>
        |c| opt_int(c.m.local.cpu.as_ref().map(|u| u.peak_cpu))),
    sel!("SD_UNITS", ["Service", "Demand", "Units", ""], Str => |c| Value::Str(
        if sd_per_transaction(c.test.kind(), c.test.units) {
            "usec/Tran"
        } else {
            "usec/KB"
        }
        .into()
    )),
    sel!("RSS_SIZE_END", ["Remote", "Send Socket", "Size", "Final"], Int =>
        |c| int(end_or(c.m.remote.send_buf_end, c.m.remote.send_buf))),
    sel!("RSR_SIZE_END", ["Remote", "Recv Socket", "Size", "Final"], Int =>
        |c| int(end_or(c.m.remote.recv_buf_end, c.m.remote.recv_buf))),
    sel!("REMOTE_SEND_SIZE", ["Remote", "Send", "Size", ""], Int =>
    |c| match c.test.kind().direction() {
        // netperf 2.7: the netserver echoes -1 for a direction it does
        // not use
        Direction::Send => int(-1),
        _ if c.test.kind() == TestKind::TcpCc => int(-1),
        _ => int(c.m.remote.send_size),
    }),
    sel!("REMOTE_RECV_SIZE", ["Remote", "Recv", "Size", ""], Int =>
    |c| match c.test.kind().direction() {
        Direction::Receive => int(-1),
        _ if c.test.kind() == TestKind::TcpCc => int(-1),
        _ => int(c.m.remote.recv_size),
    }),
    sel!("REMOTE_CPU_PEAK_UTIL", ["Remote", "Peak", "Per CPU", "Util %"], F(2) =>
        |c| f(c.m.remote.cpu.as_ref().map_or(0.0, |u| u.peak_util))),
    sel!("REMOTE_CPU_PEAK_ID", ["Remote", "Peak", "Per CPU", "ID"], Int =>
        |c| int(c.m.remote.cpu.as_ref().map_or(0, |u| u.peak_cpu))),
    sel!("MIN_LATENCY", ["Minimum", "Latency", "Microseconds", ""], Int =>
        |c| lat_us(c, |l| l.min)),
    sel!("MAX_LATENCY", ["Maximum", "Latency", "Microseconds", ""], Int =>
        |c| lat_us(c, |l| l.max)),
    sel!("P50_LATENCY", ["50th", "Percentile", "Latency", "Microseconds"], Int =>
        |c| lat_us(c, |l| l.p50)),
    sel!("IDLE_P50_LATENCY", ["Idle", "50th Percentile", "Latency", "Microseconds"], Int =>
        |c| under_load(c, |u| u.idle.as_ref().map(|l| (l.p50 / 1000) as i64))),
    sel!("LOADED_P50_LATENCY", ["Loaded", "50th Percentile", "Latency", "Microseconds"], Int =>
        |c| under_load(c, |_| c.m.latency.as_ref().map(|l| (l.p50 / 1000) as i64))),
    sel!("LOADED_P99_LATENCY", ["Loaded", "99th Percentile", "Latency", "Microseconds"], Int =>
        |c| under_load(c, |_| c.m.latency.as_ref().map(|l| (l.p99 / 1000) as i64))),
    sel!("LOAD_THROUGHPUT", ["Load", "Throughput", "10^6bits/s", ""], F(2) => |c| match c.m.load() {
        Some(u) => Value::F(u.up_mbps.unwrap_or(0.0) + u.down_mbps.unwrap_or(0.0)),
        None => Value::F(-1.0),
    }),
    sel!("UP_QUEUE_DELAY_P50", ["Up", "50th Percentile", "Queueing Delay", "Microseconds"], Int =>
        |c| queue_delay(c, true, |p| p.p50)),
    sel!("UP_QUEUE_DELAY_P99", ["Up", "99th Percentile", "Queueing Delay", "Microseconds"], Int =>
        |c| queue_delay(c, true, |p| p.p99)),
    sel!("DOWN_QUEUE_DELAY_P50", ["Down", "50th Percentile", "Queueing Delay", "Microseconds"], Int =>
        |c| queue_delay(c, false, |p| p.p50)),
    sel!("DOWN_QUEUE_DELAY_P99", ["Down", "99th Percentile", "Queueing Delay", "Microseconds"], Int =>
        |c| queue_delay(c, false, |p| p.p99)),
    sel!("RPM", ["Responsiveness", "Round Trips", "a Minute", ""], Int =>
        |c| rpm(c, |r| Some(r.rpm))),
    sel!("IDLE_RPM", ["Idle", "Round Trips", "a Minute", ""], Int =>
        |c| rpm(c, |r| Some(r.idle_rpm))),
    sel!("FOREIGN_RPM", ["Loaded", "Foreign", "Round Trips", "a Minute"], Int =>
        |c| rpm(c, |r| Some(r.foreign_rpm))),
    sel!("SELF_RPM", ["Loaded", "Self", "Round Trips", "a Minute"], Int =>
        |c| rpm(c, |r| r.self_rpm)),
    sel!("RPM_CONFIDENCE", ["Responsiveness", "Confidence", "", ""], Str =>
    |c| c.m.rpm().map_or(Value::Str(String::new()), |r| {
        Value::Str(r.confidence.name().into())
    })),
    sel!("P90_LATENCY", ["90th", "Percentile", "Latency", "Microseconds"], Int =>
        |c| lat_us(c, |l| l.p90)),
    sel!("P99_LATENCY", ["99th", "Percentile", "Latency", "Microseconds"], Int =>
        |c| lat_us(c, |l| l.p99)),
    sel!("MEAN_LATENCY", ["Mean", "Latency", "Microseconds", ""], F(2) =>
        |c| lat(c, |l| l.mean / 1000.0)),
    sel!("STDDEV_LATENCY", ["Stddev", "Latency", "Microseconds", ""], F(2) =>
        |c| lat(c, |l| l.stddev / 1000.0)),
    // what the kernel kept (Linux drops ECN bits on TCP), as netperf 2.7
    sel!("LOCAL_SOCKET_TOS", ["Local", "Socket", "TOS", ""], Hex2 =>
        |c| opt_int(c.m.local.tos.or(c.m.local.asked.tos.map(u32::from)))),
    // what the netserver marks its sends with (never CE; --ecn's codepoint)
    sel!("REMOTE_SOCKET_TOS", ["Remote", "Socket", "TOS", ""], Hex2 =>
    |c| opt_int(proto::ecn::server_tos(
        c.m.remote.asked.tos,
        c.test.spec.ecn,
        c.test.kind().protocol() == proto::Protocol::Udp,
    ))),
    sel!("LOCAL_CONG_CONTROL", ["Local", "Congestion", "Control", "Algorithm"], Str =>
    |c| Value::Str(
        c.m.local
            .tcp
            .as_ref()
            .map_or_else(String::new, |t| t.cong_control.clone())
    )),
    sel!("REMOTE_CONG_CONTROL", ["Remote", "Congestion", "Control", "Algorithm"], Str =>
    |c| Value::Str(if c.test.kind().is_connection_test() {
        String::new()
    } else {
        c.m.remote
            .tcp
            .as_ref()
            .map_or_else(String::new, |t| t.cong_control.clone())
    })),
    sel!("LOCAL_FILL_FILE", ["Local", "Fill", "File", ""], Str => |c| Value::Str(
        c.test
            .ours
            .fill_file
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string())
    )),
    sel!("REMOTE_FILL_FILE", ["Remote", "Fill", "File", ""], Str => |_| Value::Str(String::new())),
    // ours
    sel!("P999_LATENCY", ["99.9th", "Percentile", "Latency", "Microseconds"], Int =>
        |c| lat_us(c, |l| l.p999)),
    sel!("UDP_LOST", ["Datagrams", "Lost", "", ""], Int =>
        |c| opt_int(udp(c, |u, sent| sent.saturating_sub(u.received)))),
    sel!("UDP_LOST_PERCENT", ["Datagrams", "Lost", "%", ""], F(3) => |c| opt_f(udp(c, |u, sent| {
        if sent == 0 {
            0.0
        } else {
            100.0 * sent.saturating_sub(u.received) as f64 / sent as f64
        }
    }))),
    sel!("UDP_RCVBUF_DROPS", ["Receive", "Buffer", "Drops", ""], Int =>
        |c| opt_int(udp(c, |u, _| u.rcvbuf_drops))),
    sel!("UDP_OUT_OF_ORDER", ["Datagrams", "Out of", "Order", ""], Int =>
        |c| opt_int(udp(c, |u, _| u.out_of_order))),
    sel!("UDP_DUPLICATES", ["Datagrams", "Duplicated", "", ""], Int =>
        |c| opt_int(udp(c, |u, _| u.duplicates))),
    sel!("UDP_JITTER", ["Jitter", "Microseconds", "", ""], F(3) =>
        |c| opt_f(udp(c, |u, _| u.jitter_ns as f64 / 1000.0))),
    sel!("ECN_CE_FRACTION", ["ECN", "CE", "Fraction", ""], F(6) =>
        |c| opt_f(c.m.ecn(&c.test.spec).and_then(|e| e.ce_fraction()))),
    sel!("ECN_PATH", ["ECN", "Path", "", ""], Str =>
    |c| match c.m.ecn(&c.test.spec).and_then(|e| e.path()) {
        Some(p) => Value::Str(p.name().into()),
        None => Value::Str(String::new()),
    }),
    sel!("FLOWS", ["Flows", "", "", ""], Int => |c| int(c.m.local.flows.len().max(1) as i64)),
    sel!("FLOW_MIN_THROUGHPUT", ["Per Flow", "Minimum", "Throughput", ""], F(2) =>
        |c| f(flow_spread(c).0)),
    sel!("FLOW_MEDIAN_THROUGHPUT", ["Per Flow", "Median", "Throughput", ""], F(2) =>
        |c| f(flow_spread(c).1)),
    sel!("FLOW_MAX_THROUGHPUT", ["Per Flow", "Maximum", "Throughput", ""], F(2) =>
        |c| f(flow_spread(c).2)),
    sel!("FLOW_FAIRNESS", ["Jain's", "Fairness", "Index", ""], F(4) => |c| f(flow_spread(c).3)),
    sel!("RR_LOST_TRANSACTIONS", ["Lost", "Transactions", "", ""], Int =>
    |c| if c.test.kind() == TestKind::UdpRr {
        int(c.m.lost)
    } else {
        int(-1)
    }),
    sel!("LOCAL_SECURITY_TYPE_ID", ["Local", "OS", "Security", "Type ID"], Int => |_| int(0)),
    sel!("REMOTE_SECURITY_TYPE_ID", ["Remote", "OS", "Security", "Type"], Int => |_| int(0)),
    sel!("LOCAL_SECURITY_ENABLED_NUM", ["Local", "OS", "Security", "Enabled Num"], Int =>
        |_| int(0)),
    sel!("REMOTE_SECURITY_ENABLED_NUM", ["Remote", "OS", "Security", "Enabled"], Int => |_| int(0)),
];

/// The selectors that name one side, each for both: `LOCAL_X` and
/// `REMOTE_X` (or `LSS_`/`RSS_`, `LSR_`/`RSR_`), the same header after
/// "Local" or "Remote", the same value of that side.
static SIDED: &[SideSel] = &[
    side!("SEND_THROUGHPUT", ["Send", "Throughput", ""], F(2) => |c, s| rate_of(c, s.m.bytes_sent)),
    side!("RECV_THROUGHPUT", ["Recv", "Throughput", ""], F(2) =>
        |c, s| rate_of(c, s.m.bytes_received)),
    side!("TRANSPORT_RETRANS", ["Transport", "Retransmissions", ""], Int =>
    |c, s| if c.test.kind().is_connection_test() {
        // netperf 2.7 reads it on a socket already closed
        int(-1)
    } else {
        opt_int(s.m.tcp.as_ref().map(|t| t.retransmits))
    }),
    side!(["LSS_SIZE_REQ", "RSS_SIZE_REQ"], ["Send Socket", "Size", "Requested"], Int =>
        |_, s| opt_int(s.asked.send_buf)),
    side!(["LSS_SIZE", "RSS_SIZE"], ["Send Socket", "Size", "Initial"], Int =>
        |_, s| int(s.m.send_buf)),
    side!(["LSR_SIZE_REQ", "RSR_SIZE_REQ"], ["Recv Socket", "Size", "Requested"], Int =>
        |_, s| opt_int(s.asked.recv_buf)),
    side!(["LSR_SIZE", "RSR_SIZE"], ["Recv Socket", "Size", "Initial"], Int =>
        |_, s| int(s.m.recv_buf)),
    side!("SEND_CALLS", ["Send", "Calls", ""], Int => |_, s| int(s.m.send_calls)),
    side!("RECV_CALLS", ["Recv", "Calls", ""], Int => |_, s| int(s.m.recv_calls)),
    side!("BYTES_PER_RECV", ["Bytes", "Per", "Recv"], F(2) =>
        |_, s| per(s.m.bytes_received, s.m.recv_calls)),
    side!("BYTES_PER_SEND", ["Bytes", "Per", "Send"], F(2) =>
        |_, s| per(s.m.bytes_sent, s.m.send_calls)),
    side!("BYTES_RECVD", ["Bytes", "Received", ""], Int => |_, s| int(s.m.bytes_received)),
    side!("BYTES_SENT", ["Bytes", "Sent", ""], Int => |_, s| int(s.m.bytes_sent)),
    side!("BYTES_XFERD", ["Bytes", "Xferred", ""], F(0) =>
        |_, s| f((s.m.bytes_sent + s.m.bytes_received) as f64)),
    side!("SEND_WIDTH", ["Send", "Width", ""], Int => |_, s| int(s.m.send_width)),
    side!("RECV_WIDTH", ["Recv", "Width", ""], Int => |_, s| int(s.m.recv_width)),
    side!("SEND_OFFSET", ["Send", "Offset", ""], Int => |_, s| int(s.asked.send_offset)),
    side!("RECV_OFFSET", ["Recv", "Offset", ""], Int => |_, s| int(s.asked.recv_offset)),
    side!("RECV_ALIGN", ["Recv", "Alignment", ""], Int => |_, s| int(s.asked.recv_align)),
    side!("SEND_ALIGN", ["Send", "Alignment", ""], Int => |_, s| int(s.asked.send_align)),
    side!("CPU_UTIL", ["CPU", "Util", "%"], F(2) => |_, s| opt_f(s.cpu)),
    side!("CPU_PERCENT_USER", ["CPU", "User", "%"], F(2) =>
        |_, s| f(s.m.cpu.as_ref().map_or(0.0, |u| u.user))),
    side!("CPU_PERCENT_SYSTEM", ["CPU", "System", "%"], F(2) =>
        |_, s| f(s.m.cpu.as_ref().map_or(0.0, |u| u.system))),
    side!("CPU_PERCENT_IOWAIT", ["CPU", "I/O", "%"], F(2) =>
        |_, s| f(s.m.cpu.as_ref().map_or(0.0, |u| u.iowait))),
    side!("CPU_PERCENT_IRQ", ["CPU", "IRQ", "%"], F(2) =>
        |_, s| f(s.m.cpu.as_ref().map_or(0.0, |u| u.irq))),
    side!("CPU_PERCENT_SWINTR", ["CPU", "swintr", "%"], F(2) =>
        |_, s| f(s.m.cpu.as_ref().map_or(0.0, |u| u.softirq))),
    side!("CPU_BIND", ["CPU", "Bind", ""], Int => |_, s| opt_int(s.asked.cpu_bind)),
    side!("SD", ["Service", "Demand", ""], F(3) => |_, s| opt_f(s.sd)),
    side!("CPU_METHOD", ["CPU", "Util", "Method"], Str =>
        |_, s| Value::Str(if s.m.cpu.is_some() { "S" } else { "U" }.into())),
    side!("CPU_COUNT", ["CPU", "Count", ""], Int =>
        |_, s| int(s.m.cpu.as_ref().map_or(0, |u| u.num_cpus))),
    side!("NODELAY", ["NODELAY", "", ""], Int => |_, s| int(i64::from(s.asked.nodelay))),
    side!("CORK", ["Cork", "", ""], Int => |c, _| int(i64::from(c.test.ours.cork))),
    side!("SOCKET_PRIO", ["Socket", "Priority", ""], Int => |_, s| opt_int(s.asked.priority)),
    // netperf 2.7 answers these with "Deprecated" or a fixed value; so do we.
    fixed!("DRIVER_NAME", ["Driver", "Name", ""] => "Deprecated"),
    fixed!("DRIVER_VERSION", ["Driver", "Version", ""] => "Deprecated"),
    fixed!("DRIVER_FIRMWARE", ["Driver", "Firmware", ""] => "Deprecated"),
    fixed!("DRIVER_BUS", ["Driver", "Bus", ""] => "Deprecated"),
    fixed!("INTERFACE_NAME", ["Interface", "Name", ""] => "Deprecated"),
    fixed!("INTERFACE_SLOT", ["Interface", "Slot", ""] => "Deprecated"),
    fixed!("MACHINE", ["Machine", "", ""] => "Deprecated"),
    fixed!("VERSION", ["Version", "", ""] => "Deprecated"),
    fixed!("RELEASE", ["Release", "", ""] => "Deprecated"),
    fixed!("SYSNAME", ["Sysname", "", ""] => "Deprecated"),
    fixed!("SECURITY_ENABLED", ["OS", "Security", "Enabled"] => "Deprecated"),
    fixed!("SECURITY_TYPE", ["OS", "Security", "Type"] => "Deprecated"),
    fixed!("SECURITY_SPECIFIC", ["OS", "Security", "Specific"] => "Deprecated"),
    fixed!("SYSTEM_MODEL", ["System", "Model", ""] => "Deprecated"),
    fixed!("CPU_MODEL", ["CPU", "Model", ""] => "Deprecated"),
    fixed!("SEND_DIRTY_COUNT", ["Send", "Dirty", "Count"] => Int -1),
    fixed!("RECV_DIRTY_COUNT", ["Recv", "Dirty", "Count"] => Int -1),
    fixed!("RECV_CLEAN_COUNT", ["Recv", "Clean", "Count"] => Int -1),
    fixed!("INTERFACE_SUBDEVICE", ["Interface", "Subdevice", ""] => Hex4 -2),
    fixed!("INTERFACE_DEVICE", ["Interface", "Device", ""] => Hex4 -2),
    fixed!("INTERFACE_SUBVENDOR", ["Interface", "Subvendor", ""] => Hex4 -2),
    fixed!("INTERFACE_VENDOR", ["Interface", "Vendor", ""] => Hex4 -2),
    fixed!("INTERVAL_USECS", ["Interval", "Usecs", ""] => Int 0),
    fixed!("INTERVAL_BURST", ["Interval", "Burst", ""] => Int 0),
    fixed!("CPU_FREQUENCY", ["CPU", "Frequency", "MHz"] => Int 0),
    side!("TRANSPORT_RTT", ["Transport", "RTT", "Microseconds"], Int =>
        |_, s| opt_int(s.m.tcp.as_ref().map(|t| t.rtt_us))),
    side!("TRANSPORT_CWND", ["Transport", "Cwnd", "Segments"], Int =>
        |_, s| opt_int(s.m.tcp.as_ref().map(|t| t.cwnd))),
    side!("TRANSPORT_RTT_MIN", ["Transport", "RTT Min", "Microseconds"], Int =>
        |_, s| opt_int(rank(&s.m.rtt_over_time, 0.0))),
    side!("TRANSPORT_RTT_MEDIAN", ["Transport", "RTT Median", "Microseconds"], Int =>
        |_, s| opt_int(rank(&s.m.rtt_over_time, 0.5))),
    side!("TRANSPORT_RTT_MAX", ["Transport", "RTT Max", "Microseconds"], Int =>
        |_, s| opt_int(rank(&s.m.rtt_over_time, 1.0))),
];

/// The value at fraction `q` of the way through `v` sorted (nearest rank;
/// 0: the least, 1: the most), if any.
fn rank(v: &[u32], q: f64) -> Option<u32> {
    let mut v = v.to_vec();
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied()
}

/// netperf 2.7's DIRECTION of a test.
fn direction(kind: TestKind) -> &'static str {
    match kind {
        TestKind::TcpCc => "Connection",
        TestKind::TcpCrr => "Connect|Send|Recv",
        k => match k.direction() {
            Direction::Send => "Send",
            Direction::Receive => "Receive",
            Direction::RequestResponse => "Send|Recv",
        },
    }
}

/// The socket buffer size at the end, if the side reported it.
fn end_or(end: u32, initial: u32) -> u32 {
    if end > 0 { end } else { initial }
}

/// The AF_ number of an address, as netperf prints families.
fn family_number(a: Option<std::net::SocketAddr>) -> i64 {
    match a {
        Some(std::net::SocketAddr::V4(_)) => i64::from(libc_af::INET),
        Some(std::net::SocketAddr::V6(_)) => i64::from(libc_af::INET6),
        None => 0,
    }
}

/// Linux's address family numbers.
mod libc_af {
    pub const INET: u8 = 2;
    pub const INET6: u8 = 10;
}

/// netperf 2.7's selectors in its own order: what `all` prints, and where
/// `-o ?` lists them. `all` prints them in four blocks, starting at these
/// names.
const NETPERF_ORDER: &str = "\
    SOCKET_TYPE PROTOCOL DIRECTION ELAPSED_TIME THROUGHPUT THROUGHPUT_UNITS LSS_SIZE_REQ \
    LSS_SIZE LSS_SIZE_END LSR_SIZE_REQ LSR_SIZE LSR_SIZE_END RSS_SIZE_REQ RSS_SIZE \
    RSS_SIZE_END RSR_SIZE_REQ RSR_SIZE RSR_SIZE_END LOCAL_SEND_SIZE LOCAL_RECV_SIZE \
    REMOTE_SEND_SIZE REMOTE_RECV_SIZE REQUEST_SIZE RESPONSE_SIZE LOCAL_CPU_UTIL \
    LOCAL_CPU_PERCENT_USER LOCAL_CPU_PERCENT_SYSTEM LOCAL_CPU_PERCENT_IOWAIT \
    LOCAL_CPU_PERCENT_IRQ LOCAL_CPU_PERCENT_SWINTR LOCAL_CPU_METHOD LOCAL_SD REMOTE_CPU_UTIL \
    REMOTE_CPU_PERCENT_USER REMOTE_CPU_PERCENT_SYSTEM REMOTE_CPU_PERCENT_IOWAIT \
    REMOTE_CPU_PERCENT_IRQ REMOTE_CPU_PERCENT_SWINTR REMOTE_CPU_METHOD REMOTE_SD SD_UNITS \
    CONFIDENCE_LEVEL CONFIDENCE_INTERVAL CONFIDENCE_ITERATION THROUGHPUT_CONFID \
    LOCAL_CPU_CONFID REMOTE_CPU_CONFID TRANSACTION_RATE RT_LATENCY BURST_SIZE \
    LOCAL_TRANSPORT_RETRANS REMOTE_TRANSPORT_RETRANS TRANSPORT_MSS LOCAL_SEND_THROUGHPUT \
    LOCAL_RECV_THROUGHPUT REMOTE_SEND_THROUGHPUT REMOTE_RECV_THROUGHPUT LOCAL_CPU_BIND \
    LOCAL_CPU_COUNT LOCAL_CPU_PEAK_UTIL LOCAL_CPU_PEAK_ID LOCAL_CPU_MODEL LOCAL_CPU_FREQUENCY \
    REMOTE_CPU_BIND REMOTE_CPU_COUNT REMOTE_CPU_PEAK_UTIL REMOTE_CPU_PEAK_ID REMOTE_CPU_MODEL \
    REMOTE_CPU_FREQUENCY SOURCE_PORT SOURCE_ADDR SOURCE_FAMILY DEST_PORT DEST_ADDR DEST_FAMILY \
    LOCAL_SEND_CALLS LOCAL_RECV_CALLS LOCAL_BYTES_PER_RECV LOCAL_BYTES_PER_SEND \
    LOCAL_BYTES_SENT LOCAL_BYTES_RECVD LOCAL_BYTES_XFERD LOCAL_SEND_OFFSET LOCAL_RECV_OFFSET \
    LOCAL_SEND_ALIGN LOCAL_RECV_ALIGN LOCAL_SEND_WIDTH LOCAL_RECV_WIDTH LOCAL_SEND_DIRTY_COUNT \
    LOCAL_RECV_DIRTY_COUNT LOCAL_RECV_CLEAN_COUNT LOCAL_NODELAY LOCAL_CORK REMOTE_SEND_CALLS \
    REMOTE_RECV_CALLS REMOTE_BYTES_PER_RECV REMOTE_BYTES_PER_SEND REMOTE_BYTES_SENT \
    REMOTE_BYTES_RECVD REMOTE_BYTES_XFERD REMOTE_SEND_OFFSET REMOTE_RECV_OFFSET \
    REMOTE_SEND_ALIGN REMOTE_RECV_ALIGN REMOTE_SEND_WIDTH REMOTE_RECV_WIDTH \
    REMOTE_SEND_DIRTY_COUNT REMOTE_RECV_DIRTY_COUNT REMOTE_RECV_CLEAN_COUNT REMOTE_NODELAY \
    REMOTE_CORK LOCAL_SYSNAME LOCAL_SYSTEM_MODEL LOCAL_RELEASE LOCAL_VERSION LOCAL_MACHINE \
    REMOTE_SYSNAME REMOTE_SYSTEM_MODEL REMOTE_RELEASE REMOTE_VERSION REMOTE_MACHINE \
    LOCAL_INTERFACE_NAME LOCAL_INTERFACE_VENDOR LOCAL_INTERFACE_DEVICE \
    LOCAL_INTERFACE_SUBVENDOR LOCAL_INTERFACE_SUBDEVICE LOCAL_DRIVER_NAME LOCAL_DRIVER_VERSION \
    LOCAL_DRIVER_FIRMWARE LOCAL_DRIVER_BUS LOCAL_INTERFACE_SLOT REMOTE_INTERFACE_NAME \
    REMOTE_INTERFACE_VENDOR REMOTE_INTERFACE_DEVICE REMOTE_INTERFACE_SUBVENDOR \
    REMOTE_INTERFACE_SUBDEVICE REMOTE_DRIVER_NAME REMOTE_DRIVER_VERSION REMOTE_DRIVER_FIRMWARE \
    REMOTE_DRIVER_BUS REMOTE_INTERFACE_SLOT LOCAL_INTERVAL_USECS LOCAL_INTERVAL_BURST \
    REMOTE_INTERVAL_USECS REMOTE_INTERVAL_BURST LOCAL_SECURITY_TYPE_ID LOCAL_SECURITY_TYPE \
    LOCAL_SECURITY_ENABLED_NUM LOCAL_SECURITY_ENABLED LOCAL_SECURITY_SPECIFIC \
    REMOTE_SECURITY_TYPE_ID REMOTE_SECURITY_TYPE REMOTE_SECURITY_ENABLED_NUM \
    REMOTE_SECURITY_ENABLED REMOTE_SECURITY_SPECIFIC RESULT_BRAND UUID MIN_LATENCY MAX_LATENCY \
    P50_LATENCY P90_LATENCY P99_LATENCY MEAN_LATENCY STDDEV_LATENCY LOCAL_SOCKET_PRIO \
    REMOTE_SOCKET_PRIO LOCAL_SOCKET_TOS REMOTE_SOCKET_TOS LOCAL_CONG_CONTROL \
    REMOTE_CONG_CONTROL LOCAL_FILL_FILE REMOTE_FILL_FILE COMMAND_LINE";
const ALL_BLOCK_STARTS: [&str; 3] = ["LOCAL_CPU_UTIL", "LOCAL_SEND_THROUGHPUT", "LOCAL_SYSNAME"];

fn netperf_order() -> std::str::SplitWhitespace<'static> {
    NETPERF_ORDER.split_whitespace()
}

fn find(name: &str) -> Option<&'static Sel> {
    ALL.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// `--flows`: (min, median, max) of the flows' throughputs in the result's
/// units, and Jain's fairness index; one flow is the result itself.
fn flow_spread(c: &Ctx) -> (f64, f64, f64, f64) {
    use super::classic::flows;
    if c.m.local.flows.len() < 2 {
        return (c.f.result, c.f.result, c.f.result, 1.0);
    }
    let x = flows::per_flow(c.test, c.m);
    let (lo, med, hi) = flows::spread(&x);
    (lo, med, hi, flows::jain(&x))
}

/// Every selector name: netperf 2.7's in its order, then ours.
pub fn names() -> impl Iterator<Item = &'static str> {
    netperf_order().chain(
        ALL.iter()
            .map(|s| s.name)
            .filter(|n| !netperf_order().any(|o| o == *n)),
    )
}

/// netperf's list of the selectors for `-o ?` and `-k ?` (one line,
/// comma-separated) or `-O ?` (one per line), between its OUTPUT_NONE and
/// OUTPUT_END markers.
/// Piped, netperf 2.7's list exactly; with `ours`, our selectors too.
pub fn listing(one_line: bool, ours: bool) -> String {
    let all: Vec<&str> = std::iter::once("OUTPUT_NONE")
        .chain(names().take(if ours {
            usize::MAX
        } else {
            netperf_order().count()
        }))
        .chain(std::iter::once("OUTPUT_END"))
        .collect();
    let mut s = all.join(if one_line { "," } else { "\n" });
    s.push('\n');
    s
}

/// One entry of a selection: a selector, or a name we do not know.
#[derive(Clone, Debug)]
pub enum Entry {
    Known(&'static str),
    Unknown(String),
}

/// A parsed selection: blocks of entries.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub blocks: Vec<Vec<Entry>>,
}

impl Selection {
    /// Whether a latency statistic is among the selectors.
    pub fn wants_latency(&self) -> bool {
        self.blocks.iter().flatten().any(|e| match e {
            Entry::Known(n) => n.ends_with("_LATENCY") && *n != "RT_LATENCY",
            Entry::Unknown(_) => false,
        })
    }

    /// Names that did not match a selector.
    pub fn unknown(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().flatten().filter_map(|e| match e {
            Entry::Unknown(n) => Some(n.as_str()),
            Entry::Known(_) => None,
        })
    }
}

fn parse_list(list: &str) -> Selection {
    let blocks = list
        .split(';')
        .take(4)
        .map(|block| {
            block
                .split([' ', ','])
                .filter(|t| !t.is_empty())
                .map(|t| match find(t) {
                    Some(s) => Entry::Known(s.name),
                    None => Entry::Unknown(t.to_string()),
                })
                .collect::<Vec<_>>()
        })
        .filter(|b| !b.is_empty())
        .collect();
    Selection { blocks }
}

/// netperf's default selection for a test (and with `-c`/`-C`).
pub fn default_for(t: &Test) -> Selection {
    let tput = "ELAPSED_TIME,THROUGHPUT,THROUGHPUT_UNITS";
    let cpu = "LOCAL_CPU_UTIL,LOCAL_CPU_PERCENT_USER,LOCAL_CPU_PERCENT_SYSTEM,LOCAL_CPU_PERCENT_IOWAIT,LOCAL_CPU_PERCENT_IRQ,LOCAL_CPU_PERCENT_SWINTR,LOCAL_CPU_METHOD,REMOTE_CPU_UTIL,REMOTE_CPU_PERCENT_USER,REMOTE_CPU_PERCENT_SYSTEM,REMOTE_CPU_PERCENT_IOWAIT,REMOTE_CPU_PERCENT_IRQ,REMOTE_CPU_PERCENT_SWINTR,REMOTE_CPU_METHOD,LOCAL_SD,REMOTE_SD,SD_UNITS";
    let head = match t.kind().direction() {
        Direction::Send => "LSS_SIZE_END,RSR_SIZE_END,LOCAL_SEND_SIZE",
        Direction::Receive => "RSS_SIZE_END,LSR_SIZE_END,REMOTE_SEND_SIZE",
        Direction::RequestResponse => {
            "LSS_SIZE_END,LSR_SIZE_END,RSR_SIZE_END,RSS_SIZE_END,REQUEST_SIZE,RESPONSE_SIZE"
        }
    };
    let mut list = format!("{head},{tput}");
    if t.local_cpu || t.spec.measure_cpu {
        list = format!("{list},{cpu}");
    }
    parse_list(&list)
}

/// Resolve what `-o`/`-O`/`-k` named: nothing (the default list), "all",
/// a list of names, or a file of them.
pub fn resolve(t: &Test, spec: Option<&str>) -> Result<Selection, String> {
    let Some(spec) = spec else {
        return Ok(default_for(t));
    };
    if spec.eq_ignore_ascii_case("all") {
        // netperf 2.7's, in its order and its four blocks; ours are named
        // one by one.
        let mut blocks: Vec<Vec<Entry>> = vec![Vec::new()];
        for n in netperf_order() {
            if ALL_BLOCK_STARTS.contains(&n) {
                blocks.push(Vec::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push(Entry::Known(n));
            }
        }
        return Ok(Selection { blocks });
    }
    if spec.contains([',', ';']) || find(spec).is_some() {
        return Ok(parse_list(spec));
    }
    let text = std::fs::read_to_string(spec)
        .map_err(|e| format!("cannot read the output selection file '{spec}': {e}"))?;
    Ok(parse_list(&text.lines().collect::<Vec<_>>().join(";")))
}

fn render(s: &Sel, c: &Ctx) -> Option<String> {
    let v = s.value(c);
    Some(match (s.fmt, v) {
        (_, Value::None) => return None,
        (Fmt::Quoted, Value::Str(x)) => format!("\"{x}\""),
        (Fmt::PerSec, Value::Str(x)) => format!("{x}/s"),
        (_, Value::Str(x)) => x,
        (Fmt::Hex2, Value::Int(i)) => format!("0x{:02x}", i as i32 as u32),
        (Fmt::Hex4, Value::Int(i)) => format!("0x{:04x}", i as i32 as u32),
        (Fmt::F(p), Value::Int(i)) => format!("{:.*}", p, i as f64),
        (Fmt::F6, Value::Int(i)) => format!("{:.6}", i as f64),
        (_, Value::Int(i)) => i.to_string(),
        (Fmt::F(p), Value::F(x)) => format!("{x:.p$}"),
        (Fmt::F6, Value::F(x)) => format!("{x:.6}"),
        (_, Value::F(x)) => format!("{}", x.round() as i64),
    })
}

/// Print a selection in one of the three styles.
pub fn print(style: SelectorStyle, sel: &Selection, c: &Ctx) -> String {
    match style {
        SelectorStyle::KeyVal => keyval(sel, c),
        SelectorStyle::Csv => csv(sel, c),
        SelectorStyle::Columns => columns(sel, c),
    }
}

fn entries<'s>(sel: &'s Selection) -> impl Iterator<Item = Option<&'static Sel>> + 's {
    sel.blocks.iter().flatten().map(|e| match e {
        Entry::Known(n) => find(n),
        Entry::Unknown(_) => None,
    })
}

/// `-k`: `NAME=value` lines; unknown names and absent values print nothing.
fn keyval(sel: &Selection, c: &Ctx) -> String {
    let mut out = String::new();
    for s in entries(sel).flatten() {
        if let Some(v) = render(s, c) {
            let _ = writeln!(out, "{}={v}", s.name);
        }
    }
    out
}

/// `-o`: a header line (with headers on), then the values, comma-separated,
/// byte for byte as netperf 2.7 lays them out.
fn csv(sel: &Selection, c: &Ctx) -> String {
    let mut header = String::new();
    let mut values = String::new();
    for e in entries(sel) {
        if let Some(s) = e {
            let words: Vec<&str> = s
                .header
                .iter()
                .copied()
                .take_while(|h| !h.is_empty())
                .collect();
            if !words.is_empty() {
                header.push_str(&words.join(" "));
                header.push(',');
            }
        }
        match e.and_then(|s| render(s, c)) {
            Some(v) => {
                values.push_str(&v);
                values.push(',');
            }
            // netperf writes the separator and skips one column of its
            // space-filled buffer: an empty field, and a space before the
            // next value.
            None => values.push_str(", "),
        }
    }
    header.pop();
    values.pop();
    let mut out = String::new();
    if sel.blocks.iter().all(Vec::is_empty) {
        return out;
    }
    if c.test.headers {
        out.push_str(&header);
        out.push('\n');
    }
    out.push_str(&values);
    out.push('\n');
    out
}

/// `-O`: each block as four header lines and a value line in columns, each
/// as wide as its widest header line or value plus one, then one space.
fn columns(sel: &Selection, c: &Ctx) -> String {
    let mut out = String::new();
    for (i, block) in sel.blocks.iter().enumerate() {
        let mut lines: [String; 4] = Default::default();
        let mut values = String::new();
        for e in block {
            let s = match e {
                Entry::Known(n) => find(n),
                Entry::Unknown(_) => None,
            };
            let header = s.map_or(["", "", "", ""], |s| s.header);
            let value = s.and_then(|s| render(s, c));
            let widest = header.iter().map(|h| h.len()).max().unwrap_or(0);
            let width = widest.max(value.as_ref().map_or(0, |v| v.len() + 1));
            for (line, h) in lines.iter_mut().zip(header) {
                let _ = write!(line, "{h:width$} ");
            }
            let _ = write!(values, "{:width$} ", value.unwrap_or_default());
        }
        if i > 0 {
            out.push('\n');
        }
        if c.test.headers {
            for l in &lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out.push_str(&values);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::output::testing::{Words, asked};

    fn ctx_out(p: &Words, style: SelectorStyle, spec: &str) -> String {
        let mut m = Measurement {
            elapsed: 1.0,
            local: Side {
                send_buf: 16384,
                send_size: 16384,
                counts: proto::SideResults {
                    bytes_sent: 1_000_000,
                    tcp: Some(proto::TcpStats {
                        cong_control: "bbr".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
            remote: Side {
                recv_buf: 131072,
                ..Default::default()
            },
            ..Measurement::default()
        };
        (m.local.asked, m.remote.asked) = (p.local.clone(), p.remote.clone());
        let f = Figures {
            elapsed: 1.0,
            result: 8513.48,
            ..Figures::default()
        };
        let c = Ctx {
            test: &p.test,
            m: &m,
            f: &f,
            confidence: None,
            uuid: "u",
        };
        print(style, &resolve(p, Some(spec)).unwrap(), &c)
    }

    #[test]
    fn keyval_skips_unknown_names() {
        let p = asked(&[]);
        assert_eq!(
            ctx_out(
                &p,
                SelectorStyle::KeyVal,
                "THROUGHPUT,FOO,elapsed_time,THROUGHPUT_UNITS"
            ),
            "THROUGHPUT=8513.48\nELAPSED_TIME=1.00\nTHROUGHPUT_UNITS=10^6bits/s\n"
        );
    }

    #[test]
    fn csv_leaves_netperfs_empty_field_for_unknown_names() {
        let p = asked(&[]);
        assert_eq!(
            ctx_out(
                &p,
                SelectorStyle::Csv,
                "THROUGHPUT,BOGUS,LOCAL_CONG_CONTROL,BOGUS2"
            ),
            "Throughput,Local Congestion Control Algorithm\n8513.48,, bbr,,\n"
        );
        let p = asked(&["-P", "0"]);
        assert_eq!(
            ctx_out(
                &p,
                SelectorStyle::Csv,
                "THROUGHPUT,BOGUS,LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL"
            ),
            "8513.48,, bbr,\n"
        );
    }

    #[test]
    fn columns_match_netperf() {
        let p = asked(&[]);
        assert_eq!(
            ctx_out(
                &p,
                SelectorStyle::Columns,
                "THROUGHPUT,BOGUS,LOCAL_CONG_CONTROL"
            ),
            "Throughput  Local      \n            Congestion \n            Control    \n            Algorithm  \n8513.48     bbr        \n"
        );
    }

    #[test]
    fn default_lists() {
        let p = asked(&[]);
        assert_eq!(
            ctx_out(
                &p,
                SelectorStyle::Csv,
                "LSS_SIZE_END,RSR_SIZE_END,LOCAL_SEND_SIZE,ELAPSED_TIME,THROUGHPUT,THROUGHPUT_UNITS"
            ),
            "Local Send Socket Size Final,Remote Recv Socket Size Final,Local Send Size,Elapsed Time (sec),Throughput,Throughput Units\n16384,131072,16384,1.00,8513.48,10^6bits/s\n"
        );
        let names: Vec<_> = default_for(&asked(&["-t", "TCP_RR", "-c"])).blocks[0]
            .iter()
            .map(|e| match e {
                Entry::Known(n) => *n,
                Entry::Unknown(_) => "?",
            })
            .collect();
        assert_eq!(
            names[..6],
            [
                "LSS_SIZE_END",
                "LSR_SIZE_END",
                "RSR_SIZE_END",
                "RSS_SIZE_END",
                "REQUEST_SIZE",
                "RESPONSE_SIZE"
            ]
        );
        assert!(names.contains(&"REMOTE_SD"));
    }

    #[test]
    fn formats_of_unset_values() {
        let p = asked(&["-t", "TCP_RR"]);
        let out = ctx_out(
            &p,
            SelectorStyle::KeyVal,
            "LOCAL_SOCKET_TOS,LOCAL_SD,LOCAL_CPU_UTIL,CONFIDENCE_LEVEL,CONFIDENCE_INTERVAL,CONFIDENCE_ITERATION,THROUGHPUT_CONFID,SD_UNITS,DIRECTION,RESULT_BRAND,MIN_LATENCY",
        );
        assert_eq!(
            out,
            "LOCAL_SOCKET_TOS=0xffffffff\nLOCAL_SD=-1.000\nLOCAL_CPU_UTIL=-1.00\nCONFIDENCE_LEVEL=0\nCONFIDENCE_INTERVAL=-1.000000\nCONFIDENCE_ITERATION=1\nTHROUGHPUT_CONFID=-1.000\nSD_UNITS=usec/Tran\nDIRECTION=Send|Recv\nMIN_LATENCY=-1\n"
        );
        let p = asked(&["-Y", "0x10", "-B", "tag"]);
        let out = ctx_out(
            &p,
            SelectorStyle::KeyVal,
            "LOCAL_SOCKET_TOS,RESULT_BRAND,COMMAND_LINE",
        );
        assert_eq!(
            out,
            "LOCAL_SOCKET_TOS=0x10\nRESULT_BRAND=\"tag\"\nCOMMAND_LINE=\"netperf -Y 0x10 -B tag\"\n"
        );
    }

    #[test]
    fn every_selector_has_a_value_in_every_test() {
        let mut lines: Vec<Vec<&str>> = crate::cli::TestName::ALL
            .iter()
            .filter(|t| !t.is_info())
            .map(|t| vec!["-t", t.name(), "-B", "b"])
            .collect();
        for d in [
            &["--", "-d", "recv", "-T", "udp"][..],
            &["--", "-c"],
            &["--", "-d", "rr", "-c"],
        ] {
            lines.push([&["-t", "OMNI", "-B", "b"][..], d].concat());
        }
        for words in lines {
            let p = asked(&words);
            let kind = p.kind();
            let m = Measurement::default();
            let fig = Figures::default();
            let c = Ctx {
                test: &p,
                m: &m,
                f: &fig,
                confidence: None,
                uuid: "u",
            };
            for s in ALL.iter() {
                assert!(render(s, &c).is_some(), "{} has no value in {kind}", s.name);
            }
        }
    }

    #[test]
    fn every_name_is_unique_and_upper_case() {
        let mut seen = std::collections::HashSet::new();
        for n in names() {
            assert!(seen.insert(n), "{n} twice");
            assert_eq!(n, n.to_ascii_uppercase());
        }
        assert!(seen.len() > 120);
    }

    #[test]
    fn selection_from_a_file() {
        let dir = std::env::temp_dir().join(format!("sel-{}", std::process::id()));
        std::fs::write(&dir, "THROUGHPUT,ELAPSED_TIME\nPROTOCOL\n").unwrap();
        let s = resolve(&asked(&[]), dir.to_str()).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(s.blocks.len(), 2);
        assert!(
            resolve(&asked(&[]), Some("/no/such/file"))
                .unwrap_err()
                .contains("/no/such/file")
        );
    }
}
