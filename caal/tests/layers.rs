//! The engine's modules import one way, bottom to top (ARCHITECTURE.md,
//! "Layout"): a module may use its own layer and the layers below, never one
//! above. Read from the source: every `crate::name` path and every name in a
//! `crate::{…}` group, outside tests. Benchmarks drive the whole engine, so
//! they live outside it (the CLI's `bench` module, on the public API alone)
//! and hold no exemption here: the library holds none.

use std::{collections::BTreeSet, fs, path::Path};

/// Bottom first. Modules in one layer may use each other.
const LAYERS: &[&[&str]] = &[
    &["config", "crypto", "retry", "stats", "testing", "tls"],
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

/// The sources under `dirs` of `src` that are not test files (`tests.rs`,
/// `*_tests.rs`); more than 20 of them, or the directories moved.
fn code_files(src: &Path, dirs: &[&str]) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for dir in dirs {
        sources(&src.join(dir), &mut files);
    }
    assert!(files.len() > 20, "the sources were found: {files:?}");
    files.retain(|f| {
        let name = f.file_name().unwrap().to_string_lossy();
        name != "tests.rs" && !name.ends_with("_tests.rs")
    });
    files
}

/// The longest a function of the understanding, the router or the round may
/// grow (issue 43): past it, a function does several things, and a change to
/// how a sentence is read has more than one place to go.
const MOST_LINES: usize = 120;

/// Every function and method in `file` longer than `MOST_LINES`, as
/// "file:line name (N lines)"; tests (`#[cfg(test)]` modules and files named
/// `tests.rs` or `*_tests.rs`) are not measured.
fn long_functions(file: &Path, shown: &str) -> Vec<String> {
    use syn::visit::Visit;
    struct Long<'a> {
        shown: &'a str,
        found: Vec<String>,
    }
    impl Long<'_> {
        fn measure(&mut self, name: &syn::Ident, block: &syn::Block) {
            let (from, to) = (
                block.brace_token.span.open().start().line,
                block.brace_token.span.close().end().line,
            );
            if to - from + 1 > MOST_LINES {
                let lines = to - from + 1;
                self.found
                    .push(format!("{}:{from} {name} ({lines} lines)", self.shown));
            }
        }
    }
    impl<'ast> Visit<'ast> for Long<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            let is_test = m.attrs.iter().any(|a| {
                a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
            });
            if !is_test {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.measure(&f.sig.ident, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.measure(&f.sig.ident, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    let source = fs::read_to_string(file).unwrap();
    let parsed = syn::parse_file(&source).unwrap_or_else(|e| panic!("{shown}: {e}"));
    let mut long = Long {
        shown,
        found: Vec::new(),
    };
    long.visit_file(&parsed);
    long.found
}

#[test]
fn no_function_of_understanding_routing_or_the_round_is_over_its_length() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<String> = code_files(&src, &["understand", "router", "round"])
        .iter()
        .flat_map(|f| long_functions(f, &f.strip_prefix(&src).unwrap().display().to_string()))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MOST_LINES} lines (split them where they do two things): {long:#?}"
    );
}

#[test]
fn a_long_function_is_found_and_a_test_module_is_not_measured() {
    let dir = std::env::temp_dir().join(format!("caal-layers-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let body = "    let x = 1;\n".repeat(MOST_LINES);
    let file = dir.join("long.rs");
    fs::write(
        &file,
        format!(
            "fn short() {{}}\nstruct S;\nimpl S {{\n    fn long(&self) {{\n{body}    }}\n}}\n#[cfg(test)]\nmod tests {{\n    fn also_long() {{\n{body}    }}\n}}\n"
        ),
    )
    .unwrap();
    let found = long_functions(&file, "long.rs");
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        vec![format!("long.rs:4 long ({} lines)", MOST_LINES + 2)]
    );
}

/// The most lines a file of the understanding layers may hold, its tests
/// aside (issue 43): a layer, or a part of one, a reader can hold in mind.
const MOST_FILE_LINES: usize = 400;

#[test]
fn every_file_of_the_understanding_layers_is_within_its_length() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<String> = code_files(&src, &["understand", "router/layers"])
        .iter()
        .filter_map(|f| {
            let source = fs::read_to_string(f).unwrap();
            // The code before a file's own test module.
            let code = source.split("\n#[cfg(test)]").next().unwrap_or("");
            let lines = code.lines().count();
            (lines > MOST_FILE_LINES).then(|| {
                format!(
                    "{} ({lines} lines)",
                    f.strip_prefix(&src).unwrap().display()
                )
            })
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MOST_FILE_LINES} lines (make the layer a folder, a file per part): {long:#?}"
    );
}
