package crawlapi

// Crawl statuses the API reports. The last three are terminal.
const (
	StatusScraping  = "scraping"
	StatusCompleted = "completed"
	StatusCancelled = "cancelled"
	StatusFailed    = "failed"
)

// Terminal reports whether a crawl status is final.
func Terminal(status string) bool {
	return status == StatusCompleted || status == StatusCancelled || status == StatusFailed
}
