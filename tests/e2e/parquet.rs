//! `caal trace export --format parquet` from two homes into one directory,
//! read back by DuckDB and by chDB (tests/clients/parquet_check.py): the
//! rows the traces hold, typed columns, every chain link recomputed from the
//! Parquet rows alone, and the operator's queries of docs/fleet.md; then an
//! edited row and a missing partition, each found.

use std::{collections::BTreeSet, fs, path::Path};

use serde_json::Value;

use crate::support::{Sandbox, client};

const ENGINES: [&str; 2] = ["duckdb", "chdb"];

/// One home: what it said, and what its trace holds.
struct Home {
    sb: Sandbox,
    library_id: String,
    rounds: usize,
    events: usize,
    training_lines: usize,
    conversations: BTreeSet<String>,
}

impl Home {
    /// Counts what the trace holds, from its JSONL export and its training export.
    fn counted(sb: Sandbox) -> Self {
        let (mut rounds, mut events, mut conversations) = (0, 0, BTreeSet::new());
        let mut library_id = String::new();
        for line in sb.run(&["trace", "export"]).ok().stdout.lines() {
            let l: Value = serde_json::from_str(line).unwrap();
            if l["type"] == "round" {
                rounds += 1;
                library_id = l["library_id"].as_str().unwrap().to_owned();
                conversations.insert(l["conversation_id"].as_str().unwrap().to_owned());
            } else {
                events += 1;
            }
        }
        let training_lines = sb.run(&["export", "training"]).ok().stdout.lines().count();
        Home {
            sb,
            library_id,
            rounds,
            events,
            training_lines,
            conversations,
        }
    }

    fn export_to(&self, out: &Path) {
        let run = self
            .sb
            .run(&[
                "trace",
                "export",
                "--format",
                "parquet",
                "--out",
                out.to_str().unwrap(),
            ])
            .ok();
        assert!(
            run.stderr.contains(&format!(
                "exported {} rounds, {} events",
                self.rounds, self.events
            )),
            "{}",
            run.stderr
        );
    }
}

/// Home A: commands, a question with one confirmation and one with two, a
/// text with quotes and emoji, a round marked bad by id. Home B: a round
/// marked wrong by saying so. Ids (route, command) come from the rounds.
/// Two homes, the commands that asked for confirmation (with how many),
/// and the rounds marked wrong (with their notes).
struct Fleet {
    a: Home,
    b: Home,
    confirmations: Vec<(String, i64)>,
    wrong: Vec<(String, String)>,
}

fn two_homes() -> Fleet {
    let a = Sandbox::new();
    let lights = a.say("default", "Turn on the kitchen lights");
    let door = a.say("default", "unlock the front door");
    a.say("default", "yes");
    a.say("default", "add \"oat\" milk ☕ to the shopping list");
    let garage = a.say("den", "open the garage");
    a.say("den", "yes");
    a.say("den", "yes");
    let lights_id = lights["round_id"].as_str().unwrap().to_owned();
    a.run(&[
        "feedback",
        &lights_id,
        "bad",
        "--note",
        "I meant the ceiling light",
    ])
    .ok();

    let b = Sandbox::new();
    let hall = b.say("default", "switch the hall light off");
    b.say("default", "that was wrong");
    b.say("default", "what's on my shopping list");

    let confirmations = [(&door, 1), (&garage, 2)]
        .iter()
        .map(|(r, n)| (r["command_id"].as_str().unwrap().to_owned(), *n))
        .collect();
    let wrong = vec![
        (lights_id, "I meant the ceiling light".to_owned()),
        (
            hall["round_id"].as_str().unwrap().to_owned(),
            "that was wrong".to_owned(),
        ),
    ];
    Fleet {
        a: Home::counted(a),
        b: Home::counted(b),
        confirmations,
        wrong,
    }
}

fn check(out: &Path) -> Value {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/fleet.md");
    client(
        "parquet_check.py",
        &["check", out.to_str().unwrap(), doc.to_str().unwrap()],
    )
}

