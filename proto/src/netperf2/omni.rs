//! The omni messages: DO_OMNI's request, OMNI_RESPONSE, and the results
//! frame (doc: ../shared/hp-wire/README.md §3). Field names are netperf's.

use std::net::IpAddr;

use super::frame::{Frame, NF_INET, ts};

/// The omni requests' numbers.
pub const DO_OMNI: u32 = 97;
pub const OMNI_RESPONSE: u32 = 98;
pub const OMNI_RESULTS: u32 = 99;

/// The request's `flags` bits.
pub mod flags {
    pub const NO_DELAY: u32 = 0x1;
    pub const USE_SENDFILE: u32 = 0x2;
    pub const CONNECT_TEST: u32 = 0x4;
    pub const MEASURE_CPU: u32 = 0x8;
    /// Routing allowed (clear: SO_DONTROUTE) and "report the congestion
    /// control algorithm": one bit, both meanings.
    pub const ROUTING_ALLOWED: u32 = 0x20;
    pub const FASTOPEN: u32 = 0x800;
    pub const USE_CONNECTED: u32 = 0x4000;
    pub const DEFER_ACCEPT: u32 = 0x8000;
    pub const MTU_DISCOVER: u32 = 0x10000;
    pub const KEEPALIVE: u32 = 0x8000_0000;
}

/// `direction`, from the server's point of view.
pub const XMIT: u32 = 0x2;
pub const RECV: u32 = 0x4;

/// `socket_type`.
pub const NST_STREAM: i32 = 1;
pub const NST_DGRAM: i32 = 2;

/// Raw IPPROTO numbers.
pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;

/// DO_OMNI's test-specific area.
#[derive(Clone, Debug, PartialEq)]
pub struct OmniRequest {
    pub send_buf_size: i32,
    pub send_size: i32,
    pub send_alignment: u32,
    pub send_offset: u32,
    pub send_width: u32,
    pub request_size: i32,
    pub recv_buf_size: i32,
    pub receive_size: i32,
    pub recv_alignment: u32,
    pub recv_offset: u32,
    pub recv_width: u32,
    pub response_size: i32,
    pub flags: u32,
    pub cpu_rate: f32,
    pub test_length: i32,
    pub data_port: u32,
    pub ipfamily: u32,
    pub socket_type: i32,
    pub protocol: u32,
    pub direction: u32,
    pub netperf_port: u32,
    pub netperf_ip: Option<IpAddr>,
    pub netserver_ip: Option<IpAddr>,
    pub socket_prio: i32,
    pub socket_tos: i32,
    pub cong_control: String,
    pub fill_file: String,
}

impl Default for OmniRequest {
    /// netperf 2.7's stock values: everything unset.
    fn default() -> OmniRequest {
        OmniRequest {
            send_buf_size: -1,
            send_size: -1,
            send_alignment: 8,
            send_offset: 0,
            send_width: 0,
            request_size: -1,
            recv_buf_size: -1,
            receive_size: -1,
            recv_alignment: 8,
            recv_offset: 0,
            recv_width: 0,
            response_size: -1,
            flags: 0,
            cpu_rate: 0.0,
            test_length: 10,
            data_port: 0,
            ipfamily: NF_INET,
            socket_type: NST_STREAM,
            protocol: IPPROTO_TCP,
            direction: RECV,
            netperf_port: 0,
            netperf_ip: None,
            netserver_ip: None,
            socket_prio: -1,
            socket_tos: -1,
            cong_control: String::new(),
            fill_file: String::new(),
        }
    }
}

const CONG_AT: usize = 8 + 152;
const FILL_AT: usize = 8 + 168;

