package store

// Health is the error of the last commit, or nil when it succeeded or none
// has run yet. A failed commit leaves the store dirty, and the next commit
// rewrites the file first (see Store), so a later success clears it.
func (s *Store) Health() error {
	if p := s.lastCommit.Load(); p != nil {
		return *p
	}
	return nil
}
