-- 0002: retention. Whole old conversations may be removed (`caal trace
-- prune`), and only behind a tombstone: it records the removed chain's head
-- (its last round_seq, event_seq and hash) and how much went, signed with
-- the data dir's Ed25519 key. What remains still verifies: a conversation
-- that goes on after a prune continues from the tombstone's head, and
-- `caal trace verify` checks every tombstone's signature.
CREATE TABLE tombstones (
    id              INTEGER PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    conversation_id TEXT    NOT NULL,
    last_round_seq  INTEGER NOT NULL,
    last_event_seq  INTEGER NOT NULL,
    head_hash       TEXT    NOT NULL,
    rounds_removed  INTEGER NOT NULL,
    events_removed  INTEGER NOT NULL,
    removed_at      TEXT    NOT NULL,
    public_key      TEXT    NOT NULL,
    signature       TEXT    NOT NULL
);
CREATE INDEX tombstones_by_conversation ON tombstones (conversation_id, last_round_seq);

CREATE TRIGGER tombstones_append_only_update BEFORE UPDATE ON tombstones
BEGIN SELECT RAISE(ABORT, 'caal: tombstones are append-only evidence; UPDATE refused'); END;
CREATE TRIGGER tombstones_append_only_delete BEFORE DELETE ON tombstones
BEGIN SELECT RAISE(ABORT, 'caal: tombstones are append-only evidence; DELETE refused'); END;

-- Deleting stays refused, except rounds and events a tombstone covers.
DROP TRIGGER rounds_append_only_delete;
CREATE TRIGGER rounds_append_only_delete BEFORE DELETE ON rounds
WHEN NOT EXISTS (SELECT 1 FROM tombstones t
                 WHERE t.conversation_id = OLD.conversation_id AND t.last_round_seq >= OLD.round_seq)
BEGIN SELECT RAISE(ABORT, 'caal: rounds are append-only evidence; DELETE refused (only `caal trace prune` removes whole old conversations, behind a signed tombstone)'); END;
DROP TRIGGER events_append_only_delete;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM tombstones t
                 WHERE t.conversation_id = OLD.conversation_id AND t.last_round_seq >= OLD.round_seq)
BEGIN SELECT RAISE(ABORT, 'caal: events are append-only evidence; DELETE refused (only `caal trace prune` removes whole old conversations, behind a signed tombstone)'); END;
