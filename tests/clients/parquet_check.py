"""Reads `caal trace export --format parquet` with DuckDB and with chDB
(ClickHouse's engine in process), each on its own, and checks it from the
Parquet rows alone.

Usage:
  python parquet_check.py check DIR [DOC.md]
      For each engine: the row counts; the column types as the engine reads
      them; every chain link recomputed (SHA-256 over the RFC 8785 canonical
      event object, as caal/src/trace/chain.rs does) and compared, each
      conversation of each home in (round_seq, event_seq) order; each
      round's event_count and head_hash against the events there; and, with
      DOC.md, every ```sql block in it that opens with `-- duckdb: NAME` or
      `-- chdb: NAME`, run by that engine over DIR (`'export/` in the SQL
      is DIR). Prints, last, one JSON object: {"duckdb": {...}, "chdb": {...}}.
  python parquet_check.py tamper DIR
      Rewrites one events file with one payload changed (pyarrow, same
      schema), as someone editing the export would; prints what it changed.
  python parquet_check.py time DIR RUNS [DOC.md]
      Times the operator's first question (rounds per home per day) in
      DuckDB over DIR, RUNS times; prints the seconds of each run. With
      DOC.md, also every named query in it (as `check` finds them), in the
      engine it names, RUNS times each, under "doc": {engine: {name: [s]}}.
"""

import datetime
import glob
import hashlib
import json
import os
import re
import sys
import time

EPOCH = datetime.datetime(1970, 1, 1)

# The events' columns the chain needs, in one order for both engines; the
# timestamp as integer microseconds (each engine's own function below).
CHAIN_COLUMNS = (
    "library_id, conversation_id, round_seq, event_seq, schema_version, round_id, "
    "event_type, call_id, {micros}, timestamp_text, payload, status, failure_code, "
    "failure_reason, prev_hash, hash"
)
ORDER = "ORDER BY library_id, conversation_id, round_seq, event_seq"


