//! The shape of the product crates, held by a test: their modules import
//! one another one way only (no circle of `crate::`, `super::` and
//! `self::` paths, test modules aside), and doc/architecture.md names
//! every module of every crate (a file `name.rs` as `name.rs`, a folder
//! `name/` as `name/`) in that crate's part of its tree.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Module paths and their files.
type Modules = BTreeMap<Vec<String>, PathBuf>;
/// Each module's edges to the modules it names.
type Edges = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

const CRATES: [&str; 6] = [
    "proto",
    "engine",
    "optparse",
    "client",
    "netperf",
    "netserver",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `src`, by its module path (`mod.rs`, `lib.rs`
/// and `main.rs` are their folder's module).
fn modules(src: &Path) -> Modules {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).expect("under src").with_extension("");
                let mut m: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    m.pop();
                }
                out.insert(m, p);
            }
        }
    }
    out
}

/// The text without comments and without `#[cfg(test)] mod x { ... }`.
fn product_text(text: &str) -> String {
    let no_comments: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = no_comments.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let is_mod = after["#[cfg(test)]".len()..]
            .trim_start()
            .trim_start_matches("pub ")
            .starts_with("mod ");
        let Some(open) = after.find('{').filter(|_| is_mod) else {
            out.push_str("#[cfg(test)]");
            rest = &after["#[cfg(test)]".len()..];
            continue;
        };
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(i) = tree.find('{') else {
        let t = tree.split("as").next().unwrap_or("").to_string();
        return vec![t.trim_end_matches([':', '*']).replace("::self", "")];
    };
    let (prefix, inner) = (
        &tree[..i],
        &tree[i + 1..tree.rfind('}').unwrap_or(tree.len())],
    );
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .flat_map(|p| match p.as_str() {
            "" | "self" | "*" => vec![prefix.trim_end_matches(':').to_string()],
            _ => expand(&format!("{prefix}{p}")),
        })
        .collect()
}

/// The module paths a file's code names.
fn paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        let after = &rest[i + 4..];
        let end = after.find(';').unwrap_or(after.len());
        let stmt = after[..end].trim();
        if before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
            && ["crate", "super", "self"]
                .iter()
                .any(|k| stmt.starts_with(k))
        {
            out.extend(expand(stmt));
        }
        rest = &after[end.min(after.len())..];
    }
    // paths in code: crate::x::y, super::x, self::x
    for key in ["crate::", "super::", "self::"] {
        for (i, _) in text.match_indices(key) {
            let ok = text[..i]
                .chars()
                .last()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != ':');
            if ok {
                let tail: String = text[i..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                out.push(tail.trim_end_matches(':').to_string());
            }
        }
    }
    out.into_iter().filter(|p| p.contains("::")).collect()
}

