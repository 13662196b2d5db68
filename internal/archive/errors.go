package archive

import "errors"

// ErrNoCrawl is returned by Crawl for a crawl the archive has never seen.
var ErrNoCrawl = errors.New("crawl not in the archive")

// ErrTakedownNotFound is returned for a takedown id the archive has no
// record of.
var ErrTakedownNotFound = errors.New("no such takedown")

// ErrUnsupportedServer is a ClickHouse release outside OldestServer to
// NewestServer.
var ErrUnsupportedServer = errors.New("unsupported ClickHouse version")
