package store

// The keys put since the lease watch last asked: what lets it skip
// scanning a table in which nothing can have become due.

// maxChanged bounds the keys kept for TakeChanged between two calls.
const maxChanged = 1 << 16

// TakeChanged appends to dst the keys put since the last call (a key put
// twice may appear twice), forgets them, and returns dst. all reports that
// the list is not complete: more than maxChanged puts came in between, or
// this is the first call since Open (the recovered rows were never
// listed); the caller must then look at every row. Deletes are not listed.
// A caller that looks at the rows after TakeChanged returns sees every put
// either in this list, in the rows it looks at, or in the next list.
func (s *Store) TakeChanged(dst []string) (_ []string, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst, all = append(dst, s.changed...), s.changedAll
	clear(s.changed)
	s.changed, s.changedAll = s.changed[:0], false
	if cap(s.changed) > 4096 { // a burst's list is not kept for good
		s.changed = nil
	}
	return dst, all
}

// noteChanged lists key as put, for the next TakeChanged; past maxChanged
// keys it marks the list incomplete instead. Called under mu.
func (s *Store) noteChanged(key string) {
	if len(s.changed) < maxChanged {
		s.changed = append(s.changed, key)
	} else {
		s.changedAll = true
	}
}