impl OmniRequest {
    pub fn decode(f: &Frame) -> OmniRequest {
        let ipfamily = f.word(ts(84));
        OmniRequest {
            send_buf_size: f.int(ts(0)),
            send_size: f.int(ts(4)),
            send_alignment: f.word(ts(8)),
            send_offset: f.word(ts(12)),
            send_width: f.word(ts(16)),
            request_size: f.int(ts(20)),
            recv_buf_size: f.int(ts(24)),
            receive_size: f.int(ts(28)),
            recv_alignment: f.word(ts(32)),
            recv_offset: f.word(ts(36)),
            recv_width: f.word(ts(40)),
            response_size: f.int(ts(44)),
            flags: f.word(ts(48)),
            cpu_rate: f.float(ts(52)),
            test_length: f.int(ts(56)),
            data_port: f.word(ts(80)),
            ipfamily,
            socket_type: f.int(ts(88)),
            protocol: f.word(ts(92)),
            direction: f.word(ts(96)),
            netperf_port: f.word(ts(100)),
            netperf_ip: f.addr(ts(112), ipfamily),
            netserver_ip: f.addr(ts(128), ipfamily),
            socket_prio: f.int(ts(144)),
            socket_tos: f.int(ts(148)),
            cong_control: f.string(CONG_AT, 16),
            fill_file: f.string(FILL_AT, 32),
        }
    }

    /// The whole DO_OMNI frame, as netperf 2.7 sends it.
    pub fn encode(&self) -> Frame {
        let mut f = Frame::new(DO_OMNI, -1);
        f.set_int(ts(0), self.send_buf_size);
        f.set_int(ts(4), self.send_size);
        f.set_word(ts(8), self.send_alignment);
        f.set_word(ts(12), self.send_offset);
        f.set_word(ts(16), self.send_width);
        f.set_int(ts(20), self.request_size);
        f.set_int(ts(24), self.recv_buf_size);
        f.set_int(ts(28), self.receive_size);
        f.set_word(ts(32), self.recv_alignment);
        f.set_word(ts(36), self.recv_offset);
        f.set_word(ts(40), self.recv_width);
        f.set_int(ts(44), self.response_size);
        f.set_word(ts(48), self.flags);
        f.set_float(ts(52), self.cpu_rate);
        f.set_int(ts(56), self.test_length);
        // send_dirty, recv_dirty, recv_clean: unset
        for off in [68, 72, 76] {
            f.set_int(ts(off), -1);
        }
        f.set_word(ts(80), self.data_port);
        f.set_word(ts(84), self.ipfamily);
        f.set_int(ts(88), self.socket_type);
        f.set_word(ts(92), self.protocol);
        f.set_word(ts(96), self.direction);
        f.set_word(ts(100), self.netperf_port);
        f.set_addr(ts(112), self.netperf_ip);
        f.set_addr(ts(128), self.netserver_ip);
        f.set_int(ts(144), self.socket_prio);
        f.set_int(ts(148), self.socket_tos);
        f.set_string(CONG_AT, 16, &self.cong_control);
        f.set_string(FILL_AT, 32, &self.fill_file);
        f
    }
}

/// OMNI_RESPONSE's test-specific area.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OmniResponse {
    pub recv_buf_size: i32,
    pub receive_size: i32,
    pub recv_width: i32,
    pub send_buf_size: i32,
    pub send_size: i32,
    pub send_width: i32,
    pub flags: u32,
    pub cpu_rate: f32,
    pub data_port: u32,
    pub socket_prio: i32,
    pub socket_tos: i32,
}

impl OmniResponse {
    pub fn decode(f: &Frame) -> OmniResponse {
        OmniResponse {
            recv_buf_size: f.int(ts(0)),
            receive_size: f.int(ts(4)),
            recv_width: f.int(ts(8)),
            send_buf_size: f.int(ts(12)),
            send_size: f.int(ts(16)),
            send_width: f.int(ts(20)),
            flags: f.word(ts(24)),
            cpu_rate: f.float(ts(28)),
            data_port: f.word(ts(44)),
            socket_prio: f.int(ts(64)),
            socket_tos: f.int(ts(68)),
        }
    }

    pub fn encode(&self) -> Frame {
        let mut f = Frame::new(OMNI_RESPONSE, 0);
        f.set_int(ts(0), self.recv_buf_size);
        f.set_int(ts(4), self.receive_size);
        f.set_int(ts(8), self.recv_width);
        f.set_int(ts(12), self.send_buf_size);
        f.set_int(ts(16), self.send_size);
        f.set_int(ts(20), self.send_width);
        f.set_word(ts(24), self.flags);
        f.set_float(ts(28), self.cpu_rate);
        f.set_word(ts(44), self.data_port);
        f.set_int(ts(64), self.socket_prio);
        f.set_int(ts(68), self.socket_tos);
        f
    }
}

