//! The tests `-t` names, and how a name with OMNI's `-d`, `-T` and `-c`
//! becomes the data path that runs.
//!
//! netperf 2.7 runs its six familiar tests through its OMNI code, which is
//! why `-t TCP_STREAM -- -T udp` runs UDP (under TCP_STREAM's banner and
//! table) and `-t TCP_RR -- -c` opens a connection per transaction. The
//! name decides what is printed; the data path ([`TestKind`]) is resolved
//! from the name's defaults and the options.

use proto::{Protocol, TestKind};

use super::PlanError as CliError;

/// A test as `-t` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TestName {
    TcpStream,
    TcpMaerts,
    UdpStream,
    TcpRr,
    UdpRr,
    TcpCrr,
    /// netperf 2.7's native test: direction (`-d`), protocol (`-T`) and
    /// connection (`-c`) from the options, output from selectors.
    Omni,
    /// TCP_STREAM with sendfile(2) on the sending side.
    TcpSendfile,
    /// A connection per transaction, nothing sent.
    TcpCc,
    /// Prints the data connection's maximum segment size.
    TcpMss,
    /// Prints the rate of the local CPU meter.
    LocCpu,
    /// Prints the rate of the netserver's CPU meter.
    RemCpu,
    /// Prints a fresh UUID.
    Uuid,
    /// Responsiveness under working conditions (ours, after the IETF IPPM
    /// draft): round trips a minute while bulk flows load the path.
    Rpm,
    /// STAMP (RFC 8762): test packets to any STAMP reflector, no
    /// netserver: round trip, queueing delay and loss each way.
    Stamp,
}

/// netperf's direction bits (`-d`): XMIT and RECV.
pub const XMIT: u32 = 0x2;
pub const RECV: u32 = 0x4;

impl TestName {
    pub const ALL: [TestName; 15] = [
        TestName::TcpStream,
        TestName::TcpMaerts,
        TestName::UdpStream,
        TestName::TcpRr,
        TestName::UdpRr,
        TestName::TcpCrr,
        TestName::Omni,
        TestName::TcpSendfile,
        TestName::TcpCc,
        TestName::TcpMss,
        TestName::LocCpu,
        TestName::RemCpu,
        TestName::Uuid,
        TestName::Rpm,
        TestName::Stamp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TestName::TcpStream => "TCP_STREAM",
            TestName::TcpMaerts => "TCP_MAERTS",
            TestName::UdpStream => "UDP_STREAM",
            TestName::TcpRr => "TCP_RR",
            TestName::UdpRr => "UDP_RR",
            TestName::TcpCrr => "TCP_CRR",
            TestName::Omni => "OMNI",
            TestName::TcpSendfile => "TCP_SENDFILE",
            TestName::TcpCc => "TCP_CC",
            TestName::TcpMss => "TCP_MSS",
            TestName::LocCpu => "LOC_CPU",
            TestName::RemCpu => "REM_CPU",
            TestName::Uuid => "UUID",
            TestName::Rpm => "RPM",
            TestName::Stamp => "STAMP",
        }
    }

    /// One line per test, for `-h`.
    pub fn describe(self) -> &'static str {
        match self {
            TestName::TcpStream => "bulk transfer, netperf to netserver",
            TestName::TcpMaerts => "bulk transfer, netserver to netperf",
            TestName::UdpStream => "datagrams netperf to netserver, with loss",
            TestName::TcpRr => "request/response on one connection",
            TestName::UdpRr => "request/response datagrams",
            TestName::TcpCrr => "connect, request, response, close",
            TestName::Omni => "netperf 2.7's general test: -- -d, -T, -c choose what runs",
            TestName::TcpSendfile => "TCP_STREAM sent with sendfile(2)",
            TestName::TcpCc => "connect and close, no data",
            TestName::TcpMss => "the data connection's maximum segment size",
            TestName::LocCpu => "the local CPU meter's rate",
            TestName::RemCpu => "the netserver's CPU meter's rate",
            TestName::Uuid => "a fresh UUID",
            TestName::Rpm => {
                "responsiveness: round trips a minute on a loaded path (-- -d up|down|both)"
            }
            TestName::Stamp => {
                "STAMP (RFC 8762) to any reflector (-- -P ,PORT; 862): round trip, delay and loss each way"
            }
        }
    }

    /// `-t`, without regard to case, as netperf 2.7.
    pub fn from_name(name: &str) -> Option<TestName> {
        TestName::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The tests that run no data phase and print one figure.
    pub fn is_info(self) -> bool {
        matches!(self, TestName::LocCpu | TestName::RemCpu | TestName::Uuid)
    }

    /// Whether this test reads netperf 2.7's OMNI options after `--`
    /// (`-d`, `-T`, `-c`, the selectors). TCP_SENDFILE, TCP_CC and TCP_MSS
    /// are netperf 2.7's classic tests and do not.
    pub fn takes_omni_options(self) -> bool {
        !matches!(
            self,
            TestName::TcpSendfile
                | TestName::TcpCc
                | TestName::TcpMss
                | TestName::LocCpu
                | TestName::RemCpu
        )
    }

    /// The protocol, direction and connection netperf 2.7 starts this test
    /// with, before `--` options change them.
    pub fn defaults(self) -> (Protocol, u32, bool) {
        match self {
            TestName::TcpStream | TestName::TcpSendfile | TestName::TcpMss => {
                (Protocol::Tcp, XMIT, false)
            }
            TestName::TcpMaerts => (Protocol::Tcp, RECV, false),
            TestName::UdpStream => (Protocol::Udp, XMIT, false),
            TestName::TcpRr => (Protocol::Tcp, XMIT | RECV, false),
            TestName::UdpRr | TestName::Stamp => (Protocol::Udp, XMIT | RECV, false),
            // its probes: a new connection and a request/response each
            TestName::TcpCrr | TestName::Rpm => (Protocol::Tcp, XMIT | RECV, true),
            TestName::TcpCc => (Protocol::Tcp, 0, true),
            TestName::Omni | TestName::LocCpu | TestName::RemCpu | TestName::Uuid => {
                (Protocol::Tcp, 0, false)
            }
        }
    }
}

