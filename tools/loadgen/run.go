package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// Imported as wire: loadgen names its generated deliveries "delivery".
	wire "github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const secret = "bench-secret"

type options struct {
	duration  time.Duration
	conns     int
	size      int
	modes     []string
	group     []string
	half      bool
	rounds    int
	halfConns int
	dir       string
	env       map[string]string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var o options
	var modes, group string
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each measured phase")
	fs.IntVar(&o.conns, "conns", 32, "concurrent HTTP connections (closed loop)")
	fs.IntVar(&o.size, "size", 5000, "approximate delivery size in bytes")
	fs.StringVar(&modes, "sync", "always,lazy", "server sync modes to run: always, lazy")
	fs.StringVar(&group, "group-commit", "auto", "receiver group commit settings to run: auto (the receiver's default: on when the server syncs always), true, false or both")
	fs.BoolVar(&o.half, "half", true, "also measure latency at half the peak rate")
	fs.IntVar(&o.halfConns, "half-conns", 0, "connections of the half-peak phase (default: -conns)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of every phase; figures are their medians")
	fs.StringVar(&o.dir, "dir", "", "store directory (default: a temporary directory on the default disk)")
	o.env = map[string]string{}
	fs.Func("env", "KEY=VALUE: a receiver setting for the run (repeatable), e.g. -env NATS_DEDUP_WINDOW=2m", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", kv)
		}
		o.env[k] = v
		return nil
	})
	durable := fs.Bool("durable", false, "run the durable phase instead (durable.go): the write-ahead log receiver against the fsync ceiling and the lazy receiver")
	durableConns := fs.String("durable-conns", "32,128", "connection counts of the durable phase: low,high")
	ext := externalFlags(fs)
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
	if o.halfConns <= 0 {
		o.halfConns = o.conns
	}
	if *durable {
		if o.duration > time.Minute || o.rounds < 1 || o.rounds > 10 {
			return errors.New("keep it bounded: -duration at most 1m, -rounds 1 to 10")
		}
		return benchDurable(ctx, o, *durableConns, ext.profile, out)
	}
	o.modes = strings.Split(modes, ",")
	switch group {
	case "both":
		o.group = []string{"true", "false"}
	case "auto", "true", "false":
		o.group = []string{group}
	default:
		return fmt.Errorf("-group-commit: %q is not auto, true, false or both", group)
	}
	if o.duration > time.Minute || o.conns > 512 || o.halfConns > 512 || o.rounds < 1 || o.rounds > 10 {
		return errors.New("keep it bounded: -duration at most 1m, -conns and -half-conns at most 512, -rounds 1 to 10")
	}
	if ext.server != "" {
		return ext.run(ctx, o, out)
	}
	fmt.Fprintf(out, "receiver benchmark: %d conns, ~%d B deliveries, %d rounds of %s per phase, GOMAXPROCS=%d\n",
		o.conns, o.size, o.rounds, o.duration, maxProcs())
	fmt.Fprintf(out, "%-7s %-6s %-9s %10s %9s %9s %12s %7s\n", "sync", "group", "phase", "acks/s", "p50", "p99", "ceiling/s", "ratio")
	for _, mode := range o.modes {
		for _, g := range o.group {
			on := g == "true" || g == "auto" && mode == "always"
			if err := bench(ctx, o, mode == "always", on, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func maxProcs() int { return runtimeGOMAXPROCS() }

// bench runs the rounds for one server sync mode (see round) and prints
// their medians.
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
	maps.Copy(env, o.env)
	// The binary's runtime settings (receivercmd.Run), for the whole process.
	addrs, stop, err := startReceiver(ctx, env, receivercmd.Options{TuneRuntime: true})
	if err != nil {
		return err
	}
	defer stop()
	t := targets{receiver: addrs.HTTP, gen: newGenerator(o.size)}
	// The floor: a second receiver, on the same server, whose publisher
	// acknowledges at once. It does all the HTTP work of a delivery
	// (read, signature, validation, answer) and none of JetStream's.
	floorEnv := maps.Clone(env)
	floorEnv["NATS_EMBEDDED"], floorEnv["NATS_URL"] = "false", addrs.NATS
	floorAddrs, stopFloor, err := startReceiver(ctx, floorEnv, receivercmd.Options{Publisher: &instant{}})
	if err != nil {
		return err
	}
	defer stopFloor()
	t.floor = floorAddrs.HTTP
	// Bare net/http (which echo runs on): read the body, answer 200. No
	// routing, signature or validation: what HTTP itself costs here.
	bareAddr, stopBare, err := startBare()
	if err != nil {
		return err
	}
	defer stopBare()
	t.bare = bareAddr
	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		return err
	}
	defer nc.Close()
	if t.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return err
	}

	fmt.Fprintf(out, "runtime: GOGC=%d (the receiver binary's default unless GOGC is set)\n", gogc())
	mode, grp := "lazy", "-"
	if syncAlways {
		mode = "always"
	}
	if group {
		grp = "on"
	}
	if _, err := loadHTTP(ctx, t.receiver, webhookPath, t.gen, o.conns, 500*time.Millisecond, 0); err != nil {
		return err
	}
	// The machine's speed drifts by tens of percent within a minute (other
	// work on the shared cores, the disk's writeback), so each ratio is
	// taken within its round and the summary is the median of the rounds.
	var rounds []round
	for i := range o.rounds {
		r, err := t.round(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-7s %-6s round %d/%d: peak %.0f/s, ceiling %.0f/s, ratio %.0f%%, floor %.0f/s; half-peak p99 %s, JetStream alone %s\n",
			mode, grp, i+1, o.rounds, r.peak.rate, r.ceiling.rate, r.ratio(), r.floor.rate, r.half.p(99), r.store.p(99))
		rounds = append(rounds, r)
	}
	report(out, o, mode, grp, syncAlways, rounds)
	return nil
}

