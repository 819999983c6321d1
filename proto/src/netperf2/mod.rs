//! netperf 2.7's control protocol, sans-IO: its 656-byte frames, and the
//! mapping between its requests, responses and results and ours
//! ([`TestSpec`], [`Grant`], [`SideResults`]), both ways.
//!
//! The wire reference is ../shared/hp-wire/README.md (written from netperf
//! 2.7.1's source and checked against captured bytes); the captures are
//! this module's test vectors. Its traps, as they bear on us:
//! - the results frame's type word is stale: never checked (T1);
//! - fields netserver 2.7 does not write carry stale values, so only the
//!   CPU fields of a response that announced CPU measurement are read (T2,
//!   T3);
//! - IPv6 addresses arrive word-swapped from x86 senders (T8);
//! - netserver 2.7 trusts every field (T7): we validate every one, refuse
//!   a client-named fill file (netperf's `-F ,file` is answered with our
//!   own random bytes) and alignment 0.

pub mod classic;
pub mod frame;
pub mod omni;

use std::time::Duration;

pub use frame::{FRAME_LEN, Frame, NF_INET, NF_INET6, NF_UNSPEC};
pub use omni::{DO_OMNI, OMNI_RESPONSE, OMNI_RESULTS};
use omni::{OmniRequest, OmniResponse, OmniResults, flags};

use crate::test::{
    CpuStats, Family, Grant, Protocol, SideResults, SideSpec, TcpStats, TestEnd, TestKind,
    TestSpec, Token,
};

pub const DEBUG_ON: u32 = 1;
pub const DEBUG_OFF: u32 = 2;
pub const DEBUG_OK: u32 = 3;
pub const NODE_IDENTIFY: u32 = 4;
pub const CPU_CALIBRATE: u32 = 5;
pub const PASSPHRASE: u32 = 6;
pub const DO_SYSINFO: u32 = 600;

/// serv_errno of a request netserver does not know.
pub const UNKNOWN_REQUEST: i32 = 998;
/// serv_errno values we answer with (Linux numbering, as netserver 2.7 on
/// Linux).
pub const EINVAL: i32 = 22;
pub const EPROTONOSUPPORT: i32 = 93;
pub const EACCES: i32 = 13;

/// netserver 2.7 pads the timer of a test whose end it does not see
/// coming (CRR, and the UDP tests if their empty datagrams are lost).
pub const PAD: Duration = Duration::from_secs(4);

/// What a client's frame asks.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Omni(Box<OmniRequest>),
    Classic(Box<classic::ClassicRequest>),
    Passphrase(String),
    CpuCalibrate,
    Debug,
    SysInfo,
    Unknown(u32),
}

impl Request {
    pub fn decode(f: &Frame) -> Request {
        let code = f.word(0);
        match code {
            DO_OMNI => Request::Omni(Box::new(OmniRequest::decode(f))),
            PASSPHRASE => Request::Passphrase(f.string(8, FRAME_LEN - 8)),
            CPU_CALIBRATE => Request::CpuCalibrate,
            DEBUG_ON | DEBUG_OFF => Request::Debug,
            DO_SYSINFO => Request::SysInfo,
            c => match classic::ClassicRequest::decode(c, f) {
                Some(r) => Request::Classic(Box::new(r)),
                None => Request::Unknown(c),
            },
        }
    }
}

/// A response frame carrying only an error number (netserver 2.7 sends
/// one fully converted frame).
pub fn error_frame(kind: u32, errno: i32) -> Frame {
    Frame::new(kind, errno)
}

/// The errno a netperf 2.7 client is told for one of our error codes.
pub fn errno_of(code: crate::message::ErrorCode) -> i32 {
    use crate::message::ErrorCode;
    match code {
        ErrorCode::InvalidRequest | ErrorCode::Protocol => EINVAL,
        ErrorCode::Busy => 16,
        ErrorCode::Resource => 12,
        ErrorCode::Timeout => 110,
        ErrorCode::Auth => EACCES,
        ErrorCode::Unsupported | ErrorCode::Version => EPROTONOSUPPORT,
        ErrorCode::ShuttingDown => 108,
        ErrorCode::TestFailed => 5,
    }
}

/// CPU_CALIBRATE's answer: the meter's rate and the CPU count.
pub fn cpu_calibrate_reply(rate: f32, cpus: u32) -> Frame {
    let mut f = Frame::new(CPU_CALIBRATE, 0);
    f.set_float(frame::ts(0), rate);
    f.set_word(frame::ts(4), cpus);
    f
}

