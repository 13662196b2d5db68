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
// off, failed to publish) returns the bytes.
type reservation struct {
	b *byteBudget
	n int64
}

func (r *reservation) grow(n int64) bool {
	if !r.b.acquire(n) {
		return false
	}
	r.n += n
	return true
}

func (r *reservation) shrink(n int64) {
	n = min(n, r.n)
	r.b.release(n)
	r.n -= n
}

func (r *reservation) releaseAll() { r.shrink(r.n) }
