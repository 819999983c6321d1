//! The engine of netperf's and netserver's own command lines (each
//! program's table of options is its own: netperf's in `netperf::cli`).
//!
//! netperf 2.7 parses with POSIX `getopt`, and scripts in the wild lean on
//! its tolerance: values glued to their option (`-l1`, `-P0`), clustered
//! flags (`-cC`), repeated options (the last wins), stray words (ignored),
//! negative numbers as values (`-l -1000`), and a few options whose value is
//! optional (`-c [rate]`). clap cannot express all of that, so, like ripgrep,
//! we parse from one table of [`OptDef`]s with a small getopt of our own; the
//! same table generates help text, man pages and completions.
//!
//! # Layout
//! - [`getopt`]: the parser: [`OptDef`], [`parse`], [`Parsed`].
//! - [`value`]: netperf's value syntax: sizes with K/M/G and k/m/g suffixes,
//!   `a,b` pairs in both of netperf's flavours, floats.
//! - `clap` (feature `clap`, the doc crate's): the same option table as a
//!   clap command, for man pages and shell completions (parsing stays with
//!   [`parse`]; neither program links clap).

#![forbid(unsafe_code)]

#[cfg(feature = "clap")]
pub mod clap;
pub mod getopt;
pub mod value;

pub use getopt::{
    Arity, BAD_OPTION, Occurrence, OptDef, OptError, Parsed, help, parse, parse_lenient,
};
