package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A damaged log is told apart from a torn tail by pebble itself: with
// FormatWALSyncChunks each record of its WAL carries the offset up to which
// the log had been synced when it was written, and a record that fails its
// checksum while a later one says the log was synced past it is damage,
// not a crash mid-write. pebble.Open then fails with pebble.ErrCorruption
// (a torn tail it tolerates, as it should: nothing there was acknowledged).
//
// On that error the log is salvaged rather than refused: every pebble WAL
// file from the first damaged one on is moved into Dir/damaged (kept for
// inspection, never deleted), pebble is opened without them, and every
// record still readable in them is applied again, in order. Reading
// resumes at the next 32 KiB block after a damaged record (pebble's WAL
// blocks; a record's chunks never straddle one), so what is lost is at
// most the records that touch the damaged blocks. Each damaged place is
// logged at error level with its file and offset, and counted in
// crawlhouse_receiver_wal_damaged_total; the salvaged entries are
// replayed into the stream like any others. Refusing to start instead
// would refuse every delivery until an operator came, and the crawl API
// does not retry.

// damagedDir is where the damaged WAL files are kept, under Dir.
const damagedDir = "damaged"

// blockSize is the block of pebble's WAL record format.
const blockSize = 32 << 10

// damage is one damaged place in a WAL file: the record at offset could
// not be read; reading resumed at resume.
type damage struct {
	file           string
	offset, resume int64
}

// openDB opens the pebble database of the log, salvaging a damaged WAL.
func openDB(opts Options, m walMetrics) (*pebble.DB, error) {
	desc, err := pebble.Peek(opts.Dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	db, err := pebble.Open(opts.Dir, pebbleOptions(opts.MaxBytes, opts.Logger))
	if err == nil && (!desc.Exists || desc.FormatMajorVersion < pebble.FormatWALSyncChunks) {
		// pebble starts a new store's WAL (and the WAL of a store it is
		// upgrading) before it raises the format to the one asked for:
		// that WAL would carry no synced offsets. Opened again, the store
		// starts one that does.
		if err := db.Close(); err != nil {
			return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
		}
		db, err = pebble.Open(opts.Dir, pebbleOptions(opts.MaxBytes, opts.Logger))
	}
	if err == nil {
		return db, nil
	}
	if !pebble.IsCorruptionError(err) {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	return salvage(opts, m, err)
}

// walFile is one of pebble's WAL files in the log's directory.
type walFile struct {
	name string
	num  uint64
}

func salvage(opts Options, m walMetrics, cause error) (*pebble.DB, error) {
	refuse := func(err error) error {
		return fmt.Errorf("wal: %s is damaged (%v) and could not be salvaged: %w; the damaged files are under %s",
			opts.Dir, cause, err, filepath.Join(opts.Dir, damagedDir))
	}
	files, err := walFiles(opts.Dir)
	if err != nil {
		return nil, refuse(err)
	}
	var (
		records [][]byte
		found   []damage
		from    = -1 // the first damaged file
	)
	for i, f := range files {
		recs, dmg, torn, err := scanWAL(filepath.Join(opts.Dir, f.name), f.num)
		if err != nil {
			return nil, refuse(err)
		}
		// A torn tail is expected of the last file only: an earlier one
		// was closed cleanly before the next was started.
		if torn >= 0 && i < len(files)-1 {
			dmg = append(dmg, damage{file: f.name, offset: torn, resume: torn})
		}
		if len(dmg) > 0 && from < 0 {
			from = i
		}
		if from >= 0 {
			records = append(records, recs...)
			found = append(found, dmg...)
		}
	}
	if from < 0 {
		// pebble's corruption is not in its WAL (its MANIFEST or a table):
		// nothing here can tell what is intact.
		return nil, fmt.Errorf("wal: open %s: %w (not in a WAL file: move the directory aside to start with an empty log; its entries are then not replayed)", opts.Dir, cause)
	}
	aside := filepath.Join(opts.Dir, damagedDir)
	if err := os.MkdirAll(aside, 0o750); err != nil {
		return nil, refuse(err)
	}
	for _, f := range files[from:] {
		to := filepath.Join(aside, f.name)
		for n := 1; exists(to); n++ {
			to = filepath.Join(aside, f.name+"."+strconv.Itoa(n))
		}
		if err := os.Rename(filepath.Join(opts.Dir, f.name), to); err != nil {
			return nil, refuse(err)
		}
	}
	if err := syncDir(opts.Dir); err != nil {
		return nil, refuse(err)
	}
	db, err := pebble.Open(opts.Dir, pebbleOptions(opts.MaxBytes, opts.Logger))
	if err != nil {
		return nil, refuse(err)
	}
	for _, r := range records {
		b := db.NewBatch()
		err := b.SetRepr(r)
		if err == nil {
			err = db.Apply(b, pebble.NoSync)
		}
		_ = b.Close()
		if err != nil {
			_ = db.Close()
			return nil, refuse(err)
		}
	}
	// On stable storage before anything is replayed from it.
	if err := db.Flush(); err != nil {
		_ = db.Close()
		return nil, refuse(err)
	}
	for _, d := range found {
		opts.Logger.Error().Str("file", filepath.Join(opts.Dir, d.file)).Int64("offset", d.offset).Int64("resumed_at", d.resume).
			Str("kept_in", aside).Int("records_salvaged", len(records)).
			Msg("write-ahead log damaged: the entries at this offset are lost; every intact entry after it was kept and is replayed")
	}
	m.damaged.Add(float64(len(found)))
	return db, nil
}

// walFiles lists pebble's WAL files in dir (NNNNNN.log), oldest first.
func walFiles(dir string) ([]walFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []walFile
	for _, e := range ents {
		num, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".log"), 10, 64)
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") && err == nil {
			out = append(out, walFile{name: e.Name(), num: num})
		}
	}
	slices.SortFunc(out, func(a, b walFile) int { return cmp.Compare(a.num, b.num) })
	return out, nil
}

