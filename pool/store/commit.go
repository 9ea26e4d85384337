package store

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// request is one caller's Apply waiting for the writer.
type request struct {
	ops  []encodedOp
	one  [1]encodedOp // backing for the common single-op request
	done chan error   // buffered: the writer never blocks on a caller
	// group describes the group commit that carried the request. The
	// writer sets it before sending on done, which publishes it.
	group groupStat
	// taken and cancelled are guarded by queue.mu. Once taken, the request
	// belongs to a batch and its outcome is delivered on done; before that,
	// its caller may withdraw it.
	taken, cancelled bool
}

// groupStat is one group commit as its callers see it.
type groupStat struct {
	batch int           // requests acknowledged together
	bytes int           // bytes appended
	fsync time.Duration // the data fsync (zero with UnsafeNoFsync)
}

// Apply commits ops, in order, as part of one group commit, and returns nil
// once all of them are durable. It is all-or-nothing while the process
// lives (memory changes only after the whole batch is fsynced) and across a
// crash: the ops go into one group, which a restart keeps only if its
// commit marker matches it, so if Apply did not return nil either all of
// them or none survive. ctx is honoured as in Put.
func (s *Store) Apply(ctx context.Context, ops ...Op) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: commit not started: %w", err)
	}
	if len(ops) == 0 {
		return nil
	}
	r := &request{done: make(chan error, 1)}
	if len(ops) == 1 {
		r.ops = r.one[:]
	} else {
		r.ops = make([]encodedOp, len(ops))
	}
	for i, op := range ops {
		e, err := encodeOp(op)
		if err != nil {
			return err
		}
		r.ops[i] = e
	}
	if err := s.q.push(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		annotate(ctx, r.group)
		return err
	case <-ctx.Done():
	}
	if s.q.withdraw(r) {
		return fmt.Errorf("store: commit not started: %w", ctx.Err())
	}
	// The writer owns the request: report its real outcome, never "unknown".
	_ = s.failpoint("cancelledAfterTake") // lets a test see this wait begin
	err := <-r.done
	annotate(ctx, r.group)
	return err
}

// annotate puts the group commit on the caller's span, if one is recording,
// so a trace shows what the durable write cost and how it was shared.
func annotate(ctx context.Context, g groupStat) {
	span := trace.SpanFromContext(ctx)
	if g.batch == 0 || !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.Int("vksandbox.store.batch_size", g.batch),
		attribute.Int("vksandbox.store.bytes", g.bytes),
		attribute.Float64("vksandbox.store.fsync_ms", float64(g.fsync.Microseconds())/1000),
	)
}

// run is the writer: one goroutine that drains all pending requests, appends
// them with one write and one fsync, applies them to memory and only then
// acknowledges them.
func (s *Store) run() {
	defer close(s.done)
	var spare []*request
	for {
		batch := s.q.take(spare)
		if batch == nil {
			return
		}
		g, err := s.commit(batch)
		s.lastCommit.Store(&err)
		s.q.settle() // after commit applied the batch: see queue.absent
		for i, r := range batch {
			r.group = g
			r.done <- err
			batch[i] = nil
		}
		spare = batch
		if err == nil {
			s.maybeCompact()
		}
		if gatherOn {
			s.q.gather(len(batch))
		}
	}
}

// commit makes batch durable and applies it to memory. On any failure no
// caller is acknowledged, memory is unchanged, and the store is dirty: the
// file may hold part of the batch, or all of it unsynced, so the next commit
// rebuilds the file from memory before it appends.
func (s *Store) commit(batch []*request) (groupStat, error) {
	if s.dirty {
		if err := s.rewrite("recover from an earlier failed commit"); err != nil {
			return groupStat{}, err
		}
	}
	buf, n := s.buf[:0], 0
	for _, r := range batch {
		for i := range r.ops {
			buf = append(buf, r.ops[i].line...)
			n++
		}
	}
	// The marker goes in the same write: a group without it never counts,
	// so a power cut that keeps only some of its sectors loses only this
	// unacknowledged group, and no second fsync is needed.
	recs := len(buf)
	buf = appendMarker(buf, n, buf[:recs], s.salt)
	if cap(buf) <= 1<<20 {
		s.buf = buf
	} else {
		s.buf = nil
	}
	if err := s.write(buf); err != nil {
		s.dirty = true
		return groupStat{}, fmt.Errorf("store: %s: append %d records: %w", s.path, n, err)
	}
	took, err := s.syncFile(s.f)
	if err != nil {
		s.dirty = true
		return groupStat{}, fmt.Errorf("store: %s: fsync after appending %d records (not acknowledged): %w", s.path, n, err)
	}
	s.records += n
	s.keepTail(buf[:recs], n)
	s.mu.Lock()
	for _, r := range batch {
		for i := range r.ops {
			op := &r.ops[i]
			if old, ok := s.rows[op.key]; ok {
				delete(s.holders, old.claim.ID)
			}
			if op.del {
				delete(s.rows, op.key)
				continue
			}
			s.rows[op.key] = row{claim: op.claim, line: op.line}
			s.holders[op.claim.ID] = op.key
			s.noteChanged(op.key)
		}
	}
	s.mu.Unlock()
	if s.opts.Observer != nil {
		s.opts.Observer.Commit(len(batch), len(buf), took)
	}
	return groupStat{batch: len(batch), bytes: len(buf), fsync: took}, nil
}

// write appends buf with one write call. The "write" failpoint simulates a
// short write (half of buf lands, then an error), as with ENOSPC.
func (s *Store) write(buf []byte) error {
	if err := s.failpoint("write"); err != nil {
		s.f.Write(buf[:len(buf)/2])
		return err
	}
	_, err := s.f.Write(buf)
	return err
}
