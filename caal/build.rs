//! Embeds the numbered SQL migrations and the JSON Schemas into the library, and
//! reruns when either folder changes, so a new migration or schema never needs
//! a hand-edited list.

use std::{env, fmt::Write as _, fs, path::Path};

fn sorted_files(dir: &Path, suffix: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            let path = path.canonicalize().ok()?.display().to_string();
            name.ends_with(suffix).then_some((name, path))
        })
        .collect();
    files.sort();
    files
}

fn main() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&manifest);
    let mut out = String::new();
    for (set, constant) in [
        ("trace", "TRACE_MIGRATIONS"),
        ("state", "STATE_MIGRATIONS"),
        ("memory", "MEMORY_MIGRATIONS"),
    ] {
        let dir = manifest.join("migrations").join(set);
        println!("cargo:rerun-if-changed={}", dir.display());
        writeln!(
            out,
            "/// (number, file name, SQL) of migrations/{set}, in order.\npub(crate) static {constant}: &[(u32, &str, &str)] = &["
        )
        .unwrap();
        for (name, path) in sorted_files(&dir, ".sql") {
            let number: u32 = name
                .split('_')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| {
                    panic!("migration {name} must start with its number, like 0002_why.sql")
                });
            writeln!(out, "    ({number}, {name:?}, include_str!({path:?})),").unwrap();
        }
        out.push_str("];\n\n");
    }

    let schemas = manifest.join("../schemas/events");
    println!("cargo:rerun-if-changed={}", schemas.display());
    out.push_str("/// (event type, schema_version, JSON Schema of the payload).\npub(crate) static EVENT_SCHEMAS: &[(&str, u32, &str)] = &[\n");
    for (name, path) in sorted_files(&schemas, ".json") {
        let stem = name.trim_end_matches(".json");
        let (event_type, version) = stem
            .rsplit_once(".v")
            .and_then(|(t, v)| Some((t, v.parse::<u32>().ok()?)))
            .unwrap_or_else(|| panic!("schema {name} must be named <event.type>.v<N>.json"));
        writeln!(
            out,
            "    ({event_type:?}, {version}, include_str!({path:?})),"
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded.rs");
    fs::write(dest, out).expect("write embedded.rs");
}
