-- 0005: the round boundary, applied in one transaction and reconciled.
--
-- Why: a round's state changes (its conversation's state, its pending
-- confirmation, its undo records) are recorded in its terminal trace event and
-- then applied here in one transaction, which also moves this mark. A process
-- that stops between the two leaves a round whose changes the trace has and
-- this database lacks; the next open applies every recorded change after the
-- conversation's mark, so state and trace agree again.

CREATE TABLE round_boundaries (
    conversation_id TEXT PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    round_seq       INTEGER NOT NULL,  -- the last round whose changes are applied
    applied_at      TEXT    NOT NULL
);

-- An undo names the command it reverses by its call id.
CREATE INDEX undo_records_by_call ON undo_records (call_id);