def text(value):
    """A JSON string as RFC 8785 writes it: json.dumps escapes exactly the
    quote, the backslash and control characters (\\u00xx in lowercase hex,
    short forms for \\b \\f \\n \\r \\t) and nothing else."""
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def chained_timestamp(micros, timestamp_text):
    if timestamp_text is not None:
        return timestamp_text
    at = EPOCH + datetime.timedelta(microseconds=int(micros))
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def link_hash(row):
    (_, conversation, round_seq, event_seq, version, round_id, event_type, call_id,
     micros, timestamp_text, payload, status, code, reason, prev_hash, _) = row
    # Keys in RFC 8785 order (all ASCII, so sorted by code unit); the payload
    # is stored canonical, so it is embedded as it is.
    canonical = (
        '{"call_id":' + text(call_id)
        + ',"conversation_id":' + text(conversation)
        + ',"event_seq":' + str(int(event_seq))
        + ',"event_type":' + text(event_type)
        + ',"failure_code":' + text(code)
        + ',"failure_reason":' + text(reason)
        + ',"payload":' + payload
        + ',"prev_hash":' + text(prev_hash)
        + ',"round_id":' + text(round_id)
        + ',"round_seq":' + str(int(round_seq))
        + ',"schema_version":' + str(int(version))
        + ',"status":' + text(status)
        + ',"timestamp":' + text(chained_timestamp(micros, timestamp_text))
        + ',"type":"event"}'
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_chains(events):
    """Every link of every (home, conversation) chain, in order."""
    broken, starts_elsewhere, checked = [], 0, 0
    previous = {}
    for row in events:
        key = (row[0], row[1])
        where = {"library_id": row[0], "conversation_id": row[1],
                 "round_seq": int(row[2]), "event_seq": int(row[3])}
        if key not in previous:
            # A chain whose older rounds were pruned starts at a tombstone's head.
            starts_elsewhere += row[14] is not None
        elif row[14] != previous[key]:
            broken.append({**where, "problem": "prev_hash mismatch",
                           "stored": row[14], "expected": previous[key]})
        recomputed = link_hash(row)
        if recomputed != row[15]:
            broken.append({**where, "problem": "hash mismatch",
                           "stored": row[15], "recomputed": recomputed})
        previous[key] = row[15]
        checked += 1
    return {"links_checked": checked, "broken": broken[:10], "broken_count": len(broken),
            "chains": len(previous), "chains_starting_at_a_tombstone": starts_elsewhere}


def check_rounds(rounds, events):
    """Each round's event_count and head_hash against the events rows."""
    per_round = {}
    for row in events:
        per_round.setdefault((row[0], row[5]), []).append(row[15])
    mismatched = []
    for library_id, round_id, event_count, head_hash in rounds:
        hashes = per_round.get((library_id, round_id), [])
        if len(hashes) != int(event_count) or (hashes[-1] if hashes else None) != head_hash:
            mismatched.append({"library_id": library_id, "round_id": round_id,
                               "event_count": int(event_count), "events_found": len(hashes)})
    return {"rounds_not_matching_their_events": len(mismatched), "first": mismatched[:5]}


def doc_queries(doc):
    """{engine: [(name, sql)]} from the ```sql blocks of a Markdown file."""
    found = {"duckdb": [], "chdb": []}
    with open(doc, encoding="utf-8") as f:
        for block in re.findall(r"```sql\n(.*?)```", f.read(), re.S):
            head = re.match(r"-- (duckdb|chdb): (.+)\n", block)
            if head:
                found[head.group(1)].append((head.group(2).strip(), block))
    return found


def normalised(rows):
    return [[None if v is None else str(v) for v in row] for row in rows]


class DuckDB:
    name = "duckdb"

    def __init__(self, root):
        import duckdb
        self.db = duckdb.connect()
        self.root = root

    def table(self, name):
        return f"read_parquet('{self.root}/{name}/**/*.parquet', hive_partitioning = true)"

    def rows(self, sql):
        return self.db.sql(sql).fetchall()

    def types(self, name):
        return {c: t for c, t, *_ in self.rows(f"DESCRIBE SELECT * FROM {self.table(name)}")}

    micros = 'epoch_us("timestamp")'


class ChDB:
    name = "chdb"

    def __init__(self, root):
        import chdb
        self.chdb = chdb
        self.root = root

    def table(self, name):
        return f"file('{self.root}/{name}/**/*.parquet', Parquet)"

    def rows(self, sql):
        sql = sql.strip().rstrip(";")
        # 64-bit integers as JSON numbers, not strings.
        result = self.chdb.query(sql + " SETTINGS output_format_json_quote_64bit_integers = 0",
                                 "JSONCompact")
        out = result.bytes()
        return json.loads(out)["data"] if out else []

    def types(self, name):
        return {row[0]: row[1] for row in self.rows(f"DESCRIBE {self.table(name)}")}

    micros = 'toUnixTimestamp64Micro("timestamp")'


def check(engine, root, doc):
    started = time.monotonic()
    rounds_table, events_table = engine.table("rounds"), engine.table("events")
    report = {
        "rounds": int(engine.rows(f"SELECT count(*) FROM {rounds_table}")[0][0]),
        "events": int(engine.rows(f"SELECT count(*) FROM {events_table}")[0][0]),
        "rounds_types": engine.types("rounds"),
        "events_types": engine.types("events"),
    }
    events = engine.rows(
        f"SELECT {CHAIN_COLUMNS.format(micros=engine.micros)} FROM {events_table} {ORDER}")
    report.update(check_chains(events))
    rounds = engine.rows(
        f"SELECT library_id, round_id, event_count, head_hash FROM {rounds_table}")
    report.update(check_rounds(rounds, events))
    if doc:
        report["queries"] = {
            name: normalised(engine.rows(sql.replace("'export/", f"'{root}/")))
            for name, sql in doc_queries(doc)[engine.name]
        }
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


def tamper(root):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = sorted(glob.glob(f"{root}/events/**/*.parquet", recursive=True))[0]
    table = pq.read_table(path)
    kinds = table.column("event_type").to_pylist()
    at = kinds.index("output.emitted")
    payloads = table.column("payload").to_pylist()
    payloads[at] = payloads[at].replace('"text":"', '"text":"(edited) ', 1)
    column = table.schema.get_field_index("payload")
    table = table.set_column(column, table.schema.field(column),
                             pc.cast(payloads, table.schema.field(column).type))
    pq.write_table(table, path, compression="snappy")
    row = table.slice(at, 1).to_pylist()[0]
    return {"file": os.path.relpath(path, root), "conversation_id": row["conversation_id"],
            "round_seq": row["round_seq"], "event_seq": row["event_seq"]}


def time_query(root, runs):
    import duckdb

    db = duckdb.connect()
    sql = (f"SELECT library_id, day, count(*) FROM read_parquet('{root}/rounds/**/*.parquet', "
           "hive_partitioning = true) GROUP BY ALL ORDER BY ALL")
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        rows = db.sql(sql).fetchall()
        seconds.append(time.monotonic() - started)
    return {"seconds": seconds, "rows": sum(int(r[2]) for r in rows), "groups": len(rows)}


def time_doc_queries(root, runs, doc):
    timed = {}
    for engine in (DuckDB(root), ChDB(root)):
        per_query = {}
        for name, sql in doc_queries(doc)[engine.name]:
            sql = sql.replace("'export/", f"'{root}/")
            seconds = []
            for _ in range(runs):
                started = time.monotonic()
                engine.rows(sql)
                seconds.append(time.monotonic() - started)
            per_query[name] = seconds
        timed[engine.name] = per_query
    return timed


def main():
    mode, root = sys.argv[1], os.path.abspath(sys.argv[2])
    if mode == "check":
        doc = sys.argv[3] if len(sys.argv) > 3 else None
        print(json.dumps({e.name: check(e, root, doc) for e in (DuckDB(root), ChDB(root))}))
    elif mode == "tamper":
        print(json.dumps(tamper(root)))
    elif mode == "time":
        timed = time_query(root, int(sys.argv[3]))
        if len(sys.argv) > 4:
            timed["doc"] = time_doc_queries(root, int(sys.argv[3]), sys.argv[4])
        print(json.dumps(timed))
    else:
        sys.exit(f"unknown mode {mode!r}: check, tamper or time")


if __name__ == "__main__":
    main()
