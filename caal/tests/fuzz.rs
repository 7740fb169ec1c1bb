//! A short run of every fuzz target (caal::fuzz) in the test command: each
//! over its corpus in `fuzz/corpus/` (the seeds, and every input a
//! long cargo-fuzz run kept or crashed on), then over mutations of it.
//!
//! The mutator is hand-written (a few byte-level edits from a seeded
//! xorshift, so a failure repeats): libFuzzer does the real, coverage-guided
//! search under `cargo +nightly fuzz run`; this keeps what it found from
//! coming back and finds shallow breakage on stable, in seconds.
//! `CAAL_FUZZ_RUNS` sets the mutations per target (default 2,000; the HTTP
//! target runs a round for each valid chat body, so a tenth of that).

use std::{fs, panic, path::Path};

use caal::fuzz::TARGETS;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[u8] = b"\x00\xff\x7f\x80{}[]\"\\:,\n\r%|()<>;#=' 0123456789eE-.";

/// Letters of two, three and four bytes: a slice at a byte after their first is inside them.
const MULTIBYTE: &[&str] = &["é", "Ё", "ｙ", "中", "ب", "😀", "🚪", "\u{301}"];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, others: &[Vec<u8>]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                input[at] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let at = rng.below(len + 1);
                input.insert(at, INTERESTING[rng.below(INTERESTING.len())]);
            }
            3 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(8)).min(len);
                input.drain(at..end);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                let copy: Vec<u8> = input[at..end].to_vec();
                let to = rng.below(len + 1);
                input.splice(to..to, copy);
            }
            5 if !others.is_empty() => {
                let other = &others[rng.below(others.len())];
                let from = rng.below(other.len() + 1);
                let to = rng.below(input.len() + 1);
                input.splice(to.., other[from..].iter().copied());
            }
            6 => {
                let at = rng.below(len + 1);
                let letter = MULTIBYTE[rng.below(MULTIBYTE.len())].as_bytes();
                input.splice(at..at, letter.iter().copied());
            }
            _ => input.truncate(rng.below(len + 1)),
        }
    }
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| fs::read(p).unwrap()).collect()
}

/// Runs one input; a panic is reported with the input, to be added to the
/// corpus once fixed.
fn run_one(name: &str, target: fn(&[u8]), input: &[u8], origin: &str) {
    if let Err(e) = panic::catch_unwind(|| target(input)) {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        panic!(
            "fuzz target {name} failed on {origin}: {why}\ninput ({} bytes): {:?}",
            input.len(),
            String::from_utf8_lossy(input)
        );
    }
}

fn run(name: &str) {
    let target = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap();
    let seeds = corpus(name);
    assert!(!seeds.is_empty(), "fuzz/corpus/{name} holds no inputs");
    for (i, seed) in seeds.iter().enumerate() {
        run_one(name, target, seed, &format!("corpus input {i}"));
    }
    let runs: usize = std::env::var("CAAL_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let runs = if name == "http_body" { runs / 10 } else { runs };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    for i in 0..runs {
        let mut input = seeds[i % seeds.len()].clone();
        mutate(&mut rng, &mut input, &seeds);
        run_one(name, target, &input, &format!("mutation {i}"));
    }
}

#[test]
fn every_target_has_a_cargo_fuzz_entry_and_a_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no [[bin]] for {name}"
        );
        let entry = root.join("fuzz_targets").join(format!("{name}.rs"));
        let text =
            fs::read_to_string(&entry).unwrap_or_else(|e| panic!("{}: {e}", entry.display()));
        assert!(
            text.contains(&format!("caal::fuzz::{name}(")),
            "{}",
            entry.display()
        );
        assert!(
            root.join("corpus").join(name).is_dir(),
            "no corpus for {name}"
        );
    }
}

#[test]
fn thinking() {
    run("thinking");
}

#[test]
fn config() {
    run("config");
}

#[test]
fn wav() {
    run("wav");
}

#[test]
fn jsonl() {
    run("jsonl");
}

#[test]
fn http_body() {
    run("http_body");
}

#[test]
fn template() {
    run("template");
}

#[test]
fn wyoming() {
    run("wyoming");
}