/// DO_SYSINFO's answer, as netserver 2.7 gives it.
pub fn sysinfo_reply() -> Frame {
    let mut f = Frame::new(DO_SYSINFO + 1, 0);
    f.set_string(8, 64, ",Deprecated,Deprecated,Deprecated,Deprecated");
    f
}

/// A test asked in netperf 2.7's protocol, as we serve it: our spec, and
/// what the answer frames need to know.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    pub spec: TestSpec,
    /// DO_OMNI, or the classic code.
    pub code: u32,
    pub omni: Option<OmniRequest>,
    /// Whether netperf asked for the congestion control algorithm.
    pub wants_cong: bool,
    /// How long the server waits before it ends the test itself, when it
    /// may not see the end coming: the test length and the pad.
    pub pad_timer: Option<Duration>,
}

/// Why a request cannot be served: the errno the client is told, and a
/// line for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub errno: i32,
    pub why: String,
}

fn refuse(errno: i32, why: impl Into<String>) -> Refusal {
    Refusal {
        errno,
        why: why.into(),
    }
}

fn opt_u32(v: i32) -> Option<u32> {
    u32::try_from(v).ok().filter(|&n| n > 0)
}

fn family_of(nf: u32, control: Family) -> Result<Family, Refusal> {
    match nf {
        NF_INET => Ok(Family::V4),
        NF_INET6 => Ok(Family::V6),
        NF_UNSPEC => Ok(control),
        n => Err(refuse(EPROTONOSUPPORT, format!("address family {n}"))),
    }
}

fn end_of(kind: TestKind, test_length: i32) -> TestEnd {
    match test_length {
        n if n > 0 => TestEnd::Time {
            millis: u64::from(n.unsigned_abs()) * 1000,
        },
        0 => TestEnd::Time { millis: 0 },
        n if kind.is_rr() => TestEnd::Transactions(u64::from(n.unsigned_abs())),
        n => TestEnd::Bytes(u64::from(n.unsigned_abs())),
    }
}

/// The server's own end, for the tests whose end it may not see: netserver
/// 2.7's `test_length + 4 s` (none for a count or an untimed test, which
/// the server's own maximum bounds).
fn pad_timer(kind: TestKind, test_length: i32, classic: bool) -> Option<Duration> {
    let padded = match kind {
        TestKind::TcpCrr | TestKind::TcpCc | TestKind::UdpStream | TestKind::UdpRr => true,
        // classic TCP_RR ends on the server's timer too
        TestKind::TcpRr => classic,
        _ => false,
    };
    (padded && test_length > 0)
        .then(|| Duration::from_secs(u64::from(test_length.unsigned_abs())) + PAD)
}

