//! netperf's value syntax.
//!
//! Sizes and counts are integers with an optional suffix: `K`, `M`, `G`
//! multiply by powers of 1024, `k`, `m`, `g` by powers of 1000 (netperf's
//! `convert()`); a trailing `B` or `b` after it is allowed (`64KB`). Unlike
//! netperf, which reads "abc" as 0 and "1.5K" as 1024 without a word, a value
//! that is not such a number is an error that names it.
//!
//! Pairs come in netperf's two flavours: [`pair`] (a lone value sets both,
//! `a,` only the first, `,b` only the second) and [`pair_explicit`] (a lone
//! value sets only the first).

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("'{value}' {problem}")]
pub struct ValueError {
    pub value: String,
    pub problem: String,
}

fn err(value: &str, problem: impl Into<String>) -> ValueError {
    ValueError {
        value: value.to_string(),
        problem: problem.into(),
    }
}

/// An integer with netperf's optional size suffix. Negative values are
/// allowed; callers that cannot take them check the sign.
pub fn int(s: &str) -> Result<i64, ValueError> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits_end = body
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(body.len());
    let (digits, suffix) = body.split_at(digits_end);
    if digits.is_empty() {
        return Err(err(s, "is not a number"));
    }
    let mult: i64 = match suffix {
        "" | "B" | "b" => 1,
        "K" | "KB" | "Kb" => 1 << 10,
        "M" | "MB" | "Mb" => 1 << 20,
        "G" | "GB" | "Gb" => 1 << 30,
        "k" | "kB" | "kb" => 1_000,
        "m" | "mB" | "mb" => 1_000_000,
        "g" | "gB" | "gb" => 1_000_000_000,
        _ => {
            return Err(err(
                s,
                "is not a number (suffixes: K M G = 1024^n, k m g = 1000^n)",
            ));
        }
    };
    let n: i64 = digits.parse().map_err(|_| err(s, "is too large"))?;
    let v = n.checked_mul(mult).ok_or_else(|| err(s, "is too large"))?;
    Ok(if neg { -v } else { v })
}

/// netperf's `-l`: an [`int`], where a unit of seconds may follow (`30s`,
/// `30sec`, `30secs`, `30seconds`), as netperf 2.7 reads it: its number
/// parser skips letters other than K M G k m g.
pub fn test_length(s: &str) -> Result<i64, ValueError> {
    let t = s.trim();
    let bare = ["seconds", "second", "secs", "sec", "s"]
        .iter()
        .find_map(|u| t.strip_suffix(u))
        .filter(|b| b.ends_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(t);
    int(bare).map_err(|e| err(s, e.problem))
}

/// A non-negative integer that fits in a `u32` (sizes, counts).
pub fn u32_size(s: &str) -> Result<u32, ValueError> {
    let v = int(s)?;
    if v < 0 {
        return Err(err(s, "must not be negative"));
    }
    u32::try_from(v).map_err(|_| err(s, format!("is more than {}", u32::MAX)))
}

/// A port number.
pub fn port(s: &str) -> Result<u16, ValueError> {
    let v = int(s)?;
    u16::try_from(v).map_err(|_| err(s, "is not a port number (0 to 65535)"))
}

/// A decimal number (netperf reads these with `atof`/`strtod`).
pub fn float(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(err(s, "is not a number")),
    }
}

/// A rate in bits per second: `100m` = 100,000,000; `1g`; `2.5m`; with
/// `K`/`M`/`G` meaning powers of 1024 as elsewhere in netperf.
pub fn bits_per_second(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| err(s, "is not a rate"))?;
    let suffix = suffix
        .strip_suffix("bps")
        .or_else(|| suffix.strip_suffix("bit/s"))
        .unwrap_or(suffix);
    let mult = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err(s, "is not a rate (bits/s with k, m or g)")),
    };
    let v = n * mult;
    if !(1.0..=1e15).contains(&v) {
        return Err(err(s, "is not a rate between 1 bit/s and 1 Pbit/s"));
    }
    Ok(v.round() as u64)
}

/// netperf's `break_args`: `a,b` gives both, `a` sets both to `a`, `a,`
/// only the first, `,b` only the second.
pub fn pair(s: &str) -> (Option<&str>, Option<&str>) {
    match s.split_once(',') {
        Some((a, b)) => (non_empty(a), non_empty(b)),
        None => (non_empty(s), non_empty(s)),
    }
}

/// netperf's `break_args_explicit`: like [`pair`] but a lone value sets only
/// the first.
pub fn pair_explicit(s: &str) -> (Option<&str>, Option<&str>) {
    match s.split_once(',') {
        Some((a, b)) => (non_empty(a), non_empty(b)),
        None => (non_empty(s), None),
    }
}

fn non_empty(s: &str) -> Option<&str> {
    if s.is_empty() { None } else { Some(s) }
}

