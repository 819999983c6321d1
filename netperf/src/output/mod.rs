//! What netperf prints: netperf 2.7's tables ([`classic`]) and its output
//! selectors ([`selectors`]: `-o`, `-O`, `-k`), the program's own, handed
//! to the client library's runs ([`tables`], by `run::set_tables`); with
//! the library's seam and results document re-exported under their names
//! (the [`Reporter`] trait, [`json`], [`units`]).
//!
//! # Layout
//! - [`classic`]: netperf 2.7's tables, a module a family of tests.
//! - [`selectors`]: `-o`, `-O`, `-k` and their names.
//! - this file: [`tables`], the choice between them for a plan.

pub mod classic;
pub mod selectors;

pub use client::output::*;

use anyhow::{Result, anyhow};
use client::{
    plan::{Plan, SelectorStyle},
    run::Tables,
};

/// The tables a plan asks for (its selectors, or netperf 2.7's classic
/// tables), and whether a latency selector is among them. A selection
/// that cannot be read fails here, before the test; unknown names are
/// warned of at `-v 2` and above, as netperf 2.7 does.
pub fn tables(plan: &Plan, t: &Test, out: &Out) -> Result<Tables> {
    // OMNI without -o/-O/-k prints its default selection in columns.
    let selection = match (&plan.selection, plan.selector_output()) {
        (Some(s), _) => Some((
            s.style,
            selectors::resolve(t, s.spec.as_deref()).map_err(|e| anyhow!("-- -o/-O/-k: {e}"))?,
        )),
        (None, true) => Some((SelectorStyle::Columns, selectors::default_for(t))),
        (None, false) => None,
    };
    if let (true, Some((_, sel))) = (plan.verbosity > 1, &selection) {
        for name in sel.unknown() {
            eprintln!("netperf: warning: unknown output selector '{name}' ignored");
        }
    }
    let latency_shown = selection.as_ref().is_some_and(|(_, s)| s.wants_latency());
    let reporter: Box<dyn Reporter> = match selection {
        Some((style, selection)) => Box::new(selectors::Selected {
            out: out.clone(),
            style,
            selection,
            uuid: plan.uuid.clone().unwrap_or_else(client::run::new_uuid),
        }),
        None => Box::new(classic::Classic { out: out.clone() }),
    };
    Ok(Tables {
        reporter,
        latency_shown,
    })
}

/// Test helpers shared by the formats' tests.
#[cfg(test)]
pub mod testing {
    use super::Test;

    /// What the output would be told for these words of a command line,
    /// and what each side asked (which a run's measurement carries).
    pub(crate) struct Words {
        pub test: Test,
        pub local: proto::SideSpec,
        pub remote: proto::SideSpec,
    }

    impl std::ops::Deref for Words {
        type Target = Test;
        fn deref(&self) -> &Test {
            &self.test
        }
    }

    pub(crate) fn asked(words: &[&str]) -> Words {
        let plan = crate::cli::test_plan(words);
        let spec = client::family::spec_for(&plan, proto::Family::V4).unwrap();
        Words {
            test: client::run::test_of(&plan, spec, &super::Out::to(std::io::sink())),
            local: plan.local.clone(),
            remote: plan.remote.clone(),
        }
    }
}