/// Map a DO_OMNI request onto ours. `control`: the control connection's
/// family, for a request that leaves it unspecified.
pub fn serve_omni(r: &OmniRequest, control: Family) -> Result<Served, Refusal> {
    let protocol = match (r.socket_type, r.protocol) {
        (omni::NST_STREAM, omni::IPPROTO_TCP | 0) => Protocol::Tcp,
        (omni::NST_DGRAM, omni::IPPROTO_UDP | 0) => Protocol::Udp,
        (t, p) => {
            return Err(refuse(
                EPROTONOSUPPORT,
                format!("socket type {t}, protocol {p}"),
            ));
        }
    };
    let connect = r.flags & flags::CONNECT_TEST != 0;
    let sends = r.direction & omni::XMIT != 0;
    let receives = r.direction & omni::RECV != 0;
    let kind = match (protocol, sends, receives, connect) {
        (Protocol::Tcp, true, true, true) => TestKind::TcpCrr,
        (Protocol::Tcp, false, false, true) => TestKind::TcpCc,
        (Protocol::Tcp, true, true, false) => TestKind::TcpRr,
        (Protocol::Tcp, false, true, false) => TestKind::TcpStream,
        (Protocol::Tcp, true, false, false) => TestKind::TcpMaerts,
        (Protocol::Udp, true, true, false) => TestKind::UdpRr,
        (Protocol::Udp, false, true, false) => TestKind::UdpStream,
        (Protocol::Udp, true, false, false) => TestKind::UdpMaerts,
        _ => {
            return Err(refuse(
                EINVAL,
                format!("direction {:#x}, flags {:#x}", r.direction, r.flags),
            ));
        }
    };
    if r.send_alignment == 0 || r.recv_alignment == 0 {
        return Err(refuse(EINVAL, "buffer alignment 0"));
    }
    let family = family_of(r.ipfamily, control)?;
    let mut spec = TestSpec::new(kind, family);
    spec.end = end_of(kind, r.test_length);
    spec.server = SideSpec {
        send_buf: opt_u32(r.send_buf_size),
        recv_buf: opt_u32(r.recv_buf_size),
        send_size: if kind.is_rr() {
            None
        } else {
            opt_u32(r.send_size)
        },
        recv_size: if kind.is_rr() {
            None
        } else {
            opt_u32(r.receive_size)
        },
        nodelay: r.flags & flags::NO_DELAY != 0,
        tos: u8::try_from(r.socket_tos).ok(),
        cong_control: (!r.cong_control.is_empty()).then(|| r.cong_control.clone()),
        priority: u32::try_from(r.socket_prio).ok(),
        cpu_bind: None,
        dont_route: r.flags & flags::ROUTING_ALLOWED == 0,
        send_align: r.send_alignment,
        recv_align: r.recv_alignment,
        send_offset: r.send_offset,
        recv_offset: r.recv_offset,
        send_width: (r.send_width > 0).then_some(r.send_width),
        recv_width: (r.recv_width > 0).then_some(r.recv_width),
        mss: None,
    };
    if kind.is_rr() {
        spec.request_size = u32::try_from(r.request_size).unwrap_or(0);
        spec.response_size = u32::try_from(r.response_size).unwrap_or(0);
    }
    spec.data_port = match u16::try_from(r.data_port) {
        Ok(0) => None,
        Ok(p) => Some(p),
        Err(_) => return Err(refuse(EINVAL, format!("data port {}", r.data_port))),
    };
    spec.data_addr = r.netserver_ip;
    spec.measure_cpu = r.flags & flags::MEASURE_CPU != 0;
    spec.keepalive = r.flags & flags::KEEPALIVE != 0;
    spec.defer_accept = r.flags & flags::DEFER_ACCEPT != 0;
    spec.fastopen = r.flags & flags::FASTOPEN != 0;
    spec.connected_udp = r.flags & flags::USE_CONNECTED != 0;
    // a file named by the client is never opened: random bytes instead
    spec.remote_fill = !r.fill_file.is_empty();
    spec.peer_data_port = u16::try_from(r.netperf_port).ok().filter(|&p| p > 0);
    Ok(Served {
        spec,
        code: DO_OMNI,
        omni: Some(r.clone()),
        wants_cong: r.flags & flags::ROUTING_ALLOWED != 0
            && protocol == Protocol::Tcp
            && !kind.is_connection_test(),
        pad_timer: pad_timer(kind, r.test_length, false),
    })
}

/// Map a classic request onto ours.
pub fn serve_classic(r: &classic::ClassicRequest, control: Family) -> Result<Served, Refusal> {
    use classic::*;
    let kind = match r.code {
        DO_TCP_STREAM => TestKind::TcpStream,
        DO_TCP_MAERTS => TestKind::TcpMaerts,
        DO_TCP_RR => TestKind::TcpRr,
        DO_TCP_CRR => TestKind::TcpCrr,
        DO_TCP_CC => TestKind::TcpCc,
        DO_UDP_STREAM => TestKind::UdpStream,
        DO_UDP_RR => TestKind::UdpRr,
        c => return Err(refuse(UNKNOWN_REQUEST, format!("request {c}"))),
    };
    let align = |v: i32| u32::try_from(v).ok().filter(|&a| a > 0);
    let (Some(send_align), Some(recv_align)) = (align(r.send_align), align(r.recv_align)) else {
        return Err(refuse(EINVAL, "buffer alignment 0"));
    };
    let family = family_of(r.ipfamily, control)?;
    let mut spec = TestSpec::new(kind, family);
    spec.end = end_of(kind, r.test_length);
    spec.server = SideSpec {
        send_buf: opt_u32(r.send_buf),
        recv_buf: opt_u32(r.recv_buf),
        send_size: opt_u32(r.send_size),
        // UDP_STREAM's message size is the client's, never the server's
        recv_size: if kind == TestKind::UdpStream {
            None
        } else {
            opt_u32(r.receive_size)
        },
        nodelay: r.no_delay,
        send_align,
        recv_align,
        send_offset: u32::try_from(r.send_offset).unwrap_or(0),
        recv_offset: u32::try_from(r.recv_offset).unwrap_or(0),
        ..SideSpec::default()
    };
    if kind.is_rr() {
        spec.request_size = u32::try_from(r.request_size).unwrap_or(0);
        spec.response_size = u32::try_from(r.response_size).unwrap_or(0);
        if kind == TestKind::TcpCc {
            (spec.request_size, spec.response_size) = (0, 0);
        }
    }
    spec.data_port = u16::try_from(r.port).ok().filter(|&p| p > 0);
    spec.measure_cpu = r.measure_cpu;
    spec.connected_udp = r.recv_connected;
    Ok(Served {
        spec,
        code: r.code,
        omni: None,
        wants_cong: false,
        pad_timer: pad_timer(kind, r.test_length, true),
    })
}

