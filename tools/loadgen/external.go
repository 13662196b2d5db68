package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// external is the external-server phase: the compose and chart layout,
// where the receiver reaches a separate nats-server process over TCP,
// measured against the peer (an ingestion agent, see external_peer.go) on
// the same server in the same run, in two configurations: answering before
// its PubAck, as the target was set, and after it, as the agent ships.
type external struct {
	server string // nats-server binary; "" runs the embedded phases instead
	peer   bool
	agent  string // the agent's binary (external_agent.go); "": not measured
	// receiverBin is the receiver's binary: "" serves the receiver phase
	// from this process (its runtime settings, its CPU counted with the
	// load generator's), else from a process of its own, as the agent.
	receiverBin string
	// profile is the prefix of the CPU profiles of the first round's
	// receiver and peer phases: <profile>.receiver.prof and
	// <profile>.peer.prof of this process (load generator included), and
	// <profile>.receiver.server.prof and <profile>.peer.server.prof of the
	// nats-server.
	profile string
}

func externalFlags(fs *flag.FlagSet) *external {
	e := &external{}
	fs.StringVar(&e.server, "nats-server", "", "path of a nats-server binary: run the external-server phase (the receiver and the peer against a separate nats-server process, lazy sync) instead of the embedded ones")
	fs.BoolVar(&e.peer, "peer", true, "with -nats-server: also measure the peer (off to profile the receiver alone)")
	fs.StringVar(&e.agent, "agent", "", "with -nats-server: path of a Redpanda Connect binary (with its http_server input and nats_jetstream output): also measure the agent itself, as it ships, against the same server")
	fs.StringVar(&e.receiverBin, "receiver-bin", "", "with -nats-server: path of the receiver's binary (go build ./cmd/receiver): serve the receiver phase from a process of its own, as the agent runs, instead of this one (-phase-cpuprofile then profiles the load generator alone in that phase)")
	fs.StringVar(&e.profile, "phase-cpuprofile", "", "with -nats-server: write CPU profiles of the first round's receiver and peer phases, of this process and of the nats-server, to PREFIX.{receiver,peer,acked}[.server].prof; with -durable: of the first round's durable and lazy phases at the high connection count, to PREFIX.{durable,lazy}.prof")
	return e
}

// extRound is one round of the external phase.
type extRound struct {
	// receiver, peer (answers before its PubAck), acked (the peer
	// answering after its PubAck, as the agent ships) and agent (the
	// agent itself, with -agent).
	receiver, peer, acked, agent extPhase
	floor, ceiling               result
}

// extPhase is one loaded phase of a round, with what it cost per answered
// delivery: CPU time and read and write system calls in this process (the
// receiver or the peer, and the load generator) and in the nats-server's.
type extPhase struct {
	res            result
	cpu, serverCPU time.Duration
	sys, serverSys float64
}

// extSums adds up the runs of one phase of a round.
type extSums struct {
	runs           []result
	acks           float64
	took           time.Duration
	self, server   time.Duration
	sys, serverSys int64
}

func (s *extSums) add(r result, d, self, server time.Duration, sys, serverSys int64) {
	s.runs = append(s.runs, r)
	s.acks += r.rate * d.Seconds()
	s.took += d
	s.self, s.server = s.self+self, s.server+server
	s.sys, s.serverSys = s.sys+sys, s.serverSys+serverSys
}

// phase is the phase over all its runs: the deliveries answered over the
// time they took, and the costs over those deliveries.
func (s *extSums) phase() extPhase {
	var ph extPhase
	ph.res = merge(s.runs)
	if s.acks == 0 || s.took == 0 {
		return ph
	}
	ph.res.rate = s.acks / s.took.Seconds()
	ph.cpu = time.Duration(float64(s.self) / s.acks)
	ph.serverCPU = time.Duration(float64(s.server) / s.acks)
	ph.sys = float64(s.sys) / s.acks
	ph.serverSys = float64(s.serverSys) / s.acks
	return ph
}

