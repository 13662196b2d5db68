package receivercmd

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	rotatedSecret  = "rotated-secret"
	attackerSecret = "attacker-secret"
	userToken      = "Bearer user-credential-4c1d9e"
)

// quarantined waits until the quarantine stream of class holds n messages
// and returns them, oldest first.
func quarantined(t *testing.T, js jetstream.JetStream, class string, n int) []*jetstream.RawStreamMsg {
	t.Helper()
	name := "CRAWL_REJECTED_" + strings.ToUpper(class)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var msgs uint64
	for ctx.Err() == nil {
		if st, err := js.Stream(ctx, name); err == nil {
			if info, err := st.Info(ctx); err == nil {
				if msgs = info.State.Msgs; msgs == uint64(n) {
					var out []*jetstream.RawStreamMsg
					for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
						if m, err := st.GetMsg(ctx, seq); err == nil {
							out = append(out, m)
						}
					}
					return out
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s holds %d messages, never %d", name, msgs, n)
	return nil
}

// redriveRejectedCmd runs `receiver redrive-rejected` as users do.
func redriveRejectedCmd(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, append([]string{"receiver", "redrive-rejected"}, args...), func(k string) string { return env[k] }, &out, &out)
	if err != nil {
		t.Fatalf("redrive-rejected: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestQuarantineRedrive: a secret rotation done on the sender before the
// receiver: every delivery signed with the new secret is refused 401 as
// before, and kept with its reason; so is a signed delivery that fails
// validation. Once the operator adds the secret, redrive-rejected archives
// each rotated delivery exactly once; a second redrive adds nothing; what
// still does not verify or validate stays. Garbage is not kept, and no
// header value but the signature is.
func TestQuarantineRedrive(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL()})
	client := js.client(t)

	signed := func(secret string, body []byte) map[string]string {
		return map[string]string{verify.FirecrawlHeader: verify.Header(secret, body), "Authorization": userToken}
	}
	var rotatedIDs []string
	for i := 0; i < 3; i++ {
		body, id := page(t, "rotated")
		rotatedIDs = append(rotatedIDs, id)
		if a := r.postWith(t, body, signed(rotatedSecret, body)); a.status != 401 || !strings.Contains(a.body, "signature mismatch") {
			t.Fatalf("rotated delivery: %d %s, want 401 as before", a.status, a.body)
		}
	}
	// A stranger's well-formed delivery: kept, but never verifies.
	stranger, _ := page(t, "stranger")
	if a := r.postWith(t, stranger, signed(attackerSecret, stranger)); a.status != 401 {
		t.Fatalf("stranger: %d %s", a.status, a.body)
	}
	// Garbage with a signature, and a well-formed body without one: not kept.
	garbage := []byte(`{"hello":"world"}`)
	if a := r.postWith(t, garbage, signed(attackerSecret, garbage)); a.status != 401 {
		t.Fatalf("garbage: %d %s", a.status, a.body)
	}
	unsigned, _ := page(t, "unsigned")
	if a := r.postWith(t, unsigned, map[string]string{}); a.status != 401 {
		t.Fatalf("unsigned: %d %s", a.status, a.body)
	}
	// Signed with the current secret but invalid: 400, kept apart.
	invalid := []byte(`{"success":"yes","type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + uuid.NewString() + `","data":[]}`)
	if a := r.postWith(t, invalid, signed(testSecret, invalid)); a.status != 400 {
		t.Fatalf("invalid: %d %s", a.status, a.body)
	}

	unverified := quarantined(t, client, receiver.ClassUnverified, 4)
	inv := quarantined(t, client, receiver.ClassInvalid, 1)
	waitMetric(t, r, `crawlhouse_webhook_quarantine_dropped_total{class="unverified",reason="not_well_formed"}`, "1", func(v float64) bool { return v == 1 })
	if v := metricValue(t, r, `crawlhouse_webhook_quarantined_total{class="unverified"}`); v != 4 {
		t.Errorf("quarantined unverified = %v, want 4", v)
	}
	if v := metricValue(t, r, `crawlhouse_webhook_quarantined_total{class="invalid"}`); v != 1 {
		t.Errorf("quarantined invalid = %v, want 1", v)
	}
	for _, m := range append(unverified, inv...) {
		if m.Header.Get(receiver.HeaderRejectedReason) == "" || m.Header.Get(receiver.HeaderRejectedAt) == "" {
			t.Errorf("kept without reason or time: %v", m.Header)
		}
		if names := m.Header.Get(receiver.HeaderRejectedHeaders); !strings.Contains(names, "Authorization") || !strings.Contains(names, verify.FirecrawlHeader) {
			t.Errorf("header names %q", names)
		}
		raw, _ := json.Marshal(m.Header)
		if strings.Contains(string(raw), "user-credential") {
			t.Errorf("an Authorization value was kept: %s", raw)
		}
	}
	if got := unverified[0].Header.Get(receiver.HeaderRejectedReason); got != "signature mismatch" {
		t.Errorf("reason %q", got)
	}
	if got := inv[0].Header.Get(receiver.HeaderRejectedReason); !strings.Contains(got, "success") {
		t.Errorf("invalid reason %q does not name the field", got)
	}
	if n := streamMsgs(t, client); n != 0 {
		t.Fatalf("events stream holds %d messages before the redrive", n)
	}

	// Redrive with the old configuration: nothing verifies.
	env := map[string]string{"NATS_URL": js.URL(), "WEBHOOK_SECRETS": testSecret}
	if out := redriveRejectedCmd(t, env); !strings.Contains(out, "examined 5, archived 0") {
		t.Fatalf("redrive before the secret: %s", out)
	}
	// The operator adds the new secret.
	env["WEBHOOK_SECRETS"] = testSecret + "," + rotatedSecret
	out := redriveRejectedCmd(t, env)
	if !strings.Contains(out, "examined 5, archived 3 (of which 0 already stored), still refused 2") ||
		!strings.Contains(out, "unverified: signature mismatch") || !strings.Contains(out, "invalid: success: must be a boolean") {
		t.Fatalf("redrive: %s", out)
	}
	if n := streamMsgs(t, client); n != 3 {
		t.Fatalf("events stream holds %d messages, want 3", n)
	}
	ctx := context.Background()
	st, _ := client.Stream(ctx, "CRAWL_EVENTS")
	for _, id := range rotatedIDs {
		found := false
		for seq := uint64(1); seq <= 3; seq++ {
			if m, err := st.GetMsg(ctx, seq); err == nil && m.Header.Get("Nats-Msg-Id") == id {
				found = true
			}
		}
		if !found {
			t.Errorf("webhook %s not in the events stream", id)
		}
	}
	if out := redriveRejectedCmd(t, env); !strings.Contains(out, "examined 2, archived 0") {
		t.Fatalf("second redrive: %s", out)
	}
	if n := streamMsgs(t, client); n != 3 {
		t.Fatalf("after a second redrive the events stream holds %d messages, want 3", n)
	}
	quarantined(t, client, receiver.ClassUnverified, 1)
	quarantined(t, client, receiver.ClassInvalid, 1)
}

// TestQuarantineBoundedUnderFlood: a flood of well-formed deliveries with
// signatures of a secret nobody configured is answered 401 as ever; the
// unverified store stays within its byte budget, the queue within its
// bound, and the signed-but-invalid delivery kept before survives it.
func TestQuarantineBoundedUnderFlood(t *testing.T) {
	t.Parallel()
	const budget, queueBytes = 64 << 10, 32 << 10
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "LOG_LEVEL": "warn",
		"RECEIVER_QUARANTINE_UNVERIFIED_MAX_BYTES": "65536", "RECEIVER_QUARANTINE_QUEUE_BYTES": "32768"})
	client := js.client(t)

	invalid := []byte(`{"success":"yes","type":"crawl.page","id":"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c","webhookId":"` + uuid.NewString() + `","data":[]}`)
	if a := r.deliver(t, invalid); a.status != 400 {
		t.Fatalf("invalid: %d %s", a.status, a.body)
	}
	quarantined(t, client, receiver.ClassInvalid, 1)

	const flood = 400
	var peak float64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			v := metricValue(t, r, "crawlhouse_webhook_quarantine_queue_bytes")
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				body, _ := page(t, randomText(2000))
				if a := r.post(t, body, verify.DefaultHeader, verify.Header(attackerSecret, body)); a.status != 401 {
					t.Errorf("flood: %d %s", a.status, a.body)
				}
			}
		}()
	}
	for i := 0; i < flood; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	waitMetric(t, r, "crawlhouse_webhook_quarantine_queue_bytes", "0", func(v float64) bool { return v == 0 })
	close(stop)
	<-sampled

	kept := metricValue(t, r, `crawlhouse_webhook_quarantined_total{class="unverified"}`)
	dropped := metricValue(t, r, `crawlhouse_webhook_quarantine_dropped_total{class="unverified",reason="queue_full"}`)
	if kept+dropped != flood {
		t.Errorf("kept %v + dropped %v != %d refused", kept, dropped, flood)
	}
	if peak > queueBytes {
		t.Errorf("queue held %v bytes, bound %d", peak, queueBytes)
	}
	ctx := context.Background()
	st, err := client.Stream(ctx, "CRAWL_REJECTED_UNVERIFIED")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	if info.State.Bytes > budget || info.State.Msgs == 0 {
		t.Errorf("unverified store holds %d bytes in %d messages, budget %d", info.State.Bytes, info.State.Msgs, budget)
	}
	if kept <= float64(info.State.Msgs) {
		t.Errorf("kept %v, stored %d: the flood never reached the budget", kept, info.State.Msgs)
	}
	if m := quarantined(t, client, receiver.ClassInvalid, 1); !bytes.Equal(m[0].Data, invalid) {
		t.Errorf("the invalid delivery kept is not the one sent")
	}
	if n := streamMsgs(t, client); n != 0 {
		t.Errorf("events stream holds %d messages", n)
	}
}