/// The rate netserver 2.7's /proc/stat meter reports, for netperf's
/// service demand arithmetic.
pub const CPU_RATE: f32 = 100.0;

/// The response frame to a served request, from our grant.
pub fn response(s: &Served, g: &Grant) -> Frame {
    let kind = s.spec.kind;
    let sends = matches!(
        kind.direction(),
        crate::test::Direction::Receive | crate::test::Direction::RequestResponse
    );
    let receives = matches!(
        kind.direction(),
        crate::test::Direction::Send | crate::test::Direction::RequestResponse
    );
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    let rate = if g.measure_cpu { CPU_RATE } else { 0.0 };
    match &s.omni {
        Some(r) => {
            let mut fl = 0;
            if s.spec.server.nodelay {
                fl |= flags::NO_DELAY;
            }
            if g.measure_cpu {
                fl |= flags::MEASURE_CPU;
            }
            OmniResponse {
                recv_buf_size: int(g.recv_buf),
                receive_size: if receives {
                    int(g.recv_size)
                } else {
                    r.receive_size
                },
                recv_width: if receives {
                    int(g.recv_width)
                } else {
                    r.recv_width as i32
                },
                send_buf_size: int(g.send_buf),
                send_size: if sends { int(g.send_size) } else { r.send_size },
                send_width: if sends {
                    int(g.send_width)
                } else {
                    r.send_width as i32
                },
                flags: fl,
                cpu_rate: rate,
                data_port: u32::from(g.data_port),
                socket_prio: r.socket_prio,
                socket_tos: r.socket_tos,
            }
            .encode()
        }
        None => classic::ClassicResponse {
            recv_buf: int(g.recv_buf),
            send_buf: int(g.send_buf),
            receive_size: int(g.recv_size),
            send_size: int(g.send_size),
            no_delay: s.spec.server.nodelay,
            measure_cpu: g.measure_cpu,
            test_length: 0,
            data_port: u32::from(g.data_port),
            cpu_rate: rate,
        }
        .encode(s.code),
    }
}

