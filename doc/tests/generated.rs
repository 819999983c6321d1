//! The committed man pages and completions are the ones the option tables
//! generate today.

use std::{fs, path::Path};

#[test]
fn generated_files_are_current() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for (rel, want) in docgen::files() {
        match fs::read_to_string(doc.join(&rel)) {
            Ok(have) if have == want => {}
            _ => stale.push(rel),
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `cargo run -p rsnetperf-doc` and commit them"
    );
}

#[test]
fn man_pages_name_every_visible_option() {
    let man = docgen::netperf_man();
    for opt in netperf::cli::global::OPTIONS.iter().filter(|o| !o.hidden) {
        if let Some(c) = opt.short {
            assert!(man.contains(&format!("\\-{c}")), "-{c} missing");
        }
    }
    assert!(man.contains("TEST OPTIONS"));
    assert!(man.contains("\\fB\\-r\\fR"));
    let man = docgen::netserver_man();
    assert!(man.contains("\\-\\-key\\-file") || man.contains("key\\-file"));
}
