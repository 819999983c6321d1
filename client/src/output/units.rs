//! How netperf prints a number: C's `%g`.

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
}
