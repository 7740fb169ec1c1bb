-- Feedback on a round is found by the round it judges: `caal trace show`,
-- the page and the training export ask "what did people say of this round?".
-- Only feedback events are in this index, so appends of every other event
-- pay nothing for it.
CREATE INDEX events_feedback_by_round ON events (json_extract(payload, '$.round_id'), id)
 WHERE event_type = 'feedback.recorded';