// over is a's rate over b's (0 when b carried nothing).
func over(a, b extPhase) float64 {
	if b.res.rate == 0 {
		return 0
	}
	return a.res.rate / b.res.rate
}

func (r extRound) ratio() float64      { return over(r.receiver, r.peer) }
func (r extRound) ackedRatio() float64 { return over(r.receiver, r.acked) }
func (r extRound) agentRatio() float64 { return over(r.receiver, r.agent) }

// run starts a nats-server process on a fresh store, the receiver (in this
// process, the binary's runtime settings) and the peer against it, and runs
// the rounds: the receiver and the acked peer at their peaks, each in two
// halves around the peer answering before its PubAck (A B peer B A, the
// two in turn first), then the floor and the ceiling (raw asynchronous
// publishes to the same server).
func (e *external) run(ctx context.Context, o options, out io.Writer) error {
	dir, err := os.MkdirTemp(o.dir, "crawlhouse-bench-external-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, profPort, serverPid, stopServer, err := startNATSServer(e.server, dir)
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
	var addrs receivercmd.Addrs
	recPid := 0
	if e.receiverBin != "" {
		addr, pid, stop, err := startReceiverProcess(e.receiverBin, dir, env)
		if err != nil {
			return err
		}
		defer stop()
		addrs.HTTP, recPid = addr, pid
	} else {
		a, stop, err := startReceiver(ctx, env, receivercmd.Options{TuneRuntime: true})
		if err != nil {
			return err
		}
		defer stop()
		addrs = a
	}
	gen := newGenerator(o.size)
	// The floor: a second receiver whose publisher acknowledges at once:
	// the receiver's HTTP work (read, signature, validation, answer)
	// without JetStream, to set beside the peer's.
	floorEnv := maps.Clone(env)
	floorAddrs, stopFloor, err := startReceiver(ctx, floorEnv, receivercmd.Options{Publisher: &instant{}})
	if err != nil {
		return err
	}
	defer stopFloor()
	var peerAddr, ackedAddr string
	if e.peer {
		p, err := startPeer(url, "crawl.events.crawl.page", false)
		if err != nil {
			return err
		}
		defer p.close()
		a, err := startPeer(url, "crawl.events.crawl.page", true)
		if err != nil {
			return err
		}
		defer a.close()
		peerAddr, ackedAddr = p.addr, a.addr
	}
	var agentAddr string
	agentPid := 0
	if e.agent != "" {
		a, err := startAgent(e.agent, dir, url, "crawl.events.crawl.page")
		if err != nil {
			return err
		}
		defer a.stop()
		agentAddr, agentPid = a.addr, a.pid
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

	where := "in this process"
	if e.receiverBin != "" {
		where = "a process of its own (" + filepath.Base(e.receiverBin) + ")"
	}
	fmt.Fprintf(out, "external nats-server (%s, lazy sync), %d conns, ~%d B deliveries, %d rounds of %s, GOMAXPROCS=%d, GOGC=%d, the receiver in %s\n",
		filepath.Base(e.server), o.conns, o.size, o.rounds, o.duration, maxProcs(), gogc(), where)
	for _, a := range []string{addrs.HTTP, peerAddr, ackedAddr, agentAddr} {
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
		// Each phase adds its runs up in sum, and the round's figure for it
		// (ph) is made from them at the end.
		type phase struct {
			ph   *extPhase
			sum  *extSums
			addr string
			name string
			d    time.Duration
			pid  int // a process of its own serving addr (the agent, -receiver-bin), or 0
			// answersStored: it answers after the PubAck, so every delivery
			// it answered 2xx must be in the stream when the phase ends.
			answersStored bool
		}
		var recSum, ackedSum, peerSum, agentSum extSums
		rec := phase{&r.receiver, &recSum, addrs.HTTP, "receiver", o.duration / 2, recPid, true}
		acked := phase{&r.acked, &ackedSum, ackedAddr, "acked", o.duration / 2, 0, true}
		if i%2 == 1 {
			rec, acked = acked, rec
		}
		// The two compared, the receiver and the acked peer, each run in
		// two halves around the middle (A B peer agent B A, then B A peer
		// agent A B): a load that drifts over the round weighs on both
		// alike, where one phase each would give the later one the other
		// minute; the agent sits in the middle, as far from either end.
		phases := []phase{rec, acked, {&r.peer, &peerSum, peerAddr, "peer", o.duration, 0, false},
			{&r.agent, &agentSum, agentAddr, "agent", o.duration, agentPid, true}, acked, rec}
		for _, ph := range phases {
			if ph.addr == "" {
				continue
			}
			// The first round's first run of each phase is profiled.
			profile := e.profile != "" && i == 0 && len(ph.sum.runs) == 0
			var stopProfile func() error
			if profile {
				if stopProfile, err = startProfiles(e.profile+"."+ph.name, profPort, ph.d); err != nil {
					return err
				}
			}
			self0, server0 := cpuTimes(serverPid)
			sys0, serverSys0 := syscalls(os.Getpid()), syscalls(serverPid)
			_, own0 := cpuTimes(ph.pid)
			ownSys0 := syscalls(ph.pid)
			res, err := loadHTTP(ctx, ph.addr, webhookPath, gen, o.conns, ph.d, 0)
			self1, server1 := cpuTimes(serverPid)
			sys1, serverSys1 := syscalls(os.Getpid()), syscalls(serverPid)
			_, own1 := cpuTimes(ph.pid)
			ownSys1 := syscalls(ph.pid)
			// A phase's own process (the agent, -receiver-bin) counts with
			// the load generator's, as the receiver and the peers served
			// from this one do.
			self0, self1 = self0+own0, self1+own1
			sys0, sys1 = sys0+ownSys0, sys1+ownSys1
			ph.sum.add(res, ph.d, self1-self0, server1-server0, sys1-sys0, serverSys1-serverSys0)
			if profile {
				err = errors.Join(err, stopProfile())
			}
			if err != nil {
				return err
			}
			if ph.answersStored {
				if err := storedAll(ctx, js, ph.name, len(res.latencies)); err != nil {
					return err
				}
			}
			if err := purge(ctx, js); err != nil {
				return err
			}
		}
		phases = phases[:4] // each once
		for _, ph := range phases {
			*ph.ph = ph.sum.phase()
		}
		if r.floor, err = loadHTTP(ctx, floorAddrs.HTTP, webhookPath, gen, o.conns, o.duration, 0); err != nil {
			return err
		}
		if r.ceiling, err = ceiling(ctx, js, gen, o.duration); err != nil {
			return err
		}
		if err := purge(ctx, js); err != nil {
			return err
		}
		agentRate := ""
		if agentAddr != "" {
			agentRate = fmt.Sprintf(", agent %.0f/s (ratio %.2fx)", r.agent.res.rate, r.agentRatio())
		}
		fmt.Fprintf(out, "external round %d/%d: receiver %.0f/s, peer %.0f/s (ratio %.2fx), acked peer %.0f/s (ratio %.2fx)%s; floor %.0f/s, ceiling %.0f/s\n",
			i+1, o.rounds, r.receiver.res.rate, r.peer.res.rate, r.ratio(), r.acked.res.rate, r.ackedRatio(), agentRate, r.floor.rate, r.ceiling.rate)
		for _, ph := range phases {
			if ph.addr != "" {
				fmt.Fprintf(out, "  per delivery, %-8s CPU %s + server %s, syscalls %.1f + server %.1f\n",
					ph.name+":", us(ph.ph.cpu), us(ph.ph.serverCPU), ph.ph.sys, ph.ph.serverSys)
			}
		}
		rounds = append(rounds, r)
	}
	pick := func(f func(extRound) result) result {
		var rs []result
		for _, r := range rounds {
			rs = append(rs, f(r))
		}
		return merge(rs)
	}
	rec, peer, acked := pick(func(r extRound) result { return r.receiver.res }), pick(func(r extRound) result { return r.peer.res }), pick(func(r extRound) result { return r.acked.res })
	agentRes := pick(func(r extRound) result { return r.agent.res })
	floor, ceil := pick(func(r extRound) result { return r.floor }), pick(func(r extRound) result { return r.ceiling })
	fmt.Fprintf(out, "%-12s %10s %9s %9s   %s\n", "phase", "acks/s", "p50", "p99", "")
	fmt.Fprintf(out, "%-12s %10.0f %9s %9s   verifies, validates, deduplicates, answers after the PubAck\n", "receiver", rec.rate, rec.p(50), rec.p(99))
	if e.peer {
		fmt.Fprintf(out, "%-12s %10.0f %9s %9s   no signature check, answers before the PubAck\n", "peer", peer.rate, peer.p(50), peer.p(99))
		fmt.Fprintf(out, "%-12s %10.0f %9s %9s   no signature check, answers after the PubAck (the agent as it ships)\n", "acked peer", acked.rate, acked.p(50), acked.p(99))
	}
	if agentAddr != "" {
		fmt.Fprintf(out, "%-12s %10.0f %9s %9s   the agent itself (%s), answers after the PubAck\n", "agent", agentRes.rate, agentRes.p(50), agentRes.p(99), filepath.Base(e.agent))
	}
	fmt.Fprintf(out, "%-12s %10.0f %9s %9s   the receiver's HTTP work with a publisher that acknowledges at once\n", "floor", floor.rate, floor.p(50), floor.p(99))
	fmt.Fprintf(out, "%-12s %10.0f %9s %9s   raw async publishes, no HTTP\n", "ceiling", ceil.rate, "-", "-")
	type compared struct {
		name string
		f    func(extRound) float64
	}
	var cs []compared
	if e.peer {
		cs = append(cs, compared{"receiver/peer", extRound.ratio}, compared{"receiver/acked peer", extRound.ackedRatio})
	}
	if agentAddr != "" {
		cs = append(cs, compared{"receiver/agent", extRound.agentRatio})
	}
	for _, c := range cs {
		var ratios []float64
		for _, r := range rounds {
			ratios = append(ratios, c.f(r))
		}
		fmt.Fprintf(out, "%s over %d rounds: median %.2fx, range %.2fx-%.2fx (target: at least 1.00x)\n",
			c.name, len(ratios), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	if n := rec.errors + peer.errors + acked.errors + agentRes.errors; n > 0 {
		fmt.Fprintf(out, "errors: receiver %d non-2xx, peer %d non-2xx, acked peer %d non-2xx, agent %d non-2xx\n", rec.errors, peer.errors, acked.errors, agentRes.errors)
	}
	return nil
}

// storedAll checks that the stream holds at least the answered deliveries
// of a phase that answers after the PubAck: a rate is only counted for
// deliveries that were kept.
func storedAll(ctx context.Context, js jetstream.JetStream, name string, answered int) error {
	st, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs < uint64(answered) {
		return fmt.Errorf("%s: answered %d deliveries but the stream holds %d", name, answered, info.State.Msgs)
	}
	return nil
}

// startNATSServer runs the nats-server binary on a free loopback port with
// JetStream on a store under dir, syncing lazily (sync_interval 2m, the
// server's default, spelled out: the compose layout's), and returns its URL
// once it accepts connections. stop ends it with SIGTERM (SIGKILL after
// 10 s) and waits.
func startNATSServer(bin, dir string) (string, int, int, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", 0, 0, nil, err
	}
	profPort, err := freePort()
	if err != nil {
		return "", 0, 0, nil, err
	}
	conf := filepath.Join(dir, "nats.conf")
	store := filepath.Join(dir, "store")
	// prof_port serves the server's /debug/pprof on loopback, for
	// -server-cpuprofile.
	body := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nprof_port: %d\njetstream {\n  store_dir: %q\n  sync_interval: \"2m\"\n}\n", port, profPort, store)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return "", 0, 0, nil, err
	}
	pid, exited, stop, err := startProcess(filepath.Join(dir, "nats.log"), bin, "-c", conf)
	if err != nil {
		return "", 0, 0, nil, err
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	err = awaitUp(exited, 20*time.Second, 50*time.Millisecond, func() bool {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	switch {
	case errors.Is(err, errExited):
		log, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
		return "", 0, 0, nil, fmt.Errorf("nats-server exited at start: %s", log)
	case err != nil:
		stop()
		return "", 0, 0, nil, errors.New("nats-server not accepting connections within 20s")
	}
	return url, profPort, pid, stop, nil
}

// errExited and errNotUp are why awaitUp gave up.
var (
	errExited = errors.New("exited")
	errNotUp  = errors.New("not up in time")
)

// awaitUp probes up every interval until it says the process serves, and
// gives up when the process exits first (exited closed; nil: not watched)
// or limit has passed.
func awaitUp(exited <-chan struct{}, limit, interval time.Duration, up func() bool) error {
	for deadline := time.Now().Add(limit); ; time.Sleep(interval) {
		select {
		case <-exited:
			return errExited
		default:
		}
		if up() {
			return nil
		}
		if time.Now().After(deadline) {
			return errNotUp
		}
	}
}

// startProcess runs bin with args, its output to the file logPath, and
// returns its pid, a channel closed once it has exited, and stop, which
// ends it with SIGTERM (SIGKILL after 10 s) and waits.
func startProcess(logPath, bin string, args ...string) (int, <-chan struct{}, func(), error) {
	return startProcessEnv(logPath, nil, bin, args...)
}

// startProcessEnv is startProcess with the environment env ("K=V"; nil:
// this process's).
func startProcessEnv(logPath string, env []string, bin string, args ...string) (int, <-chan struct{}, func(), error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, nil, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return 0, nil, nil, fmt.Errorf("start %s: %w", bin, err)
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
	return cmd.Process.Pid, exited, stop, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startProfiles starts CPU profiles of this process and of the server
// for a phase of length d; the returned function ends them and writes
// them to prefix.prof and prefix.server.prof.
func startProfiles(prefix string, profPort int, d time.Duration) (func() error, error) {
	stopSelf, err := startCPUProfile(prefix + ".prof")
	if err != nil {
		return nil, err
	}
	server := make(chan error, 1)
	{
		go func() {
			u := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", profPort, max(1, int(d.Seconds())))
			resp, err := http.Get(u)
			if err != nil {
				server <- err
				return
			}
			defer resp.Body.Close()
			out, err := os.Create(prefix + ".server.prof")
			if err != nil {
				server <- err
				return
			}
			_, err = io.Copy(out, resp.Body)
			server <- errors.Join(err, out.Close())
		}()
	}
	return func() error {
		return errors.Join(stopSelf(), <-server)
	}, nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }

// cpuTimes is the CPU time (user and system) used so far by this process
// and by process pid (from /proc; zero where it cannot be read).
func cpuTimes(pid int) (self, other time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return self, 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return self, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return self, 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// Clock ticks of 1/100 s (USER_HZ on Linux).
	return self, time.Duration(ut+st) * 10 * time.Millisecond
}

// syscalls is the count of read and write system calls of process pid so
// far (/proc/<pid>/io; zero where it cannot be read).
func syscalls(pid int) int64 {
	io := procIO(pid)
	return io["syscr"] + io["syscw"]
}

// storageWrites is how many bytes process pid has caused to be written to
// storage so far, counted when it dirtied the pages (/proc/<pid>/io
// write_bytes; zero where it cannot be read): a lazy server's writes count
// in the phase that made them, not when the kernel writes them back.
func storageWrites(pid int) int64 { return procIO(pid)["write_bytes"] }

// procIO is /proc/<pid>/io as numbers by name (empty where it cannot be read).
func procIO(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}