fn clamp32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The results frame of a served test, from what our side counted.
/// `padded`: the server's own timer ended the test, whose pad is not part
/// of the measured interval.
pub fn results(s: &Served, r: &SideResults, padded: bool) -> Frame {
    let mut elapsed = Duration::from_nanos(r.elapsed_ns);
    if padded {
        elapsed = elapsed.saturating_sub(PAD);
    }
    let secs = elapsed.as_secs_f32();
    let cpu = r.cpu.as_ref().filter(|_| s.spec.measure_cpu);
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    if s.omni.is_none() {
        return classic::ClassicResults {
            bytes_received: r.bytes_received,
            bytes_sent: r.bytes_sent,
            recv_calls: clamp32(r.recv_calls),
            send_calls: clamp32(r.send_calls),
            transactions: clamp32(r.transactions),
            messages_received: clamp32(r.udp.as_ref().map_or(r.recv_calls, |u| u.received)),
            elapsed: secs,
            cpu_util: cpu.map_or(-1.0, |c| c.util as f32),
            cpu_method: cpu.map_or(0, |c| omni::cpu_method_number(c.method)),
            num_cpus: cpu.map_or(0, |c| c.num_cpus),
            recv_buf_end: int(r.recv_buf_end),
            send_buf_end: int(r.send_buf_end),
        }
        .encode(s.code);
    }
    OmniResults {
        bytes_received: r.bytes_received,
        recv_calls: clamp32(r.recv_calls),
        recv_buf_size: int(r.recv_buf_end),
        bytes_sent: r.bytes_sent,
        send_calls: clamp32(r.send_calls),
        send_buf_size: int(r.send_buf_end),
        failed_sends: clamp32(r.send_errors),
        trans_received: clamp32(r.transactions),
        elapsed_time: secs,
        cpu_util: cpu.map_or(0.0, |c| c.util as f32),
        cpu_percent_user: cpu.map_or(0.0, |c| c.user as f32),
        cpu_percent_system: cpu.map_or(0.0, |c| c.system as f32),
        cpu_percent_iowait: cpu.map_or(0.0, |c| c.iowait as f32),
        cpu_percent_irq: cpu.map_or(0.0, |c| c.irq as f32),
        cpu_percent_swintr: cpu.map_or(0.0, |c| c.softirq as f32),
        cpu_method: cpu.map_or(0, |c| omni::cpu_method_number(c.method)),
        num_cpus: cpu.map_or(0, |c| c.num_cpus),
        peak_cpu_id: cpu.map_or(-1, |c| int(c.peak_cpu)),
        peak_cpu_util: cpu.map_or(0.0, |c| c.peak_util as f32),
        transport_retrans: match (
            &r.tcp,
            s.spec.kind.protocol(),
            s.spec.kind.is_connection_test(),
        ) {
            (Some(t), Protocol::Tcp, false) => i32::try_from(t.retransmits).unwrap_or(i32::MAX),
            _ => -1,
        },
        cong_control: match (&r.tcp, s.wants_cong) {
            (Some(t), true) => t.cong_control.clone(),
            _ => String::new(),
        },
    }
    .encode()
}

// ---------------------------------------------------------------------
// The client side: our netperf against netserver 2.7.

/// The DO_OMNI request for our spec. `netperf_port`: our data socket's
/// port when it is bound before the request (UDP), else 0.
pub fn omni_request(spec: &TestSpec, netperf_port: u16) -> Frame {
    let kind = spec.kind;
    let (socket_type, protocol) = match kind.protocol() {
        Protocol::Tcp => (omni::NST_STREAM, omni::IPPROTO_TCP),
        Protocol::Udp => (omni::NST_DGRAM, omni::IPPROTO_UDP),
    };
    let direction = match kind {
        TestKind::TcpStream | TestKind::UdpStream => omni::RECV,
        TestKind::TcpMaerts | TestKind::UdpMaerts => omni::XMIT,
        TestKind::TcpCc => 0,
        _ => omni::XMIT | omni::RECV,
    };
    let mut fl = 0;
    // netperf 2.7: routing allowed except for UDP tests that are not RR
    if !spec.server.dont_route {
        fl |= flags::ROUTING_ALLOWED;
    }
    if kind.is_connection_test() {
        fl |= flags::CONNECT_TEST;
    }
    for (on, bit) in [
        (spec.server.nodelay, flags::NO_DELAY),
        (spec.measure_cpu, flags::MEASURE_CPU),
        (spec.keepalive, flags::KEEPALIVE),
        (spec.defer_accept, flags::DEFER_ACCEPT),
        (spec.fastopen, flags::FASTOPEN),
        (spec.connected_udp, flags::USE_CONNECTED),
    ] {
        if on {
            fl |= bit;
        }
    }
    let neg = |v: Option<u32>| v.map_or(-1, |n| i32::try_from(n).unwrap_or(i32::MAX));
    let test_length = match spec.end {
        TestEnd::Time { millis } => i32::try_from(millis.div_ceil(1000)).unwrap_or(i32::MAX),
        TestEnd::Bytes(n) | TestEnd::Transactions(n) => -i32::try_from(n).unwrap_or(i32::MAX),
    };
    let (req, resp) = if kind.is_rr() {
        (
            i32::try_from(spec.request_size).unwrap_or(i32::MAX),
            i32::try_from(spec.response_size).unwrap_or(i32::MAX),
        )
    } else {
        (-1, -1)
    };
    OmniRequest {
        send_buf_size: neg(spec.server.send_buf),
        send_size: neg(spec.server.send_size),
        send_alignment: spec.server.send_align.max(1),
        send_offset: spec.server.send_offset,
        send_width: spec.server.send_width.unwrap_or(0),
        request_size: req,
        recv_buf_size: neg(spec.server.recv_buf),
        receive_size: neg(spec.server.recv_size),
        recv_alignment: spec.server.recv_align.max(1),
        recv_offset: spec.server.recv_offset,
        recv_width: spec.server.recv_width.unwrap_or(0),
        response_size: resp,
        flags: fl,
        cpu_rate: 0.0,
        test_length,
        data_port: u32::from(spec.data_port.unwrap_or(0)),
        ipfamily: match spec.family {
            Family::V4 => NF_INET,
            Family::V6 => NF_INET6,
        },
        socket_type,
        protocol,
        direction,
        netperf_port: u32::from(netperf_port),
        netperf_ip: None,
        netserver_ip: spec.data_addr,
        socket_prio: spec.server.priority.map_or(-1, |p| p as i32),
        socket_tos: spec.server.tos.map_or(-1, i32::from),
        cong_control: spec.server.cong_control.clone().unwrap_or_default(),
        fill_file: String::new(),
    }
    .encode()
}

