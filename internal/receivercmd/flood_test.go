package receivercmd

// A slow-body flood from many addresses, against the receiver binary: each
// address stays within its share of the pool of unverified bodies, so only
// their number fills it. The crawl API never retries, so every signed
// delivery from a new address must be answered 200 while the flood holds
// the pool: a full pool makes room by evicting its slowest body.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// flood holds perAddr connections from each of addrs loopback addresses
// (127.0.0.2 on), each announcing contentLength bytes and sending the
// first sent (see hold); their answers go to the returned channel.
func flood(t *testing.T, r *receiverProc, addrs, perAddr int, contentLength int64, sent int, trickle time.Duration) <-chan answer {
	t.Helper()
	raiseFileLimit(t)
	answers := make(chan answer, addrs*perAddr)
	for a := 0; a < addrs; a++ {
		src := fmt.Sprintf("127.0.0.%d", 2+a)
		for i := 0; i < perAddr; i++ {
			hold(t, src, r.addr(), contentLength, sent, trickle, answers)
		}
	}
	return answers
}

// waitFlood waits until each of n flood connections holds its place in the
// pool, or was answered: evicted, or refused as overloaded (while evicted
// bodies were still letting go of their bytes, or, before round three, by
// a full pool); with bytesHeld, until the held bodies hold bytesHeld(held)
// bytes too. It returns the bodies held.
func waitFlood(t *testing.T, r *receiverProc, n int, bytesHeld func(held float64) float64) float64 {
	t.Helper()
	rr := &r.runningReceiver
	held := waitMetric(t, rr, "crawlhouse_webhook_unverified", fmt.Sprintf("the %d flood connections held or answered", n), func(v float64) bool {
		return v+outcomeCount(t, rr, receiver.OutcomeEvicted)+outcomeCount(t, rr, receiver.OutcomeOverloaded) == float64(n) &&
			(bytesHeld == nil || metricValue(t, rr, "crawlhouse_webhook_unverified_bytes") == bytesHeld(v))
	})
	if held == 0 {
		t.Fatalf("no flood connection held: the test does not fill the pool")
	}
	if got := outcomeCount(t, rr, receiver.OutcomeAddressLimit); got != 0 {
		t.Fatalf("%v flood connections past their address's share: the flood is meant to stay within it", got)
	}
	return held
}

// signedFromNewAddresses sends n signed deliveries of size bytes, one after
// the other, each from a loopback address of its own that sent nothing
// before (127.0.1.1 on): each is judged by the untrusted pool. It returns
// their webhook ids and every answer that was not 200.
func signedFromNewAddresses(t *testing.T, r *receiverProc, n, size int) (ids []string, refused []answer) {
	t.Helper()
	for i := 0; i < n; i++ {
		body, id := page(t, randomText(size))
		a := sendFrom(t, fmt.Sprintf("127.0.1.%d", 1+i), r.addr(), rawRequest{body: body, sig: verify.Header(testSecret, body)})
		ids = append(ids, id)
		if a.status != 200 {
			refused = append(refused, a)
		}
	}
	return ids, refused
}

