//! The writer read back with the parquet crate's own reader: rows, types,
//! partitions, chain links recomputed from the rows, replacement, errors.

use std::{collections::BTreeMap, fs, path::Path};

use arrow_array::{
    Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::json;

use super::*;
use crate::ids::LibraryId;
use crate::trace::{DB_FILE, Durability, EventDraft, EventType, RoundSpec, TraceStore};

fn spec(conversation: &str) -> RoundSpec {
    RoundSpec::typed(&conversation.parse().unwrap())
}

/// A store with `rounds` rounds over two conversations, one asking for a confirmation.
fn store_with_rounds(dir: &Path, rounds: usize) -> TraceReader {
    let library: LibraryId = "test-lib".parse().unwrap();
    let store = TraceStore::open(&dir.join(DB_FILE), library, Durability::Normal).unwrap();
    for i in 0..rounds {
        let round = store
            .begin_round(spec(if i % 2 == 0 { "kitchen" } else { "den" }))
            .unwrap();
        round
            .append(EventDraft::untyped(
                EventType::InputReceived,
                json!({"raw_text": format!("unlock the door \"{i}\"\n"), "channel": "text"}),
            ))
            .unwrap();
        round
            .append(EventDraft::untyped(
                EventType::RouteSelected,
                json!({"route_code": "intent.command", "source_rule": null, "topic": null,
                       "auth_level": 3, "macro": null, "command_id": "door.unlock", "params": {}}),
            ))
            .unwrap();
        if i == 0 {
            round
                .append(EventDraft::untyped(
                    EventType::ConfirmRequested,
                    json!({"command_id": "door.unlock", "macro": null, "auth_level": 3,
                           "summary": "unlock the door", "confirmations_required": 1}),
                ))
                .unwrap();
        }
        round
            .append(EventDraft::untyped(
                EventType::OutputEmitted,
                json!({"text": "Unlock the door?", "channel": "text"}),
            ))
            .unwrap();
        round.complete("default").unwrap();
    }
    drop(store);
    TraceReader::open(&dir.join(DB_FILE)).unwrap()
}

/// Every batch of every file under `dir/table`, by file.
fn read_table(dir: &Path, table: &str) -> BTreeMap<String, Vec<RecordBatch>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.join(table)];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let file = File::open(&path).unwrap();
                let batches = ParquetRecordBatchReaderBuilder::try_new(file)
                    .unwrap()
                    .build()
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                files.insert(rel, batches);
            }
        }
    }
    files
}

fn strings<'a>(b: &'a RecordBatch, name: &str) -> &'a StringArray {
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref()
        .unwrap()
}

fn opt(a: &StringArray, i: usize) -> Option<String> {
    a.is_valid(i).then(|| a.value(i).to_owned())
}

