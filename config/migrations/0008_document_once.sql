-- Each byte of a page stored once.
--
-- Until now `document` held the Document as received, markdown and html
-- included, so the two largest values of every page were stored twice (their
-- columns and inside the JSON): more than half of the table. From here the
-- stored column is document_cut, the Document with the JSON string of its
-- markdown cut out and a 0x01 byte in its place, and of its html a 0x02 byte.
-- `document` becomes an ALIAS that splices the values back from the markdown
-- and html columns, so every reader (SELECT document, JSONExtract*(document,
-- ...)) still gets the Document byte for byte as received.
--
-- A value is cut only where the Document spells it exactly as json_string
-- below re-spells it from the column: `"markdown":` then the string with
-- only \ " \b \f \n \r \t escaped (what Firecrawl's JSON.stringify writes
-- for text without other control characters). A Document that spells it
-- otherwise (\u escapes, \/, spaces after the colon) keeps the value: more
-- bytes, never a different Document. Raw 0x01 and 0x02 cannot occur in JSON
-- (control characters in strings must be escaped), so the markers are
-- unambiguous; a row that has them anyway is left whole. The sink cuts with
-- the same rule when it inserts (internal/archive/document.go).
--
-- The UPDATE rewrites the existing rows in place (a mutation: each part is
-- rewritten once, the new parts are smaller) and the migration waits for it.
--
-- Each step is safe to repeat from any point (a sink killed midway runs the
-- file again from its start). The rename is not by itself: once the alias
-- named document exists, renaming it onto document_cut fails, so it runs
-- only while no document_cut exists. The UPDATE skips rows already cut.
{{define "json_string"}}concat('"', replaceAll(replaceAll(replaceAll(replaceAll(replaceAll(replaceAll(replaceAll({{.}}, '\\', '\\\\'), '"', '\\"'), '\b', '\\b'), '\f', '\\f'), '\n', '\\n'), '\r', '\\r'), '\t', '\\t'), '"'){{end}}
{{define "document"}}replaceOne(replaceOne(document_cut, '\x01', {{template "json_string" "markdown"}}), '\x02', {{template "json_string" "html"}}){{end}}
-- if: (SELECT count() FROM {{system "columns"}} WHERE concat(database, '.', table) = '{{table "pages"}}' AND name = 'document_cut') = 0
ALTER TABLE {{table "pages"}}{{on_cluster}}
    RENAME COLUMN IF EXISTS document TO document_cut;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document String ALIAS {{template "document"}} AFTER document_cut;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    UPDATE document_cut = replaceOne(replaceOne(document_cut,
        concat('"markdown":', {{template "json_string" "markdown"}}), '"markdown":\x01'),
        concat('"html":', {{template "json_string" "html"}}), '"html":\x02')
    WHERE position(document_cut, '\x01') = 0 AND position(document_cut, '\x02') = 0
    SETTINGS mutations_sync = 2;

{{if on_cluster}}
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document_cut String AFTER document;

ALTER TABLE {{global "pages"}}{{on_cluster}}
    DROP COLUMN IF EXISTS document;

ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document String ALIAS {{template "document"}} AFTER document_cut;
{{end}}
