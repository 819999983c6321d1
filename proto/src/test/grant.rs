//! What a netserver allows ([`Limits`]) and grants ([`Grant`]), the
//! token a data connection presents, and the client's end of a test.

use super::*;

/// What a server allows a client to ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest TCP message size (send or receive).
    pub max_message: u32,
    /// Largest socket buffer a client may request.
    pub max_socket_buffer: u32,
    /// Largest number of flows in one test.
    pub max_flows: u32,
    /// Largest burst (transactions in flight beyond one).
    pub max_burst: u32,
    /// Longest test, in milliseconds; count-limited tests are cut off here too.
    pub max_duration_ms: u64,
    /// Buffer memory one session may use.
    pub memory_per_session: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message: 16 * 1024 * 1024,
            max_socket_buffer: 256 * 1024 * 1024,
            max_flows: 16_384,
            max_burst: 4096,
            max_duration_ms: 86_400_000,
            memory_per_session: 64 * 1024 * 1024,
        }
    }
}

/// A per-test secret that every data connection presents first.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub struct Token(pub [u8; 32]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// The server's answer to a test request: where to connect and what it set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Port of the data listener (TCP) or data socket (UDP).
    pub data_port: u16,
    /// What each data connection must present first.
    pub token: Token,
    /// Socket buffer sizes the kernel gave the server's data socket.
    pub send_buf: u32,
    pub recv_buf: u32,
    /// Message sizes the server will use.
    pub send_size: u32,
    pub recv_size: u32,
    /// Buffers in the server's send and receive rings (0 for a direction
    /// it does not use).
    pub send_width: u32,
    pub recv_width: u32,
    /// Whether the server measures its CPU utilisation.
    pub measure_cpu: bool,
    /// CPUs the server counts for utilisation.
    pub num_cpus: u32,
}

/// netperf's word that its part of the data phase is over, with what it
/// counted (the server needs the datagram count to tell in-flight datagrams
/// from lost ones).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientDone {
    /// A UDP sender's count of datagrams sent, so that the receiver knows
    /// when it has all that will arrive (0 for the other tests).
    pub datagrams_sent: u64,
}