impl std::fmt::Display for TestName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// netperf's `parse_direction` (`-- -d`): `send`, `xmit`, `transmit`,
/// `stream`; `recv`, `receive`, `maerts`; `rr`; any number (decimal, 0x
/// hex, 0 octal); parts joined with `|` are OR-ed; case does not matter.
/// Returns the bits and the parts netperf would read as 0 (unknown words).
pub fn parse_direction(s: &str) -> (u32, Vec<String>) {
    let mut bits = 0;
    let mut unknown = Vec::new();
    for part in s.split('|') {
        let p = part.trim();
        let b = match p.to_ascii_lowercase().as_str() {
            "" => 0,
            "send" | "xmit" | "transmit" | "stream" => XMIT,
            "recv" | "receive" | "maerts" => RECV,
            "rr" => XMIT | RECV,
            _ => match c_strtol(p) {
                Some(n) => n,
                None => {
                    unknown.push(p.to_string());
                    0
                }
            },
        };
        bits |= b;
    }
    (bits, unknown)
}

/// C's `strtol(s, NULL, 0)` for a whole word: decimal, `0x` hex or
/// leading-0 octal. `None` when no digits lead.
fn c_strtol(s: &str) -> Option<u32> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = digits
        .char_indices()
        .find(|(_, c)| !c.is_digit(radix))
        .map_or(digits.len(), |(i, _)| i);
    if end == 0 {
        // "0x" alone or "0" followed by a non-octal digit: strtol reads 0
        return t.starts_with('0').then_some(0);
    }
    let v = i64::from_str_radix(&digits[..end], radix).ok()?;
    let v = if neg { -v } else { v };
    Some(v as u32)
}

/// netperf's `parse_protocol` (`-- -T`): `tcp` or `udp` in any case.
/// netperf 2.7 runs anything else it does not know as TCP ("IP Default");
/// the protocols it knows but Linux lacks here fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolWord {
    Known(Protocol),
    /// Not a protocol netperf 2.7 knows: it runs TCP.
    Default,
}

pub fn parse_protocol(opt: &str, s: &str) -> Result<ProtocolWord, CliError> {
    let w = s.trim().to_ascii_lowercase();
    match w.as_str() {
        "tcp" => Ok(ProtocolWord::Known(Protocol::Tcp)),
        "udp" => Ok(ProtocolWord::Known(Protocol::Udp)),
        "sctp" | "dccp" | "udplite" | "sdp" => Err(CliError(format!(
            "{opt} {s}: this netperf runs TCP and UDP only (netperf 2.7 fails too, when it \
             opens the data socket)"
        ))),
        _ => Ok(ProtocolWord::Default),
    }
}

