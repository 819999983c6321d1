//! A getopt-compatible parser driven by a table of option definitions.

use thiserror::Error;

/// How an option takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// A flag.
    None,
    /// A value: the rest of the word (`-l10`) or the next word (`-l 10`),
    /// whatever that word looks like (`-l -10`).
    Required,
    /// netperf's `-c [rate]`: the next word is the value only if it starts
    /// with a digit and the option ends its word.
    OptionalNumeric,
    /// netperf's `-k [list]`: a glued value, or the next word unless it
    /// starts with `-`.
    OptionalWord,
}

/// One option of a command.
#[derive(Clone, Copy, Debug)]
pub struct OptDef {
    /// Identifier used by the caller to match parsed options.
    pub id: &'static str,
    pub short: Option<char>,
    pub long: Option<&'static str>,
    pub arity: Arity,
    /// Name of the value in help (`secs`, `send,recv`).
    pub value_name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Hidden options are accepted for netperf compatibility but not shown.
    pub hidden: bool,
}

impl OptDef {
    pub const fn flag(id: &'static str, short: char, help: &'static str) -> OptDef {
        OptDef {
            id,
            short: Some(short),
            long: None,
            arity: Arity::None,
            value_name: "",
            help,
            hidden: false,
        }
    }

    pub const fn value(
        id: &'static str,
        short: char,
        value_name: &'static str,
        help: &'static str,
    ) -> OptDef {
        OptDef {
            id,
            short: Some(short),
            long: None,
            arity: Arity::Required,
            value_name,
            help,
            hidden: false,
        }
    }

    /// A long name besides the short one (`-h`, `--help`).
    pub const fn with_long(mut self, long: &'static str) -> OptDef {
        self.long = Some(long);
        self
    }

    pub const fn with_arity(mut self, arity: Arity) -> OptDef {
        self.arity = arity;
        self
    }

    /// An optional value's name in help (`-c [rate]`).
    pub const fn with_value_name(mut self, value_name: &'static str) -> OptDef {
        self.value_name = value_name;
        self
    }

    pub const fn long_only(
        id: &'static str,
        long: &'static str,
        arity: Arity,
        value_name: &'static str,
        help: &'static str,
    ) -> OptDef {
        OptDef {
            id,
            short: None,
            long: Some(long),
            arity,
            value_name,
            help,
            hidden: false,
        }
    }

    pub const fn hidden(mut self) -> OptDef {
        self.hidden = true;
        self
    }

    /// How the option is written in messages: `-l` or `--json`.
    pub fn display(&self) -> String {
        match (self.short, self.long) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => self.id.to_string(),
        }
    }
}

/// What went wrong parsing a command line.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OptError {
    #[error("unknown option {0}")]
    Unknown(String),
    #[error("option {0} needs a value")]
    MissingValue(String),
    #[error("option {0} takes no value")]
    UnexpectedValue(String),
}

/// One option as it appeared, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub id: &'static str,
    /// How the user wrote it (`-l`, `--rate`), for error messages.
    pub spelled: String,
    pub value: Option<String>,
}

/// The result of parsing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Options in command-line order; later ones override earlier ones.
    pub options: Vec<Occurrence>,
    /// Words that are not options (getopt permutes them out of the way).
    pub operands: Vec<String>,
    /// Everything after `--`, when `--` was present.
    pub after_dashdash: Option<Vec<String>>,
}

impl Parsed {
    /// The last occurrence of an option, as netperf's "last one wins".
    pub fn last(&self, id: &str) -> Option<&Occurrence> {
        self.options.iter().rev().find(|o| o.id == id)
    }

    pub fn has(&self, id: &str) -> bool {
        self.options.iter().any(|o| o.id == id)
    }
}

/// Parse `args` (without the program name) against `defs`.
pub fn parse(defs: &[OptDef], args: &[String]) -> Result<Parsed, OptError> {
    parse_with(defs, args, false).map(|(p, _)| p)
}

/// The id of the occurrence [`parse_lenient`] records where an unknown
/// option or a missing value was.
pub const BAD_OPTION: &str = "?";

/// Parse as netperf 2.7 parses its test-specific options: an unknown short
/// option, or one missing its value, is not fatal. getopt reports it and
/// returns '?', and netperf goes on; here it is returned as a warning and
/// leaves an occurrence with the id [`BAD_OPTION`] in its place, so that
/// the caller can give it netperf's meaning. Unknown long options (ours)
/// are still errors.
pub fn parse_lenient(
    defs: &[OptDef],
    args: &[String],
) -> Result<(Parsed, Vec<OptError>), OptError> {
    parse_with(defs, args, true)
}

