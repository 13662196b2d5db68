package receiver

import (
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
//     bytes, both within the shared RECEIVER_MAX_INFLIGHT_BYTES. Beyond
//     either the answer is 429 overloaded.
//   - Within that pool each client address has a share,
//     RECEIVER_MAX_UNVERIFIED_PER_ADDR bodies and
//     RECEIVER_MAX_UNVERIFIED_BYTES_PER_ADDR bytes, enforced once the pool
//     is half taken (nginx's limit_conn per $binary_remote_addr, relaxed
//     while there is no contention): one address then holds at most half
//     the pool, and the other half stays for everyone else. Beyond its share
//     the answer is 429 with outcome address_limit.
//   - An address that sent a delivery whose signature verified is trusted
//     for trustFor: its bodies skip the pool and the shares (the crawl API
//     sends many deliveries at once from one address, and must never be
//     refused as a flood). They still take bytes from
//     RECEIVER_MAX_INFLIGHT_BYTES and must keep RECEIVER_BODY_MIN_RATE.
//
// How long any body may hold its place is bounded by the minimum transfer
// rate (pace.go), so holding the pool costs an attacker bandwidth, not just
// idle connections.
type admission struct {
	perAddr      int
	max          int
	bytesPerAddr int64
	// bytes are the unverified bytes of senders not trusted, all together.
	bytes *byteBudget
	now   func() time.Time
	// all counts every body being read before its signature is checked,
	// trusted senders' too (crawlhouse_webhook_unverified).
	all atomic.Int64

	mu      sync.Mutex
	reading int                        // unverified bodies of senders not trusted
	senders map[netip.Prefix]*sender   // those senders, while they have one
	trusted map[netip.Prefix]time.Time // when each last sent a verified delivery
}

// sender is what one address of the untrusted pool holds.
type sender struct {
	reading int
	bytes   atomic.Int64
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

func newAdmission(cfg Config, now func() time.Time) *admission {
	l := cfg.unverifiedLimits()
	return &admission{
		perAddr: l.perAddr, max: l.max, bytesPerAddr: l.bytesPerAddr,
		bytes: newByteBudget(l.bytes), now: now,
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
	s   *sender // nil for a trusted sender
	// held are the bytes taken from the untrusted pool (see take).
	held int64
	open bool // until release
}

// admit gives the request from key a place, and binds res to it so that
// the body's bytes are counted against the untrusted pool while they are
// unverified. It fails with errAddressLimit when key holds its share of a
// contended pool, and with errOverloaded when the pool is full.
func (a *admission) admit(key netip.Prefix, res *reservation) (*claim, error) {
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
	if a.reading >= a.max {
		return nil, errOverloaded
	}
	if s == nil {
		s = &sender{}
		a.senders[key] = s
	}
	s.reading++
	a.reading++
	a.all.Add(1)
	c := &claim{a: a, key: key, s: s, open: true}
	res.claim = c
	return c, nil
}

// take counts n more body bytes against the untrusted pool and the
// sender's share; the share is enforced once the pool is half taken.
func (c *claim) take(n int64) error {
	a := c.a
	if !a.bytes.acquire(n) {
		return errOverloaded
	}
	if c.s.bytes.Add(n) > a.bytesPerAddr && a.bytes.InUse() > a.bytes.limit/2 {
		c.s.bytes.Add(-n)
		a.bytes.release(n)
		return errAddressLimit
	}
	c.held += n
	return nil
}

// give returns n bytes taken by take.
func (c *claim) give(n int64) {
	n = min(n, c.held)
	c.s.bytes.Add(-n)
	c.a.bytes.release(n)
	c.held -= n
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
	if c.s == nil {
		return
	}
	c.give(c.held)
	if res.claim == c {
		res.claim = nil
	}
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c.s.reading--
	a.reading--
	if c.s.reading == 0 {
		delete(a.senders, c.key)
	}
	c.s = nil
}

// Reading is the number of bodies being read before their signature is
// checked, trusted senders' included.
func (a *admission) Reading() int64 { return a.all.Load() }
