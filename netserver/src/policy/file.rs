//! The policy file (`--policy FILE`, TOML): budgets per client address,
//! per prefix and for the daemon, and the limits of one test. Every key is
//! optional; a key the file does not know, or a value out of range, is an
//! error naming its line.
//!
//! ```toml
//! [daemon]
//! bytes_per_day = "20T"      # every client together
//! max_entries = 65536        # addresses, prefixes and tokens remembered
//! state_file = "/var/lib/netserver/policy-state.json"
//!
//! [address]                  # each client address
//! sessions = 8
//! tests_per_hour = 60
//!
//! [prefix]                   # each /24 (IPv4) or /56 (IPv6)
//! ipv4 = 24
//! ipv6 = 56
//! tests_per_day = 2000
//! bytes_per_day = "500G"
//! test_seconds_per_day = 36000
//!
//! [test]
//! max_seconds = 60
//! max_flows = 16
//! max_rate = "1g"            # bits/s
//!
//! [stamp]                    # --stamp's reflector
//! allow = ["198.18.0.0/24", "2001:2::/64"]   # reflect to these alone
//! ```

use std::{net::IpAddr, path::PathBuf};

use serde::{Deserialize, Deserializer};

/// A parsed policy.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    #[serde(default)]
    pub daemon: Daemon,
    #[serde(default)]
    pub address: Budget,
    #[serde(default)]
    pub prefix: PrefixBudget,
    #[serde(default)]
    pub test: TestLimits,
    #[serde(default)]
    pub stamp: StampPolicy,
}

/// Whom `--stamp`'s reflector answers: the senders in these prefixes
/// (none listed: every sender).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StampPolicy {
    #[serde(default, deserialize_with = "prefixes")]
    pub allow: Vec<(IpAddr, u8)>,
}

impl StampPolicy {
    /// Whether a test packet from `ip` gets a reflection.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|&p| engine::token::within(ip, p))
    }
}

/// A list of prefixes, `ADDR/LEN` each (a lone address: itself alone).
fn prefixes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(IpAddr, u8)>, D::Error> {
    let words: Vec<String> = Vec::deserialize(d)?;
    words
        .iter()
        .map(|w| {
            let (a, len) = w.split_once('/').unwrap_or((w, ""));
            let ip: IpAddr = a
                .trim()
                .parse()
                .map_err(|_| serde::de::Error::custom(format!("'{w}' is not an address/length")))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = if len.is_empty() {
                max
            } else {
                len.trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|&l| l <= max)
                    .ok_or_else(|| {
                        serde::de::Error::custom(format!("'{w}': a prefix of 0 to {max} bits"))
                    })?
            };
            Ok((ip, len))
        })
        .collect()
}

/// What all clients together may use, and what the daemon remembers.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Daemon {
    #[serde(default, deserialize_with = "bytes")]
    pub bytes_per_day: Option<u64>,
    /// Addresses, prefixes and tokens whose use is remembered at once (the
    /// least recently seen forgotten first); 65,536 unless set.
    pub max_entries: Option<usize>,
    /// Where the counts are kept across a restart.
    pub state_file: Option<PathBuf>,
}

/// A budget: what one address (or prefix, or token) may use.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Control sessions at once.
    pub sessions: Option<usize>,
    pub tests_per_hour: Option<u64>,
    pub tests_per_day: Option<u64>,
    #[serde(default, deserialize_with = "bytes")]
    pub bytes_per_day: Option<u64>,
    pub test_seconds_per_day: Option<u64>,
}

/// A prefix's budget, and how long a prefix is.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PrefixBudget {
    #[serde(default = "v4_default")]
    pub ipv4: u8,
    #[serde(default = "v6_default")]
    pub ipv6: u8,
    pub sessions: Option<usize>,
    pub tests_per_hour: Option<u64>,
    pub tests_per_day: Option<u64>,
    #[serde(default, deserialize_with = "bytes")]
    pub bytes_per_day: Option<u64>,
    pub test_seconds_per_day: Option<u64>,
}

