//! netperf's grammar in two stages: global options, then, after `--`, the
//! test-specific options. Raw words become one validated [`Plan`] (the
//! client library's domain value, [`client::plan`]); nothing downstream
//! looks at the command line again. The grammar is the netperf program's
//! alone: a netserver links none of it.
//!
//! # Layout
//! - this file: [`parse`], the help texts, [`Invocation`].
//! - [`global`], [`test_opts`]: the two option tables and how each option
//!   sets the plan; [`values`]: reading a value as netperf 2.7 reads it.
//! - [`third_party`]: `netperf mesh`'s test words as the typed
//!   third-party request a netserver runs.

pub mod global;
pub mod test_opts;
pub mod third_party;
pub mod values;

pub use client::plan::{self, test_name};
pub use plan::{
    AuthSource, Confidence, DEFAULT_PORT, DialectChoice, Length, LocalOnly, MAX_FLOWS, OneWayAsk,
    Plan, RPM_LOAD, RPM_MAX_FLOWS, Selection, SelectorStyle, TestName, UnderLoad, Units,
};
pub use values::CliError;

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    Help,
    TestHelp,
    Version,
    /// `--version`.
    OurVersion,
    /// `-o ?` and `-k ?` (one line), `-O ?` (one per line): list the
    /// output selectors; with ours too at `-v 3` and above.
    ListSelectors {
        one_line: bool,
        ours: bool,
    },
    Run(Box<Plan>),
}

pub fn usage() -> String {
    let tests: Vec<String> = TestName::ALL
        .iter()
        .map(|t| format!("  {:<13} {}", t.name(), t.describe()))
        .collect();
    format!(
        "Usage: netperf [global options] -- [test options]\n\nGlobal options:\n{}\n\
         For options taking two values: a lone value sets both (or only the first\n\
         where noted), 'a,' sets the first, ',b' the second.\n\n\
         Tests (-t):\n{}\n\n\
         Piped output has netperf 2.7's lines exactly; on a terminal, and at -v 3,\n\
         this netperf adds its own (UDP loss, latency percentiles, confidence).\n\
         Test options: netperf -t TEST -- -h\n\n\
         Also: netperf plot RUN.json [FILE.svg] draws a saved --json run;\n\
         netperf mesh --hosts H1,H2,... tests every pair of netservers (netperf mesh --help).\n",
        optparse::help(global::OPTIONS),
        tests.join("\n")
    )
}

pub fn test_usage() -> String {
    let tests: Vec<&str> = TestName::ALL.iter().map(|t| t.name()).collect();
    format!(
        "Usage: netperf [global options] -- [test options]\n\nTest options:\n{}\n         Tests: {}.\n         TCP_SENDFILE, TCP_CC and TCP_MSS take no -d, -T, -t, -o, -O, -k, -u (netperf 2.7's\n         classic tests); LOC_CPU and REM_CPU take no test options.\n",
        optparse::help(test_opts::OPTIONS),
        tests.join(", ")
    )
}

/// `-V`: netperf 2.7's one line, which scripts test.
pub fn version() -> String {
    "Netperf version 2.7.1".to_string()
}

/// `--version`: ours, and the control protocol's.
pub fn our_version() -> String {
    format!(
        "rsnetperf {}, control protocol version {}",
        env!("CARGO_PKG_VERSION"),
        proto::PROTOCOL_VERSION
    )
}

/// Parse the arguments (without the program name).
pub fn parse(args: &[String]) -> Result<Invocation, CliError> {
    let command_line = std::iter::once("netperf".to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let global = optparse::parse(global::OPTIONS, args).map_err(|e| CliError(e.to_string()))?;
    let mut plan = Plan::new(command_line);
    if let Some(inv) = global::apply(&global, &mut plan)? {
        return Ok(inv);
    }
    let after = global.after_dashdash.clone().unwrap_or_default();
    // LOC_CPU and REM_CPU read nothing after `--`, as netperf 2.7.
    if !matches!(plan.name, TestName::LocCpu | TestName::RemCpu) {
        let (test, warnings) = optparse::parse_lenient(test_opts::OPTIONS, &after)
            .map_err(|e| CliError(e.to_string()))?;
        for w in warnings {
            // netperf 2.7's getopt complains and its test goes on, reading
            // the bad option as -4.
            plan.warnings.push(format!(
                "warning: {w} after --, ignored (netperf 2.7 reads it as -4: an IPv4 data connection)"
            ));
        }
        if let Some(inv) = test_opts::apply(&test, &mut plan)? {
            return Ok(inv);
        }
    }
    plan::finish(&mut plan)?;
    Ok(Invocation::Run(Box::new(plan)))
}

/// Tests: the plan a command line (without the program name) parses to.
#[cfg(test)]
pub(crate) fn test_plan(words: &[&str]) -> Plan {
    let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
    match parse(&v) {
        Ok(Invocation::Run(p)) => *p,
        other => panic!("{words:?}: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
