//! Short-lived tokens (`netserver token`): what a token says, as text.
//!
//! A token is its public part and a signature, joined by `_`:
//!
//! ```text
//! rsnp1_<expires>_<tests>_<prefix>_<id>_<signature>
//! ```
//!
//! `expires` is the wall clock's second it stops working; `tests` how
//! many tests it may start (0: as many as the policy's budgets allow);
//! `prefix` the client addresses it may come from (`127.0.1.0/24`, or
//! `any`); `id` 16 hexadecimal digits that name it in the policy's
//! counts and the log; the signature 32 hexadecimal digits of
//! HMAC-SHA256 under the netserver's key over the public part
//! ([`crate::auth::Key::sign_token`]). Only the holder of the whole
//! token can prove it: our netperf proves it in the control handshake
//! without sending it (`--token`, or `-Z` given a token); netperf 2.7's
//! `-Z` sends it as its passphrase, in the clear.

use std::net::IpAddr;

/// The first word of every token (its format's version).
pub const PREFIX: &str = "rsnp1";

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The wall clock's second (since 1970) it stops working.
    pub expires: u64,
    /// Tests it may start; 0 for no count of its own.
    pub tests: u64,
    /// The addresses it may come from: a prefix and its length.
    pub prefix: Option<(IpAddr, u8)>,
    pub id: u64,
}

impl Token {
    /// The public part, as signed.
    pub fn payload(&self) -> String {
        let prefix = self
            .prefix
            .map_or_else(|| "any".to_string(), |(a, l)| format!("{a}/{l}"));
        format!(
            "{PREFIX}_{}_{}_{prefix}_{:016x}",
            self.expires, self.tests, self.id
        )
    }

    /// A token's public part read back; an error says what is wrong.
    pub fn parse(payload: &str) -> Result<Token, String> {
        let mut w = payload.split('_');
        if w.next() != Some(PREFIX) {
            return Err(format!("a token starts with {PREFIX}_"));
        }
        let mut next = |what: &str| {
            w.next()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("the token has no {what}"))
        };
        let expires = next("expiry")?
            .parse()
            .map_err(|_| "the token's expiry is not a number".to_string())?;
        let tests = next("test count")?
            .parse()
            .map_err(|_| "the token's test count is not a number".to_string())?;
        let prefix = match next("prefix")? {
            "any" => None,
            p => Some(parse_prefix(p)?),
        };
        let id = next("id")?;
        if id.len() != 16 {
            return Err("the token's id is not 16 hexadecimal digits".into());
        }
        let id = u64::from_str_radix(id, 16)
            .map_err(|_| "the token's id is not 16 hexadecimal digits".to_string())?;
        if w.next().is_some() {
            return Err("the token has more words than its format".into());
        }
        Ok(Token {
            expires,
            tests,
            prefix,
            id,
        })
    }

    /// Whether `ip` is inside the token's prefix (an IPv4 client on a
    /// dual-stack port counts as its IPv4 address).
    pub fn admits(&self, ip: IpAddr) -> bool {
        let Some((net, len)) = self.prefix else {
            return true;
        };
        within(ip, (net, len))
    }
}

/// Whether `ip` is in the prefix `net`/`len` (an IPv4 address mapped into
/// IPv6, as a dual-stack socket tells it, as IPv4).
pub fn within(ip: IpAddr, (net, len): (IpAddr, u8)) -> bool {
    let ip = match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// `ADDR/LEN`, the address's host bits cleared.
pub fn parse_prefix(p: &str) -> Result<(IpAddr, u8), String> {
    let (a, l) = p
        .split_once('/')
        .ok_or_else(|| format!("'{p}' is not a prefix ADDR/LEN"))?;
    let a: IpAddr = a
        .parse()
        .map_err(|_| format!("'{p}' does not start with an IP address"))?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    let l: u8 = l
        .parse()
        .ok()
        .filter(|l| u32::from(*l) <= max)
        .ok_or_else(|| format!("'{p}': the length is not 0 to {max}"))?;
    let net = match a {
        IpAddr::V4(v) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
            IpAddr::V4((u32::from(v) & mask).into())
        }
        IpAddr::V6(v) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
            IpAddr::V6((u128::from(v) & mask).into())
        }
    };
    Ok((net, l))
}

/// A whole token split into its public part and its signature, if it
/// has the shape of one.
pub fn split(token: &str) -> Option<(&str, &str)> {
    let (payload, sig) = token.rsplit_once('_')?;
    (payload.starts_with(PREFIX) && sig.len() == 32).then_some((payload, sig))
}

/// Hexadecimal, lower case.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_back_as_written() {
        let t = Token {
            expires: 1_800_000_000,
            tests: 5,
            prefix: Some(("127.0.1.0".parse().unwrap(), 24)),
            id: 0xfeed,
        };
        assert_eq!(
            t.payload(),
            "rsnp1_1800000000_5_127.0.1.0/24_000000000000feed"
        );
        assert_eq!(Token::parse(&t.payload()), Ok(t));
        let v6 = Token {
            prefix: Some(("2001:2::".parse().unwrap(), 64)),
            ..t
        };
        assert_eq!(Token::parse(&v6.payload()), Ok(v6));
        let any = Token { prefix: None, ..t };
        assert_eq!(Token::parse(&any.payload()), Ok(any));
    }

    #[test]
    fn what_is_not_a_token_says_why() {
        for (bad, why) in [
            ("", "starts with"),
            ("rsnp1_x_1_any_0000000000000001", "expiry"),
            ("rsnp1_1_1_any_01", "16 hexadecimal"),
            ("rsnp1_1_1_10.0.0.0/33_0000000000000001", "length"),
            ("rsnp1_1_1_any_0000000000000001_x", "more words"),
            ("rsnp1_1_1", "prefix"),
        ] {
            let e = Token::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn prefixes_hold_their_addresses() {
        let t = Token {
            expires: 0,
            tests: 0,
            prefix: Some(parse_prefix("127.0.1.77/24").unwrap()),
            id: 1,
        };
        assert_eq!(t.prefix.unwrap().0, "127.0.1.0".parse::<IpAddr>().unwrap());
        assert!(t.admits("127.0.1.200".parse().unwrap()));
        assert!(t.admits("::ffff:127.0.1.9".parse().unwrap()));
        assert!(!t.admits("127.0.2.1".parse().unwrap()));
        assert!(!t.admits("::1".parse().unwrap()));
        let all = Token {
            prefix: Some(parse_prefix("0.0.0.0/0").unwrap()),
            ..t
        };
        assert!(all.admits("10.1.2.3".parse().unwrap()));
    }
}
