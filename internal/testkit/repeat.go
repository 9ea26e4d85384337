package testkit

// RepeatReader reads Line again and again, never ending: the input of a
// benchmark that decodes the same frame b.N times from a real reader.
type RepeatReader struct {
	Line []byte
	off  int
}

func (r *RepeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.Line[r.off:])
	r.off = (r.off + n) % len(r.Line)
	return n, nil
}