/// The events read back as `EventRecord`s, in chain order.
fn events_back(dir: &Path) -> Vec<EventRecord> {
    let mut out = Vec::new();
    for batches in read_table(dir, "events").values() {
        for b in batches {
            let int = |name: &str| -> Int64Array {
                b.column_by_name(name)
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone()
            };
            let (round_seq, event_seq) = (int("round_seq"), int("event_seq"));
            let at: &TimestampMicrosecondArray = b
                .column_by_name("timestamp")
                .unwrap()
                .as_any()
                .downcast_ref()
                .unwrap();
            let version: &Int32Array = b
                .column_by_name("schema_version")
                .unwrap()
                .as_any()
                .downcast_ref()
                .unwrap();
            for i in 0..b.num_rows() {
                let text = opt(strings(b, "timestamp_text"), i).unwrap_or_else(|| {
                    jiff::Timestamp::from_microsecond(at.value(i))
                        .unwrap()
                        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                        .to_string()
                });
                out.push(EventRecord {
                    schema_version: version.value(i) as u32,
                    round_id: strings(b, "round_id").value(i).into(),
                    conversation_id: strings(b, "conversation_id").value(i).into(),
                    round_seq: round_seq.value(i),
                    event_seq: event_seq.value(i),
                    event_type: strings(b, "event_type").value(i).into(),
                    call_id: opt(strings(b, "call_id"), i),
                    timestamp: text,
                    payload: strings(b, "payload").value(i).into(),
                    status: strings(b, "status").value(i).into(),
                    failure_code: opt(strings(b, "failure_code"), i),
                    failure_reason: opt(strings(b, "failure_reason"), i),
                    prev_hash: opt(strings(b, "prev_hash"), i),
                    hash: strings(b, "hash").value(i).into(),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.conversation_id, a.round_seq, a.event_seq).cmp(&(
            &b.conversation_id,
            b.round_seq,
            b.event_seq,
        ))
    });
    out
}

#[test]
fn every_row_reads_back_typed_and_every_chain_link_recomputes_from_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let reader = store_with_rounds(dir.path(), 9);
    let out = dir.path().join("out");
    let stats = export(&reader, None, &out, Options::default(), &mut |_| {}).unwrap();
    assert_eq!((stats.rounds, stats.files, stats.partitions), (9, 2, 1));

    let rounds = read_table(&out, "rounds");
    let (path, batches) = rounds.iter().next().unwrap();
    assert!(
        path.starts_with("rounds/library_id=test-lib/day=20")
            && path.ends_with("/part-00000.parquet"),
        "{path}"
    );
    let b = &batches[0];
    assert_eq!(b.schema(), tables::rounds_schema());
    let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(n, 9);
    assert_eq!(strings(b, "command_id").value(0), "door.unlock");
    assert_eq!(strings(b, "input").value(0), "unlock the door \"0\"\n");
    let confirmations = b.column_by_name("confirmations_required").unwrap();
    assert_eq!((confirmations.null_count(), confirmations.len()), (8, 9));

    let events = events_back(&out);
    assert_eq!(events.len() as u64, stats.events);
    assert_eq!(events.len() as u64, reader.count_events(None).unwrap());
    let mut heads: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for e in &events {
        let prev = heads.entry(&e.conversation_id).or_insert(None);
        assert_eq!(e.prev_hash.as_deref(), *prev, "{e:?}");
        assert_eq!(e.recompute_hash().unwrap(), e.hash, "{e:?}");
        *prev = Some(&e.hash);
    }
    // Every timestamp the store wrote is in its usual form: no text kept.
    assert!(events.iter().all(|e| e.timestamp.len() == 27));
}

#[test]
fn one_conversation_has_files_of_its_own_and_exporting_again_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let reader = store_with_rounds(dir.path(), 4);
    let out = dir.path().join("out");
    let den: ConversationId = "den".parse().unwrap();
    export(&reader, None, &out, Options::default(), &mut |_| {}).unwrap();
    let one = export(&reader, Some(&den), &out, Options::default(), &mut |_| {}).unwrap();
    assert_eq!(one.rounds, 2);
    let names: Vec<String> = read_table(&out, "rounds").into_keys().collect();
    assert_eq!(names.len(), 2);
    assert!(names.iter().any(|n| n.ends_with("/part-00000.parquet")));
    assert!(
        names
            .iter()
            .any(|n| n.contains("/part-conv-") && n.ends_with("-00000.parquet"))
    );

    // A part left by an earlier, larger export goes; a foreign file stays.
    let partition = Path::new(&names[0]).parent().unwrap().to_owned();
    let stale = out.join(&partition).join("part-00007.parquet");
    let foreign = out.join(&partition).join("notes.txt");
    fs::write(&stale, b"old").unwrap();
    fs::write(&foreign, b"mine").unwrap();
    let again = export(&reader, None, &out, Options::default(), &mut |_| {}).unwrap();
    assert_eq!(again.replaced, 1);
    assert!(!stale.exists() && foreign.exists());
    // No temporary file is left behind.
    let leftovers = walk(&out)
        .into_iter()
        .filter(|p| p.ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn a_file_that_cannot_be_written_fails_the_export_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let reader = store_with_rounds(dir.path(), 3);
    let out = dir.path().join("out");
    // Where the rounds table's partition goes is a file: the files' thread
    // fails on its first file, the export returns that error, and no
    // temporary file (of either table) is left.
    let in_the_way = out.join("rounds/library_id=test-lib");
    fs::create_dir_all(out.join("rounds")).unwrap();
    fs::write(&in_the_way, b"in the way").unwrap();
    let err = export(&reader, None, &out, Options::default(), &mut |_| {}).unwrap_err();
    assert!(matches!(err, ParquetExportError::Io { .. }), "{err}");
    assert!(err.to_string().contains("library_id=test-lib"), "{err}");
    assert_eq!(walk(&out), vec![in_the_way.display().to_string()]);
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

fn header(library: &str, created_at: &str, seq: i64) -> RoundRecord {
    RoundRecord {
        kind: "round",
        schema_version: 1,
        library_id: library.into(),
        bucket_id: "bucket:c".into(),
        conversation_id: "c".into(),
        round_id: format!("r{seq}"),
        round_seq: seq,
        state_in: "default".into(),
        state_out: None,
        audio_id: None,
        channel: "text".into(),
        created_at: created_at.into(),
        status: "open".into(),
        failure_code: None,
        failure_reason: None,
    }
}

#[test]
fn partitions_by_home_and_day_with_few_open_and_small_batches() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        batch_rows: 2,
        row_group_rows: 3,
        row_group_bytes: 1 << 20,
        open_partitions: 1,
    };
    let mut sink = PartitionedSink::new(dir.path(), "part".into(), options).unwrap();
    // Two homes (one with a name that must be escaped) and two days,
    // interleaved, with one partition open at a time: each return to a
    // partition starts its next part.
    let rounds = [
        header("home-a", "2026-11-27T23:59:59.999999Z", 1),
        header("home/b", "2026-11-27T10:00:00.000000Z", 2),
        header("home-a", "2026-11-28T00:00:00.000000Z", 3),
        header("home-a", "2026-11-27T08:00:00.000000Z", 4),
        header("home-a", "2026-11-27T09:00:00.000000Z", 5),
    ];
    for r in &rounds {
        sink.push(r, &[]).unwrap();
    }
    let stats = sink
        .finish(ExportStats {
            rounds: 5,
            events: 0,
        })
        .unwrap();
    assert_eq!((stats.partitions, stats.files), (3, 8));
    let files = read_table(dir.path(), "rounds");
    let rows = |name: &str| -> usize { files[name].iter().map(RecordBatch::num_rows).sum() };
    assert_eq!(
        rows("rounds/library_id=home-a/day=2026-11-27/part-00000.parquet"),
        1
    );
    assert_eq!(
        rows("rounds/library_id=home-a/day=2026-11-27/part-00001.parquet"),
        2
    );
    assert_eq!(
        rows("rounds/library_id=home%2Fb/day=2026-11-27/part-00000.parquet"),
        1
    );
    assert_eq!(
        rows("rounds/library_id=home-a/day=2026-11-28/part-00000.parquet"),
        1
    );
}