/// An address family as netperf spells it after a comma (`-H host,6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrFamily {
    Unspec,
    V4,
    V6,
}

/// netperf's `parse_address_family`: anything containing "6" is IPv6,
/// "inet" or "4" IPv4, "unspec" or "0" either. netperf warns and falls back
/// to either for anything else; we make it an error.
pub fn address_family(s: &str) -> Result<AddrFamily, ValueError> {
    let t = s.to_ascii_lowercase();
    if t.contains('6') {
        Ok(AddrFamily::V6)
    } else if t.contains("inet") || t.contains('4') {
        Ok(AddrFamily::V4)
    } else if t.contains("unspec") || t.contains('0') {
        Ok(AddrFamily::Unspec)
    } else {
        Err(err(
            s,
            "is not an address family (4, 6, inet, inet6 or unspec)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_length_may_name_seconds() {
        for l in ["30", "30s", "30sec", "30secs", "30seconds", " 30s "] {
            assert_eq!(test_length(l), Ok(30), "{l}");
        }
        assert_eq!(test_length("-100M"), Ok(-100 << 20));
        assert_eq!(test_length("s").unwrap_err().value, "s");
        assert_eq!(test_length("30min").unwrap_err().value, "30min");
    }

    #[test]
    fn suffixes() {
        assert_eq!(int("64K"), Ok(65_536));
        assert_eq!(int("64KB"), Ok(65_536));
        assert_eq!(int("1M"), Ok(1_048_576));
        assert_eq!(int("2G"), Ok(2_147_483_648));
        assert_eq!(int("64k"), Ok(64_000));
        assert_eq!(int("3m"), Ok(3_000_000));
        assert_eq!(int("1g"), Ok(1_000_000_000));
        assert_eq!(int("1024"), Ok(1024));
        assert_eq!(int("-10000000"), Ok(-10_000_000));
        assert_eq!(int("+5"), Ok(5));
        assert_eq!(int(" 7 "), Ok(7));
    }

    #[test]
    fn malformed_numbers_are_errors() {
        for bad in [
            "",
            "abc",
            "1.5K",
            "10x",
            "K",
            "-",
            "64KK",
            "99999999999999999999",
        ] {
            assert!(int(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(int("abc").unwrap_err().to_string().contains("'abc'"));
    }

    #[test]
    fn sizes() {
        assert_eq!(u32_size("128K"), Ok(131_072));
        assert!(u32_size("-1").is_err());
        assert!(u32_size("5G").is_err());
        assert_eq!(port("12865"), Ok(12865));
        assert!(port("70000").is_err());
    }

    #[test]
    fn pairs() {
        assert_eq!(pair("1,2"), (Some("1"), Some("2")));
        assert_eq!(pair("64K"), (Some("64K"), Some("64K")));
        assert_eq!(pair("64K,"), (Some("64K"), None));
        assert_eq!(pair(",128K"), (None, Some("128K")));
        assert_eq!(pair_explicit("1024"), (Some("1024"), None));
        assert_eq!(pair_explicit(",1024"), (None, Some("1024")));
        assert_eq!(pair_explicit("host,6"), (Some("host"), Some("6")));
    }

    #[test]
    fn floats() {
        assert_eq!(float("0.2"), Ok(0.2));
        assert_eq!(float("-0.2"), Ok(-0.2));
        assert!(float("x").is_err());
        assert!(float("inf").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(bits_per_second("100m"), Ok(100_000_000));
        assert_eq!(bits_per_second("2.5g"), Ok(2_500_000_000));
        assert_eq!(bits_per_second("64k"), Ok(64_000));
        assert_eq!(bits_per_second("1000"), Ok(1000));
        assert_eq!(bits_per_second("10mbps"), Ok(10_000_000));
        assert!(bits_per_second("0").is_err());
        assert!(bits_per_second("fast").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_string_parses_or_errs(s in ".{0,30}") {
            let _ = int(&s);
            let _ = float(&s);
            let _ = bits_per_second(&s);
            let _ = pair(&s);
            let _ = pair_explicit(&s);
        }

        #[test]
        fn integers_round_trip(n in -1_000_000_000i64..1_000_000_000) {
            proptest::prop_assert_eq!(int(&n.to_string()), Ok(n));
        }
    }
}

#[cfg(test)]
mod family_tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(address_family("6"), Ok(AddrFamily::V6));
        assert_eq!(address_family("inet6"), Ok(AddrFamily::V6));
        assert_eq!(address_family("AF_INET6"), Ok(AddrFamily::V6));
        assert_eq!(address_family("4"), Ok(AddrFamily::V4));
        assert_eq!(address_family("inet"), Ok(AddrFamily::V4));
        assert_eq!(address_family("unspec"), Ok(AddrFamily::Unspec));
        assert_eq!(address_family("0"), Ok(AddrFamily::Unspec));
        assert!(address_family("ipx").is_err());
    }
}