/// The results frame's test-specific area (the CPU fields are meaningful
/// only when the response's flags carried MEASURE_CPU).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OmniResults {
    pub bytes_received: u64,
    pub recv_calls: u32,
    pub recv_buf_size: i32,
    pub bytes_sent: u64,
    pub send_calls: u32,
    pub send_buf_size: i32,
    pub failed_sends: u32,
    pub trans_received: u32,
    pub elapsed_time: f32,
    pub cpu_util: f32,
    pub cpu_percent_user: f32,
    pub cpu_percent_system: f32,
    pub cpu_percent_iowait: f32,
    pub cpu_percent_irq: f32,
    pub cpu_percent_swintr: f32,
    pub cpu_method: u32,
    pub num_cpus: u32,
    pub peak_cpu_id: i32,
    pub peak_cpu_util: f32,
    pub transport_retrans: i32,
    pub cong_control: String,
}

const RESULTS_CONG_AT: usize = 8 + 268;

impl OmniResults {
    pub fn decode(f: &Frame) -> OmniResults {
        OmniResults {
            bytes_received: f.u64(ts(0)),
            recv_calls: f.word(ts(8)),
            recv_buf_size: f.int(ts(12)),
            bytes_sent: f.u64(ts(16)),
            send_calls: f.word(ts(24)),
            send_buf_size: f.int(ts(28)),
            failed_sends: f.word(ts(32)),
            trans_received: f.word(ts(36)),
            elapsed_time: f.float(ts(40)),
            cpu_util: f.float(ts(44)),
            cpu_percent_user: f.float(ts(48)),
            cpu_percent_system: f.float(ts(52)),
            cpu_percent_iowait: f.float(ts(56)),
            cpu_percent_irq: f.float(ts(60)),
            cpu_percent_swintr: f.float(ts(64)),
            cpu_method: f.word(ts(72)),
            num_cpus: f.word(ts(76)),
            peak_cpu_id: f.int(ts(80)),
            peak_cpu_util: f.float(ts(84)),
            transport_retrans: f.int(ts(104)),
            cong_control: f.string(RESULTS_CONG_AT, 16),
        }
    }

    /// The frame; its type word is OMNI_RESULTS (netperf 2.7 never reads
    /// it).
    pub fn encode(&self) -> Frame {
        let mut f = Frame::new(OMNI_RESULTS, 0);
        f.set_u64(ts(0), self.bytes_received);
        f.set_word(ts(8), self.recv_calls);
        f.set_int(ts(12), self.recv_buf_size);
        f.set_u64(ts(16), self.bytes_sent);
        f.set_word(ts(24), self.send_calls);
        f.set_int(ts(28), self.send_buf_size);
        f.set_word(ts(32), self.failed_sends);
        f.set_word(ts(36), self.trans_received);
        f.set_float(ts(40), self.elapsed_time);
        f.set_float(ts(44), self.cpu_util);
        f.set_float(ts(48), self.cpu_percent_user);
        f.set_float(ts(52), self.cpu_percent_system);
        f.set_float(ts(56), self.cpu_percent_iowait);
        f.set_float(ts(60), self.cpu_percent_irq);
        f.set_float(ts(64), self.cpu_percent_swintr);
        f.set_float(ts(68), -1.0);
        f.set_word(ts(72), self.cpu_method);
        f.set_word(ts(76), self.num_cpus);
        f.set_int(ts(80), self.peak_cpu_id);
        f.set_float(ts(84), self.peak_cpu_util);
        f.set_int(ts(104), self.transport_retrans);
        f.set_string(RESULTS_CONG_AT, 16, &self.cong_control);
        f
    }
}

/// netperf's cpu_method numbers and letters.
pub fn cpu_method_letter(m: u32) -> char {
    match m {
        1 => 'I',
        2 => 'P',
        3 => 'T',
        4 => 'L',
        5 => 'R',
        6 => 'N',
        7 => 'K',
        8 => 'S',
        9 => 'C',
        10 => 'E',
        11 => 'M',
        12 => 'O',
        _ => 'U',
    }
}

pub fn cpu_method_number(c: char) -> u32 {
    match c {
        'I' => 1,
        'P' => 2,
        'T' => 3,
        'L' => 4,
        'R' => 5,
        'N' => 6,
        'K' => 7,
        'S' => 8,
        'C' => 9,
        'E' => 10,
        'M' => 11,
        'O' => 12,
        _ => 0,
    }
}