/// Each module's edges to the modules it names (the longest module a path
/// starts with; a module's own path and its parent's declaration aside).
fn graph(src: &Path) -> (Modules, Edges) {
    let mods = modules(src);
    let mut edges = BTreeMap::new();
    for (m, file) in &mods {
        let text = product_text(&fs::read_to_string(file).expect("read"));
        let mut to = BTreeSet::new();
        for p in paths(&text) {
            let parts: Vec<&str> = p.split("::").collect();
            let (mut base, mut rest): (Vec<String>, &[&str]) = match parts.first() {
                Some(&"crate") => (Vec::new(), &parts[1..]),
                // `super` and `self` count from the module itself
                _ => (m.clone(), &parts[..]),
            };
            while let Some(first) = rest.first() {
                match *first {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            let mut best = mods.contains_key(&base).then(|| base.clone());
            let mut cand = base;
            for seg in rest {
                cand.push((*seg).to_string());
                if mods.contains_key(&cand) {
                    best = Some(cand.clone());
                } else {
                    break;
                }
            }
            if let Some(b) = best.filter(|b| b != m) {
                to.insert(b);
            }
        }
        edges.insert(m.clone(), to);
    }
    (mods, edges)
}

/// Strongly connected sets of more than one module (Tarjan).
fn circles(edges: &Edges) -> Vec<Vec<Vec<String>>> {
    struct T<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Vec<String>) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_product_crate_has_a_circle_of_modules() {
    let mut found = Vec::new();
    for c in CRATES {
        let (_, edges) = graph(&root().join(c).join("src"));
        for comp in circles(&edges) {
            let names: Vec<String> = comp.iter().map(|m| m.join("/")).collect();
            found.push(format!("{c}: {}", names.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "module circles (a module that, through others, imports itself):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("shape-circle-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("a")).unwrap();
    fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    fs::write(dir.join("a/mod.rs"), "use crate::b::thing;\nmod inner;\n").unwrap();
    fs::write(dir.join("a/inner.rs"), "fn f() { super::super::b::g(); }\n").unwrap();
    fs::write(
        dir.join("b.rs"),
        "use crate::{a::inner, c};\n#[cfg(test)]\nmod tests { use crate::a; }\n",
    )
    .unwrap();
    let (_, edges) = graph(&dir);
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut names: Vec<String> = found[0].iter().map(|m| m.join("/")).collect();
    names.sort();
    assert_eq!(names, ["a/inner", "b"]);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn architecture_md_names_every_module() {
    let doc = fs::read_to_string(root().join("doc/architecture.md")).expect("architecture.md");
    let tree = doc.split("```").nth(1).expect("the layout block");
    let mut missing = Vec::new();
    for (i, c) in CRATES.iter().enumerate() {
        // this crate's part of the tree: from its line to the next crate's
        let start = tree
            .find(&format!("\n{c}/"))
            .or_else(|| tree.starts_with(&format!("{c}/")).then_some(0))
            .unwrap_or_else(|| panic!("{c}/ is not in the layout"));
        let end = CRATES
            .iter()
            .skip(i + 1)
            .filter_map(|n| tree.find(&format!("\n{n}/")))
            .chain(["\ntests/", "\ndoc/"].iter().filter_map(|n| tree.find(n)))
            .filter(|&e| e > start)
            .min()
            .unwrap_or(tree.len());
        let part = &tree[start..end];
        let src = root().join(c).join("src");
        for (m, file) in modules(&src) {
            let Some(last) = m.last() else { continue };
            let name = match file.file_stem().and_then(|s| s.to_str()) {
                Some("mod") => format!("{last}/"),
                _ => format!("{last}.rs"),
            };
            if !part.contains(&name) {
                missing.push(format!("{c}/src/{}", m.join("/")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "doc/architecture.md does not name these modules in their crate's part of the layout:\n{}",
        missing.join("\n")
    );
}

/// Each crate's `# Layout` (its lib.rs's first doc comment) names every
/// module the crate declares at its top, as `name` or [`name`].
#[test]
fn every_crates_layout_names_its_modules() {
    let mut missing = Vec::new();
    for c in CRATES {
        let lib = root().join(c).join("src/lib.rs");
        let text = fs::read_to_string(&lib).expect("lib.rs");
        let layout: String = text
            .lines()
            .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
            .skip_while(|l| !l.contains("# Layout"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!layout.is_empty(), "{c}/src/lib.rs has no # Layout");
        let declared = text.lines().filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            // (an inline module is the crate's own scaffolding)
            rest.strip_suffix(';').map(str::to_string)
        });
        for m in declared {
            if !layout.contains(&format!("`{m}`")) && !layout.contains(&format!("`{m}::")) {
                missing.push(format!("{c}: {m}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these modules are not in their crate's # Layout:\n{}",
        missing.join("\n")
    );
}

/// Every path doc/architecture.md names in backquotes (`a/b.rs`, `a/b/`)
/// exists: from the workspace's root, or under a crate's `src/`.
#[test]
fn architecture_md_names_no_path_that_is_gone() {
    let doc = fs::read_to_string(root().join("doc/architecture.md")).expect("architecture.md");
    let mut gone = Vec::new();
    for quoted in doc.split('`').skip(1).step_by(2) {
        let is_path = quoted.contains('/')
            && !quoted.contains(' ')
            && !quoted.contains("://")
            && (quoted.ends_with(".rs") || quoted.ends_with(".md") || quoted.ends_with('/'))
            && quoted
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "/._-".contains(ch));
        if !is_path {
            continue;
        }
        let found = root().join(quoted).exists()
            || CRATES
                .iter()
                .any(|c| root().join(c).join("src").join(quoted).exists());
        if !found {
            gone.push(quoted.to_string());
        }
    }
    assert!(
        gone.is_empty(),
        "doc/architecture.md names paths that are gone:\n{}",
        gone.join("\n")
    );
}

/// The `[dependencies]` of a crate's manifest: each line's name and what
/// follows it.
fn dependencies(krate: &str) -> Vec<(String, String)> {
    let text = fs::read_to_string(root().join(krate).join("Cargo.toml")).expect("Cargo.toml");
    let mut deps = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line.ends_with("dependencies]") && !line.contains("dev-");
            continue;
        }
        if let (true, Some((name, rest))) = (inside, line.split_once('=')) {
            deps.push((name.trim().to_string(), rest.trim().to_string()));
        }
    }
    deps
}

/// The daemon links the test's lifecycle, not the program's presentation:
/// no plotting or clap crate, not the netperf program's crate, and the
/// client library it uses has no grammar of netperf's options (no option
/// table, no parse of words) and prints no tables.
#[test]
fn the_daemon_links_no_presentation() {
    for krate in ["netserver", "client", "engine", "proto"] {
        for (name, rest) in dependencies(krate) {
            assert!(
                !["plotters", "clap", "netperf", "rsnetperf"].contains(&name.as_str()),
                "{krate} depends on {name}"
            );
            if name == "optparse" {
                assert!(
                    !rest.contains("clap"),
                    "{krate}: optparse with clap: {rest}"
                );
            }
        }
    }
    for file in modules(&root().join("client/src")).into_values() {
        let text = product_text(&fs::read_to_string(&file).expect("read"));
        for grammar in ["optparse::parse", "OptDef", "mod classic", "mod selectors"] {
            assert!(
                !text.contains(grammar),
                "{}: {grammar} (the netperf program's)",
                file.display()
            );
        }
    }
}
