-- document_meta: the Document as received with its markdown and html as
-- empty strings, computed when read from document_cut alone.
--
-- `document` splices the page's text back in, so reading it decompresses the
-- page's whole content (markdown and html): a query for one metadata field of
-- every page of a crawl read ~35 kB per page for a few bytes (1.05 s for a
-- crawl of 20 000 pages in an archive of a million, docs/benchmarks.md).
-- document_meta puts "" where document_cut holds the markers, so it is
-- valid JSON that every JSON function reads, at ~0.1 kB per page. An ALIAS
-- column: nothing is stored or rewritten.
ALTER TABLE {{table "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document_meta String ALIAS replaceOne(replaceOne(document_cut, '\x01', '""'), '\x02', '""') AFTER document;
{{if on_cluster}}
ALTER TABLE {{global "pages"}}{{on_cluster}}
    ADD COLUMN IF NOT EXISTS document_meta String ALIAS replaceOne(replaceOne(document_cut, '\x01', '""'), '\x02', '""') AFTER document;
{{end}}