#[test]
fn two_homes_read_back_in_duckdb_and_chdb_with_every_chain_link_recomputed() {
    let Fleet {
        a,
        b,
        confirmations,
        wrong,
    } = two_homes();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    a.export_to(&out);
    b.export_to(&out);
    let report = check(&out);

    for engine in ENGINES {
        let r = &report[engine];
        assert_eq!(r["rounds"], a.rounds + b.rounds, "{engine}: {r}");
        assert_eq!(r["events"], a.events + b.events, "{engine}");
        assert_eq!(r["links_checked"], a.events + b.events, "{engine}");
        assert_eq!(r["broken_count"], 0, "{engine}: {}", r["broken"]);
        assert_eq!(
            r["chains"],
            a.conversations.len() + b.conversations.len(),
            "{engine}"
        );
        assert_eq!(r["chains_starting_at_a_tombstone"], 0, "{engine}");
        assert_eq!(
            r["rounds_not_matching_their_events"], 0,
            "{engine}: {}",
            r["first"]
        );
    }

    // Typed columns, as each engine reads them.
    let duck = &report["duckdb"];
    for (column, ty) in [
        ("schema_version", "INTEGER"),
        ("round_seq", "BIGINT"),
        ("created_at", "TIMESTAMP WITH TIME ZONE"),
        ("auth_level", "INTEGER"),
        ("input", "VARCHAR"),
        ("day", "DATE"),
    ] {
        assert_eq!(duck["rounds_types"][column], ty, "duckdb rounds.{column}");
    }
    assert_eq!(
        duck["events_types"]["timestamp"],
        "TIMESTAMP WITH TIME ZONE"
    );
    assert_eq!(duck["events_types"]["event_seq"], "BIGINT");
    let ch = &report["chdb"];
    for (table, column, ty) in [
        ("rounds", "created_at", "DateTime64(6, 'UTC')"),
        ("rounds", "round_seq", "Int64"),
        ("rounds", "auth_level", "Int32"),
        ("events", "timestamp", "DateTime64(6, 'UTC')"),
        ("events", "payload", "String"),
    ] {
        let got = ch[format!("{table}_types")][column].as_str().unwrap();
        assert!(got.contains(ty), "chdb {table}.{column}: {got}");
    }

    // The docs' queries: the same rows in both engines, and the right ones.
    let queries = &duck["queries"];
    let names: Vec<&String> = queries.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 4, "{names:?}");
    for name in &names {
        assert_eq!(
            queries[name.as_str()],
            ch["queries"][name.as_str()],
            "{name}: duckdb vs chdb"
        );
    }
    let rows = |name: &str| queries[name].as_array().unwrap().clone();
    for home in [&a, &b] {
        let counted: usize = rows("rounds per home per day")
            .iter()
            .filter(|r| r[0] == home.library_id.as_str())
            .map(|r| r[2].as_str().unwrap().parse::<usize>().unwrap())
            .sum();
        assert_eq!(counted, home.rounds, "{}", home.library_id);
    }
    let confirmed = rows("commands that needed confirmation");
    for (command, n) in &confirmations {
        assert!(
            confirmed
                .iter()
                .any(|r| r[0] == command.as_str() && r[1] == n.to_string().as_str()),
            "{command} ({n}) in {confirmed:?}"
        );
    }
    let marked: Vec<(String, String)> = rows("rounds users marked wrong")
        .iter()
        .map(|r| {
            (
                r[1].as_str().unwrap().to_owned(),
                r[4].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let mut want = wrong.clone();
    want.sort();
    let mut marked_sorted = marked.clone();
    marked_sorted.sort();
    assert_eq!(marked_sorted, want);
    let lines: usize = rows("training lines by route")
        .iter()
        .map(|r| r[1].as_str().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(lines, a.training_lines + b.training_lines);
}

#[test]
fn an_edited_row_and_a_missing_partition_are_found_by_both_engines() {
    let Fleet { a, b, .. } = two_homes();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    a.export_to(&out);
    b.export_to(&out);

    let edited = client("parquet_check.py", &["tamper", out.to_str().unwrap()]);
    let report = check(&out);
    for engine in ENGINES {
        let r = &report[engine];
        assert_eq!(r["broken_count"], 1, "{engine}: {}", r["broken"]);
        let link = &r["broken"][0];
        assert_eq!(link["problem"], "hash mismatch", "{engine}");
        for key in ["conversation_id", "round_seq", "event_seq"] {
            assert_eq!(link[key], edited[key], "{engine}: {key}");
        }
    }

    // Home B's events partition gone: its rounds no longer match any events.
    fs::remove_dir_all(
        out.join("events")
            .join(format!("library_id={}", b.library_id)),
    )
    .unwrap();
    let report = check(&out);
    for engine in ENGINES {
        let r = &report[engine];
        assert_eq!(r["events"], a.events, "{engine}");
        assert_eq!(r["rounds_not_matching_their_events"], b.rounds, "{engine}");
    }
}

#[test]
fn a_bad_out_is_refused_with_its_fix() {
    let sb = Sandbox::new();
    sb.say("default", "Turn on the kitchen lights");
    let file = sb.path().join("export.parquet");
    fs::write(&file, "").unwrap();
    let run = sb.run(&[
        "trace",
        "export",
        "--format",
        "parquet",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("is a file") && run.stderr.contains("choose another path"),
        "{}",
        run.stderr
    );
    let under = file.join("sub");
    let run = sb.run(&[
        "trace",
        "export",
        "--format",
        "parquet",
        "--out",
        under.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot create the directory"),
        "{}",
        run.stderr
    );
    let run = sb.run(&["trace", "export", "--format", "parquet"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("add --out DIR"), "{}", run.stderr);
}
