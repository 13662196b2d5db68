package query

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Version is one archived version of a page: the row of `pages` that one
// job holds for its URL.
type Version struct {
	CrawlID    uuid.UUID
	ReceivedAt time.Time
	Success    bool
	StatusCode uint16
	Markdown   string
}

// Versions returns two versions of url to compare, the older (from) and the
// newer (to), each of a different job. toJob picks the newer version,
// fromJob the older; either may be "". Without toJob the newer is the
// newest version of a job other than fromJob; without fromJob the older is
// the newest version received before the newer one. So with neither, they
// are the latest two versions. A job's version is its row of `pages` under
// FINAL: its newest delivery of the URL, duplicates collapsed.
//
// It fails with ErrNoPage, ErrOneVersion (returning the one version found
// as to) or ErrNoVersion (wrapped with the job's id).
func (r *Reader) Versions(ctx context.Context, url, fromJob, toJob string) (from, to Version, err error) {
	fromID, err := parseJob("from", fromJob)
	if err != nil {
		return Version{}, Version{}, err
	}
	toID, err := parseJob("to", toJob)
	if err != nil {
		return Version{}, Version{}, err
	}
	var ok bool
	switch {
	case toJob != "":
		to, ok, err = r.version(ctx, url, "crawl_id = ?", toID)
	case fromJob != "":
		to, ok, err = r.version(ctx, url, "crawl_id != ?", fromID)
	default:
		to, ok, err = r.version(ctx, url, "1")
	}
	if err != nil {
		return Version{}, Version{}, err
	}
	if !ok {
		return Version{}, Version{}, r.missing(ctx, url, toJob)
	}
	if fromJob != "" {
		from, ok, err = r.version(ctx, url, "crawl_id = ?", fromID)
	} else {
		from, ok, err = r.version(ctx, url, "crawl_id != ? AND toUnixTimestamp64Milli(received_at) <= ?", to.CrawlID, to.ReceivedAt.UnixMilli())
	}
	if err != nil {
		return Version{}, Version{}, err
	}
	if !ok {
		if fromJob != "" {
			return Version{}, Version{}, r.missing(ctx, url, fromJob)
		}
		return Version{}, to, ErrOneVersion
	}
	return from, to, nil
}

func parseJob(which, job string) (uuid.UUID, error) {
	if job == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(job)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%s job id: %w", which, err)
	}
	return id, nil
}

// version reads the newest version of url among the jobs where holds.
func (r *Reader) version(ctx context.Context, url, where string, args ...any) (Version, bool, error) {
	rows, err := r.conn.Query(ctx, "SELECT crawl_id, received_at, success, status_code, markdown FROM "+r.db+
		".pages FINAL WHERE url = ? AND ("+where+") ORDER BY received_at DESC, crawl_id DESC LIMIT 1", append([]any{url}, args...)...)
	if err != nil {
		return Version{}, false, fmt.Errorf("versions of a url: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Version{}, false, fmt.Errorf("versions of a url: %w", err)
		}
		return Version{}, false, nil
	}
	var v Version
	if err := rows.Scan(&v.CrawlID, &v.ReceivedAt, &v.Success, &v.StatusCode, &v.Markdown); err != nil {
		return Version{}, false, fmt.Errorf("versions of a url: %w", err)
	}
	return v, true, nil
}

// missing is the error for a version not found: ErrNoPage when no job
// holds url, else ErrNoVersion of job (ErrOneVersion when job is "").
func (r *Reader) missing(ctx context.Context, url, job string) error {
	_, found, err := r.version(ctx, url, "1")
	switch {
	case err != nil:
		return err
	case !found:
		return ErrNoPage
	case job == "":
		return ErrOneVersion
	}
	return fmt.Errorf("job %s: %w", job, ErrNoVersion)
}
