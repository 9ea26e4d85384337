package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Claim is one row: the credentials needed to release a VM this node
// delivered. The JSON names are exactly those of the JSON claims document
// (the format migrated from; see doc.go).
type Claim struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Address   string    `json:"address"`
	PodUID    string    `json:"podUID"`
	ClaimedAt time.Time `json:"claimedAt"`
	Deadline  time.Time `json:"deadline"`
	// OwnerUID is the UID of the Pod's controller owner. The JSON claims
	// document has no such field; rows migrated from it leave it empty.
	OwnerUID string `json:"ownerUID,omitempty"`
	// Owner names the controller owner (apiVersion/kind/name), so that a
	// Pod deleted while this process was down can still be authorized
	// against its owner after a restart. Empty for bare Pods.
	Owner string `json:"owner,omitempty"`
}

// Observer is told about every group commit once it is durable: how many
// callers it acknowledged, how many bytes it appended and how long the fsync
// took (zero with UnsafeNoFsync). It is also told about every compaction
// once it has been installed (err nil; records is the new log's length) or
// has failed, with the time from its snapshot to that point. Both run on
// the writer goroutine, so they must be quick and must not call back into
// the Store.
type Observer interface {
	Commit(batch int, bytes int, fsync time.Duration)
	Compact(records int, took time.Duration, err error)
}

// Options configures a Store. The zero value is the production setting.
type Options struct {
	// UnsafeNoFsync skips every fsync. A crash can then lose acknowledged
	// commits. For tests and benchmarks only.
	UnsafeNoFsync bool
	// Observer, if set, sees every group commit.
	Observer Observer
	// SlowFsync is the threshold above which an fsync is logged as a
	// warning. Default 100ms.
	SlowFsync time.Duration
	// Logger receives recovery, compaction and slow-fsync reports. It never
	// sees a token. Default slog.Default().
	Logger *slog.Logger
	// CompactMin is the floor of the compaction bound, in records (the
	// bound is stated at Store.maybeCompact). Default 16384 (about 4 MiB
	// of log): a compaction has a fixed cost of three fsyncs, which a
	// small table must not pay every few group commits.
	CompactMin int

	// failpoint, when set (tests only), is consulted at named points of the
	// write path; a non-nil result is treated as the failure of that step.
	// "cancelledAfterTake" is a notification only: its result is ignored.
	failpoint func(point string) error
}

const (
	defaultSlowFsync  = 100 * time.Millisecond
	defaultCompactMin = 16384
)

// errClosed is returned by every mutating call on a closed Store.
var errClosed = errors.New("store: closed")

// row is one live claim as held in memory. line is its put record exactly
// as it is on disk, so compaction copies bytes instead of re-encoding.
type row struct {
	claim Claim
	line  []byte
}

// Store is the durable claim table. All methods are safe for concurrent use.
//
// Invariants:
//   - rows holds only durable state: the writer applies a batch to rows
//     after its bytes are fsynced and before any of its callers is
//     acknowledged, so Get never returns a row that a crash could lose.
//   - Only the writer goroutine (or Open/Close while no writer runs)
//     mutates rows, f, records, dirty and compacting. The compactor
//     goroutine only writes its own temp file.
//   - dirty means the file may not equal rows (a write or fsync failed, or a
//     rename was not followed by a successful directory fsync). The next
//     commit rewrites the file from rows before appending anything.
type Store struct {
	path string
	dir  string
	opts Options
	lg   *slog.Logger
	lock *os.File

	mu   sync.RWMutex
	rows map[string]row
	// holders maps each durable row's claim id to its key; it changes
	// with rows, under mu.
	holders map[string]string

	q    queue
	done chan struct{} // closed when the writer goroutine exits

	// Owned by the writer.
	f          *os.File
	records    int           // put and del records in the current log file
	salt       uint64        // the current file's salt, which seeds its commit markers
	dirty      bool          // see the type comment
	compactAt  int           // after a failed compaction, do not retry before this many records
	compacting *compaction   // the compaction in flight, if any
	buf        []byte        // batch buffer, reused
	wbuf       *bufio.Writer // snapshot buffer, reused: compaction is periodic

	lastCommit atomic.Pointer[error] // see Health; written by the writer only

	// Under mu: the keys put since the last TakeChanged, and whether
	// some were not kept (see there).
	changed    []string
	changedAll bool
}