/// Our grant from netserver 2.7's OMNI_RESPONSE.
pub fn grant_of(f: &Frame) -> Grant {
    let r = OmniResponse::decode(f);
    let pos = |v: i32| u32::try_from(v).unwrap_or(0);
    Grant {
        data_port: u16::try_from(r.data_port).unwrap_or(0),
        token: Token([0; 32]),
        send_buf: pos(r.send_buf_size),
        recv_buf: pos(r.recv_buf_size),
        send_size: pos(r.send_size),
        recv_size: pos(r.receive_size),
        send_width: pos(r.send_width),
        recv_width: pos(r.recv_width),
        // only these bits are trustworthy (T3)
        measure_cpu: r.flags & flags::MEASURE_CPU != 0,
        num_cpus: 0,
    }
}

/// The server's side of the results from netserver 2.7's results frame;
/// CPU figures only if its response announced them (`measured`).
pub fn side_results_of(f: &Frame, measured: bool) -> SideResults {
    let r = OmniResults::decode(f);
    // A float from the network: NaN, infinite, negative or beyond what a
    // Duration holds (f32 reaches 3e38 s) all read as "not measured".
    let elapsed = Duration::try_from_secs_f32(r.elapsed_time).unwrap_or(Duration::ZERO);
    let pct = |v: f32| if v.is_finite() { f64::from(v) } else { 0.0 };
    SideResults {
        elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        bytes_sent: r.bytes_sent,
        bytes_received: r.bytes_received,
        send_calls: u64::from(r.send_calls),
        recv_calls: u64::from(r.recv_calls),
        transactions: u64::from(r.trans_received),
        send_buf_end: u32::try_from(r.send_buf_size).unwrap_or(0),
        recv_buf_end: u32::try_from(r.recv_buf_size).unwrap_or(0),
        cpu: measured.then(|| CpuStats {
            util: pct(r.cpu_util),
            user: pct(r.cpu_percent_user),
            system: pct(r.cpu_percent_system),
            iowait: pct(r.cpu_percent_iowait),
            irq: pct(r.cpu_percent_irq),
            softirq: pct(r.cpu_percent_swintr),
            peak_cpu: u32::try_from(r.peak_cpu_id).unwrap_or(0),
            peak_util: pct(r.peak_cpu_util),
            num_cpus: r.num_cpus,
            method: omni::cpu_method_letter(r.cpu_method),
        }),
        tcp: (r.transport_retrans >= 0).then(|| TcpStats {
            retransmits: u64::from(r.transport_retrans.unsigned_abs()),
            cong_control: r.cong_control.clone(),
            ..TcpStats::default()
        }),
        ..SideResults::default()
    }
}

/// CPU_CALIBRATE's request, and its answer (rate, CPUs); a nonzero
/// serv_errno reads as rate 0, as netperf 2.7 reads it.
pub fn cpu_calibrate_request() -> Frame {
    Frame::new(CPU_CALIBRATE, -1)
}

pub fn cpu_calibrate_of(f: &Frame) -> (f32, u32) {
    if f.int(1) != 0 {
        return (0.0, 0);
    }
    (f.float(frame::ts(0)), f.word(frame::ts(4)))
}

/// The passphrase frame of netperf 2.7's `-Z`.
pub fn passphrase_frame(text: &str) -> Frame {
    let mut f = Frame::new(PASSPHRASE, -1);
    f.set_string(8, FRAME_LEN - 8, text);
    f
}

#[cfg(test)]
mod tests;