fn parse_with(
    defs: &[OptDef],
    args: &[String],
    lenient: bool,
) -> Result<(Parsed, Vec<OptError>), OptError> {
    let mut warnings = Vec::new();
    let mut bad = |out: &mut Parsed, e: OptError| -> Result<(), OptError> {
        if !lenient {
            return Err(e);
        }
        let spelled = match &e {
            OptError::Unknown(s) | OptError::MissingValue(s) | OptError::UnexpectedValue(s) => {
                s.clone()
            }
        };
        out.options.push(Occurrence {
            id: BAD_OPTION,
            spelled,
            value: None,
        });
        warnings.push(e);
        Ok(())
    };
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        if word == "--" {
            out.after_dashdash = Some(args[i..].to_vec());
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            out.options.push(long_option(defs, long, args, &mut i)?);
            continue;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) else {
            // "foo" or a lone "-": not an option; getopt permutes it away.
            out.operands.push(word.clone());
            continue;
        };
        for (pos, c) in cluster.char_indices() {
            let spelled = format!("-{c}");
            let Some(def) = defs.iter().find(|d| d.short == Some(c)) else {
                bad(&mut out, OptError::Unknown(spelled))?;
                continue;
            };
            let rest = &cluster[pos + c.len_utf8()..];
            let value = match def.arity {
                Arity::None => None,
                Arity::Required => {
                    let v = if !rest.is_empty() {
                        rest.to_string()
                    } else {
                        let Some(v) = args.get(i) else {
                            bad(&mut out, OptError::MissingValue(spelled))?;
                            break;
                        };
                        i += 1;
                        v.clone()
                    };
                    out.options.push(Occurrence {
                        id: def.id,
                        spelled,
                        value: Some(v),
                    });
                    break;
                }
                Arity::OptionalNumeric => {
                    if rest.is_empty() {
                        take_if(args, &mut i, starts_digit)
                    } else {
                        None
                    }
                }
                Arity::OptionalWord => {
                    if !rest.is_empty() {
                        out.options.push(Occurrence {
                            id: def.id,
                            spelled,
                            value: Some(rest.to_string()),
                        });
                        break;
                    }
                    take_if(args, &mut i, not_option)
                }
            };
            out.options.push(Occurrence {
                id: def.id,
                spelled,
                value,
            });
        }
    }
    Ok((out, warnings))
}

/// `--name`, `--name=value` or `--name value` (`long` without its
/// dashes; `i` past it, and past a value taken from the next word).
fn long_option(
    defs: &[OptDef],
    long: &str,
    args: &[String],
    i: &mut usize,
) -> Result<Occurrence, OptError> {
    let (name, glued) = match long.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (long, None),
    };
    let def = defs
        .iter()
        .find(|d| d.long == Some(name))
        .ok_or_else(|| OptError::Unknown(format!("--{name}")))?;
    let spelled = format!("--{name}");
    let value = match def.arity {
        Arity::None => {
            if glued.is_some() {
                return Err(OptError::UnexpectedValue(spelled));
            }
            None
        }
        Arity::Required => match glued {
            Some(v) => Some(v),
            None => {
                let v = args
                    .get(*i)
                    .ok_or_else(|| OptError::MissingValue(spelled.clone()))?;
                *i += 1;
                Some(v.clone())
            }
        },
        Arity::OptionalNumeric => glued.or_else(|| take_if(args, i, starts_digit)),
        Arity::OptionalWord => glued.or_else(|| take_if(args, i, not_option)),
    };
    Ok(Occurrence {
        id: def.id,
        spelled,
        value,
    })
}