// Open opens the claim store at path, creating its directory (0700) and file
// (0600) if needed. It takes an exclusive lock on path+".lock", removes stale
// compaction temp files, loads the table, truncates a torn tail, and migrates
// a JSON claims document to the log format. A corrupt file yields a
// *corruptError; the Store refuses to start rather than guess.
func Open(path string, o Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: empty state path")
	}
	path = filepath.Clean(path)
	if o.SlowFsync <= 0 {
		o.SlowFsync = defaultSlowFsync
	}
	if o.CompactMin <= 0 {
		o.CompactMin = defaultCompactMin
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	s := &Store{
		path: path,
		dir:  filepath.Dir(path),
		opts: o,
		lg:   lg.With("path", path),
		done: make(chan struct{}),
		wbuf: bufio.NewWriterSize(nil, 256<<10),
		// The rows recovered from the file were never listed as changed.
		changedAll: true,
	}
	s.q.wake = make(chan struct{}, 1)
	if err := s.makeDir(); err != nil {
		return nil, fmt.Errorf("store: %s: create directory: %w", path, err)
	}
	s.checkDirMode()
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		if s.f != nil {
			s.f.Close()
		}
		unlockFile(lock)
		return nil, err
	}
	go s.run()
	return s, nil
}

// recover loads the file into rows and leaves f open at the end of a valid
// log. It runs under the lock, before the writer starts.
func (s *Store) recover() error {
	s.removeStaleTemps()
	ld, err := load(s.path)
	if err != nil {
		return err
	}
	s.rows, s.records = ld.rows, ld.records
	s.holders = make(map[string]string, len(s.rows))
	for k, r := range s.rows {
		s.holders[r.claim.ID] = k
	}
	if ld.torn != nil {
		if err := s.repair(ld.torn); err != nil {
			return err
		}
	}
	switch {
	case ld.reference:
		return s.migrate("migrate JSON claims document", "JSON claims document")
	case ld.version == 1:
		// Appending groups with markers to a log that has no header would
		// make a file neither decoder reads: rewrite it first.
		return s.migrate("upgrade log format", "version 1 log")
	}
	s.salt = ld.salt
	return s.openLog()
}

// openLog opens (or creates) the log for appending. An empty log gets its
// header first.
func (s *Store) openLog() error {
	_, statErr := os.Stat(s.path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: %s: open for append: %w", s.path, err)
	}
	s.f = f
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store: %s: stat: %w", s.path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && !created {
		// The file holds release tokens: tighten it rather than serve them.
		s.lg.Warn("claim store: state file readable by others; setting mode 0600", "mode", perm.String())
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("store: %s: chmod 0600: %w", s.path, err)
		}
	}
	if fi.Size() > 0 {
		return nil
	}
	// The header must be durable before any group is appended: a group is
	// checked against the header's salt. The directory is synced too (the
	// file exists for a crash only once its entry does), also when the
	// empty file was found rather than created, since nothing says its
	// entry was ever synced.
	s.salt = newSalt()
	hdr := encodeHeader(s.salt)
	if _, err := f.Write(hdr); err != nil {
		return fmt.Errorf("store: %s: write header: %w", s.path, err)
	}
	if _, err := s.syncFile(f); err != nil {
		return fmt.Errorf("store: %s: fsync after writing the header: %w", s.path, err)
	}
	if err := s.syncDir(); err != nil {
		return fmt.Errorf("store: %s: after create: %w", s.path, err)
	}
	return nil
}

