package crawlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

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

// StatusPage is one chunk of a crawl's status.
type StatusPage struct {
	// Status is scraping, completed, cancelled or failed.
	Status string
	// Total is the number of pages attempted, Completed those that
	// succeeded; both are clamped to [0, maxCount].
	Total     int
	Completed int
	// CreditsUsed is -1 when unknown (self-hosted APIs send -1).
	CreditsUsed int
	ExpiresAt   time.Time
	// Next is the next link as the API sent it, "" when absent or null.
	Next string
	// Data holds the successful pages of this chunk, raw JSON kept.
	Data []events.Document
}

type statusBody struct {
	Success     bool              `json:"success"`
	Status      string            `json:"status"`
	Total       json.RawMessage   `json:"total"`
	Completed   json.RawMessage   `json:"completed"`
	CreditsUsed json.RawMessage   `json:"creditsUsed"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	Next        *string           `json:"next"`
	Data        []events.Document `json:"data"`
	Error       string            `json:"error"`
}

// maxCount bounds the counts read from the API: far above any real crawl,
// far below overflow wherever they are added or compared.
const maxCount = 1 << 40

// apiNumber reads the number field name of a status (raw JSON: any number,
// or null or absent for 0) clamped to [lo, maxCount]: a float or an
// exponent does not fail the page, and a negative or huge value cannot turn
// the paging arithmetic around.
func apiNumber(name string, raw json.RawMessage, lo int) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return max(0, lo), nil
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil {
		return 0, fmt.Errorf("%s is not a number: %.40s", name, raw)
	}
	// A number beyond float64 is ±Inf with ErrRange: clamped below.
	f, err := strconv.ParseFloat(num.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is not a number: %.40s", name, raw)
	}
	return int(min(max(f, float64(lo)), maxCount)), nil
}

// Get reads the status page at ref (JobRef or a Ref), retrying
// as the package documentation says. It returns ErrUnauthorized,
// ErrNotFound, ErrUnavailable (wrapped) or another error for a
// non-retryable answer.
func (c *Client) Get(ctx context.Context, crawlID, ref string) (*StatusPage, error) {
	body, err := c.fetch(ctx, "status", crawlID, ref, c.cfg.NotFoundRetries)
	if err != nil {
		return nil, err
	}
	var sb statusBody
	if err := json.Unmarshal(body, &sb); err != nil {
		return nil, fmt.Errorf("status of crawl %s: decode: %w", crawlID, err)
	}
	p := &StatusPage{Status: sb.Status, ExpiresAt: sb.ExpiresAt, Data: sb.Data}
	var errs [3]error
	p.Total, errs[0] = apiNumber("total", sb.Total, 0)
	p.Completed, errs[1] = apiNumber("completed", sb.Completed, 0)
	p.CreditsUsed, errs[2] = apiNumber("creditsUsed", sb.CreditsUsed, -1)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("status of crawl %s: %w", crawlID, err)
	}
	if sb.Next != nil {
		p.Next = *sb.Next
	}
	return p, nil
}