fn v4_default() -> u8 {
    24
}

fn v6_default() -> u8 {
    56
}

impl Default for PrefixBudget {
    fn default() -> Self {
        PrefixBudget {
            ipv4: v4_default(),
            ipv6: v6_default(),
            sessions: None,
            tests_per_hour: None,
            tests_per_day: None,
            bytes_per_day: None,
            test_seconds_per_day: None,
        }
    }
}

impl PrefixBudget {
    pub fn budget(&self) -> Budget {
        Budget {
            sessions: self.sessions,
            tests_per_hour: self.tests_per_hour,
            tests_per_day: self.tests_per_day,
            bytes_per_day: self.bytes_per_day,
            test_seconds_per_day: self.test_seconds_per_day,
        }
    }

    /// The prefix `ip` belongs to: its address with the host bits cleared,
    /// and the prefix's length.
    pub fn of(&self, ip: IpAddr) -> (IpAddr, u8) {
        match ip {
            IpAddr::V4(a) => {
                let len = self.ipv4.min(32);
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                (IpAddr::V4((u32::from(a) & mask).into()), len)
            }
            IpAddr::V6(a) => {
                // an IPv4 client on a dual-stack port is counted as IPv4
                if let Some(v4) = a.to_ipv4_mapped() {
                    return self.of(IpAddr::V4(v4));
                }
                let len = self.ipv6.min(128);
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                (IpAddr::V6((u128::from(a) & mask).into()), len)
            }
        }
    }
}

/// What one test may ask.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TestLimits {
    pub max_seconds: Option<u64>,
    pub max_flows: Option<u32>,
    /// Bits a second, the test's in all.
    #[serde(default, deserialize_with = "rate")]
    pub max_rate: Option<u64>,
}

impl From<TestLimits> for proto::ServerLimits {
    fn from(t: TestLimits) -> proto::ServerLimits {
        proto::ServerLimits {
            max_seconds: t.max_seconds,
            max_flows: t.max_flows,
            max_rate: t.max_rate,
        }
    }
}

/// A byte count: a number, or a string with a suffix (`K M G T`, 1024^n).
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    amount(d, optparse::value::byte_size)
}

/// A rate: bits a second, a number or a string with `k m g` (1000^n).
fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    amount(d, optparse::value::bits_per_second)
}

/// A number, or a string `parse` reads.
fn amount<'de, D: Deserializer<'de>>(
    d: D,
    parse: impl Fn(&str) -> Result<u64, optparse::value::ValueError>,
) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Int(u64),
        Text(String),
    }
    Ok(Some(match N::deserialize(d)? {
        N::Int(n) => n,
        N::Text(s) => parse(&s)
            .map_err(|e| serde::de::Error::custom(format!("'{}' {}", e.value, e.problem)))?,
    }))
}

