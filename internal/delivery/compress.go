package delivery

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

var (
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zstdOnce sync.Once
)

func zstdInit() {
	// EncodeAll and DecodeAll are safe for concurrent use; one encoder
	// serves every delivery. Low concurrency keeps memory bounded.
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
}

// compress returns body compressed with zstd.
func compress(body []byte) []byte {
	zstdOnce.Do(zstdInit)
	return zenc.EncodeAll(body, make([]byte, 0, len(body)/4))
}

// decompress reverses compress. sizeHint, when known, sizes the output.
func decompress(b []byte, sizeHint int) ([]byte, error) {
	zstdOnce.Do(zstdInit)
	out, err := zdec.DecodeAll(b, make([]byte, 0, max(sizeHint, 0)))
	if err != nil {
		return nil, fmt.Errorf("decompress body: %w", err)
	}
	return out, nil
}
