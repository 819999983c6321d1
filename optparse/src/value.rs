//! netperf's value syntax.
//!
//! Numbers are read as netperf 2.7 reads them, because scripts pass what
//! netperf accepts: [`int`] is its `convert()` (the leading integer, then
//! every suffix letter found anywhere in the word multiplies it once: `K`,
//! `M`, `G` by powers of 1024, `k`, `m`, `g` by powers of 1000; anything
//! else is ignored, so `80000:80000` is 80000 and `64KB` is 65536);
//! [`atoi`] and [`float`] read the leading number and ignore the rest, as C's
//! `atoi` and `atof` do.
//!
//! netperf 2.7's own options take any word, as its C converters do: a word
//! with no leading number at all (`abc`, or nothing) is 0, trailing text is
//! ignored; wrappers rely on it. [`convert`], [`atoi_lenient`] and [`atof`]
//! read them so, and say whether the word was a clean number (the caller
//! then says, in one line, what it was taken as). The strict readers
//! ([`int`], [`atoi`], [`float`]) are for our own options. A value past 32
//! bits, which netperf 2.7 wraps into nonsense, is an error either way.
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

/// The leading integer of `s` as C's `atoi` finds it: blanks, a sign, then
/// digits. `None` when there are no digits.
fn leading_int(s: &str) -> Option<(bool, &str)> {
    let t = s.trim_start();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = body
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(body.len());
    (end > 0).then(|| (neg, &body[..end]))
}

/// The most a value may be: netperf keeps them in a C `int`, and a larger
/// one wraps there.
const LIMIT: i64 = i32::MAX as i64;

fn signed(s: &str, neg: bool, digits: &str, mult: i64) -> Result<i64, ValueError> {
    let n: i64 = digits.parse().map_err(|_| err(s, "is too large"))?;
    match n.checked_mul(mult) {
        Some(v) if v <= LIMIT => Ok(if neg { -v } else { v }),
        _ => Err(err(s, format!("is more than {LIMIT}"))),
    }
}

/// netperf's `convert()`: the leading integer, multiplied once by each of
/// the suffix letters `K M G` (1024^n) and `k m g` (1000^n) that appear
/// anywhere in the word. Negative values are allowed; callers that cannot
/// take them check the sign.
pub fn int(s: &str) -> Result<i64, ValueError> {
    let Some((neg, digits)) = leading_int(s) else {
        return Err(err(
            s,
            "is not a number (suffixes: K M G = 1024^n, k m g = 1000^n)",
        ));
    };
    let mut mult: i64 = 1;
    for (c, m) in [
        ('K', 1i64 << 10),
        ('M', 1 << 20),
        ('G', 1 << 30),
        ('k', 1_000),
        ('m', 1_000_000),
        ('g', 1_000_000_000),
    ] {
        if s.contains(c) {
            mult = mult
                .checked_mul(m)
                .filter(|&m| m <= LIMIT)
                .ok_or_else(|| err(s, format!("is more than {LIMIT}")))?;
        }
    }
    signed(s, neg, &digits_of(digits), mult)
}

/// A number read as netperf 2.7 reads it, and whether its word was a
/// clean number (else the caller says what it was taken as).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lenient<T> {
    pub value: T,
    pub clean: bool,
}

/// Whether `s` is a sign, digits and at most one suffix letter of
/// `suffixes` at its end, blanks around it aside.
fn is_clean(s: &str, suffixes: &str) -> bool {
    let t = s.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let t = t.strip_suffix(|c: char| suffixes.contains(c)).unwrap_or(t);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// netperf 2.7's `convert()` as it is: [`int`], but a word with no leading
/// number (or nothing) is 0, as C's `atoi` makes it.
pub fn convert(s: &str) -> Result<Lenient<i64>, ValueError> {
    let clean = is_clean(s, "KMGkmg");
    if leading_int(s).is_none() {
        return Ok(Lenient { value: 0, clean });
    }
    int(s).map(|value| Lenient { value, clean })
}

/// C's `atoi` as netperf 2.7 uses it: [`atoi`], a word with no leading
/// number 0.
pub fn atoi_lenient(s: &str) -> Result<Lenient<i64>, ValueError> {
    let clean = is_clean(s, "");
    if leading_int(s).is_none() {
        return Ok(Lenient { value: 0, clean });
    }
    atoi(s).map(|value| Lenient { value, clean })
}

/// C's `atof` as netperf 2.7 uses it: [`float`], a word with no leading
/// number 0.
pub fn atof(s: &str) -> Lenient<f64> {
    match float(s) {
        Ok(value) => Lenient {
            value,
            clean: s.trim().parse::<f64>().is_ok(),
        },
        Err(_) => Lenient {
            value: 0.0,
            clean: false,
        },
    }
}

/// A port as netperf 2.7 hands it to `getaddrinfo`: digits (past 65535
/// they wrap, as glibc wraps them), or a service name of /etc/services.
pub fn service_port(s: &str) -> Result<Lenient<u16>, ValueError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = t.parse().map_err(|_| err(s, "is not a port number"))?;
        return Ok(Lenient {
            value: (n % 65_536) as u16,
            clean: n <= 65_535,
        });
    }
    let services = std::fs::read_to_string("/etc/services").unwrap_or_default();
    let found = services.lines().find_map(|l| {
        let l = l.split('#').next().unwrap_or("");
        let mut w = l.split_whitespace();
        let (name, port) = (w.next()?, w.next()?);
        let (port, proto) = port.split_once('/')?;
        (proto == "tcp" && (name == t || w.any(|alias| alias == t)))
            .then(|| port.parse::<u16>().ok())
            .flatten()
    });
    match found {
        Some(value) => Ok(Lenient {
            value,
            clean: false,
        }),
        None => Err(err(
            s,
            "is not a port number (0 to 65535) or a service name of /etc/services",
        )),
    }
}

