package receiver

import "sync/atomic"

// byteBudget bounds the request-body bytes held by every delivery in
// progress together (RECEIVER_MAX_INFLIGHT_BYTES). A body's buffer grows as
// its bytes arrive, and each growth is taken from the budget first: a sender
// that announces a large Content-Length and then stalls holds only what it
// sent, and all senders together never hold more than the budget, whatever
// they announce and whether or not they can sign.
type byteBudget struct {
	limit int64
	used  atomic.Int64
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// acquire takes n bytes; false, taking nothing, when they would exceed the
// limit.
func (b *byteBudget) acquire(n int64) bool {
	if n <= 0 {
		return true
	}
	for {
		cur := b.used.Load()
		if cur+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release gives n bytes back.
func (b *byteBudget) release(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}

// InUse is the number of bytes taken.
func (b *byteBudget) InUse() int64 { return b.used.Load() }

// reservation is what one delivery holds of the budget. Its zero value
// with b set holds nothing; releaseAll gives everything back and is what
// the handler defers, so every path (answered, refused, timed out, broken
// off, failed to publish) returns the bytes. While claim is set (a body
// not verified yet, from a sender not trusted: admission.go) each byte is
// also counted against the untrusted pool and the sender's share.
type reservation struct {
	b     *byteBudget
	n     int64
	claim *claim
}

// grow takes n more bytes: errOverloaded when the budget or the untrusted
// pool cannot give them, errAddressLimit when the sender is past its share.
func (r *reservation) grow(n int64) error {
	if r.claim != nil {
		if err := r.claim.take(n); err != nil {
			return err
		}
	}
	if !r.b.acquire(n) {
		if r.claim != nil {
			r.claim.give(n)
		}
		return errOverloaded
	}
	r.n += n
	return nil
}

func (r *reservation) shrink(n int64) {
	n = min(n, r.n)
	if r.claim != nil {
		r.claim.give(n)
	}
	r.b.release(n)
	r.n -= n
}

func (r *reservation) releaseAll() { r.shrink(r.n) }
