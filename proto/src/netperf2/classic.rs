//! The classic tests' messages (every word converted both ways): what
//! `--disable-omni` clients send for every test, and what every netperf
//! 2.7 sends for TCP_CC (300) and for TCP_SENDFILE and TCP_MSS (10).
//! Layouts: ../shared/hp-wire/README.md, Appendix A.

use super::frame::{Frame, ts};

pub const DO_TCP_STREAM: u32 = 10;
pub const DO_TCP_RR: u32 = 13;
pub const DO_UDP_STREAM: u32 = 16;
pub const DO_UDP_RR: u32 = 19;
pub const DO_TCP_CRR: u32 = 34;
pub const DO_TCP_MAERTS: u32 = 94;
pub const DO_TCP_CC: u32 = 300;

/// The classic codes this module serves.
pub const CODES: [u32; 7] = [
    DO_TCP_STREAM,
    DO_TCP_RR,
    DO_UDP_STREAM,
    DO_UDP_RR,
    DO_TCP_CRR,
    DO_TCP_MAERTS,
    DO_TCP_CC,
];

/// A classic request, whatever its code: the fields its layout has, the
/// others at their "unset" values.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassicRequest {
    pub code: u32,
    pub send_buf: i32,
    pub recv_buf: i32,
    /// TCP_MAERTS: the server's send size.
    pub send_size: i32,
    /// TCP_STREAM: the server's receive size.
    pub receive_size: i32,
    pub send_align: i32,
    pub send_offset: i32,
    pub recv_align: i32,
    pub recv_offset: i32,
    pub request_size: i32,
    pub response_size: i32,
    pub no_delay: bool,
    pub measure_cpu: bool,
    pub test_length: i32,
    pub port: i32,
    pub ipfamily: u32,
    /// UDP_STREAM: connect the receiving socket.
    pub recv_connected: bool,
}

impl ClassicRequest {
    fn blank(code: u32) -> ClassicRequest {
        ClassicRequest {
            code,
            send_buf: -1,
            recv_buf: -1,
            send_size: -1,
            receive_size: -1,
            send_align: 8,
            send_offset: 0,
            recv_align: 8,
            recv_offset: 0,
            request_size: -1,
            response_size: -1,
            no_delay: false,
            measure_cpu: false,
            test_length: 10,
            port: 0,
            ipfamily: super::frame::NF_INET,
            recv_connected: false,
        }
    }

    /// The request of classic `code`; `None` for a code that is not one.
    pub fn decode(code: u32, f: &Frame) -> Option<ClassicRequest> {
        let w = |i: usize| f.int(ts(4 * i));
        let mut r = ClassicRequest::blank(code);
        match code {
            DO_TCP_STREAM => {
                r.send_buf = w(0);
                r.recv_buf = w(1);
                r.receive_size = w(2);
                r.recv_align = w(3);
                r.recv_offset = w(4);
                r.no_delay = w(5) != 0;
                r.measure_cpu = w(6) != 0;
                r.test_length = w(8);
                r.port = w(13);
                r.ipfamily = w(14) as u32;
            }
            DO_TCP_MAERTS => {
                r.send_buf = w(0);
                r.recv_buf = w(1);
                r.send_size = w(2);
                r.send_align = w(3);
                r.send_offset = w(4);
                r.no_delay = w(5) != 0;
                r.measure_cpu = w(6) != 0;
                r.test_length = w(8);
                r.port = w(13);
                r.ipfamily = w(14) as u32;
            }
            DO_TCP_RR | DO_TCP_CRR | DO_UDP_RR | DO_TCP_CC => {
                r.recv_buf = w(0);
                r.send_buf = w(1);
                r.recv_align = w(2);
                r.recv_offset = w(3);
                r.send_align = w(4);
                r.send_offset = w(5);
                r.request_size = w(6);
                r.response_size = w(7);
                r.no_delay = w(8) != 0;
                r.measure_cpu = w(9) != 0;
                r.test_length = w(11);
                r.port = w(14);
                r.ipfamily = w(15) as u32;
            }
            DO_UDP_STREAM => {
                r.recv_buf = w(0);
                r.receive_size = w(1);
                r.recv_connected = w(2) != 0;
                r.recv_align = w(3);
                r.recv_offset = w(4);
                r.measure_cpu = w(6) != 0;
                r.test_length = w(8);
                r.port = w(11);
                r.ipfamily = w(12) as u32;
            }
            _ => return None,
        }
        Some(r)
    }
}

/// What the server says back, in the code's layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassicResponse {
    pub recv_buf: i32,
    pub send_buf: i32,
    pub receive_size: i32,
    pub send_size: i32,
    pub no_delay: bool,
    pub measure_cpu: bool,
    pub test_length: i32,
    pub data_port: u32,
    pub cpu_rate: f32,
}

