package query_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestReadAPIOnShards: the read API's queries through the Distributed
// tables of a two-shard cluster, written through one node and read
// through the other: search (words, a phrase's two steps with GLOBAL IN, a
// change class), a page and its history, the changes feed, exports.
func TestReadAPIOnShards(t *testing.T) {
	t.Parallel()
	c := clickhousetest.StartCluster(t, 2)
	cfg := archive.Config{Addr: c.Addr(0), Database: "crawl", User: "default", Cluster: c.Name}
	ctx := context.Background()
	nodes := c.OpenAll(t)
	if _, err := schema.MigrateNodes(ctx, nodes, cfg, schema.NodeOptions{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w := archivetest.NewStore(t, nodes[0], cfg)
	jobA, jobB := uuid.NewString(), uuid.NewString()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	const pages = 30
	for i := range pages {
		archivetest.InsertDelivery(t, w, readPageBody(jobA, fmt.Sprintf("https://shard.example/%d", i), "Shard page", fmt.Sprintf("alpha beta gamma %d", i), 200), t0)
	}
	archivetest.InsertDelivery(t, w, readPageBody(jobB, "https://shard.example/7", "Shard page", "alpha beta delta", 200), t0.Add(time.Minute))
	readCfg := cfg
	readCfg.Addr = c.Addr(1)
	// Two ClickHouse processes on a busy machine: a query through the
	// Distributed tables may take past the default 10 s, which is no
	// finding of this test (what it reads is); the other limits stay.
	limits := query.DefaultLimits
	limits.MaxExecutionTime = 2 * time.Minute
	r, err := query.NewReader(nodes[1], readCfg)
	if err == nil {
		r, err = r.WithReadOptions(query.ReadOptions{CursorKey: []byte("test key"), FeedSettle: time.Millisecond, Limits: limits})
	}
	if err != nil {
		t.Fatal(err)
	}

	// The Distributed tables send their rows to the shards in the
	// background: wait until every row is readable through node 1.
	deadline := time.Now().Add(time.Minute)
	for clickhousetest.TryCount(nodes[1], "SELECT count() FROM crawl.pages FINAL") != pages+1 ||
		clickhousetest.TryCount(nodes[1], "SELECT count() FROM crawl.page_changes") != pages+1 {
		if time.Now().After(deadline) {
			t.Fatal("rows not on the shards after a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}

	var urls []string
	q := query.SearchQuery{Text: "GAMMA", Limit: 7}
	for {
		p, err := r.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range p.Hits {
			urls = append(urls, h.URL)
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	if len(urls) != pages {
		t.Fatalf("paged search found %d pages, want %d", len(urls), pages)
	}
	p, err := r.Search(ctx, query.SearchQuery{Text: `"beta delta"`})
	if err != nil || len(p.Hits) != 1 || p.Hits[0].CrawlID.String() != jobB || p.Hits[0].Change != "changed" {
		t.Fatalf("phrase: %+v %v", p.Hits, err)
	}
	p, err = r.Search(ctx, query.SearchQuery{Change: "changed"})
	if err != nil || len(p.Hits) != 1 {
		t.Fatalf("change class: %+v %v", p.Hits, err)
	}
	page, err := r.Page(ctx, "https://shard.example/7", "", query.PageParts{Markdown: true})
	if err != nil || page.Markdown != "alpha beta delta" {
		t.Fatalf("page: %+v %v", page, err)
	}
	h, err := r.History(ctx, "https://shard.example/7")
	if err != nil || len(h) != 2 || h[1].Change != "changed" {
		t.Fatalf("history: %+v %v", h, err)
	}
	seen := map[string]bool{}
	cursor := ""
	for range 20 {
		f, err := r.Changes(ctx, query.FeedQuery{Cursor: cursor, Limit: 8})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range f.Items {
			if seen[it.ID] {
				t.Fatalf("%s twice", it.ID)
			}
			seen[it.ID] = true
		}
		cursor = f.Next
	}
	if len(seen) != pages+1 {
		t.Fatalf("feed gave %d rows, want %d", len(seen), pages+1)
	}
	var nd, warc bytes.Buffer
	if _, err := r.ExportNDJSON(ctx, jobA, query.NDJSONOptions{}, &nd); err != nil || strings.Count(nd.String(), "\n") != pages {
		t.Fatalf("ndjson: %d lines, %v", strings.Count(nd.String(), "\n"), err)
	}
	if _, err := r.ExportWARC(ctx, jobB, query.WARCOptions{}, &warc); err != nil || !strings.Contains(gunzip(t, warc.Bytes()), "WARC-Type: conversion") {
		t.Fatalf("warc: %v", err)
	}
}
