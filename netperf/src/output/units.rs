//! netperf's output units (`-f`).

use crate::cli::Units;

impl Units {
    /// The label in table titles (netperf's `format_units()`).
    pub fn label(self) -> &'static str {
        match self {
            Units::Bytes('B') => "Bytes",
            Units::Bytes('K') => "KBytes",
            Units::Bytes('M') => "MBytes",
            Units::Bytes('G') => "GBytes",
            Units::Bits('b') => "10^0bits",
            Units::Bits('k') => "10^3bits",
            Units::Bits('m') => "10^6bits",
            Units::Bits('g') => "10^9bits",
            Units::Transactions => "Trans",
            Units::Usec => "Usec",
            _ => "KBytes",
        }
    }

    /// `amount` (bytes, or transactions for [`Units::Transactions`]) over
    /// `secs`, in these units per second. Bits are bits: netperf 2.7's `-f b`
    /// prints bytes under a bits label; we do not.
    pub fn rate(self, amount: f64, secs: f64) -> f64 {
        if secs <= 0.0 {
            return 0.0;
        }
        // netperf 2.7's `-f u`: microseconds an amount (a transaction, or
        // for a stream test a byte), the inverse of the rate
        if self == Units::Usec {
            return if amount > 0.0 {
                secs * 1e6 / amount
            } else {
                0.0
            };
        }
        let per = match self {
            Units::Bytes('B') => 1.0,
            Units::Bytes('K') => 1024.0,
            Units::Bytes('M') => 1024.0 * 1024.0,
            Units::Bytes('G') => 1024.0 * 1024.0 * 1024.0,
            Units::Bits('b') => 1.0 / 8.0,
            Units::Bits('k') => 1000.0 / 8.0,
            Units::Bits('m') => 1e6 / 8.0,
            Units::Bits('g') => 1e9 / 8.0,
            Units::Transactions => 1.0,
            _ => 1024.0,
        };
        amount / per / secs
    }
}

/// C's `printf("%W.Pg", x)`: `p` significant digits, in fixed or
/// exponent notation, whichever C would pick, trailing zeros removed,
/// right-aligned in `w` characters.
pub fn c_g(x: f64, w: usize, p: usize) -> String {
    let p = p.max(1);
    let body = if x == 0.0 || !x.is_finite() {
        format!("{x}")
    } else {
        // The exponent after rounding to p significant digits.
        let e = format!("{:.*e}", p - 1, x);
        let exp: i32 = e
            .rsplit_once('e')
            .and_then(|(_, x)| x.parse().ok())
            .unwrap_or(0);
        if exp < -4 || exp >= p as i32 {
            let (mantissa, _) = e.split_once('e').unwrap_or((&e, ""));
            format!(
                "{}e{}{:02}",
                trim_zeros(mantissa),
                if exp < 0 { '-' } else { '+' },
                exp.unsigned_abs()
            )
        } else {
            let decimals = (p as i32 - 1 - exp).max(0) as usize;
            trim_zeros(&format!("{x:.decimals$}")).to_string()
        }
    };
    format!("{body:>w$}")
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_style_g() {
        assert_eq!(c_g(1_538_000_000.0, 6, 4), "1.538e+09");
        assert_eq!(c_g(1_572_864_000.0, 6, 4), "1.573e+09");
        assert_eq!(c_g(1234.0, 6, 4), "  1234");
        assert_eq!(c_g(12345.0, 6, 4), "1.234e+04");
        assert_eq!(c_g(0.5, 6, 4), "   0.5");
        assert_eq!(c_g(0.0, 6, 4), "     0");
        assert_eq!(c_g(100.0, 0, 6), "100");
    }

    #[test]
    fn rates() {
        assert_eq!(Units::Bits('m').rate(125_000_000.0, 1.0), 1000.0);
        assert_eq!(Units::Bits('g').rate(125_000_000.0, 1.0), 1.0);
        assert_eq!(Units::Bits('b').rate(1.0, 1.0), 8.0);
        assert_eq!(Units::Bytes('K').rate(2048.0, 2.0), 1.0);
        assert_eq!(Units::Bytes('M').rate(1048576.0, 1.0), 1.0);
        assert_eq!(Units::Transactions.rate(500.0, 0.5), 1000.0);
        assert_eq!(Units::Bits('m').rate(1.0, 0.0), 0.0);
    }

    #[test]
    fn labels() {
        assert_eq!(Units::Bits('m').label(), "10^6bits");
        assert_eq!(Units::Bytes('G').label(), "GBytes");
        assert_eq!(Units::Transactions.label(), "Trans");
    }
}
