//! netperf: the client program. It parses netperf 2.7's command line,
//! drives one test over the control connection, and prints what netperf
//! prints. The test's lifecycle is the client library's ([`client`],
//! re-exported here under the same module names); this crate adds what
//! only the program has: netperf's grammar, its tables, its pictures, the
//! netserver it embeds when none answers on loopback, and the words before
//! the options (`netperf plot`, `netperf mesh`, `netperf compare`).
//!
//! # Layout
//! - [`cli`]: netperf's grammar in two stages (global options, then test
//!   options after `--`), producing one validated plan
//!   ([`client::plan::Plan`]); `netperf mesh`'s test words as a typed
//!   third-party request.
//! - [`output`]: netperf 2.7's tables and selectors, handed to the client
//!   library's runs (`run::set_tables`), beside the library's results
//!   document.
//! - [`compare`]: `netperf compare`, two runs (or two setups run here,
//!   interleaved) judged SAME, SLOWER, FASTER or UNKNOWN.
//! - [`mesh`]: `netperf mesh`, a test between every ordered pair of a
//!   lab's netservers, run by the netservers themselves.
//! - [`plot`]: the pictures (`--plot`, `netperf plot`), drawn with
//!   plotters: the program's own, handed to the client library's runs
//!   (`run::set_plotter`), so that a netserver links no plotting library.
//! - the client library's modules, re-exported under their names.
//!
//! Dependencies run one way: `client` knows no netserver and no
//! presentation; `netperf` depends on `client` and on the netserver
//! library (embedding); `netserver` depends on `client` (third-party
//! tests, `--fleet`), not on this crate.

#![forbid(unsafe_code)]

pub mod cli;
pub mod compare;
pub mod mesh;
pub mod output;
pub mod plot;

pub use client::{
    confidence, control, debug, events, family, interim, interrupt, limits, plan, progress, report,
    rpm, run, third_party, under_load,
};

use std::process::ExitCode;

use cli::Invocation;

/// The netperf program, given its arguments (without the program name).
pub fn main_with(args: &[String]) -> ExitCode {
    // the pictures are this program's (`--plot`): a netserver draws none
    run::set_plotter(plot::reporter);
    // and so are netperf 2.7's tables
    run::set_tables(output::tables);
    // ours: `netperf compare ...` judges two runs, or runs two setups
    if let Some(("compare", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        control::set_embedder(embed);
        return compare::main(rest);
    }
    // ours: `netperf mesh ...` runs its tests on the netservers, and never
    // embeds one
    if let Some(("mesh", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        return match mesh::main(rest) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("netperf mesh: {e:#}");
                // (against a baseline, as compare's errors)
                ExitCode::from(if rest.iter().any(|a| a == "--baseline") {
                    4
                } else {
                    2
                })
            }
        };
    }
    control::set_embedder(embed);
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

/// The netserver this program starts in-process when none answers on
/// loopback.
#[derive(Debug)]
struct Embedded(netserver::Embedded);

impl control::EmbeddedServer for Embedded {
    fn addr(&self) -> std::net::SocketAddr {
        self.0.addr()
    }
}

fn embed(
    ip: std::net::IpAddr,
    key: Option<engine::auth::Key>,
) -> std::io::Result<Box<dyn control::EmbeddedServer>> {
    Ok(Box::new(Embedded(netserver::spawn_embedded(ip, key)?)))
}
