//! Reading one option's value as netperf 2.7 reads it, and the one-line
//! error that names the option at fault.

use optparse::value::{self, AddrFamily, ValueError};

/// A command-line error: one line naming the option at fault (the plan's
/// own error: the checks of a whole plan are the client library's).
pub use client::plan::PlanError as CliError;

pub(crate) fn bad(opt: &str, e: ValueError) -> CliError {
    CliError(format!("{opt}: {e}"))
}

/// One line saying what a word that is not a clean number was taken as,
/// as netperf 2.7 reads it.
pub(crate) fn taken(
    o: &str,
    s: &str,
    clean: bool,
    as_what: impl std::fmt::Display,
    w: &mut Vec<String>,
) {
    if !clean {
        warn(
            w,
            format!(
                "warning: {o} '{s}' is not a clean number: taken as {as_what}, as netperf 2.7 reads it"
            ),
        );
    }
}

/// A warning, once however often the option or value repeats (a lone
/// value of a pair sets both sides).
pub(crate) fn warn(w: &mut Vec<String>, line: String) {
    if !w.contains(&line) {
        w.push(line);
    }
}

/// netperf 2.7's `convert()` of an option's value (see [`taken`]).
pub(crate) fn num(o: &str, s: &str, w: &mut Vec<String>) -> Result<i64, CliError> {
    let r = value::convert(s).map_err(|e| bad(o, e))?;
    taken(o, s, r.clean, r.value, w);
    Ok(r.value)
}

/// C's `atoi` of an option's value (see [`taken`]).
pub(crate) fn atoi(o: &str, s: &str, w: &mut Vec<String>) -> Result<i64, CliError> {
    let r = value::atoi_lenient(s).map_err(|e| bad(o, e))?;
    taken(o, s, r.clean, r.value, w);
    Ok(r.value)
}

/// [`num`] for a size or count: what does not fit a `u32` is refused (2.7
/// would wrap or crash on it), a negative only where `negative` says what
/// it means (`None`: refused).
pub(crate) fn unsigned(o: &str, s: &str, w: &mut Vec<String>) -> Result<u32, CliError> {
    let n = num(o, s, w)?;
    u32::try_from(n).map_err(|_| {
        CliError(if n < 0 {
            format!("{o}: '{s}' must not be negative")
        } else {
            format!("{o}: '{s}' is more than {}", u32::MAX)
        })
    })
}

/// A port as netperf 2.7 gives it to getaddrinfo: digits (wrapped past
/// 65535) or a service name.
pub(crate) fn port_of(o: &str, s: &str, w: &mut Vec<String>) -> Result<u16, CliError> {
    let r = value::service_port(s).map_err(|e| bad(o, e))?;
    if !r.clean {
        warn(
            w,
            format!(
                "warning: {o} '{s}': port {}, as netperf 2.7's getaddrinfo reads it",
                r.value
            ),
        );
    }
    Ok(r.value)
}

/// An address family after a comma; netperf 2.7 warns about a word it does
/// not know and goes on with either family.
pub(crate) fn family_of(o: &str, s: &str, w: &mut Vec<String>) -> AddrFamily {
    value::address_family(s).unwrap_or_else(|e| {
        warn(
            w,
            format!("warning: {o}: {e}; either family, as netperf 2.7 goes on"),
        );
        AddrFamily::Unspec
    })
}

/// A value with netperf's `convert()`, as a u32 that must not be negative.
pub(crate) fn size(o: &str, s: &str) -> Result<u32, CliError> {
    value::u32_size(s).map_err(|e| bad(o, e))
}

/// IP TOS as netperf's `parse_ipqos` reads it: a DSCP name (`ef`, `af11`
/// to `af43`, `cs0` to `cs7`) or one of the old TOS names, else a number in
/// C's notation (decimal, 0x hex, 0 octal), 0 to 255, the whole byte (ECN
/// bits included). netperf 2.7 sets it only when it is more than 0, so 0
/// means "leave it", as `None` here.
pub(crate) fn tos(opt: &str, s: &str, warnings: &mut Vec<String>) -> Option<u8> {
    const NAMES: &[(&str, u8)] = &[
        ("af11", 0x28),
        ("af12", 0x30),
        ("af13", 0x38),
        ("af21", 0x48),
        ("af22", 0x50),
        ("af23", 0x58),
        ("af31", 0x68),
        ("af32", 0x70),
        ("af33", 0x78),
        ("af41", 0x88),
        ("af42", 0x90),
        ("af43", 0x98),
        ("cs0", 0x00),
        ("cs1", 0x20),
        ("cs2", 0x40),
        ("cs3", 0x60),
        ("cs4", 0x80),
        ("cs5", 0xa0),
        ("cs6", 0xc0),
        ("cs7", 0xe0),
        ("ef", 0xb8),
        ("lowdelay", 0x10),
        ("throughput", 0x08),
        ("reliability", 0x04),
    ];
    let t = s.trim();
    let v = NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(t))
        .map(|&(_, v)| u32::from(v))
        .or_else(|| {
            if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u32::from_str_radix(h, 16).ok()
            } else if t.len() > 1 && t.starts_with('0') {
                u32::from_str_radix(&t[1..], 8).ok()
            } else {
                t.parse::<u32>().ok()
            }
        })
        .filter(|&v| v <= 255);
    match v {
        Some(v) => (v > 0).then_some(v as u8),
        None => {
            // netperf 2.7 leaves the TOS unset, without a word
            warn(
                warnings,
                format!(
                    "warning: {opt} '{s}' is not a TOS byte (0 to 255 in decimal, 0x hex or 0 octal, or a name: ef, af11..af43, cs0..cs7, lowdelay, throughput, reliability): not set, as netperf 2.7 leaves it"
                ),
            );
            None
        }
    }
}

/// `--cpus 0,2,4-7`: CPU numbers, each one that exists on this host.
pub(crate) fn cpu_list(o: &str, v: &str) -> Result<Vec<u32>, CliError> {
    let have = engine::cpu::count();
    let mut out = Vec::new();
    for part in v.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| CliError(format!("{o}: '{part}' is not a CPU number or range")))
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if a > b {
            return Err(CliError(format!("{o}: '{part}' is not a range")));
        }
        for c in a..=b {
            if c >= have {
                return Err(CliError(format!(
                    "{o}: CPU {c} does not exist (this host has CPUs 0 to {})",
                    have.saturating_sub(1)
                )));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(CliError(format!("{o}: '{v}' names no CPU")));
    }
    Ok(out)
}

/// `-H addr/len`: netperf 2.7 randomises the address within the mask;
/// we take the address.
pub(crate) fn strip_mask(h: &str) -> &str {
    h.split_once('/').map_or(h, |(a, _)| a)
}

/// An option in a table that no handler takes: a bug, caught by a test.
pub(crate) fn unhandled(id: &str) -> CliError {
    CliError(format!("internal error: option '{id}' has no handler"))
}
