package stream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// StoreSyncer makes durable what the embedded server has acknowledged,
// without waiting for its own sync (NATS_SYNC_INTERVAL): it fsyncs the
// message blocks of every stream in the server's store, as the server's
// periodic sync does. nats-server writes a message to its block file
// before it sends the PubAck (a single-replica stream flushes in place),
// so once Sync returns, every message acknowledged before it was called
// is on stable storage. The receiver's write-ahead log trims by it
// (wal.Options.StreamSync): the log then never bets on the server having
// synced within some time.
//
// It relies on the file store's layout (store/jetstream/ACCOUNT/streams/
// STREAM/msgs/N.blk, one block written at a time, the newest); a test
// holds it to the server's real behaviour on a power-loss filesystem
// (internal/powerloss).
type StoreSyncer struct {
	dir string

	mu sync.Mutex
	// from is, per msgs directory, the lowest block number still to sync:
	// blocks below the newest one seen are full and were synced then.
	from map[string]uint64
	// parents: the directories above the blocks were synced once.
	parents bool
}

// NewStoreSyncer syncs the store of the embedded server in storeDir
// (NATS_STORE_DIR).
func NewStoreSyncer(storeDir string) *StoreSyncer {
	return &StoreSyncer{dir: storeDir, from: map[string]uint64{}}
}

// Sync returns once every message the server acknowledged before the call
// is on stable storage, or an error naming the file that could not be
// synced.
func (s *StoreSyncer) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dirs, err := filepath.Glob(filepath.Join(s.dir, "jetstream", "*", "streams", "*", "msgs"))
	if err != nil {
		return fmt.Errorf("sync the stream store: %w", err)
	}
	for _, d := range dirs {
		if err := s.syncBlocks(d); err != nil {
			return fmt.Errorf("sync the stream store: %w", err)
		}
	}
	if !s.parents {
		// A stream created since the server started: its metadata files
		// (a lazy server leaves them in the page cache) and its
		// directories' entries, once: neither changes afterwards unless the
		// stream's configuration does.
		root := filepath.Clean(s.dir)
		for _, d := range dirs {
			for _, name := range []string{"meta.inf", "meta.sum"} {
				if err := syncPath(filepath.Join(filepath.Dir(d), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("sync the stream store: %w", err)
				}
			}
			for p := filepath.Dir(d); ; p = filepath.Dir(p) {
				if err := syncPath(p); err != nil {
					return fmt.Errorf("sync the stream store: %w", err)
				}
				if p == root || p == filepath.Dir(p) {
					break
				}
			}
		}
		s.parents = len(dirs) > 0
	}
	return nil
}

// syncBlocks fsyncs the blocks of one stream from the newest one synced
// last time on, then the directory (a block created since).
func (s *StoreSyncer) syncBlocks(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the stream was deleted
	}
	if err != nil {
		return err
	}
	from, newest := s.from[dir], uint64(0)
	for _, e := range ents {
		n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".blk"), 10, 64)
		if err != nil || !strings.HasSuffix(e.Name(), ".blk") || n < from {
			continue
		}
		// A block removed meanwhile (purged, compacted) needs no sync.
		if err := syncPath(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		newest = max(newest, n)
	}
	if err := syncPath(dir); err != nil {
		return err
	}
	s.from[dir] = max(from, newest)
	return nil
}

// syncPath fsyncs a file or directory through a descriptor of its own:
// fsync writes out the file's dirty pages whoever wrote them.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
