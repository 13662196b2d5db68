package receiver

import (
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// admission decides which request bodies may be read before anyone knows
// whether their sender holds a secret. The HMAC covers the whole body, so a
// body is unverified until its last byte has arrived; while it arrives it
// holds a goroutine, a connection and buffer bytes. What is kept apart:
//
//   - RECEIVER_MAX_INFLIGHT, the slots of deliveries being stored, is taken
//     only after the signature verified: no unsigned request ever holds one.
//   - Bodies of senders not trusted yet are counted in a pool of their own,
//     RECEIVER_MAX_UNVERIFIED bodies and RECEIVER_MAX_UNVERIFIED_BYTES
//     bytes, both within the shared RECEIVER_MAX_INFLIGHT_BYTES.
//   - Within that pool each client address has a share,
//     RECEIVER_MAX_UNVERIFIED_PER_ADDR bodies and
//     RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR bytes, enforced once the pool
//     is half taken (nginx's limit_conn per $binary_remote_addr, relaxed
//     while there is no contention): one address then holds at most half
//     the pool, and the other half stays for everyone else. Beyond its share
//     the answer is 429 with outcome address_limit.
//   - A full pool makes room instead of refusing: a request that finds it
//     full of bodies, or a body that cannot get its bytes, evicts the
//     slowest body of the pool (see slowest), which is answered 429 with
//     outcome evicted. Many addresses holding slow bodies therefore cannot
//     refuse a new sender: they must send faster than it to stay, which
//     costs them bandwidth, not just connections. The sender the crawl API
//     never retries is the one whose body arrives at once.
//   - An address that sent a delivery whose signature verified is trusted
//     for trustFor: its bodies skip the pool and the shares (the crawl API
//     sends many deliveries at once from one address, and must never be
//     refused as a flood). They still take bytes from
//     RECEIVER_MAX_INFLIGHT_BYTES and must keep RECEIVER_BODY_MIN_RATE.
//
// What is scarce before authentication is memory, so an unverified body's
// buffer grows with the bytes that arrived (from UnverifiedChunk, never on
// the word of Content-Length): a connection that announced a large body
// and trickles holds a few KiB. How long any body may hold its place is
// bounded by the minimum transfer rate (pace.go).
type admission struct {
	perAddr      int
	max          int
	bytesPerAddr int64
	bytesLimit   int64
	now          func() time.Time
	// all counts every body being read before its signature is checked,
	// trusted senders' too (crawlhouse_webhook_unverified).
	all atomic.Int64
	// used mirrors bytes for the gauge, read without the lock.
	used atomic.Int64

	mu      sync.Mutex
	reading int                        // unverified bodies of senders not trusted
	bytes   int64                      // their bytes, all together
	pool    []*claim                   // those bodies, for eviction
	senders map[netip.Prefix]*sender   // those senders, while they have one
	trusted map[netip.Prefix]time.Time // when each last sent a verified delivery
}

// sender is what one address of the untrusted pool holds (under
// admission.mu).
type sender struct {
	reading int
	bytes   int64
}

const (
	// trustFor is how long an address stays trusted after its last
	// verified delivery: longer than a crawl's quiet spells, short enough
	// that an address handed on (a cloud IP) is not trusted for long.
	trustFor = 15 * time.Minute
	// maxTrusted bounds the trusted set. Only a valid signature adds to it,
	// so only genuine senders can fill it; when full, expired entries are
	// dropped, and a new address waits for a place (it is served from the
	// untrusted pool meanwhile).
	maxTrusted = 4096
)

// UnverifiedChunk is the most an unverified body's buffer starts with
// (FirstChunk for a trusted sender): about what one read from the
// connection brings, so that announcing a body costs the sender the bytes
// it sends, not the bytes it announces.
const UnverifiedChunk = 8 << 10

func newAdmission(cfg Config, now func() time.Time) *admission {
	l := cfg.unverifiedLimits()
	return &admission{
		perAddr: l.perAddr, max: l.max, bytesPerAddr: l.bytesPerAddr,
		bytesLimit: l.bytes, now: now,
		senders: make(map[netip.Prefix]*sender),
		trusted: make(map[netip.Prefix]time.Time),
	}
}

// senderOf is the key an address's share is counted under: the address
// itself for IPv4, its /64 for IPv6 (one host commonly holds a whole /64).
// An address that does not parse shares the zero key with every other such.
func senderOf(ip string) netip.Prefix {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// claim is one request's place in the admission, from admit until release.
type claim struct {
	a   *admission
	key netip.Prefix
	// pooled: the sender was not trusted, the body is in the pool.
	pooled bool
	open   bool // until release
	// w is the request's connection, stopped when the body is evicted.
	w     http.ResponseWriter
	since time.Time
	// got is the body bytes that arrived (set by pacedBody).
	got atomic.Int64
	// evicted is set, before the connection is stopped, once the body
	// lost its place to another (see evict).
	evicted atomic.Bool

	// Under a.mu: the sender (nil once out of the pool), the bytes taken
	// from the pool (see take), the place in a.pool, and whether the body
	// was read to its end (no longer evicted: see read).
	s    *sender
	held int64
	at   int
	done bool
}

// admit gives the request from key a place, and binds res to it so that
// the body's bytes are counted against the untrusted pool while they are
// unverified; w is the request's answer, through which an evicted body's
// connection is stopped. It fails with errAddressLimit when key holds its
// share of a contended pool, and with errOverloaded when the pool is full
// and holds no body but the newcomer's to evict.
func (a *admission) admit(key netip.Prefix, res *reservation, w http.ResponseWriter) (*claim, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at, ok := a.trusted[key]; ok && a.now().Sub(at) < trustFor {
		a.all.Add(1)
		return &claim{a: a, key: key, open: true}, nil
	}
	s := a.senders[key]
	if s != nil && s.reading >= a.perAddr && a.reading >= a.max/2 {
		return nil, errAddressLimit
	}
	if a.reading >= a.max && !a.evictSlowest(nil) {
		return nil, errOverloaded
	}
	if s == nil {
		s = &sender{}
		a.senders[key] = s
	}
	s.reading++
	a.reading++
	a.all.Add(1)
	c := &claim{a: a, key: key, pooled: true, open: true, w: w, since: a.now(), s: s, at: len(a.pool)}
	a.pool = append(a.pool, c)
	res.claim = c
	return c, nil
}

// take counts n more body bytes against the untrusted pool and the
// sender's share; the share is enforced once the pool is half taken. When
// the pool cannot give them, slower bodies are evicted until it can.
func (c *claim) take(n int64) error {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.s == nil {
		return errEvicted
	}
	if c.s.bytes+n > a.bytesPerAddr && a.bytes+n > a.bytesLimit/2 {
		return errAddressLimit
	}
	for a.bytes+n > a.bytesLimit {
		if !a.evictSlowest(c) {
			return errOverloaded
		}
	}
	c.s.bytes += n
	a.bytes += n
	a.used.Store(a.bytes)
	c.held += n
	return nil
}

// give returns n bytes taken by take.
func (c *claim) give(n int64) {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c.giveLocked(n)
}

func (c *claim) giveLocked(n int64) {
	if c.s == nil {
		return
	}
	n = min(n, c.held)
	c.s.bytes -= n
	c.a.bytes -= n
	c.a.used.Store(c.a.bytes)
	c.held -= n
}

// leaveLocked takes c out of the pool: its place, its bytes and its
// sender's count.
func (c *claim) leaveLocked() {
	a := c.a
	c.giveLocked(c.held)
	last := a.pool[len(a.pool)-1]
	a.pool[c.at], last.at = last, c.at
	a.pool[len(a.pool)-1] = nil
	a.pool = a.pool[:len(a.pool)-1]
	c.s.reading--
	a.reading--
	if c.s.reading == 0 {
		delete(a.senders, c.key)
	}
	c.s = nil
}

// evictSlowest makes room in the pool: the slowest body other than keep
// leaves it and its connection is stopped (its reader sees errEvicted).
// The evicted body's buffer stays counted in RECEIVER_MAX_INFLIGHT_BYTES
// until its handler lets go of it, so memory stays bounded by that budget
// while the pool is handed on. False when there is no other body.
func (a *admission) evictSlowest(keep *claim) bool {
	v := a.slowest(keep)
	if v == nil {
		return false
	}
	v.leaveLocked()
	// Set before the deadline: pacedBody checks it after setting its own
	// (see pacedBody.Read), so one of the two deadlines is the last.
	v.evicted.Store(true)
	refuse(v.w)
	return true
}

// slowest is the body of the pool, other than keep and those read to
// their end, that has arrived slowest: the most time held per byte received, counting one byte more
// for each so that a body with nothing yet is weighed by its age. A
// sender that delivers at once holds its place for microseconds per byte
// and is the last to go; a connection that announced a body and trickles
// is the first. Linear in the pool, and only run when the pool is full.
func (a *admission) slowest(keep *claim) *claim {
	now := a.now()
	var v *claim
	var worst float64
	for _, c := range a.pool {
		if c == keep || c.done {
			continue
		}
		score := float64(now.Sub(c.since)) / float64(c.got.Load()+1)
		if v == nil || score > worst {
			v, worst = c, score
		}
	}
	return v
}

// read records that the body arrived to its end: it keeps its place until
// its signature is checked. Called before the connection's deadline is
// lifted (pacedBody.done), so that an eviction cannot leave a deadline in
// the past under the publish that follows.
func (c *claim) read() {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c.done = true
}

// verified records that the request's signature verified: its address is
// trusted from now on.
func (c *claim) verified() {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if _, ok := a.trusted[c.key]; !ok && len(a.trusted) >= maxTrusted {
		for k, at := range a.trusted {
			if now.Sub(at) >= trustFor {
				delete(a.trusted, k)
			}
		}
		if len(a.trusted) >= maxTrusted {
			return
		}
	}
	a.trusted[c.key] = now
}

// release gives the request's place and its unverified bytes back (the
// bytes stay held in RECEIVER_MAX_INFLIGHT_BYTES by res until the answer).
// Called once the body is verified or refused.
func (c *claim) release(res *reservation) {
	if !c.open {
		return
	}
	c.open = false
	c.a.all.Add(-1)
	if !c.pooled {
		return
	}
	if res.claim == c {
		res.claim = nil
	}
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.s != nil { // not evicted
		c.leaveLocked()
	}
	c.w = nil
}

// Reading is the number of bodies being read before their signature is
// checked, trusted senders' included.
func (a *admission) Reading() int64 { return a.all.Load() }

// UnverifiedBytes is the bytes held by the pool.
func (a *admission) UnverifiedBytes() int64 { return a.used.Load() }