const webhookPath = "/webhooks/crawl"

// targets are what a round loads.
type targets struct {
	receiver, floor, bare string // HTTP addresses
	js                    jetstream.JetStream
	gen                   *generator
}

// round holds one round's phases.
type round struct {
	peak, floor, bare, half, store, ceiling result
}

func (r round) ratio() float64 { return 100 * r.peak.rate / r.ceiling.rate }

// round runs one round: the receiver at its peak (closed loop); the floor
// and bare net/http the same way; the receiver at half its peak rate (open
// loop) and the store alone at that rate; and the ceiling. The stream is
// purged after every phase that writes to it, so each starts on an empty
// store and none pays for writing back another's data.
func (t targets) round(ctx context.Context, o options) (round, error) {
	var r round
	var err error
	step := func(phase func() error, writes bool) {
		if err == nil {
			err = phase()
		}
		if err == nil && writes {
			err = purge(ctx, t.js)
		}
	}
	post := func(res *result, addr string, conns int, rate float64) func() error {
		return func() (err error) {
			*res, err = loadHTTP(ctx, addr, webhookPath, t.gen, conns, o.duration, rate)
			return err
		}
	}
	step(post(&r.peak, t.receiver, o.conns, 0), true)
	step(post(&r.floor, t.floor, o.conns, 0), false)
	step(post(&r.bare, t.bare, o.conns, 0), false)
	if o.half && err == nil && r.peak.rate > 0 {
		step(post(&r.half, t.receiver, o.halfConns, r.peak.rate/2), true)
		step(func() error {
			r.store = loadJetStream(ctx, t.js, t.gen, o.halfConns, o.duration, r.peak.rate/2)
			return nil
		}, true)
	}
	step(func() (err error) {
		r.ceiling, err = ceiling(ctx, t.js, t.gen, o.duration)
		return err
	}, true)
	return r, err
}

