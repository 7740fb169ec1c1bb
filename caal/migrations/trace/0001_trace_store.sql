-- 0001: the trace store.
--
-- Why: every round must be reconstructable and tamper-evident. A round header is
-- written once at intake; everything that happens afterwards, including the
-- round's final status, is an appended event. Evidence is never rewritten, so
-- triggers refuse UPDATE and DELETE even from a raw sqlite3 session.

CREATE TABLE rounds (
    id              INTEGER PRIMARY KEY,      -- insertion order; recovery sweeps from a mark
    schema_version  INTEGER NOT NULL,
    round_id        TEXT    NOT NULL UNIQUE,  -- UUIDv7
    library_id      TEXT    NOT NULL,
    bucket_id       TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    round_seq       INTEGER NOT NULL CHECK (round_seq >= 1),
    state_in        TEXT    NOT NULL,
    audio_id        TEXT,
    channel         TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,         -- RFC 3339 UTC, microseconds
    UNIQUE (conversation_id, round_seq)
);

-- One chain per conversation, ordered by (round_seq, event_seq). `id` is a
-- global append order that live streams resume from (SSE Last-Event-ID).
-- Events are keyed by their round's row (`round_row` = rounds.id), which
-- grows with time: index inserts land at the right edge, so a commit of many
-- concurrent conversations rewrites a few index pages, not one per
-- conversation. conversation_id and round_seq are kept on the row (and
-- hashed), so every event describes itself.
CREATE TABLE events (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    round_row       INTEGER NOT NULL,
    round_id        TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    round_seq       INTEGER NOT NULL,
    event_seq       INTEGER NOT NULL CHECK (event_seq >= 1),
    event_type      TEXT    NOT NULL,
    call_id         TEXT,
    timestamp       TEXT    NOT NULL,
    payload         TEXT    NOT NULL,         -- RFC 8785 canonical JSON
    status          TEXT    NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    failure_code    TEXT,
    failure_reason  TEXT,
    prev_hash       TEXT,
    hash            TEXT    NOT NULL,
    UNIQUE (round_row, event_seq)
);

-- Each process that opens the store for writing appends a session; a clean
-- close appends its end. A session without an end crashed: the next open
-- sweeps the rounds created since its mark and appends round.failed to any
-- left open, instead of scanning every round on every start.
CREATE TABLE writer_sessions (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    started_at      TEXT    NOT NULL,
    pid             INTEGER NOT NULL,
    caal_version    TEXT    NOT NULL,
    rounds_mark     INTEGER NOT NULL          -- max(rounds.id) when the session began
);

CREATE TABLE writer_session_ends (
    session_id      INTEGER PRIMARY KEY REFERENCES writer_sessions(id),
    schema_version  INTEGER NOT NULL,
    ended_at        TEXT    NOT NULL,
    how             TEXT    NOT NULL CHECK (how IN ('clean', 'recovered'))
);

CREATE TRIGGER rounds_append_only_update BEFORE UPDATE ON rounds
BEGIN SELECT RAISE(ABORT, 'caal: rounds are append-only evidence; UPDATE refused'); END;
CREATE TRIGGER rounds_append_only_delete BEFORE DELETE ON rounds
BEGIN SELECT RAISE(ABORT, 'caal: rounds are append-only evidence; DELETE refused'); END;
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'caal: events are append-only evidence; UPDATE refused'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'caal: events are append-only evidence; DELETE refused'); END;
CREATE TRIGGER writer_sessions_append_only_update BEFORE UPDATE ON writer_sessions
BEGIN SELECT RAISE(ABORT, 'caal: writer sessions are append-only evidence; UPDATE refused'); END;
CREATE TRIGGER writer_sessions_append_only_delete BEFORE DELETE ON writer_sessions
BEGIN SELECT RAISE(ABORT, 'caal: writer sessions are append-only evidence; DELETE refused'); END;
CREATE TRIGGER writer_session_ends_append_only_update BEFORE UPDATE ON writer_session_ends
BEGIN SELECT RAISE(ABORT, 'caal: writer sessions are append-only evidence; UPDATE refused'); END;
CREATE TRIGGER writer_session_ends_append_only_delete BEFORE DELETE ON writer_session_ends
BEGIN SELECT RAISE(ABORT, 'caal: writer sessions are append-only evidence; DELETE refused'); END;
