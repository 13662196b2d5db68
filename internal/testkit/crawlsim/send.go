package crawlsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
)

// DefaultRetryDelays are the real sender's waits before its retries.
var DefaultRetryDelays = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}

// SenderOptions configure how a crawl is delivered.
type SenderOptions struct {
	// Target is the URL deliveries are POSTed to.
	Target string
	// Secret signs the deliveries; empty sends them unsigned, without the
	// signature header, as the real sender does.
	Secret string
	// SignatureHeader is the header of the signature (default
	// X-Service-Signature; the real API uses X-Firecrawl-Signature).
	SignatureHeader string
	// Rate is the most first attempts per second (0: no limit).
	Rate float64
	// Concurrency is the most POSTs in flight (default 8).
	Concurrency int
	// Timeout is how long an answer is waited for (default 10 s, the real
	// sender's); no answer counts as a failure and is retried.
	Timeout time.Duration
	// RetryDelays are the waits before each retry of a non-2xx delivery
	// (default DefaultRetryDelays); after the last the delivery is given up.
	RetryDelays []time.Duration
	// Client is the HTTP client (default: a new one).
	Client *http.Client
}

// Sender delivers crawls as the real API's webhook sender does.
type Sender struct {
	o   SenderOptions
	sem chan struct{}
	// ticker paces first attempts at Rate: time.NewTicker's channel and
	// stop; tests hand the ticks out themselves.
	ticker func(period time.Duration) (<-chan time.Time, func())
}

// NewSender checks the options and returns a Sender.
func NewSender(o SenderOptions) (*Sender, error) {
	if o.Target == "" {
		return nil, errors.New("crawlsim: sender needs a target URL")
	}
	if o.SignatureHeader == "" {
		o.SignatureHeader = verify.DefaultHeader
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.RetryDelays == nil {
		o.RetryDelays = DefaultRetryDelays
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	return &Sender{o: o, sem: make(chan struct{}, o.Concurrency), ticker: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	}}, nil
}

// job is one delivery in flight and its record.
type job struct {
	body   []byte
	badSig bool
	dup    bool
	mu     sync.Mutex
	d      Delivery
}

// Send delivers a job: <kind>.started, then each page in scrape order
// (making it visible to the status endpoint as it goes), then, once every
// page had its first attempt, the job is completed and <kind>.completed is
// sent. A job with Options.Cancel is cancelled when its page CancelAt comes:
// its status turns cancelled, its remaining pages are delivered as
// cancelled failures, and <kind>.cancelled is sent last. Up to Concurrency POSTs run at once, so pages arrive unordered.
// Retries wait RetryDelays in the background and resend the same bytes with
// the same webhookId, so a page may arrive after crawl.completed. Send
// returns when every delivery is accepted or given up, or when ctx ends
// (what is still pending is then reported cancelled).
func (s *Sender) Send(ctx context.Context, c *Crawl) *Report {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		jobs []*job
	)
	launch := func(j *job) <-chan struct{} {
		mu.Lock()
		jobs = append(jobs, j)
		mu.Unlock()
		first := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, j, first)
		}()
		return first
	}
	wait := func(ch <-chan struct{}) {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}

	wait(launch(s.crawlEvent(c, c.EventType("started"))))

	var tick <-chan time.Time
	if s.o.Rate > 0 {
		var stop func()
		tick, stop = s.ticker(time.Duration(float64(time.Second) / s.o.Rate))
		defer stop()
	}
	// slots bounds the pages waiting for their first answer, so a large
	// crawl does not start a goroutine per page up front.
	slots := make(chan struct{}, s.o.Concurrency)
	for _, p := range c.Pages {
		if p.Index == c.CancelAt {
			c.Cancel()
		}
		c.Scrape(p.Index + 1)
		j := &job{body: p.Body, badSig: p.Has(FaultBadSignature), dup: p.Has(FaultDuplicate), d: Delivery{
			Type: c.EventType("page"), WebhookID: p.WebhookID, Page: p.Index, URL: p.URL, ScrapeID: p.ScrapeID,
			Success: p.Success, Faults: p.Faults, Bytes: len(p.Body)}}
		if p.Has(FaultDrop) {
			j.d.Outcome = OutcomeDropped
			mu.Lock()
			jobs = append(jobs, j)
			mu.Unlock()
			continue
		}
		if ctx.Err() != nil {
			mu.Lock()
			jobs = append(jobs, j)
			mu.Unlock()
			continue
		}
		if tick != nil {
			wait(tickChan(tick))
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		first := launch(j)
		go func() {
			wait(first)
			<-slots
		}()
	}
	for range cap(slots) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		final := c.FinalStatus()
		c.Finish(final)
		launch(s.crawlEvent(c, c.EventType(final)))
	}
	wg.Wait()

	r := &Report{CrawlID: c.ID, Kind: c.Kind, Target: s.o.Target, Status: c.Status(), RobotsBlocked: c.RobotsBlocked}
	for _, j := range jobs {
		j.mu.Lock()
		d := j.d
		j.mu.Unlock()
		if d.Outcome == "" {
			d.Outcome = OutcomeCancelled
		}
		r.Deliveries = append(r.Deliveries, d)
	}
	r.summarise()
	return r
}

// tickChan turns a ticker channel into a done-style channel for wait.
func tickChan(t <-chan time.Time) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		<-t
		close(ch)
	}()
	return ch
}

func (s *Sender) crawlEvent(c *Crawl, typ string) *job {
	id := uuid.NewString()
	body, _ := c.eventBody(typ, id)
	return &job{body: body, d: Delivery{Type: typ, WebhookID: id, Page: -1, Success: true, Bytes: len(body)}}
}

// run delivers one job until a 2xx, the last retry, or the end of ctx.
// first is closed once the first attempt is answered (or abandoned).
func (s *Sender) run(ctx context.Context, j *job, first chan struct{}) {
	var once sync.Once
	firstDone := func() { once.Do(func() { close(first) }) }
	defer firstDone()
	for try := 0; ; try++ {
		code, answer := s.post(ctx, j)
		firstDone()
		if ctx.Err() != nil && !ok2xx(code) {
			return
		}
		if ok2xx(code) {
			if j.dup {
				// The same bytes again, as when an answer is lost and the
				// sender retries a delivery that was in fact persisted.
				s.post(ctx, j)
			}
			j.mu.Lock()
			j.d.Outcome, j.d.Answer = OutcomeAccepted, answer
			j.mu.Unlock()
			return
		}
		if try >= len(s.o.RetryDelays) {
			j.mu.Lock()
			j.d.Outcome = OutcomeRejected
			j.mu.Unlock()
			return
		}
		t := time.NewTimer(s.o.RetryDelays[try])
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// post makes one attempt and records it. It returns the HTTP status (0 when
// there was no answer in time) and the answer's "status" field.
func (s *Sender) post(ctx context.Context, j *job) (int, string) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ""
	}
	defer func() { <-s.sem }()
	code, answer := s.do(ctx, j)
	j.mu.Lock()
	j.d.Attempts++
	j.d.Statuses = append(j.d.Statuses, code)
	j.mu.Unlock()
	return code, answer
}

func (s *Sender) do(ctx context.Context, j *job) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.Target, bytes.NewReader(j.body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	if s.o.Secret != "" {
		secret := s.o.Secret
		if j.badSig {
			secret = "not-" + secret
		}
		req.Header.Set(s.o.SignatureHeader, verify.Header(secret, j.body))
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &a)
	return resp.StatusCode, a.Status
}