#[test]
fn a_bad_out_is_named_with_its_fix_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.parquet");
    fs::write(&file, b"").unwrap();
    let err = prepare_out_dir(&file).unwrap_err().to_string();
    assert!(
        err.contains("is a file") && err.contains("choose another path"),
        "{err}"
    );
    let err = prepare_out_dir(&file.join("sub")).unwrap_err().to_string();
    assert!(
        err.starts_with("cannot create the directory") && err.contains("choose a path"),
        "{err}"
    );
    prepare_out_dir(&dir.path().join("new/dir")).unwrap();
    assert!(dir.path().join("new/dir").is_dir());
}

#[test]
fn the_schema_document_names_every_column_with_its_type() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schemas/parquet.v1.json")).unwrap();
    for (table, schema) in [
        ("rounds", tables::rounds_schema()),
        ("events", tables::events_schema()),
    ] {
        let columns = doc["$defs"][table]["properties"].as_object().unwrap();
        let required: Vec<&str> = doc["$defs"][table]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let names: Vec<&str> = columns.keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        expected.sort_unstable();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "{table}: the document's columns");
        for field in schema.fields() {
            let column = &columns[field.name()];
            let parquet_type = column["x-parquet-type"].as_str().unwrap();
            let want = match field.data_type() {
                arrow_schema::DataType::Int32 => "INT32",
                arrow_schema::DataType::Int64 => "INT64",
                arrow_schema::DataType::Utf8 => "STRING",
                arrow_schema::DataType::Timestamp(..) => "TIMESTAMP(MICROS, UTC)",
                other => panic!("{other:?} is not documented"),
            };
            assert_eq!(parquet_type, want, "{table}.{}", field.name());
            assert_eq!(
                column["x-nullable"].as_bool(),
                Some(field.is_nullable()),
                "{table}.{}",
                field.name()
            );
            assert_eq!(
                required.contains(&field.name().as_str()),
                !field.is_nullable()
            );
        }
    }
}
