package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The durable phase (-durable) measures the receiver's durable fast layout
// against the targets it was built for, all ratios within one round:
//
//   - the durable receiver (write-ahead log, lazily syncing embedded
//     server) at the low and high connection counts, against the per-write
//     fsync ceiling: raw async publishes to a server that syncs always;
//   - the same at the high count against the lazy receiver (no log, the
//     same lazy server settings), which promises nothing on power loss;
//   - the p99 latency of each at half its own peak rate (open loop).
//
// Targets: durable at the low count ≥ 3x the ceiling; at the high count
// ≥ 5x the ceiling and ≥ 70% of lazy; half-peak p99 ≤ 2x lazy's.
const (
	targetLowVsCeiling  = 3.0
	targetHighVsCeiling = 5.0
	targetHighVsLazy    = 0.70
	targetHalfP99       = 2.0
)

// durableRound is one round of the durable phase.
type durableRound struct {
	low, high, lazy, halfDurable, halfLazy, ceiling result
}

func (r durableRound) lowVsCeiling() float64  { return r.low.rate / r.ceiling.rate }
func (r durableRound) highVsCeiling() float64 { return r.high.rate / r.ceiling.rate }
func (r durableRound) highVsLazy() float64    { return r.high.rate / r.lazy.rate }
func (r durableRound) halfP99() float64 {
	return float64(r.halfDurable.quantile(99)) / float64(max(r.halfLazy.quantile(99), 1))
}

// quantile is the q-th percentile latency (0 without latencies).
func (r result) quantile(q int) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

// durableTarget is a receiver of the durable phase with a client of its
// server, to purge the stream between phases.
type durableTarget struct {
	http string
	js   jetstream.JetStream
	stop func()
}

func startDurableTarget(ctx context.Context, env map[string]string) (durableTarget, error) {
	addrs, stop, err := startReceiver(ctx, env, receivercmd.Options{TuneRuntime: true})
	if err != nil {
		return durableTarget{}, err
	}
	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		stop()
		return durableTarget{}, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		stop()
		return durableTarget{}, err
	}
	return durableTarget{http: addrs.HTTP, js: js, stop: func() { nc.Close(); stop() }}, nil
}

