-- A page's markdown and html compressed together.
--
-- The html of a page repeats the text of its markdown. Kept in two columns,
-- ClickHouse compresses each apart and pays for that text twice: markdown
-- and html alone took 1.4 times what the same Documents take compressed as
-- whole JSON. From here one column, content, holds the markdown followed by
-- the html (markdown_bytes says where the html starts), so ZSTD sees the
-- html next to the markdown it repeats. `markdown` and `html` become ALIAS
-- columns cutting content at markdown_bytes (substring counts bytes, so any
-- UTF-8 comes back byte for byte), and `document` still splices both back
-- into the Document as received: every reader keeps its columns.
--
-- The text index on markdown is rebuilt on the same expression the alias
-- names, so hasToken(markdown, ...), hasAllTokens, hasPhrase and LIKE still
-- use it; its posting lists are bit-packed (half the bytes of plain lists on
-- page text, the same answers).
--
-- Steps, each safe to repeat: add the new columns and fill them from the old
-- ones (a mutation, waited for); let content_hash and document stop naming
-- the old columns; drop the old columns (their files are removed with them);
-- add the aliases under the old names; build the index for every part (a
-- second mutation, waited for). Until the last step ends, searches of old
-- parts fall back to reading the text.
--
-- Run again from its start after a stop at any step, it resumes: the fill
-- runs only while markdown is still a stored column (once it is dropped, the
-- name is unknown until the alias comes back), and the old index is dropped
-- only while it still indexes the stored column, so the rebuilt one is kept.
{{define "json_string"}}concat('"', replaceAll(replaceAll(replaceAll(replaceAll(replaceAll(replaceAll(replaceAll({{.}}, '\\', '\\\\'), '"', '\\"'), '\b', '\\b'), '\f', '\\f'), '\n', '\\n'), '\r', '\\r'), '\t', '\\t'), '"'){{end}}
{{define "document"}}replaceOne(replaceOne(document_cut, '\x01', {{template "json_string" "markdown"}}), '\x02', {{template "json_string" "html"}}){{end}}
{{define "markdown"}}substring(content, 1, markdown_bytes){{end}}
{{define "html"}}substring(content, markdown_bytes + 1){{end}}
{{/* The old columns out and the aliases in, for the table named by the
     argument: the local table, and on a cluster the Distributed one too. */}}
{{define "swap"}}ALTER TABLE {{.}}{{on_cluster}}
    MODIFY COLUMN content_hash UInt64 MATERIALIZED cityHash64({{template "markdown"}});

ALTER TABLE {{.}}{{on_cluster}}
    DROP COLUMN IF EXISTS document;

ALTER TABLE {{.}}{{on_cluster}}
    DROP COLUMN IF EXISTS markdown,
    DROP COLUMN IF EXISTS html
    SETTINGS mutations_sync = 2;

ALTER TABLE {{.}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS markdown String ALIAS {{template "markdown"}} AFTER markdown_bytes,
    ADD COLUMN IF NOT EXISTS html String ALIAS {{template "html"}} AFTER content_hash;

ALTER TABLE {{.}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document String ALIAS {{template "document"}} AFTER document_cut;
{{end}}
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS content String CODEC(ZSTD(3)) AFTER title,
    ADD COLUMN IF NOT EXISTS markdown_bytes UInt32 AFTER content;

-- if: (SELECT count() FROM {{system "columns"}} WHERE concat(database, '.', table) = '{{table "pages"}}' AND name = 'markdown' AND default_kind = '') > 0
ALTER TABLE {{table "pages"}}{{on_cluster}}
    UPDATE content = concat(markdown, html), markdown_bytes = length(markdown)
    WHERE markdown_bytes = 0 AND content = ''
    SETTINGS mutations_sync = 2;

-- if: (SELECT count() FROM {{system "data_skipping_indices"}} WHERE concat(database, '.', table) = '{{table "pages"}}' AND name = 'markdown_text' AND expr = 'markdown') > 0
ALTER TABLE {{table "pages"}}{{on_cluster}}
    DROP INDEX IF EXISTS markdown_text;

{{template "swap" (table "pages")}}

ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD INDEX IF NOT EXISTS markdown_text {{template "markdown"}} TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower({{template "markdown"}}), posting_list_codec = 'bitpacking') GRANULARITY 100000000;

ALTER TABLE {{table "pages"}}{{on_cluster}}
    MATERIALIZE INDEX markdown_text
    SETTINGS mutations_sync = 2;

{{if on_cluster}}
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS content String AFTER title,
    ADD COLUMN IF NOT EXISTS markdown_bytes UInt32 AFTER content;

{{template "swap" (global "pages")}}{{end}}
