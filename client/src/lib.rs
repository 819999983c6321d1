//! The client as a library: the one test lifecycle, what a run measured
//! and its results document. The `netperf` program is a layer over it
//! (netperf's command line and its tables are the program's);
//! `netserver --fleet` uses it to run a third-party test against another
//! netserver, in process, and links none of the program's presentation.
//!
//! # Layout
//! - [`plan`]: the domain test value, one validated [`plan::Plan`], which
//!   each speaker produces (netperf's grammar, in the netperf program; a
//!   typed third-party request, [`third_party`]) and the families consume;
//!   the checks of a whole plan.
//! - [`control`]: the control connection ([`control::Control`], whichever
//!   protocol the netserver speaks); an embedded netserver stands in on
//!   loopback only when the program gave a starter
//!   ([`control::set_embedder`]).
//! - [`report`]: what a run measured ([`report::Measurement`], its
//!   figures) and what it tells as it goes ([`report::Observer`]).
//! - [`family`]: the one test lifecycle (`family::lifecycle`: prepare,
//!   request, connect the flows, timer, data phase, finish, check,
//!   measurement) and each family's part of it (stream, rr, crr, udp).
//! - [`under_load`], [`rpm`]: tests made of several of the family's runs
//!   (`--under-load`, `-t RPM`); [`rfc_stamp`]: `-t STAMP`, a STAMP
//!   Session-Sender to any reflector, a [`source::Source`] of its own.
//! - [`run`]: one invocation from connection to output, iterations and
//!   confidence included, from a [`source::Source`] of measurements
//!   ([`source`]: the trait alone, which `run` and `rfc_stamp` share).
//! - [`output`]: the [`output::Reporter`] seam, where output goes, and the
//!   results document (`--json`, a third-party test's answer); netperf
//!   2.7's tables and selectors are the netperf program's, handed to
//!   [`run::set_tables`], and so is the picture ([`run::set_plotter`]);
//!   [`events`] (`--json-stream`) is a reporter too; [`events`],
//!   [`interim`] (`-D`'s lines) and [`progress`] observe the run as it
//!   goes.
//! - [`third_party`]: a test run on a client's behalf by a `netserver
//!   --fleet` (meshes): the typed request as a checked plan, its JSON
//!   document.
//! - [`limits`]: what a netserver's policy allows one test, told in its
//!   hello: the plan fitted to it before the first request.
//! - [`one_way`]: one-way delay probes beside a test (`--under-load`,
//!   `-t RPM`, `--one-way`), and `--observer`.
//! - [`confidence`]: `-I`/`-i`; [`debug`]: `-d`: netperf 2.7's debug
//!   lines, and ours; [`interrupt`]: Ctrl-C ends a test early with its
//!   results, and a run's own `StopGroup` ends its tests alone (a
//!   netserver's third-party test whose client went away).
//!
//! Dependencies go one way, with no circle between modules: `report`
//! knows none of its readers; `family` writes reports and knows no
//! output; `run` and the outputs read them.

#![forbid(unsafe_code)]

pub mod confidence;
pub mod control;
pub mod debug;
pub mod events;
pub mod family;
pub mod interim;
pub mod interrupt;
pub mod limits;
pub mod one_way;
pub mod output;
pub mod plan;
pub mod progress;
pub mod report;
pub mod rfc_stamp;
pub mod rpm;
pub mod run;
pub mod source;
pub mod third_party;
pub mod under_load;
