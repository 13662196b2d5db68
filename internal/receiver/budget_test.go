package receiver

import (
	"sync"
	"testing"
)

// TestByteBudget: acquire never lets the total pass the limit, even under
// concurrent callers, and a reservation gives back exactly what it took.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(1000)
	r := reservation{b: b}
	if r.grow(600) != nil || r.grow(500) == nil || r.grow(400) != nil {
		t.Fatalf("600 then 500 (refused) then 400 of 1000: in use %d", b.InUse())
	}
	if b.InUse() != 1000 {
		t.Fatalf("in use %d, want 1000", b.InUse())
	}
	r.shrink(600)
	r.releaseAll()
	if b.InUse() != 0 {
		t.Fatalf("after releaseAll: in use %d", b.InUse())
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				r := reservation{b: b}
				if r.grow(300) == nil {
					mu.Lock()
					peak = max(peak, b.InUse())
					mu.Unlock()
				}
				r.releaseAll()
			}
		}()
	}
	wg.Wait()
	if peak > 1000 || b.InUse() != 0 {
		t.Fatalf("peak %d (limit 1000), in use after %d", peak, b.InUse())
	}
}