// TestSlowBodiesFromManyAddressesDoNotRefuseSigned: 50 addresses hold 22
// connections each (1 100, more than RECEIVER_MAX_UNVERIFIED's 1 024),
// each announcing 100 000 bytes and trickling a byte every two seconds;
// the minimum rate is no help (RECEIVER_BODY_TIMEOUT of 10m). Once the pool
// is full, seven signed deliveries, each from a new address, are all
// answered 200 and stored, the first evicting one slow body; the flood's
// bodies hold the bytes that arrived, not the bytes they announced.
func TestSlowBodiesFromManyAddressesDoNotRefuseSigned(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	const (
		addrs, perAddr = 50, 22
		n              = addrs * perAddr
		pool           = 1024 // RECEIVER_MAX_UNVERIFIED's default
		announced      = 100000
		genuine        = 7
	)
	r := startReceiverProcess(t, map[string]string{"NATS_URL": js.URL(),
		"RECEIVER_BODY_TIMEOUT": "10m", "RECEIVER_READ_TIMEOUT": "10m"})
	answers := flood(t, r, addrs, perAddr, announced, 1, 2*time.Second)
	if held := waitFlood(t, r, n, nil); held != pool {
		t.Fatalf("%v flood bodies held, want the pool full (%d)", held, pool)
	}
	for i := 0; i < n-pool; i++ {
		if a := <-answers; a.status != 429 || !strings.Contains(a.body, `"error":"overloaded"`) {
			t.Fatalf("a flood connection past the full pool: %d %s, want 429 overloaded", a.status, a.body)
		}
	}

	ids, refused := signedFromNewAddresses(t, r, genuine, 5000)
	if len(refused) > 0 {
		t.Fatalf("%d of %d signed deliveries from new addresses refused while %d slow bodies from %d addresses filled the pool, e.g. %d %s",
			len(refused), genuine, pool, addrs, refused[0].status, refused[0].body)
	}
	// The first made room by evicting one slow body (and left its place
	// to the next); the rest are still held.
	rr := &r.runningReceiver
	if got := outcomeCount(t, rr, receiver.OutcomeEvicted); got != n-pool+1 {
		t.Errorf("outcome evicted counted %v, want %d", got, n-pool+1)
	}
	if v := metricValue(t, rr, "crawlhouse_webhook_unverified"); v != pool-1 {
		t.Errorf("crawlhouse_webhook_unverified %v after the signed deliveries, want the %d flood bodies left", v, pool-1)
	}
	// Each holds one first buffer: what arrived, not what it announced.
	if v, want := metricValue(t, rr, "crawlhouse_webhook_unverified_bytes"), float64((pool-1)*receiver.UnverifiedChunk); v != want {
		t.Errorf("crawlhouse_webhook_unverified_bytes %v, want %v: what arrived, not the %d bytes each announced", v, want, announced)
	}
	requireStored(t, js, ids)
	if t.Failed() {
		t.Logf("receiver log:\n%s", r.log())
	}
}

// TestHalfSentBodiesFromManyAddressesDoNotRefuseSigned: 50 addresses
// open 4 connections each, announcing 700 000 bytes, sending 300 000 and
// stalling, more than RECEIVER_MAX_UNVERIFIED_BYTES holds while each
// address stays within its share. Once the pool's bytes are taken, seven
// signed deliveries of the same size, each from a new address, are all
// answered 200 and stored: the bytes a new body needs are made by evicting
// the slowest bodies.
func TestHalfSentBodiesFromManyAddressesDoNotRefuseSigned(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	const (
		addrs, perAddr  = 50, 4
		n               = addrs * perAddr
		maxBody         = 1 << 20
		pool            = 16 << 20
		announced, sent = 700000, 300000
		genuine         = 7
	)
	r := startReceiverProcess(t, map[string]string{"NATS_URL": js.URL(),
		"WEBHOOK_MAX_BODY_BYTES": strconv.Itoa(maxBody), "RECEIVER_MAX_INFLIGHT_BYTES": strconv.Itoa(64 << 20),
		"RECEIVER_MAX_UNVERIFIED_BYTES": strconv.Itoa(pool), "RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR": strconv.Itoa(4 << 20),
		"RECEIVER_BODY_TIMEOUT": "10m", "RECEIVER_READ_TIMEOUT": "10m"})
	// A buffer doubles from receiver.UnverifiedChunk as bytes arrive: 300
	// 000 bytes take 512 KiB. The connections come one at a time, each
	// held or answered before the next, so that the pool ends as full as
	// one body's growth (its old and new buffer at once) lets it be.
	const buffer = 512 << 10
	raiseFileLimit(t)
	answers := make(chan answer, n)
	var held float64
	for i := 0; i < n; i++ {
		hold(t, fmt.Sprintf("127.0.0.%d", 2+i%addrs), r.addr(), announced, sent, 0, answers)
		held = waitFlood(t, r, i+1, func(held float64) float64 { return held * buffer })
	}
	if pool-held*buffer > announced {
		t.Fatalf("%v flood bodies hold %v bytes: the pool of %d has room for a body of %d without evicting", held, held*buffer, pool, announced)
	}

	ids, refused := signedFromNewAddresses(t, r, genuine, announced-300)
	if len(refused) > 0 {
		t.Fatalf("%d of %d signed deliveries from new addresses refused while %v half-sent bodies from %d addresses held the pool's bytes, e.g. %d %s",
			len(refused), genuine, held, addrs, refused[0].status, refused[0].body)
	}
	if v := metricValue(t, &r.runningReceiver, "crawlhouse_webhook_unverified_bytes"); v > pool {
		t.Errorf("crawlhouse_webhook_unverified_bytes %v, above RECEIVER_MAX_UNVERIFIED_BYTES %d", v, pool)
	}
	requireStored(t, js, ids)
	if t.Failed() {
		t.Logf("receiver log:\n%s", r.log())
	}
}
