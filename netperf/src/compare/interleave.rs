//! `netperf compare --a ARGS --b ARGS`: both command lines run here, in
//! ABBA blocks (which goes first alternating block by block, so that a
//! drift of the machine falls on both alike), a sample each run, until
//! every figure is decided (SAME or a change) or `--max-time` has passed;
//! Ctrl-C gives the verdict so far.

use std::{
    io::IsTerminal,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow, bail};

use super::docs::Run;

/// Shell words: spaces split, quotes (single or double) keep them, a
/// backslash escapes the next character outside single quotes.
pub fn words(line: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let (mut cur, mut any, mut quote) = (String::new(), false, None::<char>);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(c),
            (_, '\\') => cur.push(
                chars
                    .next()
                    .ok_or_else(|| anyhow!("'{line}': ends in a backslash"))?,
            ),
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        bail!("'{line}': a quote is not closed");
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// A command line checked as netperf would parse it (its own error if
/// not), with `--json` added where it is not there.
fn checked(which: &str, line: &str) -> Result<Vec<String>> {
    let mut args = words(line)?;
    if args.first().map(String::as_str) == Some("netperf") {
        args.remove(0);
    }
    match crate::cli::parse(&args) {
        Ok(crate::cli::Invocation::Run(_)) => {}
        Ok(_) => bail!("{which} '{line}': asks for no test"),
        Err(e) => bail!("{which} '{line}': {e}"),
    }
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    if !args[..at].iter().any(|a| a == "--json") {
        args.insert(at, "--json".into());
    }
    Ok(args)
}

/// One run of netperf with `args`: its document.
fn sample(args: &[String], which: &str) -> Result<serde_json::Value> {
    let exe = std::env::current_exe().map_err(|e| anyhow!("this program's path: {e}"))?;
    let out = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow!("{which}: cannot run netperf: {e}"))?;
    if !out.status.success() {
        bail!(
            "{which}: netperf {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).map_err(|e| anyhow!("{which}: netperf's document: {e}"))
}

/// Run A and B in ABBA blocks until the rule decides every figure, or
/// `max_secs`, or Ctrl-C.
pub fn run(a: &str, b: &str, effect: f64, max_secs: u64) -> Result<(Run, Run)> {
    let (args_a, args_b) = (checked("--a", a)?, checked("--b", b)?);
    let stop = engine::timer::StopFlag::new();
    client::interrupt::install();
    let _guard = client::interrupt::stop_on_interrupt(&stop);
    let (mut base, mut new) = (Run::default(), Run::default());
    let (start, limit) = (Instant::now(), Duration::from_secs(max_secs));
    let tty = std::io::stderr().is_terminal();
    for block in 0.. {
        let order = if block % 2 == 0 {
            [0, 1, 1, 0]
        } else {
            [1, 0, 0, 1]
        };
        for side in order {
            if stop.is_set() || start.elapsed() >= limit {
                break;
            }
            let (args, run, which) = if side == 0 {
                (&args_a, &mut base, "--a")
            } else {
                (&args_b, &mut new, "--b")
            };
            let doc = sample(args, which);
            // a run that Ctrl-C cut short is no sample of its setup
            if stop.is_set() {
                break;
            }
            run.add(&doc?, which)?;
        }
        let decided = decided(&base, &new, effect);
        if tty {
            eprint!(
                "\rnetperf compare: {} samples of each, {:.0} s{}",
                base.headline.len().min(new.headline.len()),
                start.elapsed().as_secs_f64(),
                if decided { ", decided      \n" } else { "   " }
            );
        }
        if decided || stop.is_set() || start.elapsed() >= limit {
            break;
        }
    }
    if base.headline.is_empty() || new.headline.is_empty() {
        bail!("no sample of both sides (stopped at once)");
    }
    Ok((base, new))
}

/// Whether every figure is SAME or changed (at least 3 samples a side).
fn decided(base: &Run, new: &Run, effect: f64) -> bool {
    if base.headline.len() < 3 || new.headline.len() < 3 {
        return false;
    }
    super::judge(base, new, effect).is_ok_and(|j| j.iter().all(|j| j.verdict != "UNKNOWN"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_as_a_shell_splits_them() {
        assert_eq!(
            words(r#"-H host -t TCP_RR -- -r "64, 64" -o 'A B' x\ y"#).unwrap(),
            vec![
                "-H", "host", "-t", "TCP_RR", "--", "-r", "64, 64", "-o", "A B", "x y"
            ]
        );
        assert_eq!(words("  a  ''  b ").unwrap(), vec!["a", "", "b"]);
        assert!(words("'open").is_err());
    }

    #[test]
    fn a_line_netperf_refuses_is_its_error() {
        let e = checked("--a", "-t NO_SUCH_TEST").unwrap_err().to_string();
        assert!(e.contains("--a") && e.contains("NO_SUCH_TEST"), "{e}");
        let ok = checked("--b", "netperf -l 1 -- -m 1K").unwrap();
        assert_eq!(ok, vec!["-l", "1", "--json", "--", "-m", "1K"]);
    }
}