// parseConns reads "-durable-conns low,high".
func parseConns(s string) (low, high int, err error) {
	a, b, ok := strings.Cut(s, ",")
	if ok {
		low, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			high, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	if !ok || err != nil || low < 1 || high < low || high > 512 {
		return 0, 0, fmt.Errorf("-durable-conns: %q is not low,high with 1 <= low <= high <= 512", s)
	}
	return low, high, nil
}

// benchDurable runs the durable phase: three receivers in this process,
// each with its own embedded server and store on the same disk, loaded one
// at a time.
func benchDurable(ctx context.Context, o options, conns, profile string, out io.Writer) error {
	low, high, err := parseConns(conns)
	if err != nil {
		return err
	}
	base := o.dir
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "crawlhouse-bench-durable-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	common := map[string]string{
		"RECEIVER_LISTEN": "127.0.0.1:0", "WEBHOOK_SECRETS": secret, "LOG_LEVEL": "warn",
		"NATS_EMBEDDED": "true", "NATS_URL": "nats://127.0.0.1:-1", "RECEIVER_MAX_INFLIGHT": "4096",
	}
	maps.Copy(common, o.env)
	with := func(kv ...string) map[string]string {
		env := maps.Clone(common)
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	durableEnv := with("NATS_STORE_DIR", filepath.Join(dir, "durable", "nats"),
		"NATS_SYNC_ALWAYS", "false", "RECEIVER_WAL_DIR", filepath.Join(dir, "durable", "wal"))
	// The settings the durable receiver runs with, defaults included.
	durableCfg, err := receivercmd.Load(func(k string) string { return durableEnv[k] })
	if err != nil {
		return fmt.Errorf("durable receiver: %w", err)
	}
	durable, err := startDurableTarget(ctx, durableEnv)
	if err != nil {
		return fmt.Errorf("durable receiver: %w", err)
	}
	defer durable.stop()
	lazy, err := startDurableTarget(ctx, with("NATS_STORE_DIR", filepath.Join(dir, "lazy", "nats"), "NATS_SYNC_ALWAYS", "false"))
	if err != nil {
		return fmt.Errorf("lazy receiver: %w", err)
	}
	defer lazy.stop()
	// The ceiling's server: a receiver's embedded server that syncs every
	// write, loaded by raw async publishes (its HTTP side stays idle).
	always, err := startDurableTarget(ctx, with("NATS_STORE_DIR", filepath.Join(dir, "always", "nats"),
		"NATS_SYNC_ALWAYS", "true", "RECEIVER_GROUP_COMMIT", "false"))
	if err != nil {
		return fmt.Errorf("sync-always server: %w", err)
	}
	defer always.stop()

	gen := newGenerator(o.size)
	fmt.Fprintf(out, "durable receiver benchmark: write-ahead log + lazy embedded server (NATS_SYNC_INTERVAL %s) at %d and %d conns, lazy receiver at %d, ceiling = raw publishes to a server that syncs always; ~%d B deliveries, %d rounds of %s per phase, GOMAXPROCS=%d\n",
		durableCfg.SyncInterval, low, high, high, o.size, o.rounds, o.duration, maxProcs())
	for _, t := range []durableTarget{durable, lazy} {
		if _, err := loadHTTP(ctx, t.http, webhookPath, gen, low, 500*time.Millisecond, 0); err != nil {
			return err
		}
		if err := purge(ctx, t.js); err != nil {
			return err
		}
	}
	var rounds []durableRound
	for i := range o.rounds {
		var r durableRound
		var err error
		step := func(t durableTarget, phase func() error) {
			if err == nil {
				err = phase()
			}
			if err == nil {
				err = purge(ctx, t.js)
			}
		}
		post := func(res *result, t durableTarget, conns int, rate float64, prof string) func() error {
			return func() (err error) {
				if profile != "" && prof != "" && i == 0 {
					stop, perr := startCPUProfile(profile + "." + prof + ".prof")
					if perr != nil {
						return perr
					}
					defer func() { err = errors.Join(err, stop()) }()
				}
				return measured(res, o.duration, func() (err error) {
					*res, err = loadHTTP(ctx, t.http, webhookPath, gen, conns, o.duration, rate)
					return err
				})
			}
		}
		step(durable, post(&r.low, durable, low, 0, ""))
		step(durable, post(&r.high, durable, high, 0, "durable"))
		step(lazy, post(&r.lazy, lazy, high, 0, "lazy"))
		if err == nil && r.high.rate > 0 && r.lazy.rate > 0 {
			step(durable, post(&r.halfDurable, durable, high, r.high.rate/2, ""))
			step(lazy, post(&r.halfLazy, lazy, high, r.lazy.rate/2, ""))
		}
		step(always, func() error {
			return measured(&r.ceiling, o.duration, func() (err error) {
				r.ceiling, err = ceiling(ctx, always.js, gen, o.duration)
				return err
			})
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "round %d/%d: durable %.0f/s @%d, %.0f/s @%d; lazy %.0f/s @%d; ceiling %.0f/s; half-peak p99 durable %s, lazy %s; durable/ceiling %.1fx @%d, %.1fx @%d; durable/lazy %.0f%% @%d; p99 ratio %.2f; CPU per delivery durable %s @%d, %s @%d, lazy %s @%d; bytes to storage per delivery durable %.0f @%d, %.0f @%d, lazy %.0f @%d\n",
			i+1, o.rounds, r.low.rate, low, r.high.rate, high, r.lazy.rate, high, r.ceiling.rate,
			r.halfDurable.p(99), r.halfLazy.p(99), r.lowVsCeiling(), low, r.highVsCeiling(), high, 100*r.highVsLazy(), high, r.halfP99(),
			us(r.low.cpu), low, us(r.high.cpu), high, us(r.lazy.cpu), high, r.low.written, low, r.high.written, high, r.lazy.written, high)
		rounds = append(rounds, r)
	}
	reportDurable(out, low, high, rounds)
	if syncs, deliveries, err := walSyncs(durable.http); err == nil && syncs > 0 {
		fmt.Fprintf(out, "  write-ahead log: %.0f synced commits for %.0f deliveries (%.1f per fsync)\n", syncs, deliveries, deliveries/syncs)
	}
	return nil
}

// walSyncs reads from the durable receiver's /metrics how many synced
// commits the log made and how many deliveries it answered.
func walSyncs(addr string) (syncs, deliveries float64, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "crawlhouse_receiver_wal_sync_seconds_count":
			syncs = f
		case "crawlhouse_webhook_publish_seconds_count":
			deliveries = f
		}
	}
	return syncs, deliveries, nil
}

