package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// buildBinaries builds the receiver and sink as users run them.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../../cmd/receiver", "../../cmd/sink")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// requireAccounted fails the test unless the run happened and every check
// of every crawl holds.
func requireAccounted(t *testing.T, res *Result, err error, crawls int) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Checks {
		if !c.OK() {
			t.Errorf("crawl %s: %s: expected %d, got %d %s", c.Crawl, c.Name, c.Expected, c.Got, c.Detail)
		}
	}
	if want := crawls * 6; len(res.Checks) != want {
		t.Errorf("%d checks, want %d", len(res.Checks), want)
	}
	if len(res.SecretsInLogs) > 0 {
		t.Errorf("secrets in logs: %v", res.SecretsInLogs)
	}
}

// workDir is the run's state and logs directory; should the test fail, the
// end of every process's log is printed (ClickHouse's included), since the
// directory goes with the test.
func workDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
		chLogs, _ := filepath.Glob(filepath.Join(dir, "clickhouse", "*.log"))
		for _, f := range append(logs, chLogs...) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			t.Logf("last %d lines of %s:\n%s", min(len(lines), 40), f, strings.Join(lines[max(len(lines)-40, 0):], "\n"))
		}
	})
	return dir
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSoakShort is `make soak` in small: three crawls with every fault
// while a sink is SIGKILLed and ClickHouse restarts; every page must be
// accounted for, and the accepted-to-queryable latency and the RSS of both
// processes are reported.
func TestSoakShort(t *testing.T) {
	bin := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := runSoak(ctx, Options{
		BinDir:  bin,
		WorkDir: workDir(t),
		Crawls:  3, Pages: 150, PageBytes: 3000,
		Rate: 150, Concurrency: 16,
		Faults: crawlsim.Faults{Duplicates: 0.1, Drops: 0.1, Failures: 0.05, BadSignatures: 0.04, Oversized: 0.02, OversizeBytes: 2 << 20},
		Sinks:  2, KillSink: true, RestartClickHouse: true,
		AlertThreshold:  5,
		LatencyRate:     200,
		LatencyDuration: 3 * time.Second,
		Settle:          2 * time.Minute,
		Seed:            7,
		Out:             logWriter{t},
	})
	requireAccounted(t, res, err, 3)
	if res.LatencyRows < 500 {
		t.Errorf("latency measured over %d rows, want the 600 of the steady phase", res.LatencyRows)
	}
	for name, rss := range res.PeakRSS {
		if rss == 0 || rss > 1<<30 {
			t.Errorf("%s peak RSS %d bytes: not sampled or above 1 GiB", name, rss)
		}
	}
	if len(res.Events) != 4 {
		t.Errorf("disruptions %v, want sink kill+start and ClickHouse stop+start", res.Events)
	}
}

// TestSoakCluster is the scale-out case: a three-node JetStream cluster
// with the stream at three replicas, three receivers each connected to a
// different node, two sinks on the one durable consumer. Mid-run the stream
// leader is stopped and a sink is SIGKILLed: every delivery that got a 2xx
// must be in ClickHouse once, and those refused during the election must
// have been retried by the sender and landed.
func TestSoakCluster(t *testing.T) {
	bin := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := runSoak(ctx, Options{
		BinDir:  bin,
		WorkDir: workDir(t),
		Crawls:  3, Pages: 300, PageBytes: 3000,
		Rate: 100, Concurrency: 16,
		Faults:    crawlsim.Faults{Duplicates: 0.1, Drops: 0.05, Failures: 0.05},
		Receivers: 3, Sinks: 2, Cluster: true, KillSink: true,
		AlertThreshold: 5,
		Settle:         2 * time.Minute,
		Seed:           11,
		Out:            logWriter{t},
	})
	requireAccounted(t, res, err, 3)
	var leaderStopped bool
	for _, e := range res.Events {
		leaderStopped = leaderStopped || strings.Contains(e, "stream leader")
	}
	if !leaderStopped {
		t.Errorf("disruptions %v: the stream leader was not stopped", res.Events)
	}
}
