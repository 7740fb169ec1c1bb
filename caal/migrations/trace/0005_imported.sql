-- `caal import` asks "which of these rounds are here already?" before it
-- imports anything: the keys of every `round.imported` event. Only those
-- events are in this index, so appends of every other event pay nothing.
CREATE INDEX events_imported ON events (id) WHERE event_type = 'round.imported';
