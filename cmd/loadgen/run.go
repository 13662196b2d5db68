package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const secret = "bench-secret"

type options struct {
	duration time.Duration
	conns    int
	size     int
	modes    []string
	group    []bool
	half     bool
	dir      string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var o options
	var modes, group string
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each measured phase")
	fs.IntVar(&o.conns, "conns", 32, "concurrent HTTP connections (closed loop)")
	fs.IntVar(&o.size, "size", 5000, "approximate delivery size in bytes")
	fs.StringVar(&modes, "sync", "always,lazy", "server sync modes to run: always, lazy")
	fs.StringVar(&group, "group-commit", "true", "receiver group commit settings to run: true, false or both")
	fs.BoolVar(&o.half, "half", true, "also measure latency at half the peak rate")
	fs.StringVar(&o.dir, "dir", "", "store directory (default: a temporary directory on the default disk)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (load generator, receiver and server) here")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o.modes = strings.Split(modes, ",")
	switch group {
	case "both":
		o.group = []bool{true, false}
	case "false":
		o.group = []bool{false}
	default:
		o.group = []bool{true}
	}
	if o.duration > time.Minute || o.conns > 512 {
		return errors.New("keep it bounded: -duration at most 1m, -conns at most 512")
	}
	fmt.Fprintf(out, "receiver benchmark: %d conns, ~%d B deliveries, %s per phase, GOMAXPROCS=%d\n",
		o.conns, o.size, o.duration, maxProcs())
	fmt.Fprintf(out, "%-7s %-6s %-9s %10s %9s %9s %12s %7s\n", "sync", "group", "phase", "acks/s", "p50", "p99", "ceiling/s", "ratio")
	for _, mode := range o.modes {
		for _, g := range o.group {
			if err := bench(ctx, o, mode == "always", g, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func maxProcs() int { return runtimeGOMAXPROCS() }

// bench runs the phases for one server sync mode: the receiver at its peak
// (closed loop), the receiver at half that rate (open loop), and the
// ceiling.
func bench(ctx context.Context, o options, syncAlways, group bool, out io.Writer) error {
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "crawlhouse-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	} else {
		dir = fmt.Sprintf("%s/%d", dir, time.Now().UnixNano())
		defer os.RemoveAll(dir)
	}
	env := map[string]string{
		"RECEIVER_LISTEN": "127.0.0.1:0", "WEBHOOK_SECRETS": secret, "LOG_LEVEL": "warn",
		"NATS_EMBEDDED": "true", "NATS_URL": "nats://127.0.0.1:-1", "NATS_STORE_DIR": dir,
		"NATS_SYNC_ALWAYS": fmt.Sprint(syncAlways), "RECEIVER_GROUP_COMMIT": fmt.Sprint(group),
		"RECEIVER_MAX_INFLIGHT": "4096",
	}
	rctx, stop := context.WithCancel(ctx)
	ready := make(chan receiver.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- receiver.RunWithOptions(rctx, []string{"receiver"}, func(k string) string { return env[k] },
			io.Discard, io.Discard, receiver.Options{Ready: func(a receiver.Addrs) { ready <- a }})
	}()
	var addrs receiver.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		stop()
		return fmt.Errorf("receiver: %w", err)
	}
	defer func() { stop(); <-done }()
	url := "http://" + addrs.HTTP + "/webhooks/crawl"
	if err := waitReady("http://" + addrs.HTTP + "/readyz"); err != nil {
		return err
	}
	mode, grp := "lazy", "-"
	if syncAlways {
		mode = "always"
	}
	if group {
		grp = "on"
	}

	gen := newGenerator(o.size)
	warm, _ := loadHTTP(ctx, url, gen, o.conns, 500*time.Millisecond, 0)
	_ = warm
	peak, err := loadHTTP(ctx, url, gen, o.conns, o.duration, 0)
	if err != nil {
		return err
	}
	ceil, err := ceiling(ctx, addrs.NATS, gen, o.duration)
	if err != nil {
		return err
	}
	line := func(phase string, r result) {
		fmt.Fprintf(out, "%-7s %-6s %-9s %10.0f %9s %9s %12.0f %6.0f%%\n", mode, grp, phase, r.rate,
			r.p(50), r.p(99), ceil.rate, 100*r.rate/ceil.rate)
	}
	line("peak", peak)
	if o.half && peak.rate > 0 {
		half, err := loadHTTP(ctx, url, gen, o.conns*4, o.duration, peak.rate/2)
		if err != nil {
			return err
		}
		line("half-peak", half)
	}
	fmt.Fprintf(out, "%-7s %-6s %-9s %10.0f %9s %9s\n", mode, "", "ceiling", ceil.rate, ceil.p(50), ceil.p(99))
	if peak.errors+ceil.errors > 0 {
		fmt.Fprintf(out, "        errors: receiver %d non-2xx, ceiling %d\n", peak.errors, ceil.errors)
	}
	return nil
}

func waitReady(url string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return errors.New("receiver not ready in 10s")
}

// generator makes signed deliveries of about size bytes, each with a fresh
// webhookId, from one template.
type generator struct {
	template []byte
	idAt     int
}

func newGenerator(size int) *generator {
	filler := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", size/56+1)[:max(size-420, 0)]
	body := fmt.Sprintf(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"%s","data":[{"markdown":"# Bench\n\n%s","metadata":{"title":"Bench","language":"en","sourceURL":"https://example.com/bench","url":"https://example.com/bench","statusCode":200,"contentType":"text/html","scrapeId":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}}],"metadata":{"tenant":"bench"}}`,
		"00000000-0000-4000-8000-000000000000", filler)
	return &generator{template: []byte(body), idAt: strings.Index(body, "00000000-0000-4000")}
}

// next returns a delivery, its signature header and its webhookId.
func (g *generator) next() ([]byte, string, string) {
	b := slices.Clone(g.template)
	id := uuid.NewString()
	copy(b[g.idAt:], id)
	return b, verify.Header(secret, b), id
}

type result struct {
	rate      float64
	latencies []time.Duration
	errors    int64
}

func (r result) p(q int) string {
	if len(r.latencies) == 0 {
		return "-"
	}
	slices.Sort(r.latencies)
	d := r.latencies[min(len(r.latencies)-1, len(r.latencies)*q/100)]
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// loadHTTP posts deliveries over conns keep-alive connections for d. With
// rate 0 each connection posts back to back (closed loop: the peak); with a
// rate, deliveries start on a fixed schedule (open loop) and latency counts
// from the scheduled start.
func loadHTTP(ctx context.Context, url string, g *generator, conns int, d time.Duration, rate float64) (result, error) {
	tr := &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, 1<<16)
		ok, bad   atomic.Int64
		wg        sync.WaitGroup
	)
	post := func(scheduled time.Time) {
		body, sig, _ := g.next()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set(verify.DefaultHeader, sig)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			bad.Add(1)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			bad.Add(1)
			return
		}
		lat := time.Since(scheduled)
		ok.Add(1)
		mu.Lock()
		latencies = append(latencies, lat)
		mu.Unlock()
	}
	start := time.Now()
	if rate == 0 {
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					post(time.Now())
				}
			}()
		}
	} else {
		interval := time.Duration(float64(time.Second) / rate)
		sem := make(chan struct{}, conns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				at := start.Add(time.Duration(i) * interval)
				if wait := time.Until(at); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				} else if ctx.Err() != nil {
					return
				}
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					post(at)
				}()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return result{rate: float64(ok.Load()) / elapsed.Seconds(), latencies: latencies, errors: bad.Load()}, nil
}

// ceiling publishes the same payloads straight to JetStream, asynchronously
// (up to 4096 PubAcks pending), with the same headers a delivery gets, for d.
func ceiling(ctx context.Context, url string, g *generator, d time.Duration) (result, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return result{}, err
	}
	type sent struct {
		at time.Time
		f  jetstream.PubAckFuture
	}
	futures := make(chan sent, 8192)
	var latencies []time.Duration
	var bad int64
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for s := range futures {
			select {
			case <-s.f.Ok():
				latencies = append(latencies, time.Since(s.at))
			case <-s.f.Err():
				bad++
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for ctx.Err() == nil {
		body, _, id := g.next()
		msg := &nats.Msg{Subject: "crawl.events.crawl.page", Data: body, Header: nats.Header{
			"Nats-Msg-Id": {id}, "Crawlhouse-Crawl-Id": {"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"},
			"Crawlhouse-Event-Type": {"crawl.page"}, "Crawlhouse-Received-At": {time.Now().UTC().Format(time.RFC3339Nano)},
			"Crawlhouse-Body-Size": {fmt.Sprint(len(body))},
		}}
		at := time.Now()
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			bad++
			continue
		}
		futures <- sent{at, f}
	}
	close(futures)
	<-collected
	elapsed := time.Since(start)
	return result{rate: float64(len(latencies)) / elapsed.Seconds(), latencies: latencies, errors: bad}, nil
}