// report prints the medians of the rounds.
func report(out io.Writer, o options, mode, grp string, syncAlways bool, rounds []round) {
	pick := func(f func(round) result) result {
		var rs []result
		for _, r := range rounds {
			rs = append(rs, f(r))
		}
		return merge(rs)
	}
	var ratios []float64
	for _, r := range rounds {
		ratios = append(ratios, r.ratio())
	}
	peak, half, ceil := pick(func(r round) result { return r.peak }), pick(func(r round) result { return r.half }), pick(func(r round) result { return r.ceiling })
	floor, bare, store := pick(func(r round) result { return r.floor }), pick(func(r round) result { return r.bare }), pick(func(r round) result { return r.store })
	line := func(phase string, r result, ratio string) {
		fmt.Fprintf(out, "%-7s %-6s %-9s %10.0f %9s %9s %12.0f %7s\n", mode, grp, phase, r.rate,
			r.p(50), r.p(99), ceil.rate, ratio)
	}
	note := func(phase string, r result, format string, args ...any) {
		fmt.Fprintf(out, "%-7s %-6s %-9s %10.0f %9s %9s   %s\n", mode, "", phase, r.rate, r.p(50), r.p(99), fmt.Sprintf(format, args...))
	}
	line("peak", peak, fmt.Sprintf("%.0f%%", median(ratios)))
	if o.half {
		line("half-peak", half, "")
		note("store", store, "JetStream alone at the half-peak rate (publish, wait for the PubAck)")
	}
	note("ceiling", ceil, "")
	if syncAlways {
		note("floor", floor, "the HTTP work alone (instant publisher)")
	} else {
		// Both the HTTP work and the lazy store are CPU on the same two
		// cores: a delivery costs about 1/floor + 1/ceiling of a second, so
		// the receiver should reach about 1/(1/floor + 1/ceiling) (a rough
		// estimate: it reaches JetStream in process, the ceiling over TCP).
		bound := 1 / (1/floor.rate + 1/ceil.rate)
		note("floor", floor, "bound 1/(1/floor+1/ceiling) = %.0f/s (%.0f%% of ceiling); peak is %.0f%% of it",
			bound, 100*bound/ceil.rate, 100*peak.rate/bound)
		bareBound := 1 / (1/bare.rate + 1/ceil.rate)
		note("http", bare, "bare net/http: bound 1/(1/http+1/ceiling) = %.0f/s (%.0f%% of ceiling)", bareBound, 100*bareBound/ceil.rate)
	}
	if len(ratios) > 1 {
		fmt.Fprintf(out, "%-7s %-6s ratio over %d rounds: median %.0f%%, range %.0f%%-%.0f%%\n",
			mode, grp, len(ratios), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	if peak.errors+half.errors+ceil.errors > 0 {
		fmt.Fprintf(out, "        errors: receiver %d non-2xx, ceiling %d\n", peak.errors+half.errors, ceil.errors)
	}
}

// startReceiver runs a receiver in this process until stop is called.
func startReceiver(ctx context.Context, env map[string]string, opts receivercmd.Options) (receivercmd.Addrs, func(), error) {
	rctx, cancel := context.WithCancel(ctx)
	ready := make(chan receivercmd.Addrs, 1)
	done := make(chan error, 1)
	opts.Ready = func(a receivercmd.Addrs) { ready <- a }
	getenv := func(k string) string {
		if k == "GOGC" || k == "GOMEMLIMIT" { // the runtime's own, from this process
			return os.Getenv(k)
		}
		return env[k]
	}
	go func() {
		done <- receivercmd.RunWithOptions(rctx, []string{"receiver"}, getenv, io.Discard, io.Discard, opts)
	}()
	var addrs receivercmd.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		return addrs, nil, fmt.Errorf("receiver: %w", err)
	}
	stop := func() { cancel(); <-done }
	if err := waitReady("http://" + addrs.HTTP + "/readyz"); err != nil {
		stop()
		return addrs, nil, err
	}
	return addrs, stop, nil
}

// gogc is the collector's current target (/gc/gogc:percent).
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// startBare serves bare net/http on a free loopback port: each request's
// body is read and answered 200 with a fixed JSON body.
func startBare() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	answer := []byte(`{"status":"accepted","webhookId":"00000000-0000-4000-8000-000000000000"}` + "\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// instant is the floor receiver's publisher: every delivery is "stored" at
// once, nothing reaches JetStream.
type instant struct{ seq atomic.Uint64 }

func (i *instant) Publish(context.Context, *wire.Envelope) (stream.Ack, error) {
	return stream.Ack{Sequence: i.seq.Add(1)}, nil
}

// merge sums up the rounds of one phase: the median rate, CPU and bytes
// to storage per delivery, every latency.
func merge(rounds []result) result {
	var m result
	var rates, cpus, written []float64
	for _, r := range rounds {
		rates = append(rates, r.rate)
		cpus = append(cpus, float64(r.cpu))
		written = append(written, r.written)
		m.latencies = append(m.latencies, r.latencies...)
		m.errors += r.errors
	}
	if len(rates) > 0 {
		m.rate = median(rates)
		m.cpu = time.Duration(median(cpus))
		m.written = median(written)
	}
	return m
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// purge empties the events stream (the receiver's default, CRAWL_EVENTS)
// between phases.
func purge(ctx context.Context, js jetstream.JetStream) error {
	st, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	if err := st.Purge(ctx); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}

func waitReady(url string) error {
	if awaitUp(nil, 10*time.Second, 20*time.Millisecond, func() bool { return readyz(url) }) != nil {
		return errors.New("receiver not ready in 10s")
	}
	return nil
}

// readyz says whether url (a /readyz) answers 200 within ops' probe time.
func readyz(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// generator makes signed deliveries of about size bytes, each with a fresh
// webhookId. The webhookId is the body's last field, so that the HMAC of
// everything before it is computed once: a delivery costs the load
// generator a clone of that state and two SHA-256 blocks, not a pass over
// 5 KB (the receiver still verifies the whole body). Ids are a random run
// prefix and a counter, in the UUID v4 layout.
type generator struct {
	prefix, suffix []byte    // body = prefix + id + suffix
	mac            hash.Hash // HMAC state after prefix
	run            [8]byte
	seq            atomic.Uint64
}

func newGenerator(size int) *generator {
	filler := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", size/56+1)[:max(size-420, 0)]
	prefix := fmt.Sprintf(`{"success":true,"type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","data":[{"markdown":"# Bench\n\n%s","metadata":{"title":"Bench","language":"en","sourceURL":"https://example.com/bench","url":"https://example.com/bench","statusCode":200,"contentType":"text/html","scrapeId":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}}],"metadata":{"tenant":"bench"},"webhookId":"`, filler)
	g := &generator{prefix: []byte(prefix), suffix: []byte(`"}`), mac: hmac.New(sha256.New, []byte(secret))}
	g.mac.Write(g.prefix)
	_, _ = rand.Read(g.run[:])
	return g
}

// delivery is one generated delivery: its webhookId and signature header.
type delivery struct {
	id  [36]byte
	sig [71]byte // "sha256=" + 64 hex digits
}

func (g *generator) next(d *delivery) {
	n := g.seq.Add(1)
	var raw [16]byte
	copy(raw[:8], g.run[:])
	binary.BigEndian.PutUint64(raw[8:], n)
	raw[6] = raw[6]&0x0f | 0x40
	raw[8] = raw[8]&0x3f | 0x80
	hex.Encode(d.id[0:8], raw[0:4])
	d.id[8] = '-'
	hex.Encode(d.id[9:13], raw[4:6])
	d.id[13] = '-'
	hex.Encode(d.id[14:18], raw[6:8])
	d.id[18] = '-'
	hex.Encode(d.id[19:23], raw[8:10])
	d.id[23] = '-'
	hex.Encode(d.id[24:36], raw[10:16])
	c, err := g.mac.(hash.Cloner).Clone()
	if err != nil {
		panic(err)
	}
	m := c.(hash.Hash)
	m.Write(d.id[:])
	m.Write(g.suffix)
	var sum [sha256.Size]byte
	copy(d.sig[:], "sha256=")
	hex.Encode(d.sig[7:], m.Sum(sum[:0]))
}

// size is the length of every body.
func (g *generator) size() int { return len(g.prefix) + 36 + len(g.suffix) }

// body returns the whole body of d.
func (g *generator) body(d *delivery) []byte {
	b := make([]byte, 0, g.size())
	b = append(b, g.prefix...)
	b = append(b, d.id[:]...)
	return append(b, g.suffix...)
}

// msg is a fresh delivery as the receiver publishes it: subject, body and
// the headers of a delivery's envelope.
func (g *generator) msg() *nats.Msg {
	var d delivery
	g.next(&d)
	h := events.Head{Type: "crawl.page", CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", WebhookID: string(d.id[:])}
	env := wire.NewEnvelope("crawl.events", h, g.body(&d), time.Now())
	return &nats.Msg{Subject: env.Subject, Data: env.Body, Header: env.Header()}
}

type result struct {
	rate      float64
	latencies []time.Duration
	errors    int64
	// cpu is this process's CPU time (user and system) per answered
	// delivery over the phase, where the phase measured it.
	cpu time.Duration
	// written is the bytes this process caused to be written to storage
	// per answered delivery (zero where not measured).
	written float64
}

func (r result) p(q int) string {
	if len(r.latencies) == 0 {
		return "-"
	}
	slices.Sort(r.latencies)
	d := r.latencies[min(len(r.latencies)-1, len(r.latencies)*q/100)]
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// loadHTTP posts deliveries over conns keep-alive connections for d (see
// load).
//
// The client is a minimal HTTP/1.1 writer and reader on raw connections:
// net/http's client cost the load generator about as much CPU as the
// receiver's whole handler, on the same two cores.
func loadHTTP(ctx context.Context, addr, path string, g *generator, conns int, d time.Duration, rate float64) (result, error) {
	clients := make([]client, 0, conns)
	for range conns {
		c, err := dialHTTP(addr, path, g)
		if err != nil {
			return result{}, err
		}
		defer c.conn.Close()
		clients = append(clients, c)
	}
	return load(ctx, clients, d, rate), nil
}

// loadJetStream publishes the same messages as the ceiling, but each
// waiting for its PubAck (as a delivery does), from conns publishers: the
// store alone, under the load the receiver gets (see load).
func loadJetStream(ctx context.Context, js jetstream.JetStream, g *generator, conns int, d time.Duration, rate float64) result {
	clients := make([]client, conns)
	for i := range clients {
		clients[i] = &jsClient{ctx: ctx, js: js, g: g}
	}
	return load(ctx, clients, d, rate)
}

// client sends one delivery at a time.
type client interface {
	// send sends one and says whether it was acknowledged.
	send() bool
	// usable is false once the client cannot send any more.
	usable() bool
}

// load makes the clients send for d. With rate 0 each client sends back to
// back (closed loop: the peak); with a rate, sends start on a fixed
// schedule (open loop) on the first free client, and latency counts from
// the scheduled start, so that a stall is counted for every send it
// delayed.
func load(ctx context.Context, clients []client, d time.Duration, rate float64) result {
	pool := make(chan client, len(clients))
	for _, c := range clients {
		pool <- c
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, 1<<16)
		ok, bad   atomic.Int64
		wg        sync.WaitGroup
	)
	send := func(c client, scheduled time.Time) {
		if !c.send() {
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
		for range clients {
			c := <-pool
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && c.usable() {
					send(c, time.Now())
				}
			}()
		}
	} else {
		interval := time.Duration(float64(time.Second) / rate)
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
				var c client
				select {
				case c = <-pool:
				case <-ctx.Done():
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					send(c, at)
					pool <- c
				}()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return result{rate: float64(ok.Load()) / elapsed.Seconds(), latencies: latencies, errors: bad.Load()}
}

// jsClient publishes one message at a time and waits for its PubAck.
type jsClient struct {
	ctx context.Context
	js  jetstream.JetStream
	g   *generator
}

func (c *jsClient) send() bool {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	_, err := c.js.PublishMsg(ctx, c.g.msg())
	return err == nil
}

func (c *jsClient) usable() bool { return c.ctx.Err() == nil }

// httpConn is one keep-alive connection of the load generator.
type httpConn struct {
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	head   []byte // request line and headers up to the signature's value
	g      *generator
	broken bool
}

func dialHTTP(addr, path string, g *generator) (*httpConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s: ",
		path, addr, g.size(), verify.DefaultHeader)
	return &httpConn{conn: conn, r: bufio.NewReaderSize(conn, 4096), w: bufio.NewWriterSize(conn, 16<<10), head: []byte(head), g: g}, nil
}

func (c *httpConn) send() bool {
	status, err := c.post()
	return err == nil && status == 200
}

func (c *httpConn) usable() bool { return !c.broken }

// post sends one fresh delivery and reads the answer's status, discarding
// its body.
func (c *httpConn) post() (int, error) {
	var d delivery
	c.g.next(&d)
	_ = c.conn.SetDeadline(time.Now().Add(15 * time.Second))
	c.w.Write(c.head)
	c.w.Write(d.sig[:])
	c.w.WriteString("\r\n\r\n")
	c.w.Write(c.g.prefix)
	c.w.Write(d.id[:])
	c.w.Write(c.g.suffix)
	if err := c.w.Flush(); err != nil {
		c.broken = true
		return 0, err
	}
	status, err := readAnswer(c.r)
	if err != nil {
		c.broken = true
	}
	return status, err
}

// readAnswer reads one HTTP/1.1 response with a Content-Length body.
func readAnswer(r *bufio.Reader) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil {
				return 0, fmt.Errorf("bad Content-Length %q", line)
			}
		}
	}
	if length < 0 {
		return 0, errors.New("answer without Content-Length")
	}
	_, err = r.Discard(length)
	return status, err
}

// ceiling publishes the same payloads straight to JetStream, asynchronously
// (up to 4096 PubAcks pending), with the same headers a delivery gets, for d.
func ceiling(ctx context.Context, js jetstream.JetStream, g *generator, d time.Duration) (result, error) {
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
	// refused counts the publishes the client would not take (too many
	// PubAcks outstanding); bad, those the server did not acknowledge.
	var refused int64
	for ctx.Err() == nil {
		msg := g.msg()
		at := time.Now()
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			refused++
			continue
		}
		futures <- sent{at, f}
	}
	close(futures)
	<-collected
	elapsed := time.Since(start)
	return result{rate: float64(len(latencies)) / elapsed.Seconds(), latencies: latencies, errors: bad + refused}, nil
}
