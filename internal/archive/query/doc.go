// Package query is the archive's read API: the questions the reader binary
// (its JSON API and its pages) and `sink diff`/`sink status` ask of what
// the sink archived, and the change summaries' view of a job.
//
// One type, Reader, answers them (one concept per file):
//
//	reader.go      Reader, its ReadOptions (limits, cursor key, feed settle, search budget)
//	limits.go      the Limits every query runs under, the read slots, the optional settings
//	cursor.go      the signed keyset cursors of every paged answer
//	keyset.go      readPage: one page of a list by its sort key
//	search.go      Search: words and phrases by the text index, filters, relevance, snippets, counts
//	jobs_read.go   Jobs, JobStatus, Failures, Blocked
//	pages_read.go  Page, History
//	versions.go    Versions, the two versions `diff` compares
//	comparisons.go Comparisons: the versions search hits are compared with (changeTracking)
//	feed.go        Changes, the feed of stored rows in insertion order
//	jobchanges.go  JobChanges and RecentJobs, for change summaries
//	export.go      NDJSON and Parquet exports of a job
//	warc.go        the WARC 1.1 export, the same bytes for the same rows
//	cdxj.go        its CDXJ index, offsets taken while the WARC is written
//	linesort.go    the index's lines sorted in bounded memory (runs on disk)
//	wacz.go        the WACZ: the WARC, its index, pages and datapackage in one zip
//	warcpointers.go the Parquet export's pointers into the WARC
//	instep.go      a cursor read in step with an export's rows, by URL
//	errors.go      ParamError (400), ErrLimit, ErrBusy, ErrNoHTTP, ErrNoPage...
//
// It only reads: the rows, their mapping and the inserts are package
// archive's (whose Lookups JobStatus asks), the tables' shape package
// schema's. Every value travels as a bound parameter, never in SQL text.
package query
