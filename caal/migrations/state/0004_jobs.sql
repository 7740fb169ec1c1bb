-- 0004: background jobs (research that runs beside the conversation), in data/state.db.
--
-- A job is queued by the round that asked, claimed by a worker (running,
-- attempts + 1), and ends done, failed or cancelled with the round that told
-- the conversation. A job found running at start (the process died under
-- it) is queued again, or failed once it has had its attempts.

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    schema_version    INTEGER NOT NULL,
    job_id            TEXT    NOT NULL UNIQUE,
    conversation_id   TEXT    NOT NULL,
    class             TEXT    NOT NULL,
    topic             TEXT    NOT NULL,
    query             TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    enqueued_in_round TEXT,
    work_round_id     TEXT,
    result_round_id   TEXT,
    result            TEXT,
    created_at_ms     INTEGER NOT NULL,
    started_at_ms     INTEGER,
    finished_at_ms    INTEGER
);
CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued';
