package query

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// sortRunBytes bounds the lines a lineSorter holds in memory.
const sortRunBytes = 8 << 20

// sortReadBuffer is the buffer a merge reads each run through.
const sortReadBuffer = 16 << 10

// lineSorter sorts lines (each ending in '\n') by bytes in bounded memory:
// it holds lines until they reach runBytes, then sorts them and writes them
// as one run to a temporary file; writeTo merges the runs. Memory is
// runBytes, plus sortReadBuffer per run while merging (a run per runBytes
// of lines: 2 MiB of buffers for 8 GiB of lines); disk is the lines' size.
//
// Written here rather than taken from a library: the standard library has
// no sort on disk, the Go external-sort packages are small one-maintainer
// projects, and pebble (a whole LSM store) would be a large dependency for
// a hundred lines of runs and a heap merge.
type lineSorter struct {
	dir      string // of the temporary file; "" for os.TempDir
	runBytes int
	lines    [][]byte
	size     int
	file     *os.File
	runs     []int64 // the end offset of each run in file
}

func newLineSorter(dir string, runBytes int) *lineSorter {
	return &lineSorter{dir: dir, runBytes: runBytes}
}

func (s *lineSorter) add(line []byte) error {
	s.lines = append(s.lines, line)
	s.size += len(line)
	if s.size < s.runBytes {
		return nil
	}
	return s.spill()
}

// spill writes the lines held, sorted, as a run.
func (s *lineSorter) spill() error {
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, "crawlhouse-sort-*")
		if err != nil {
			return fmt.Errorf("sort index: %w", err)
		}
		s.file = f
	}
	slices.SortFunc(s.lines, bytes.Compare)
	w := bufio.NewWriterSize(s.file, 256<<10)
	for _, l := range s.lines {
		if _, err := w.Write(l); err != nil {
			return fmt.Errorf("sort index: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sort index: %w", err)
	}
	end, err := s.file.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("sort index: %w", err)
	}
	s.runs = append(s.runs, end)
	clear(s.lines)
	s.lines, s.size = s.lines[:0], 0
	return nil
}

// writeTo writes every line added, in order, and returns the bytes written.
func (s *lineSorter) writeTo(w io.Writer) (int64, error) {
	buf := bufio.NewWriterSize(w, 64<<10)
	out := &countingWriter{w: buf}
	if s.file == nil {
		slices.SortFunc(s.lines, bytes.Compare)
		for _, l := range s.lines {
			if _, err := out.Write(l); err != nil {
				return out.n, err
			}
		}
		return out.n, buf.Flush()
	}
	if len(s.lines) > 0 {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	h := make(runHeap, 0, len(s.runs))
	var start int64
	for _, end := range s.runs {
		r := &run{rd: bufio.NewReaderSize(io.NewSectionReader(s.file, start, end-start), sortReadBuffer)}
		if err := r.next(); err != nil {
			return 0, err
		}
		if r.line != nil {
			h = append(h, r)
		}
		start = end
	}
	heap.Init(&h)
	for len(h) > 0 {
		r := h[0]
		if _, err := out.Write(r.line); err != nil {
			return out.n, err
		}
		if err := r.next(); err != nil {
			return out.n, err
		}
		if r.line == nil {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out.n, buf.Flush()
}

// close removes the temporary file.
func (s *lineSorter) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
}

// run is a sorted run being merged; line is nil past its end.
type run struct {
	rd   *bufio.Reader
	line []byte
}

func (r *run) next() error {
	line, err := r.rd.ReadBytes('\n')
	switch {
	case errors.Is(err, io.EOF) && len(line) == 0:
		r.line = nil
		return nil
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("sort index: %w", err)
	}
	r.line = line
	return nil
}

type runHeap []*run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].line, h[j].line) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*run)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}