fn digits_of(d: &str) -> String {
    // Leading zeros would not change the value; keep the parse in range.
    let t = d.trim_start_matches('0');
    if t.is_empty() { "0".into() } else { t.into() }
}

/// A byte count for our own long options, beyond netperf's 32-bit
/// `convert()`: digits, then at most one suffix `K M G T` (1024^n).
pub fn byte_size(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'M')) => (&t[..i], 1 << 20),
        Some((i, 'G')) => (&t[..i], 1 << 30),
        Some((i, 'T')) => (&t[..i], 1 << 40),
        _ => (t, 1),
    };
    let bad = || err(s, "is not a byte count (digits, then K, M, G or T)");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(bad)
}

/// C's `atoi`, which netperf uses for some options (`-b`, `-e`, `-n`,
/// `-G`, `-q`, `-R`, `-p`'s range): the leading integer, no suffixes.
pub fn atoi(s: &str) -> Result<i64, ValueError> {
    let Some((neg, digits)) = leading_int(s) else {
        return Err(err(s, "is not a number"));
    };
    signed(s, neg, &digits_of(digits), 1)
}

/// netperf's `-l`: [`int`], so that `30s` and `30secs` are 30 seconds (no
/// suffix letter in them), as netperf 2.7 reads it.
pub fn test_length(s: &str) -> Result<i64, ValueError> {
    int(s)
}

/// A non-negative integer that fits in a `u32` (sizes, counts).
pub fn u32_size(s: &str) -> Result<u32, ValueError> {
    let v = int(s)?;
    if v < 0 {
        return Err(err(s, "must not be negative"));
    }
    u32::try_from(v).map_err(|_| err(s, format!("is more than {}", u32::MAX)))
}

/// A port number. netperf hands port words to `getaddrinfo`, which takes
/// digits only (or a service name, which we do not look up).
pub fn port(s: &str) -> Result<u16, ValueError> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(s, "is not a port number (0 to 65535)"));
    }
    t.parse::<u16>()
        .map_err(|_| err(s, "is not a port number (0 to 65535)"))
}

