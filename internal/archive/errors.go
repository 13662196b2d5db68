package archive

import "errors"

// ErrNoCrawl is returned by Crawl for a crawl the archive has never seen.
var ErrNoCrawl = errors.New("crawl not in the archive")
