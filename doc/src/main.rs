//! Write doc/man/*.1 and doc/completions/* from the option tables.

use std::{fs, path::Path};

fn main() -> std::io::Result<()> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (rel, contents) in docgen::files() {
        let path = doc.join(&rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        fs::write(&path, contents)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
