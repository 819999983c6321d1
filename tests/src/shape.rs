//! The shape of netperf's output: its lines, fields and words, with the
//! numbers masked, so that our output can be held line for line against
//! netperf 2.7's (the fixtures under `tests/fixtures/netperf-2.7/`,
//! captured from a netperf 2.7.1 built from its public repository).
//!
//! Masked: every number (`12.34`, `-1`, `1.538e+09`, `-nan`), an address in
//! parentheses (netperf 2.7 prints `()` for addresses longer than 7
//! characters; we print the address), a UUID, and a double-quoted string
//! (the command line). Fields are split at white space and at commas (the
//! CSV of `-o`). netperf 2.7's `!!! WARNING` block is left out of both:
//! whether confidence was reached depends on the run.

/// One line's words, masked.
pub type Line = Vec<String>;

pub fn shape(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut in_warning = false;
    for line in text.split('\n') {
        if line.starts_with("!!!") {
            in_warning = true;
            continue;
        }
        if in_warning {
            in_warning = false;
            if line.is_empty() {
                continue;
            }
        }
        out.push(words(&unquote(line)));
    }
    out
}

/// `"anything"` becomes `"Q"`.
fn unquote(line: &str) -> String {
    let mut s = String::with_capacity(line.len());
    let mut quoted = false;
    for c in line.chars() {
        match (c, quoted) {
            ('"', false) => {
                quoted = true;
                s.push_str("\"Q");
            }
            ('"', true) => {
                quoted = false;
                s.push('"');
            }
            (_, true) => {}
            (c, false) => s.push(c),
        }
    }
    s
}

fn words(line: &str) -> Line {
    line.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(mask)
        .collect()
}

fn mask(w: &str) -> String {
    if let Some((k, v)) = w.split_once('=')
        && !k.is_empty()
    {
        return format!("{k}={}", if v.is_empty() { String::new() } else { mask(v) });
    }
    if let Some(body) = w.strip_suffix(['?', ':', ';'])
        && is_number(body)
    {
        return format!("N{}", &w[body.len()..]);
    }
    if is_number(w) {
        return "N".into();
    }
    if w.starts_with('(') && w.ends_with(')') {
        return "(A)".into();
    }
    if is_uuid(w) {
        return "UUID".into();
    }
    w.to_string()
}

fn is_number(w: &str) -> bool {
    let t = w.strip_suffix('%').unwrap_or(w);
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    if matches!(t, "nan" | "inf") {
        return true;
    }
    let (mantissa, exp) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (t, None),
    };
    let digits = mantissa.chars().filter(|c| c.is_ascii_digit()).count();
    let ok_mantissa = digits > 0
        && mantissa.chars().all(|c| c.is_ascii_digit() || c == '.')
        && mantissa.matches('.').count() <= 1;
    let ok_exp = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    ok_mantissa && ok_exp
}

fn is_uuid(w: &str) -> bool {
    let parts: Vec<&str> = w.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Where two outputs differ in shape: the first differing line of each,
/// numbered from 1, or `None` when they have the same shape.
pub fn first_difference(want: &str, got: &str) -> Option<(usize, String, String)> {
    let (a, b) = (shape(want), shape(got));
    let n = a.len().max(b.len());
    (0..n).find_map(|i| {
        let (x, y) = (a.get(i), b.get(i));
        (x != y).then(|| {
            let show = |l: Option<&Line>| l.map_or_else(|| "(no line)".into(), |l| l.join(" "));
            (i + 1, show(x), show(y))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_addresses_and_quotes_are_masked() {
        let a = "MIGRATED TCP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to 127.0.0.1 () port 0 AF_INET : demo\n\
                 131072  16384  16384    1.00     6340.50   \n\
                 COMMAND_LINE=\"netperf -H x\"\n1.538e+09 -nan 0xffffffff a,b,,c";
        let b = "MIGRATED TCP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to 127.0.0.1 (127.0.0.1) port 0 AF_INET : demo\n\
                 87380 16384 65536 10.00 99.9\n\
                 COMMAND_LINE=\"/usr/bin/netperf -H y -l 1\"\n3 0.00 0xffffffff a,b,c";
        assert_eq!(first_difference(a, b), None);
        assert!(first_difference("x 1\n", "x 1 2\n").is_some());
        assert!(first_difference("Lost 1\n", "Lost 1\nmore\n").is_some());
        assert!(first_difference("TCP\n", "UDP\n").is_some());
    }

    #[test]
    fn the_confidence_warning_is_left_out() {
        let warned = "banner\n!!! WARNING\n!!! more\n\nrow 1\n";
        assert_eq!(first_difference(warned, "banner\nrow 2\n"), None);
    }
}
