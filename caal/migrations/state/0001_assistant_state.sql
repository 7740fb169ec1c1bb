-- 0001: the assistant's mutable state, in data/state.db.
--
-- Why a second database: the trace is evidence and never changes; this is
-- what the next round reads (the conversation's state, what waits for
-- confirmation, what can be undone, the built-in home, which tool calls ran).
-- Every change made here is also recorded as an event in the trace.

CREATE TABLE conversations (
    conversation_id TEXT PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);

-- At most one confirmation waits per conversation; `body` is the pending
-- chain as JSON, checked again against the configuration when confirmed.
CREATE TABLE pending_confirmations (
    conversation_id TEXT PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    confirmation_id TEXT    NOT NULL UNIQUE,
    body            TEXT    NOT NULL,
    expires_at_ms   INTEGER NOT NULL
);

-- Level-2 commands that ran, with the compensating command that undoes them.
CREATE TABLE undo_records (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    conversation_id TEXT    NOT NULL,
    command_id      TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    summary         TEXT    NOT NULL,
    undo_command    TEXT    NOT NULL,
    undo_params     TEXT    NOT NULL,
    executed_at_ms  INTEGER NOT NULL,
    expires_at_ms   INTEGER NOT NULL,
    undone_at_ms    INTEGER
);
CREATE INDEX undo_records_by_conversation ON undo_records (conversation_id, id);

-- Every tool call by call_id: a call_id that has run is never run again.
CREATE TABLE tool_calls (
    call_id         TEXT    PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    tool_id         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    started_at      TEXT    NOT NULL,
    finished_at     TEXT,
    result          TEXT
);

-- The built-in home: what the default configuration controls when no Home
-- Assistant or webhook is configured for a command.
CREATE TABLE lights (
    room            TEXT    PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    is_on           INTEGER NOT NULL,
    brightness      INTEGER NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE TABLE thermostat (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version  INTEGER NOT NULL,
    temperature     REAL    NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE TABLE doors (
    door            TEXT    PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    locked          INTEGER NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE TABLE garage (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version  INTEGER NOT NULL,
    is_open         INTEGER NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE TABLE timers (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    seconds         INTEGER NOT NULL,
    due_at_ms       INTEGER NOT NULL,
    cancelled       INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT    NOT NULL
);
CREATE TABLE reminders (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    what            TEXT    NOT NULL,
    due_at_ms       INTEGER NOT NULL,
    created_at      TEXT    NOT NULL
);
CREATE TABLE shopping_list (
    item            TEXT    PRIMARY KEY COLLATE NOCASE,
    schema_version  INTEGER NOT NULL,
    added_at        TEXT    NOT NULL
);