/// The data path for a test: its name's defaults with what `--` changed.
pub fn resolve(
    name: TestName,
    protocol: Protocol,
    direction: u32,
    connection: bool,
) -> Result<TestKind, CliError> {
    let dir = direction & (XMIT | RECV);
    if connection {
        if protocol == Protocol::Udp {
            return Err(CliError(format!(
                "-- -c: {name} over UDP: a connection per transaction needs TCP \
                 (netperf 2.7 fails with a remote error here too)"
            )));
        }
        return match dir {
            0 => Ok(TestKind::TcpCc),
            d if d == XMIT | RECV => Ok(TestKind::TcpCrr),
            _ => Err(CliError(format!(
                "-- -c: a connection per transaction that only {} is not supported; \
                 use -d rr for connect/request/response, or no -d for connect/close",
                if dir == XMIT { "sends" } else { "receives" }
            ))),
        };
    }
    let kind = match dir {
        XMIT => TestKind::TcpStream,
        RECV => TestKind::TcpMaerts,
        d if d == XMIT | RECV => TestKind::TcpRr,
        _ => {
            return Err(CliError(format!(
                "-- -d {direction}: neither sends (2) nor receives (4), so it would \
                 measure empty loops (netperf 2.7 counts them); use send, recv or rr, \
                 or -c for connect/close"
            )));
        }
    };
    kind.over(protocol)
        .ok_or_else(|| CliError(format!("{name}: no such test over UDP")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_any_case() {
        for t in TestName::ALL {
            assert_eq!(TestName::from_name(t.name()), Some(t));
            assert_eq!(TestName::from_name(&t.name().to_lowercase()), Some(t));
        }
        assert_eq!(TestName::from_name("OmNi"), Some(TestName::Omni));
        assert_eq!(TestName::from_name("TCP_STREAMX"), None);
    }

    #[test]
    fn directions_as_netperf_spells_them() {
        for (s, bits) in [
            ("send", XMIT),
            ("XMIT", XMIT),
            ("transmit", XMIT),
            ("stream", XMIT),
            ("recv", RECV),
            ("Receive", RECV),
            ("maerts", RECV),
            ("rr", XMIT | RECV),
            ("send|recv", XMIT | RECV),
            ("SEND|Recv", XMIT | RECV),
            ("recv|send", XMIT | RECV),
            ("send|", XMIT),
            ("|recv", RECV),
            ("6", 6),
            ("0x6", 6),
            ("06", 6),
            ("4", 4),
            ("0", 0),
            ("1", 1),
        ] {
            assert_eq!(parse_direction(s), (bits, vec![]), "{s}");
        }
        assert_eq!(parse_direction("bogus"), (0, vec!["bogus".to_string()]));
    }

    #[test]
    fn protocols() {
        assert_eq!(
            parse_protocol("-T", "UDP"),
            Ok(ProtocolWord::Known(Protocol::Udp))
        );
        assert_eq!(
            parse_protocol("-T", "tcp"),
            Ok(ProtocolWord::Known(Protocol::Tcp))
        );
        assert_eq!(parse_protocol("-T", "ip"), Ok(ProtocolWord::Default));
        assert!(
            parse_protocol("-T", "sctp")
                .unwrap_err()
                .0
                .contains("-T sctp")
        );
    }

    #[test]
    fn what_runs() {
        use Protocol::*;
        let r = |d, p, c| resolve(TestName::Omni, p, d, c);
        assert_eq!(r(XMIT, Tcp, false), Ok(TestKind::TcpStream));
        assert_eq!(r(XMIT, Udp, false), Ok(TestKind::UdpStream));
        assert_eq!(r(RECV, Tcp, false), Ok(TestKind::TcpMaerts));
        assert_eq!(r(RECV, Udp, false), Ok(TestKind::UdpMaerts));
        assert_eq!(r(XMIT | RECV, Tcp, false), Ok(TestKind::TcpRr));
        assert_eq!(r(XMIT | RECV, Udp, false), Ok(TestKind::UdpRr));
        assert_eq!(r(XMIT | RECV, Tcp, true), Ok(TestKind::TcpCrr));
        assert_eq!(r(0, Tcp, true), Ok(TestKind::TcpCc));
        assert_eq!(r(1, Tcp, true), Ok(TestKind::TcpCc));
        assert!(r(XMIT | RECV, Udp, true).unwrap_err().0.contains("-c"));
        assert!(r(XMIT, Tcp, true).is_err());
        assert!(r(1, Tcp, false).unwrap_err().0.contains("-d 1"));
    }
}
