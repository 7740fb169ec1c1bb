-- 0001: bucket memory, in data/memory.db.
--
-- Why a third database: memory is what people tell the assistant to keep,
-- it grows to many thousands of items per bucket and has its own full-text
-- index; reading it (the CLI, a UI) must not wait on rounds being written.
-- Every change made here is also recorded as an event in the trace.

-- One remembered thing. `content` has already been through the secret
-- scanner (secrets are secret_ref tokens). The score is kept as decayed
-- signal values at `touched_ms`: each signal decays with the configured
-- half-life from the moment it happened, so the score at any later time is
-- (v_write + v_topic + v_citation) * 2^(-(now - touched_ms) / half_life).
-- `rank_key` = log2(v_write + v_topic + v_citation) + touched_ms / half_life
-- orders items by that score at every `now` alike, so "highest scores"
-- is an index range scan, not a sort of the whole bucket.
CREATE TABLE items (
    id              INTEGER PRIMARY KEY,
    item_id         TEXT    NOT NULL UNIQUE,
    bucket_id       TEXT    NOT NULL,
    bucket_tag      TEXT    NOT NULL,  -- one search token for the bucket ("b" + 16 hex of its sha256)
    schema_version  INTEGER NOT NULL,
    content         TEXT    NOT NULL,
    content_key     TEXT    NOT NULL,  -- sha256 of content (hex, 16): finds "remembered again" without a scan
    metadata        TEXT    NOT NULL,  -- JSON: refs to documents/files, with optional excerpt or summary
    refs_text       TEXT    NOT NULL,  -- the refs' words, for the full-text index
    pinned          INTEGER NOT NULL DEFAULT 0,
    topic_hits      INTEGER NOT NULL DEFAULT 0,
    citations       INTEGER NOT NULL DEFAULT 0,
    v_write         REAL    NOT NULL,
    v_topic         REAL    NOT NULL DEFAULT 0,
    v_citation      REAL    NOT NULL DEFAULT 0,
    touched_ms      INTEGER NOT NULL,
    rank_key        REAL    NOT NULL,
    created_ms      INTEGER NOT NULL,
    last_updated_ms INTEGER NOT NULL
);
CREATE INDEX items_by_rank ON items (bucket_id, pinned, rank_key DESC);
CREATE INDEX items_by_recency ON items (bucket_id, pinned, last_updated_ms DESC);
CREATE INDEX items_by_content ON items (bucket_id, content_key);

-- Full-text search over content and refs (porter stemming: "light" finds
-- "lights"). The bucket is a token too, so a search in one bucket is one
-- FTS query, ranked and limited inside FTS5, not a join filtered afterwards.
CREATE VIRTUAL TABLE items_fts USING fts5 (
    content, refs_text, bucket_tag,
    content = 'items', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
    INSERT INTO items_fts (rowid, content, refs_text, bucket_tag) VALUES (new.id, new.content, new.refs_text, new.bucket_tag);
END;
CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, content, refs_text, bucket_tag) VALUES ('delete', old.id, old.content, old.refs_text, old.bucket_tag);
END;
CREATE TRIGGER items_fts_update AFTER UPDATE OF content, refs_text ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, content, refs_text, bucket_tag) VALUES ('delete', old.id, old.content, old.refs_text, old.bucket_tag);
    INSERT INTO items_fts (rowid, content, refs_text, bucket_tag) VALUES (new.id, new.content, new.refs_text, new.bucket_tag);
END;

-- Each bucket's register: a summary of at most 140 characters for UIs,
-- rewritten in the same transaction as every write to the bucket.
CREATE TABLE registers (
    bucket_id       TEXT    PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    summary         TEXT    NOT NULL,
    item_count      INTEGER NOT NULL,
    pinned_count    INTEGER NOT NULL,
    last_updated_ms INTEGER NOT NULL
);

-- The half-life the rank keys were computed with; when the configuration
-- changes it, the keys are recomputed on open.
CREATE TABLE memory_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