/// A decimal number, as C's `atof`/`strtod` read it: the longest leading
/// decimal number, the rest ignored (`99,` or `0.5s`). A word with no
/// leading number is an error.
pub fn float(s: &str) -> Result<f64, ValueError> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        let frac = i + 1;
        let mut j = frac;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if digits > 0 || j > frac {
            digits += j - frac;
            i = j;
        }
    }
    if digits == 0 {
        return Err(err(s, "is not a number"));
    }
    // An exponent, as strtod takes it, only when digits follow.
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let exp_digits = j;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j > exp_digits {
            i = j;
        }
    }
    match t[..i].parse::<f64>() {
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
/// "inet" or "4" IPv4, "unspec" or "0" either. netperf 2.7 warns and falls
/// back to either for anything else; the caller does the same with the
/// error this returns.
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

    /// netperf 2.7's converters, word by word (as its C code reads them,
    /// checked against netperf 2.7.1): what is not a number is 0, trailing
    /// text is ignored, and the word is marked as not clean.
    #[test]
    fn lenient_readings_are_netperf_2_7s() {
        let c = |s: &str| convert(s).map(|l| (l.value, l.clean));
        assert_eq!(c("tcp"), Ok((0, false)));
        assert_eq!(c(""), Ok((0, false)));
        assert_eq!(c("12abc"), Ok((12, false)));
        assert_eq!(c("-5"), Ok((-5, true)));
        assert_eq!(c("1.5"), Ok((1, false)));
        assert_eq!(c("1.5K"), Ok((1024, false)));
        assert_eq!(c("0x10"), Ok((0, false)));
        assert_eq!(c("64K"), Ok((65_536, true)));
        assert_eq!(c("64KB"), Ok((65_536, false)));
        assert!(c("4G").is_err(), "wraps in netperf 2.7: refused");
        let a = |s: &str| atoi_lenient(s).map(|l| (l.value, l.clean));
        assert_eq!(a("tcp"), Ok((0, false)));
        assert_eq!(a("2.5"), Ok((2, false)));
        assert_eq!(a("7"), Ok((7, true)));
        assert_eq!((atof("1.5").value, atof("1.5").clean), (1.5, true));
        assert_eq!((atof("word").value, atof("word").clean), (0.0, false));
        assert_eq!((atof("2s").value, atof("2s").clean), (2.0, false));
        let p = |s: &str| service_port(s).map(|l| (l.value, l.clean));
        assert_eq!(p("12865"), Ok((12865, true)));
        assert_eq!(p("89535"), Ok((23999, false)));
        assert!(p("12abc").is_err());
        if std::fs::read_to_string("/etc/services")
            .is_ok_and(|s| s.contains("http\t") || s.contains("http "))
        {
            assert_eq!(p("http"), Ok((80, false)));
        }
    }

    #[test]
    fn test_length_may_name_seconds() {
        for l in ["30", "30s", "30sec", "30secs", "30seconds", " 30s "] {
            assert_eq!(test_length(l), Ok(30), "{l}");
        }
        assert_eq!(test_length("-100M"), Ok(-100 << 20));
        assert_eq!(test_length("s").unwrap_err().value, "s");
        // netperf's convert() finds the 'm' of "min": a million seconds.
        assert_eq!(test_length("30min"), Ok(30_000_000));
        assert_eq!(test_length("-2K"), Ok(-2048));
    }

    #[test]
    fn byte_sizes_reach_past_32_bits() {
        assert_eq!(byte_size("64G"), Ok(64 << 30));
        assert_eq!(byte_size("1T"), Ok(1 << 40));
        assert_eq!(byte_size("4096"), Ok(4096));
        for bad in ["", "G", "1.5G", "-1M", "1X", "99999999999999999999"] {
            assert!(byte_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn suffixes() {
        assert_eq!(int("64K"), Ok(65_536));
        assert_eq!(int("64KB"), Ok(65_536));
        assert_eq!(int("1M"), Ok(1_048_576));
        assert_eq!(int("1G"), Ok(1 << 30));
        assert_eq!(int("64k"), Ok(64_000));
        assert_eq!(int("3m"), Ok(3_000_000));
        assert_eq!(int("1g"), Ok(1_000_000_000));
        assert_eq!(int("1024"), Ok(1024));
        assert_eq!(int("-10000000"), Ok(-10_000_000));
        assert_eq!(int("+5"), Ok(5));
        assert_eq!(int(" 7 "), Ok(7));
    }

    #[test]
    fn trailing_words_as_netperfs_convert_reads_them() {
        // The leading number, then each suffix letter found anywhere, once.
        assert_eq!(int("80000:80000"), Ok(80_000));
        assert_eq!(int("64Kfoo"), Ok(65_536));
        assert_eq!(int("1.5K"), Ok(1024));
        assert_eq!(int("1Kk"), Ok(1_024_000));
        assert_eq!(int("1KK"), Ok(1024));
        assert_eq!(int("10x"), Ok(10));
        assert_eq!(int("0x100"), Ok(0));
        assert_eq!(int("007"), Ok(7));
        assert_eq!(atoi("8K"), Ok(8));
        assert_eq!(atoi("5,"), Ok(5));
    }

    #[test]
    fn what_netperf_would_read_as_zero_or_wrap_is_an_error() {
        for bad in [
            "",
            "abc",
            "K",
            "-",
            "2G",
            "3G",
            "10g",
            "2KM",
            "99999999999999999999",
        ] {
            assert!(int(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(int("abc").unwrap_err().to_string().contains("'abc'"));
        assert!(atoi("x1").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(u32_size("128K"), Ok(131_072));
        assert!(u32_size("-1").is_err());
        assert!(u32_size("5G").is_err());
        assert_eq!(port("12865"), Ok(12865));
        assert!(port("70000").is_err());
        assert!(port("1K").is_err());
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
        assert_eq!(float("99,"), Ok(99.0));
        assert_eq!(float(".5s"), Ok(0.5));
        assert_eq!(float("1e3x"), Ok(1000.0));
        assert_eq!(float("2e"), Ok(2.0));
        assert!(float("x").is_err());
        assert!(float("inf").is_err());
        assert!(float(".").is_err());
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
