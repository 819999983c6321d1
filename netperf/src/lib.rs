//! netperf: the client. It parses netperf 2.7's command line, drives one
//! test over the control connection, and prints what netperf prints.
//!
//! # Layout
//! - [`cli`]: the grammar, in two stages (global options, then test
//!   options after `--`), producing one validated [`cli::Plan`].
//! - [`control`]: the control connection ([`control::Control`], whichever
//!   protocol the netserver speaks), and the embedded netserver fallback.
//! - [`report`]: what a run measured ([`report::Measurement`], its
//!   figures) and what it tells as it goes ([`report::Observer`]).
//! - [`family`]: the one test lifecycle (`family::lifecycle`: prepare,
//!   request, connect the flows, timer, data phase, finish, check,
//!   measurement) and each family's part of it (stream, rr, crr, udp).
//! - [`under_load`], [`rpm`]: tests made of several of the family's runs
//!   (`--under-load`, `-t RPM`).
//! - [`run`]: one invocation from connection to output, iterations and
//!   confidence included, from a [`run::Source`] of measurements.
//! - [`output`]: the outputs, one [`output::Reporter`] each (the classic
//!   tables, selectors, JSON); [`events`] (`--json-stream`) and [`plot`]
//!   (`--plot`) are reporters too; [`events`], [`interim`] (`-D`'s lines)
//!   and [`progress`] observe the run as it goes.
//! - [`confidence`]: `-I`/`-i`; [`debug`]: `-d`: netperf 2.7's debug
//!   lines, and ours; [`interrupt`]: Ctrl-C ends a test early with its
//!   results.
//!
//! Dependencies go one way, with no circle between modules: `report`
//! knows none of its readers; `family` writes reports and knows no
//! output; `run` and the outputs read them.

#![forbid(unsafe_code)]

pub mod cli;
pub mod confidence;
pub mod control;
pub mod debug;
pub mod events;
pub mod family;
pub mod interim;
pub mod interrupt;
pub mod limits;
pub mod output;
pub mod plot;
pub mod progress;
pub mod report;
pub mod rpm;
pub mod run;
pub mod under_load;

use std::process::ExitCode;

use cli::Invocation;

/// The netperf program, given its arguments (without the program name).
pub fn main_with(args: &[String]) -> ExitCode {
    // ours: `netperf plot RUN.json [FILE.svg]` (netperf 2.7 has no words
    // before its options)
    if let Some(("plot", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        return match plot::main(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netperf: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let mut plan = match cli::parse(args) {
        Ok(Invocation::Help) => {
            print!("{}", cli::usage());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::TestHelp) => {
            print!("{}", cli::test_usage());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            println!("{}", cli::version());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::OurVersion) => {
            println!("{}", cli::our_version());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::ListSelectors { one_line, ours }) => {
            // netperf 2.7 lists them and exits with status 1
            use std::io::IsTerminal as _;
            let ours = ours || std::io::stdout().is_terminal();
            print!("{}", output::selectors::listing(one_line, ours));
            return ExitCode::from(1);
        }
        Ok(Invocation::Run(plan)) => plan,
        Err(e) => {
            eprintln!("netperf: {e}");
            eprintln!("Try 'netperf -h' for the options.");
            return ExitCode::from(2);
        }
    };
    // COMMAND_LINE names the program as it was run, as netperf 2.7's does.
    if let Some(argv0) = std::env::args().next() {
        plan.command_line = std::iter::once(argv0)
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
    }
    debug::set_level(plan.debug);
    interrupt::install();
    match run::run(&plan) {
        Ok(run::Outcome::Clean) => ExitCode::SUCCESS,
        // the figures are printed, with a warning on stderr
        Ok(run::Outcome::ForeignTraffic) => ExitCode::from(3),
        // stdout was closed (netperf | head): end quietly, with the status
        // a shell gives a process killed by SIGPIPE, as netperf 2.7 is.
        Err(e) if e.is::<output::StdoutClosed>() => ExitCode::from(141),
        // netperf 2.7's two lines on stdout and its status, then ours.
        Err(e) if e.is::<control::Unreachable>() => {
            if let Some(u) = e.downcast_ref::<control::Unreachable>() {
                use std::io::Write as _;
                let mut out = std::io::stdout();
                let _ = out.write_all(u.netperf_lines().as_bytes());
                let _ = out.flush();
            }
            eprintln!("netperf: {e:#}");
            ExitCode::from(255)
        }
        Err(e) => {
            eprintln!("netperf: {e:#}");
            ExitCode::FAILURE
        }
    }
}