// reportDurable prints each ratio's median and range over the rounds
// beside its target.
func reportDurable(out io.Writer, low, high int, rounds []durableRound) {
	ratio := func(name string, f func(durableRound) float64, target float64, atMost bool, unit string) {
		var xs []float64
		for _, r := range rounds {
			xs = append(xs, f(r))
		}
		m := median(xs)
		ok := m >= target
		cmp := ">="
		if atMost {
			ok, cmp = m <= target, "<="
		}
		verdict := "met"
		if !ok {
			verdict = "MISSED"
		}
		scale := 1.0
		if unit == "%" {
			scale = 100
		}
		fmt.Fprintf(out, "  %-34s median %6.2f%s  range %.2f-%.2f%s  target %s %.2f%s  %s\n", name, scale*m, unit,
			scale*slices.Min(xs), scale*slices.Max(xs), unit, cmp, scale*target, unit, verdict)
	}
	pick := func(f func(durableRound) result) result {
		var rs []result
		for _, r := range rounds {
			rs = append(rs, f(r))
		}
		return merge(rs)
	}
	phases := []struct {
		name string
		r    result
	}{
		{fmt.Sprintf("durable @%d", low), pick(func(r durableRound) result { return r.low })},
		{fmt.Sprintf("durable @%d", high), pick(func(r durableRound) result { return r.high })},
		{fmt.Sprintf("lazy @%d", high), pick(func(r durableRound) result { return r.lazy })},
		{"durable half-peak", pick(func(r durableRound) result { return r.halfDurable })},
		{"lazy half-peak", pick(func(r durableRound) result { return r.halfLazy })},
		{"ceiling (sync always)", pick(func(r durableRound) result { return r.ceiling })},
	}
	fmt.Fprintf(out, "%-22s %10s %9s %9s %9s %12s\n", "phase (medians)", "acks/s", "p50", "p99", "CPU/dlv", "storage B/dlv")
	for _, p := range phases {
		cpu, written := "-", "-"
		if p.r.cpu > 0 {
			cpu = us(p.r.cpu)
		}
		if p.r.written > 0 {
			written = fmt.Sprintf("%.0f", p.r.written)
		}
		fmt.Fprintf(out, "%-22s %10.0f %9s %9s %9s %12s\n", p.name, p.r.rate, p.r.p(50), p.r.p(99), cpu, written)
	}
	fmt.Fprintf(out, "targets (ratios within each round; %d rounds):\n", len(rounds))
	ratio(fmt.Sprintf("durable/ceiling @%d", low), durableRound.lowVsCeiling, targetLowVsCeiling, false, "x")
	ratio(fmt.Sprintf("durable/ceiling @%d", high), durableRound.highVsCeiling, targetHighVsCeiling, false, "x")
	ratio(fmt.Sprintf("durable/lazy @%d", high), durableRound.highVsLazy, targetHighVsLazy, false, "%")
	ratio("half-peak p99 durable/lazy", durableRound.halfP99, targetHalfP99, true, "x")
	// merge sums the rounds' errors.
	var errs []string
	for _, p := range phases {
		if p.r.errors > 0 {
			errs = append(errs, fmt.Sprintf("%s %d", p.name, p.r.errors))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(out, "  errors (non-2xx answers or failed publishes): %s\n", strings.Join(errs, ", "))
	}
}

// measured runs phase, which fills res over d, and sets res's CPU time and
// bytes written to storage per answered delivery, both of this process
// (load generator, receiver, embedded server).
func measured(res *result, d time.Duration, phase func() error) error {
	cpu0, _ := cpuTimes(0)
	written0 := storageWrites(os.Getpid())
	err := phase()
	cpu1, _ := cpuTimes(0)
	written := storageWrites(os.Getpid()) - written0
	if n := res.rate * d.Seconds(); n > 0 {
		res.cpu = time.Duration(float64(cpu1-cpu0) / n)
		res.written = float64(written) / n
	}
	return err
}

// startCPUProfile profiles this process (load generator, receiver and
// embedded server) into path until the returned function is called.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-phase-cpuprofile: %w (not with -cpuprofile)", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
