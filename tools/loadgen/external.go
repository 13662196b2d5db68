package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// external is the external-server phase: the compose and chart layout,
// where the receiver reaches a separate nats-server process over TCP,
// measured against the peer (an ingestion agent that answers before the
// message is stored; see peer.go) on the same server in the same run.
type external struct {
	server string // nats-server binary; "" runs the embedded phases instead
	peer   bool
}

func externalFlags(fs *flag.FlagSet) *external {
	e := &external{}
	fs.StringVar(&e.server, "nats-server", "", "path of a nats-server binary: run the external-server phase (the receiver and the peer against a separate nats-server process, lazy sync) instead of the embedded ones")
	fs.BoolVar(&e.peer, "peer", true, "with -nats-server: also measure the peer (off to profile the receiver alone)")
	return e
}

// extRound is one round of the external phase.
type extRound struct {
	receiver, peer, ceiling result
}

func (r extRound) ratio() float64 {
	if r.peer.rate == 0 {
		return 0
	}
	return r.receiver.rate / r.peer.rate
}

// run starts a nats-server process on a fresh store, the receiver (in this
// process, the binary's runtime settings) and the peer against it, and runs
// the rounds: the receiver at its peak, the peer at its peak (in turn
// first, so that neither always runs on a warmer machine), and the ceiling
// (raw asynchronous publishes to the same server).
func (e *external) run(ctx context.Context, o options, out io.Writer) error {
	dir, err := os.MkdirTemp(o.dir, "crawlhouse-bench-external-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, stopServer, err := startNATSServer(e.server, dir)
	if err != nil {
		return err
	}
	defer stopServer()
	env := map[string]string{
		"RECEIVER_LISTEN": "127.0.0.1:0", "WEBHOOK_SECRETS": secret, "LOG_LEVEL": "warn",
		"NATS_EMBEDDED": "false", "NATS_URL": url,
		"RECEIVER_GROUP_COMMIT": "false", "RECEIVER_MAX_INFLIGHT": "4096",
	}
	maps.Copy(env, o.env)
	addrs, stop, err := startReceiver(ctx, env, receiver.Options{TuneRuntime: true})
	if err != nil {
		return err
	}
	defer stop()
	gen := newGenerator(o.size)
	var peerAddr string
	if e.peer {
		p, err := startPeer(url, "crawl.events.crawl.page")
		if err != nil {
			return err
		}
		defer p.close()
		peerAddr = p.addr
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "external nats-server (%s, lazy sync), %d conns, ~%d B deliveries, %d rounds of %s, GOMAXPROCS=%d, GOGC=%d\n",
		filepath.Base(e.server), o.conns, o.size, o.rounds, o.duration, maxProcs(), gogc())
	for _, a := range []string{addrs.HTTP, peerAddr} {
		if a == "" {
			continue
		}
		if _, err := loadHTTP(ctx, a, webhookPath, gen, o.conns, 500*time.Millisecond, 0); err != nil {
			return err
		}
		if err := purge(ctx, js); err != nil {
			return err
		}
	}
	var rounds []extRound
	for i := range o.rounds {
		var r extRound
		phases := []struct {
			res  *result
			addr string
		}{{&r.receiver, addrs.HTTP}, {&r.peer, peerAddr}}
		if i%2 == 1 {
			slices.Reverse(phases)
		}
		for _, ph := range phases {
			if ph.addr == "" {
				continue
			}
			if *ph.res, err = loadHTTP(ctx, ph.addr, webhookPath, gen, o.conns, o.duration, 0); err != nil {
				return err
			}
			if err := purge(ctx, js); err != nil {
				return err
			}
		}
		if r.ceiling, err = ceiling(ctx, js, gen, o.duration); err != nil {
			return err
		}
		if err := purge(ctx, js); err != nil {
			return err
		}
		fmt.Fprintf(out, "external round %d/%d: receiver %.0f/s (p99 %s), peer %.0f/s (p99 %s), ratio %.2fx; ceiling %.0f/s\n",
			i+1, o.rounds, r.receiver.rate, r.receiver.p(99), r.peer.rate, r.peer.p(99), r.ratio(), r.ceiling.rate)
		rounds = append(rounds, r)
	}
	pick := func(f func(extRound) result) result {
		var rs []result
		for _, r := range rounds {
			rs = append(rs, f(r))
		}
		return merge(rs)
	}
	rec, peer, ceil := pick(func(r extRound) result { return r.receiver }), pick(func(r extRound) result { return r.peer }), pick(func(r extRound) result { return r.ceiling })
	fmt.Fprintf(out, "%-9s %10s %9s %9s   %s\n", "phase", "acks/s", "p50", "p99", "")
	fmt.Fprintf(out, "%-9s %10.0f %9s %9s   verifies, validates, deduplicates, answers after the PubAck\n", "receiver", rec.rate, rec.p(50), rec.p(99))
	if e.peer {
		fmt.Fprintf(out, "%-9s %10.0f %9s %9s   no signature check, answers before the PubAck\n", "peer", peer.rate, peer.p(50), peer.p(99))
	}
	fmt.Fprintf(out, "%-9s %10.0f %9s %9s   raw async publishes, no HTTP\n", "ceiling", ceil.rate, "-", "-")
	if e.peer {
		var ratios []float64
		for _, r := range rounds {
			ratios = append(ratios, r.ratio())
		}
		fmt.Fprintf(out, "receiver/peer over %d rounds: median %.2fx, range %.2fx-%.2fx (target: at least 1.00x)\n",
			len(ratios), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	if n := rec.errors + peer.errors; n > 0 {
		fmt.Fprintf(out, "errors: receiver %d non-2xx, peer %d non-2xx\n", rec.errors, peer.errors)
	}
	return nil
}

// startNATSServer runs the nats-server binary on a free loopback port with
// JetStream on a store under dir, syncing lazily (sync_interval 2m, the
// server's default, spelled out: the compose layout's), and returns its URL
// once it accepts connections. stop ends it with SIGTERM (SIGKILL after
// 10 s) and waits.
func startNATSServer(bin, dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(dir, "nats.conf")
	store := filepath.Join(dir, "store")
	body := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n  sync_interval: \"2m\"\n}\n", port, store)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return "", nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
			return "", nil, fmt.Errorf("nats-server exited at start: %s", log)
		default:
		}
		if nc, err := nats.Connect(url); err == nil {
			nc.Close()
			return url, stop, nil
		}
	}
	stop()
	return "", nil, errors.New("nats-server not accepting connections within 20s")
}