fn starts_digit(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

fn not_option(s: &str) -> bool {
    !s.starts_with('-')
}

fn take_if(args: &[String], i: &mut usize, pred: fn(&str) -> bool) -> Option<String> {
    let next = args.get(*i).filter(|w| pred(w))?;
    *i += 1;
    Some(next.clone())
}

/// Help text for a table of options, one line each, hidden ones left out.
pub fn help(defs: &[OptDef]) -> String {
    let rows: Vec<(String, &str)> = defs
        .iter()
        .filter(|d| !d.hidden)
        .map(|d| {
            let mut names = Vec::new();
            if let Some(c) = d.short {
                names.push(format!("-{c}"));
            }
            if let Some(l) = d.long {
                names.push(format!("--{l}"));
            }
            let mut left = names.join(", ");
            match d.arity {
                Arity::None => {}
                Arity::Required => {
                    left.push(' ');
                    left.push_str(d.value_name);
                }
                Arity::OptionalNumeric | Arity::OptionalWord => {
                    left.push_str(&format!(" [{}]", d.value_name));
                }
            }
            (left, d.help)
        })
        .collect();
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0).min(26);
    let mut out = String::new();
    for (left, text) in rows {
        if left.len() > width {
            out.push_str(&format!("    {left}\n    {:width$}  {text}\n", ""));
        } else {
            out.push_str(&format!("    {left:width$}  {text}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFS: &[OptDef] = &[
        OptDef::value("length", 'l', "secs", "test length"),
        OptDef::value("headers", 'P', "0|1", "headers"),
        OptDef::flag("v4", '4', "IPv4"),
        OptDef::flag("v6", '6', "IPv6"),
        OptDef::flag("local_cpu", 'c', "cpu").with_arity(Arity::OptionalNumeric),
        OptDef::flag("remote_cpu", 'C', "cpu").with_arity(Arity::OptionalNumeric),
        OptDef::flag("keyval", 'k', "keyval").with_arity(Arity::OptionalWord),
        OptDef::long_only("json", "json", Arity::None, "", "json"),
        OptDef::long_only("rate", "rate", Arity::Required, "bps", "rate"),
    ];

    fn p(words: &[&str]) -> Result<Parsed, OptError> {
        let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        parse(DEFS, &v)
    }

    fn val<'a>(p: &'a Parsed, id: &str) -> Option<&'a str> {
        p.last(id).and_then(|o| o.value.as_deref())
    }

    #[test]
    fn glued_and_separate_values() {
        assert_eq!(val(&p(&["-l10"]).unwrap(), "length"), Some("10"));
        assert_eq!(val(&p(&["-l", "10"]).unwrap(), "length"), Some("10"));
        assert_eq!(val(&p(&["-P0"]).unwrap(), "headers"), Some("0"));
    }

    #[test]
    fn negative_numbers_are_values() {
        assert_eq!(val(&p(&["-l", "-1000"]).unwrap(), "length"), Some("-1000"));
    }

    #[test]
    fn last_one_wins() {
        assert_eq!(
            val(&p(&["-l", "1", "-l", "2"]).unwrap(), "length"),
            Some("2")
        );
    }

    #[test]
    fn clusters() {
        let r = p(&["-46cC"]).unwrap();
        assert!(r.has("v4") && r.has("v6") && r.has("local_cpu") && r.has("remote_cpu"));
        let r = p(&["-4l5"]).unwrap();
        assert_eq!(val(&r, "length"), Some("5"));
    }

    #[test]
    fn optional_numeric_values() {
        let r = p(&["-c", "100", "-C"]).unwrap();
        assert_eq!(val(&r, "local_cpu"), Some("100"));
        assert_eq!(r.last("remote_cpu").unwrap().value, None);
        let r = p(&["-c", "-C", "200"]).unwrap();
        assert_eq!(r.last("local_cpu").unwrap().value, None);
        assert_eq!(val(&r, "remote_cpu"), Some("200"));
        // "foo" is not a rate; it is a stray word.
        let r = p(&["-c", "foo"]).unwrap();
        assert_eq!(r.last("local_cpu").unwrap().value, None);
        assert_eq!(r.operands, vec!["foo"]);
        // in the middle of a cluster, -c takes nothing
        let r = p(&["-cC", "5"]).unwrap();
        assert_eq!(r.last("local_cpu").unwrap().value, None);
        assert_eq!(val(&r, "remote_cpu"), Some("5"));
    }

    #[test]
    fn optional_word_values() {
        let r = p(&["-k", "THROUGHPUT,MIN_LATENCY"]).unwrap();
        assert_eq!(val(&r, "keyval"), Some("THROUGHPUT,MIN_LATENCY"));
        let r = p(&["-k", "-4"]).unwrap();
        assert_eq!(r.last("keyval").unwrap().value, None);
        assert!(r.has("v4"));
        let r = p(&["-kTHROUGHPUT"]).unwrap();
        assert_eq!(val(&r, "keyval"), Some("THROUGHPUT"));
    }

    #[test]
    fn stray_words_and_dashdash() {
        let r = p(&["foo", "-l", "3", "bar", "--", "-m", "64K"]).unwrap();
        assert_eq!(r.operands, vec!["foo", "bar"]);
        assert_eq!(
            r.after_dashdash,
            Some(vec!["-m".to_string(), "64K".to_string()])
        );
        let r = p(&["-l", "3"]).unwrap();
        assert_eq!(r.after_dashdash, None);
    }

    #[test]
    fn long_options() {
        let r = p(&["--json", "--rate=10m"]).unwrap();
        assert!(r.has("json"));
        assert_eq!(val(&r, "rate"), Some("10m"));
        assert_eq!(val(&p(&["--rate", "5g"]).unwrap(), "rate"), Some("5g"));
        assert_eq!(
            p(&["--json=1"]),
            Err(OptError::UnexpectedValue("--json".into()))
        );
    }

    #[test]
    fn errors_name_the_option() {
        assert_eq!(p(&["-x"]), Err(OptError::Unknown("-x".into())));
        assert_eq!(p(&["-l"]), Err(OptError::MissingValue("-l".into())));
        assert_eq!(p(&["--nope"]), Err(OptError::Unknown("--nope".into())));
        assert_eq!(p(&["--rate"]), Err(OptError::MissingValue("--rate".into())));
    }
}
