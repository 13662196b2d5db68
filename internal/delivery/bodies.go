package delivery

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Bodies is the object store that holds the bodies too large for one
// message (internal/stream creates it beside the events stream). It is safe
// for concurrent use.
type Bodies struct {
	js     jetstream.JetStream
	bucket string

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

// NewBodies returns the body store named bucket, opened on first use.
func NewBodies(js jetstream.JetStream, bucket string) *Bodies {
	return &Bodies{js: js, bucket: bucket}
}

// Open returns the delivery bytes of an envelope exactly as the receiver got
// them: read from the object store when the body was stored aside, and
// decompressed when it was compressed. An error wraps
// jetstream.ErrObjectNotFound when the stored body is gone (it expired, or
// was deleted): no retry brings it back.
func (b *Bodies) Open(ctx context.Context, env *Envelope) ([]byte, error) {
	data := env.Body
	if env.BodyRef != "" {
		obs, err := b.store(ctx)
		if err != nil {
			return nil, err
		}
		data, err = obs.GetBytes(ctx, env.BodyRef)
		if err != nil {
			return nil, fmt.Errorf("body %s from object store: %w", env.BodyRef, err)
		}
	}
	if env.Encoding == EncodingZstd {
		// The size header sizes the output, within reason: it is a hint,
		// not a promise.
		return decompress(data, min(env.Size, maxSizeHint))
	}
	return data, nil
}

// maxSizeHint bounds the buffer decompress allocates up front.
const maxSizeHint = 64 << 20

// put stores data under name.
func (b *Bodies) put(ctx context.Context, name string, data []byte) error {
	obs, err := b.store(ctx)
	if err != nil {
		return err
	}
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("put body %s in object store %s: %w", name, b.bucket, err)
	}
	return nil
}

func (b *Bodies) store(ctx context.Context) (jetstream.ObjectStore, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.obs != nil {
		return b.obs, nil
	}
	obs, err := b.js.ObjectStore(ctx, b.bucket)
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", b.bucket, err)
	}
	b.obs = obs
	return obs, nil
}
