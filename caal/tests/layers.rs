//! The engine's modules import one way, bottom to top (ARCHITECTURE.md,
//! "Layout"): a module may use its own layer and the layers below, never one
//! above. Read from the source: every `crate::name` path and every name in a
//! `crate::{…}` group, outside tests. Benchmarks drive the whole engine, so
//! they live outside it (the CLI's `bench` module, on the public API alone)
//! and hold no exemption here: the library holds none.

use std::{collections::BTreeSet, fs, path::Path};

/// Bottom first. Modules in one layer may use each other.
const LAYERS: &[&[&str]] = &[
    &["config", "crypto", "retry", "stats", "testing"],
    &["safety"],
    &["ids"],
    &["sqlite"],
    &["trace", "state", "memory"],
    // What the trace becomes for other tools (OTLP).
    &["export"],
    // Reading a sentence, and commands as values (typed parameters, said
    // back as words): below the router, the executors and the timers.
    &["understand", "command"],
    &[
        "auth",
        "reasoning",
        "router",
        "tools",
        "llm",
        "voice",
        "schedule",
    ],
    &["round"],
    &["server"],
    // Drives what the engine reads from outside, the server included.
    &["fuzz"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level modules a piece of source names after `crate::`.
fn used_modules(source: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of a `crate::{a::x, b, c::{…}}` group.
            let mut depth = 1;
            let mut name = String::new();
            let mut at_start = true;
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => at_start = true,
                    c if depth == 1 && at_start && (c.is_ascii_lowercase() || c == '_') => {
                        name.push(c)
                    }
                    c if depth == 1 && at_start && c.is_whitespace() && name.is_empty() => {}
                    _ if depth == 1 && at_start => {
                        if !name.is_empty() {
                            used.insert(std::mem::take(&mut name));
                        }
                        at_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                used.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_reader_sees_grouped_and_plain_paths() {
    let used = used_modules(
        "use crate::{\n    auth::{self, Pending},\n    ids::BucketId,\n};\nlet x = crate::trace::now();",
    );
    assert_eq!(
        used,
        ["auth", "ids", "trace"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

#[test]
fn the_library_holds_no_benchmark() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let benches: Vec<String> = files
        .iter()
        .filter(|file| {
            let name = file.file_name().unwrap().to_string_lossy();
            name == "bench.rs" || name.ends_with("_bench.rs")
        })
        .map(|file| file.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert!(
        benches.is_empty(),
        "benchmarks in the library (move them to the CLI's bench module, cli/src/bench/, on the public API): {benches:?}"
    );
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        let name = file.file_name().unwrap().to_string_lossy();
        if module == "lib" || name.contains("test") {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            unplaced.insert(module);
            continue;
        };
        let text = fs::read_to_string(file).unwrap();
        // What follows `#[cfg(test)]` is test code.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for used in used_modules(code) {
            match layer_of(&used) {
                Some(layer) if layer > own => {
                    wrong.push(format!("{} uses crate::{used}", relative.display()))
                }
                Some(_) => {}
                None => {
                    unplaced.insert(used);
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules with no layer (add them to LAYERS and ARCHITECTURE.md): {unplaced:?}"
    );
    assert!(
        wrong.is_empty(),
        "imports of a layer above:\n{}",
        wrong.join("\n")
    );
}
