-- 0002: audio artifacts, in data/state.db.
--
-- One row per clip kept: where its file is, its SHA-256 (the same hash a
-- voice round's input.received carries into the trace), what it is, and
-- until when it is kept. A sweep deletes expired, unpinned files and sets
-- deleted_at; the row, and so the hash, stays.

CREATE TABLE audio_artifacts (
    audio_id       TEXT    PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    path           TEXT    NOT NULL,
    sha256         TEXT    NOT NULL,
    bytes          INTEGER NOT NULL,
    duration_ms    INTEGER,
    codec          TEXT    NOT NULL,
    sample_rate    INTEGER NOT NULL,
    channels       INTEGER NOT NULL,
    created_at     TEXT    NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    retention_days INTEGER NOT NULL,
    expires_at_ms  INTEGER NOT NULL,
    pinned         INTEGER NOT NULL DEFAULT 0,
    rms_preview    TEXT    NOT NULL,
    peak           REAL    NOT NULL,
    deleted_at     TEXT
);

CREATE INDEX audio_artifacts_expiry ON audio_artifacts (expires_at_ms) WHERE deleted_at IS NULL AND pinned = 0;