impl PolicyFile {
    /// Parse a policy's text; an error names the line at fault.
    pub fn parse(text: &str) -> Result<PolicyFile, String> {
        let p: PolicyFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text.get(..s.start).unwrap_or("").matches('\n').count() + 1);
            let what = e.message().trim().to_string();
            match line {
                Some(l) => format!("line {l}: {what}"),
                None => what,
            }
        })?;
        p.check(text)?;
        Ok(p)
    }

    /// Values that parse but mean nothing.
    fn check(&self, text: &str) -> Result<(), String> {
        let line_of = |key: &str| {
            text.lines()
                .position(|l| l.trim_start().starts_with(key))
                .map_or(String::new(), |i| format!("line {}: ", i + 1))
        };
        if self.prefix.ipv4 > 32 {
            return Err(format!(
                "{}[prefix] ipv4 = {}: an IPv4 prefix is 0 to 32 bits",
                line_of("ipv4"),
                self.prefix.ipv4
            ));
        }
        if self.prefix.ipv6 > 128 {
            return Err(format!(
                "{}[prefix] ipv6 = {}: an IPv6 prefix is 0 to 128 bits",
                line_of("ipv6"),
                self.prefix.ipv6
            ));
        }
        for (key, v) in [
            ("max_seconds", self.test.max_seconds),
            ("max_flows", self.test.max_flows.map(u64::from)),
            ("max_rate", self.test.max_rate),
            ("max_entries", self.daemon.max_entries.map(|n| n as u64)),
        ] {
            if v == Some(0) {
                return Err(format!(
                    "{}{key} = 0: leave it out for no limit",
                    line_of(key)
                ));
            }
        }
        Ok(())
    }

    /// The addresses, prefixes and tokens remembered at once.
    pub fn max_entries(&self) -> usize {
        self.daemon.max_entries.unwrap_or(65_536)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_for_a_public_server_parses() {
        let p = PolicyFile::parse(
            r#"
[daemon]
bytes_per_day = "20T"
state_file = "/var/lib/netserver/policy-state.json"

[address]
sessions = 8
tests_per_hour = 60

[prefix]
ipv4 = 24
tests_per_day = 2000
bytes_per_day = 536870912000

[test]
max_seconds = 60
max_flows = 16
max_rate = "1g"
"#,
        )
        .unwrap();
        assert_eq!(p.daemon.bytes_per_day, Some(20 << 40));
        assert_eq!(p.address.sessions, Some(8));
        assert_eq!(p.prefix.ipv6, 56);
        assert_eq!(p.prefix.bytes_per_day, Some(500 << 30));
        assert_eq!(p.test.max_rate, Some(1_000_000_000));
        assert_eq!(p.max_entries(), 65_536);
    }

    #[test]
    fn an_error_names_its_line() {
        let e = PolicyFile::parse("[address]\nsessions = 8\ntests_per_houre = 3\n").unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
        assert!(e.contains("tests_per_houre"), "{e}");
        let e = PolicyFile::parse("[test]\n\nmax_seconds = -1\n").unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
        let e = PolicyFile::parse("[prefix]\nipv4 = 33\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = PolicyFile::parse("[daemon]\nbytes_per_day = \"10X\"\n").unwrap_err();
        assert!(e.starts_with("line 2:") && e.contains("10X"), "{e}");
        let e = PolicyFile::parse("[test]\nmax_flows = 0\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    #[test]
    fn stamps_allowed_prefixes() {
        let p = PolicyFile::parse(
            "[stamp]\nallow = [\"198.18.0.0/24\", \"2001:2::/64\", \"203.0.113.7\"]\n",
        )
        .unwrap();
        for (ip, ok) in [
            ("198.18.0.9", true),
            ("198.18.1.9", false),
            ("::ffff:198.18.0.200", true),
            ("2001:2::5", true),
            ("2001:3::5", false),
            ("203.0.113.7", true),
            ("203.0.113.8", false),
        ] {
            assert_eq!(p.stamp.allows(ip.parse().unwrap()), ok, "{ip}");
        }
        assert!(
            PolicyFile::default()
                .stamp
                .allows("192.0.2.1".parse().unwrap())
        );
        let e = PolicyFile::parse("[stamp]\nallow = [\"198.18.0.0/33\"]\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("0 to 32"), "{e}");
    }

    #[test]
    fn prefixes_clear_the_host_bits() {
        let p = PrefixBudget::default();
        assert_eq!(
            p.of("198.18.0.77".parse().unwrap()),
            ("198.18.0.0".parse().unwrap(), 24)
        );
        assert_eq!(
            p.of("2001:2::1234:5678:9abc".parse().unwrap()),
            ("2001:2::".parse().unwrap(), 56)
        );
        assert_eq!(
            p.of("::ffff:10.1.2.3".parse().unwrap()),
            ("10.1.2.0".parse().unwrap(), 24)
        );
        let all = PrefixBudget {
            ipv4: 0,
            ..PrefixBudget::default()
        };
        assert_eq!(
            all.of("10.1.2.3".parse().unwrap()),
            ("0.0.0.0".parse().unwrap(), 0)
        );
    }
}
