-- 0003: timers and reminders that ring, in data/state.db.
--
-- A timer or reminder belongs to the conversation that set it and rings
-- there. A timer runs (due_at_ms set, paused_left_ms NULL) or is paused
-- (paused_left_ms: what was left when it was paused; due_at_ms is then
-- meaningless). The scheduler claims what is due by setting fired_at_ms and,
-- once the firing round is durable in the trace, fired_round_id; a claim
-- without a round (a crash in between) is released on the next start, so a
-- timer rings at least once and, short of a crash, exactly once.

ALTER TABLE timers ADD COLUMN conversation_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE timers ADD COLUMN name TEXT;
ALTER TABLE timers ADD COLUMN paused_left_ms INTEGER;
ALTER TABLE timers ADD COLUMN fired_at_ms INTEGER;
ALTER TABLE timers ADD COLUMN fired_round_id TEXT;
ALTER TABLE timers ADD COLUMN set_in_round TEXT;

ALTER TABLE reminders ADD COLUMN conversation_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE reminders ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reminders ADD COLUMN fired_at_ms INTEGER;
ALTER TABLE reminders ADD COLUMN fired_round_id TEXT;
ALTER TABLE reminders ADD COLUMN set_in_round TEXT;

-- Timers and reminders set before anything rang them: those already past
-- are closed without ringing (an empty fired_round_id says so).
UPDATE timers SET fired_at_ms = due_at_ms, fired_round_id = ''
 WHERE due_at_ms < CAST(strftime('%s', 'now') AS INTEGER) * 1000;
UPDATE reminders SET fired_at_ms = due_at_ms, fired_round_id = ''
 WHERE due_at_ms < CAST(strftime('%s', 'now') AS INTEGER) * 1000;

CREATE INDEX timers_due ON timers (due_at_ms, id)
 WHERE fired_at_ms IS NULL AND cancelled = 0 AND paused_left_ms IS NULL;
CREATE INDEX reminders_due ON reminders (due_at_ms, id)
 WHERE fired_at_ms IS NULL AND cancelled = 0;