impl ClassicResponse {
    /// The response frame to a request of `code` (its type is code + 1).
    pub fn encode(&self, code: u32) -> Frame {
        let mut f = Frame::new(code + 1, 0);
        let mut put = |i: usize, v: i32| f.set_int(ts(4 * i), v);
        let (nd, cpu) = (i32::from(self.no_delay), i32::from(self.measure_cpu));
        let rate_at = match code {
            DO_TCP_STREAM | DO_TCP_MAERTS => {
                put(0, self.recv_buf);
                put(
                    1,
                    if code == DO_TCP_STREAM {
                        self.receive_size
                    } else {
                        self.send_size
                    },
                );
                put(2, nd);
                put(3, cpu);
                put(4, self.test_length);
                put(5, self.send_buf);
                put(6, self.data_port as i32);
                7
            }
            DO_UDP_STREAM => {
                put(0, self.recv_buf);
                put(1, self.send_buf);
                put(2, cpu);
                put(3, self.test_length);
                put(4, self.data_port as i32);
                5
            }
            _ => {
                put(0, self.recv_buf);
                put(1, nd);
                put(2, cpu);
                put(3, self.test_length);
                put(4, self.send_buf);
                put(5, self.data_port as i32);
                6
            }
        };
        f.set_float(ts(4 * rate_at), self.cpu_rate);
        f
    }
}

/// What the server counted, for the code's results layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassicResults {
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub recv_calls: u32,
    pub send_calls: u32,
    pub transactions: u32,
    pub messages_received: u32,
    pub elapsed: f32,
    /// -1.0 when not measured.
    pub cpu_util: f32,
    pub cpu_method: u32,
    pub num_cpus: u32,
    pub recv_buf_end: i32,
    pub send_buf_end: i32,
}

impl ClassicResults {
    /// The results frame of a request of `code` (type code + 2).
    pub fn encode(&self, code: u32) -> Frame {
        let mut f = Frame::new(code + 2, 0);
        let w = |i: usize| ts(4 * i);
        match code {
            DO_TCP_STREAM => {
                f.set_double(w(0), self.bytes_received as f64);
                f.set_word(w(2), self.recv_calls);
                f.set_float(w(3), self.elapsed);
                f.set_float(w(4), self.cpu_util);
                f.set_float(w(5), -1.0);
                f.set_word(w(6), self.cpu_method);
                f.set_word(w(7), self.num_cpus);
                f.set_int(w(8), self.recv_buf_end);
                f.set_int(w(9), self.send_buf_end);
            }
            DO_TCP_MAERTS => {
                f.set_double(w(0), self.bytes_sent as f64);
                f.set_word(w(2), self.send_calls);
                f.set_float(w(3), self.elapsed);
                f.set_float(w(4), self.cpu_util);
                f.set_float(w(5), -1.0);
                f.set_word(w(6), self.cpu_method);
                f.set_word(w(7), self.num_cpus);
            }
            DO_UDP_STREAM => {
                f.set_word(w(0), self.messages_received);
                f.set_word(w(1), self.bytes_received as u32);
                f.set_float(w(2), self.elapsed);
                f.set_float(w(3), self.cpu_util);
                f.set_word(w(4), self.cpu_method);
                f.set_word(w(5), self.num_cpus);
            }
            _ => {
                f.set_word(w(0), self.bytes_received as u32);
                f.set_word(w(1), self.recv_calls);
                f.set_word(w(2), self.transactions);
                f.set_float(w(3), self.elapsed);
                f.set_float(w(4), self.cpu_util);
                f.set_float(w(5), -1.0);
                f.set_word(w(6), self.cpu_method);
                f.set_word(w(7), self.num_cpus);
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captured classic TCP_STREAM request (`-l 1`), and a response in
    /// its layout.
    #[test]
    fn classic_tcp_stream_request_and_response() {
        let mut f = Frame::new(DO_TCP_STREAM, -1);
        // as captured: send_buf -1, recv_buf -1, receive_size 0, align 8,
        // test_length 1, ipfamily 4
        for (i, v) in [(0, -1), (1, -1), (2, 0), (3, 8), (8, 1), (14, 4)] {
            f.set_int(ts(4 * i), v);
        }
        let r = ClassicRequest::decode(DO_TCP_STREAM, &f).unwrap();
        assert_eq!((r.receive_size, r.recv_align, r.test_length), (0, 8, 1));
        assert_eq!(r.ipfamily, 4);
        let resp = ClassicResponse {
            recv_buf: 0x20000,
            receive_size: 0x20000,
            send_buf: 0x4000,
            data_port: 0x899f,
            ..Default::default()
        }
        .encode(DO_TCP_STREAM);
        // the captured reply's first 0x24 bytes
        let want: [u8; 36] = [
            0, 0, 0, 0x0b, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0x40, 0, 0, 0, 0x89, 0x9f,
        ];
        assert_eq!(&resp.0[..36], &want);
        assert!(ClassicRequest::decode(4, &f).is_none());
    }
}
