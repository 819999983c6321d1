//! The data path's conventions: what, beside the test's own bytes, the two
//! ends of a data connection agree on. The control dialect chooses them
//! (ours, or netperf 2.7's) and passes them to every loop and to the
//! server's accept path; no loop knows which dialect it serves.
//!
//! | | ours ([`Conventions::NATIVE`]) | netperf 2.7 ([`Conventions::NETPERF2`]) |
//! |---|---|---|
//! | a data connection belongs to the test | it presents the 36-byte preamble (token, flow number); UDP says it in a hello | it comes from the control connection's peer address |
//! | UDP_STREAM datagrams | start with a header (test id, sequence number, send time) | fill bytes only |
//! | UDP_RR messages | start with a tag (the transaction's sequence number) | fill bytes only |
//! | the UDP sender is done | it says so on the control connection | it sends three zero-length datagrams |
//! | TCP_CRR's connection | the responder closes first, after its response (before the `crr-server-closes` capability, the requester) | the same |
//!
//! The TCP stream and TCP_RR ends are the same in both: the sender (the
//! requester) half-closes and waits for the peer's end-of-file.
//!
//! iperf3's ([`Conventions::iperf3`]): its streams present the session's
//! cookie on the server's own port and are handed to the test by the
//! listener (a UDP stream says iperf3's connect message, "9876", and
//! waits for "6789"); UDP datagrams start with iperf3's header (send time
//! in seconds and microseconds, a sequence number from 1, of 32 or 64
//! bits); the test ends on the control connection (TEST_END), and the
//! receiver counts what it has read by then: a sending client leaves its
//! streams open, and tells the end once what it sent is acknowledged and
//! has had a moment to be read ([`Conventions::told_end`]).

/// How a data connection shows that it belongs to the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proof {
    /// The test's token and the flow number, first on every connection
    /// ([`crate::handshake`]); a UDP socket's hello carries them.
    Preamble,
    /// Nothing: a connection from the control connection's peer address is
    /// the test's (netperf 2.7 sends no token).
    ControlPeer,
    /// The listener proved it (iperf3's cookie, on the server's own port)
    /// and handed it to the test: the client presents the cookie its
    /// token makes ([`proto::iperf3::cookie_of`]), or on UDP iperf3's
    /// connect message.
    Handed,
}

/// What a UDP_STREAM datagram starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpHeader {
    /// Fill bytes only (netperf 2.7's).
    None,
    /// Ours: the test's id, a 64-bit sequence number from 0, the send time
    /// in microseconds ([`crate::stream::udp`]).
    Ours,
    /// iperf3's: the send time (seconds, microseconds; 32 bits each), then
    /// a sequence number from 1, of 64 bits with `udp_counters_64bit`.
    Iperf3 { counters64: bool },
}

/// How a UDP sender tells the receiver that it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpEnd {
    /// On the control connection, with the count of what it sent.
    Control,
    /// This many zero-length datagrams on the data socket; the first that
    /// arrives ends the receiver's loop.
    EmptyDatagrams(u8),
}

/// Which end of a connection-per-transaction closes first (and so holds
/// the TIME_WAIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closer {
    Requester,
    Responder,
}

/// The conventions of one test's data path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conventions {
    pub proof: Proof,
    /// What UDP_STREAM datagrams start with.
    pub udp_header: UdpHeader,
    /// UDP_RR messages carry their transaction's tag.
    pub udp_rr_tags: bool,
    pub udp_end: UdpEnd,
    pub crr_closer: Closer,
    /// A TCP sender, once done, waits for the receiver's end-of-file (ours
    /// and netperf 2.7's); iperf3's clients close their streams only after
    /// the results.
    pub sender_waits_eof: bool,
    /// The receiver counts until the client tells the end on the control
    /// connection (iperf3's TEST_END), what it has read by then: a sending
    /// client leaves its streams open and tells the end only once what it
    /// sent is acknowledged (TCP) and [`SETTLE`] has passed.
    pub told_end: bool,
}

/// How long a sending client waits, once what it sent is acknowledged,
/// before it tells the end where the receiver counts until told
/// ([`Conventions::told_end`]): time for the receiver to read what its
/// socket holds.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(200);

impl Conventions {
    /// Ours.
    pub const NATIVE: Conventions = Conventions {
        proof: Proof::Preamble,
        udp_header: UdpHeader::Ours,
        udp_rr_tags: true,
        udp_end: UdpEnd::Control,
        crr_closer: Closer::Responder,
        sender_waits_eof: true,
        told_end: false,
    };

    /// netperf 2.7's.
    pub const NETPERF2: Conventions = Conventions {
        proof: Proof::ControlPeer,
        udp_header: UdpHeader::None,
        udp_rr_tags: false,
        udp_end: UdpEnd::EmptyDatagrams(3),
        crr_closer: Closer::Responder,
        sender_waits_eof: true,
        told_end: false,
    };

    /// Bytes a TCP_CRR request carries before the test's own.
    pub fn crr_preamble(&self) -> usize {
        match self.proof {
            Proof::Preamble => crate::handshake::PREAMBLE_LEN,
            Proof::ControlPeer | Proof::Handed => 0,
        }
    }

    /// What a new data connection presents first: our preamble (the
    /// test's token and the flow's number), iperf3's cookie (the one the
    /// token makes), or nothing (netperf 2.7's).
    pub fn present(
        &self,
        mut w: impl std::io::Write,
        token: &proto::test::Token,
        flow: u32,
    ) -> Result<(), crate::EngineError> {
        match self.proof {
            Proof::Preamble => crate::handshake::write_preamble(w, token, flow),
            Proof::Handed => w
                .write_all(&proto::iperf3::cookie_of(token))
                .map_err(|e| crate::EngineError::io("presenting the cookie", e)),
            Proof::ControlPeer => Ok(()),
        }
    }

    /// Bytes of a UDP_RR message that carry its tag (0 without tags).
    pub fn udp_rr_tag_len(&self, req: usize, resp: usize) -> usize {
        if self.udp_rr_tags {
            proto::test::udp_rr_tag_len(req, resp)
        } else {
            0
        }
    }
}

impl Conventions {
    /// iperf3's, with 64-bit UDP sequence numbers when its client asked.
    pub const fn iperf3(counters64: bool) -> Conventions {
        Conventions {
            proof: Proof::Handed,
            udp_header: UdpHeader::Iperf3 { counters64 },
            udp_rr_tags: false,
            udp_end: UdpEnd::Control,
            crr_closer: Closer::Responder,
            sender_waits_eof: false,
            told_end: true,
        }
    }
}

impl From<proto::dialect::Dialect> for Conventions {
    /// The conventions a control dialect's tests use.
    fn from(d: proto::dialect::Dialect) -> Conventions {
        match d {
            proto::dialect::Dialect::Native => Conventions::NATIVE,
            proto::dialect::Dialect::Netperf2 => Conventions::NETPERF2,
            proto::dialect::Dialect::Iperf3 => Conventions::iperf3(false),
        }
    }
}

impl Conventions {
    /// The conventions with a netserver that can do what `c` says: its
    /// dialect's, with TCP_CRR's closer as it closes.
    pub fn with(c: &proto::Capabilities) -> Conventions {
        let mut conv = Conventions::from(c.dialect);
        // a netserver of this suite from before it closed TCP_CRR's
        // connections first waits for ours to close
        if !c.crr_server_closes {
            conv.crr_closer = Closer::Requester;
        }
        conv
    }
}

impl Default for Conventions {
    fn default() -> Conventions {
        Conventions::NATIVE
    }
}