// Put records c under key. It returns nil only once the record is durable
// (its bytes fsynced, and the file's directory entry fsynced when the file
// was created or replaced). Concurrent Puts share one write and one fsync.
//
// ctx bounds only the wait for the writer to take the request. Once taken,
// Put waits for the outcome, so the caller always learns it: nil means
// durable; an error means not acknowledged. (A commit that failed may still
// surface after a crash; it is never reported as durable when it is not.)
func (s *Store) Put(ctx context.Context, key string, c Claim) error {
	return s.Apply(ctx, Op{Key: key, Claim: c})
}

// Delete durably removes key. It is ordered after every Put of key that is
// queued or in flight when Delete is called (every Put that returned, and
// every one that is waiting for the writer), even one not yet durable: such
// a Delete is queued behind the Put and returns once its tombstone is
// durable. Only a key that is neither in the durable table nor the subject
// of such a Put is a no-op success, at once and without an fsync. A Put
// that has not been queued yet (still validating) is concurrent with the
// Delete, and may be ordered either way.
func (s *Store) Delete(ctx context.Context, key string) error {
	absent, err := s.q.absent(key, s.durable)
	if err != nil || absent {
		return err
	}
	return s.Apply(ctx, Op{Key: key, Delete: true})
}

// durable reports whether key is in the durable table.
func (s *Store) durable(key string) bool {
	s.mu.RLock()
	_, ok := s.rows[key]
	s.mu.RUnlock()
	return ok
}

// Get returns the durable claim for key. It never touches the disk.
func (s *Store) Get(key string) (Claim, bool) {
	s.mu.RLock()
	r, ok := s.rows[key]
	s.mu.RUnlock()
	return r.claim, ok
}

// Holder returns the key whose durable row holds claim id. O(1); it never
// touches the disk.
func (s *Store) Holder(id string) (key string, ok bool) {
	s.mu.RLock()
	key, ok = s.holders[id]
	s.mu.RUnlock()
	return key, ok
}

// Range calls fn for every durable row until fn returns false. It iterates
// a snapshot taken at the call (one O(n) copy), so fn may call Put and
// Delete; it does not see their effects. The snapshot's slice is reused
// across calls (rangeSnapshots): the lease pass ranges over the whole
// table every second, and a new one each time was most of what that pass
// allocated during a burst.
func (s *Store) Range(fn func(key string, c Claim) bool) {
	snap := rangeSnapshots.Get().(*[]rangeRow)
	defer func() {
		clear(*snap) // the pool keeps no claim (tokens) alive
		*snap = (*snap)[:0]
		rangeSnapshots.Put(snap)
	}()
	s.mu.RLock()
	for k, r := range s.rows {
		*snap = append(*snap, rangeRow{k, r.claim})
	}
	s.mu.RUnlock()
	for _, e := range *snap {
		if !fn(e.key, e.claim) {
			return
		}
	}
}

type rangeRow struct {
	key   string
	claim Claim
}

// rangeSnapshots holds Range's snapshot slices for reuse.
var rangeSnapshots = sync.Pool{New: func() any { return new([]rangeRow) }}

// Len is the number of durable rows.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.rows)
}

// Close commits every request already queued, stops the writer, rewrites the
// file if an earlier failure left it dirty, and releases the lock. Get, Range
// and Len keep serving the last durable table; mutating calls and a second
// Close return errClosed.
func (s *Store) Close() error {
	if !s.q.close() {
		return errClosed
	}
	<-s.done
	s.abandonCompaction() // the old log is whole; a snapshot is only an optimisation
	var errs []error
	if s.dirty {
		if err := s.rewrite("close after failed commit"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: %s: close: %w", s.path, err))
	}
	if err := unlockFile(s.lock); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// failpoint lets tests fail a named step of the write path.
func (s *Store) failpoint(point string) error {
	if s.opts.failpoint == nil {
		return nil
	}
	return s.opts.failpoint(point)
}
