-- Full-text search (SQLite FTS5) over what was said (`input.received`),
-- answered (`output.emitted`) and decided (`route.selected`: route, command,
-- layer, parameters). The index holds no copy of the text: it reads it
-- through this view of the events (an external-content table). Its writer
-- keeps it in step with the append-only store, off the rounds' path: what was
-- appended is indexed in one statement after a quiet moment, or once 8,192
-- events wait (a trigger per row halved the append rate; indexing in each
-- commit slowed every round); a search reads the events after the index's
-- last one directly, so it never misses one. An event a retention tombstone
-- removes leaves the index with it (the trigger below).
CREATE VIEW events_search_text AS
SELECT id,
       CASE event_type
         WHEN 'input.received' THEN json_extract(payload, '$.raw_text')
         WHEN 'output.emitted' THEN json_extract(payload, '$.text')
         ELSE coalesce(json_extract(payload, '$.route_code'), '') || ' ' || coalesce(json_extract(payload, '$.command_id'), '')
              || ' ' || coalesce(json_extract(payload, '$.layer'), '') || ' ' || coalesce(json_extract(payload, '$.params'), '')
       END AS text
FROM events
WHERE event_type IN ('input.received', 'output.emitted', 'route.selected');

CREATE VIRTUAL TABLE events_fts USING fts5(
  text,
  content = 'events_search_text',
  content_rowid = 'id',
  tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO events_fts (rowid, text) SELECT id, text FROM events_search_text WHERE text IS NOT NULL;

-- Only an event the index holds is taken out of it (those after its last
-- one were never put in).
CREATE TRIGGER events_fts_delete AFTER DELETE ON events
WHEN old.event_type IN ('input.received', 'output.emitted', 'route.selected')
 AND old.id <= (SELECT coalesce(max(id), 0) FROM events_fts_docsize)
BEGIN
  INSERT INTO events_fts (events_fts, rowid, text)
  SELECT 'delete', old.id,
         CASE old.event_type
           WHEN 'input.received' THEN json_extract(old.payload, '$.raw_text')
           WHEN 'output.emitted' THEN json_extract(old.payload, '$.text')
           ELSE coalesce(json_extract(old.payload, '$.route_code'), '') || ' ' || coalesce(json_extract(old.payload, '$.command_id'), '')
              || ' ' || coalesce(json_extract(old.payload, '$.layer'), '') || ' ' || coalesce(json_extract(old.payload, '$.params'), '')
         END;
END;
