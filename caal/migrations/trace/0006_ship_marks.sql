-- 0006: live shipping (`caal serve --ship URL`). The trace store is the
-- shipper's queue: per conversation, the last round a receiver acknowledged
-- (its round_seq, and the id of its terminal event, the order rounds are
-- shipped in). A mark moves only after the receiver answers 2xx, so a crash
-- or an outage resends from it and loses nothing. Marks are a position, not
-- evidence: they are updated in place.
CREATE TABLE ship_marks (
    conversation_id TEXT    PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    round_seq       INTEGER NOT NULL,         -- the last round shipped, and all before it
    event_id        INTEGER NOT NULL,         -- that round's round.completed/failed (events.id)
    acked_at        TEXT    NOT NULL
);

-- What `caal ship status` and the page say besides the backlog: when a
-- receiver last acknowledged, how many rounds it has, and the last error
-- (never a credential: the shipper writes only status lines and reasons).
CREATE TABLE ship_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version  INTEGER NOT NULL,
    last_ack_at     TEXT,
    rounds_acked    INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_error_at   TEXT
);