// scanWAL reads every intact record of the WAL file at path, log number
// num. Where a record cannot be read, it resumes at the next block that
// starts with a chunk of this log; a place followed by intact records is
// damage, the last one not followed by any is the torn tail (its offset,
// or -1 for a clean end).
func scanWAL(path string, num uint64) (records [][]byte, found []damage, torn int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, -1, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, -1, err
	}
	size, name := fi.Size(), filepath.Base(path)
	var pending *damage // a place not yet known to be followed by intact records
	for start := int64(0); start < size; {
		r := newReader(io.NewSectionReader(f, start, size-start), num)
		var bad int64 = -1
		for {
			at := start + r.Offset()
			rec, err := r.Next()
			var b []byte
			if err == nil {
				b, err = io.ReadAll(rec)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				bad = at
				break
			}
			if pending != nil {
				found, pending = append(found, *pending), nil
			}
			records = append(records, b)
		}
		if bad < 0 {
			break // a clean end
		}
		next, err := nextChunkOf(f, size, (bad/blockSize+1)*blockSize, num)
		if err != nil {
			return nil, nil, -1, err
		}
		if pending == nil {
			pending = &damage{file: name, offset: bad}
		}
		pending.resume = next
		start = next
	}
	if pending != nil {
		return records, found, pending.offset, nil
	}
	return records, found, -1, nil
}

// nextChunkOf is the offset of the first block from off on whose first
// chunk header names log num (pebble's recyclable and sync-offset chunk
// formats, types 5 to 12, carry the log number in bytes 7-10), or size.
// Blocks of zeros (preallocated) or of an older log (a recycled file) are
// passed over without reading them as records; the record reader then
// checks the block it is given in full.
func nextChunkOf(f *os.File, size, off int64, num uint64) (int64, error) {
	var h [11]byte
	for ; off < size; off += blockSize {
		if _, err := f.ReadAt(h[:], off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		} else if err != nil {
			return size, nil
		}
		if h[6] >= 5 && h[6] <= 12 && binary.LittleEndian.Uint32(h[7:11]) == uint32(num) {
			return off, nil
		}
	}
	return size, nil
}

// newReader is record.NewReader for the log number num: its parameter type
// lives in an internal package of pebble, which only inference can name.
func newReader(r io.Reader, num uint64) *record.Reader {
	return newReaderOf(record.NewReader, r, num)
}

func newReaderOf[N ~uint64](open func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return open(r, N(num))
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
