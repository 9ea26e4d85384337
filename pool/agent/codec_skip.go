package agent

import (
	"bytes"
	"strconv"
)

// The scanner's skipping of unknown values: every JSON type, checked as
// strictly as json.Unmarshal checks it, since a value the scanner lets
// through is never seen by json.

// skip scans any JSON value without keeping it, checking it as strictly
// as json.Unmarshal does.
func (s *scanner) skip(depth int) bool {
	if s.i >= len(s.b) || depth > maxSkipDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{' || c == '[':
		return s.skipComposite(depth)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.skipNumber()
	}
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// skipComposite skips an object or an array, its members each skipped.
func (s *scanner) skipComposite(depth int) bool {
	closer := byte(']')
	object := s.b[s.i] == '{'
	if object {
		closer = '}'
	}
	s.i++
	s.ws()
	if s.eat(closer) {
		return true
	}
	for {
		s.ws()
		if object {
			if s.i >= len(s.b) || s.b[s.i] != '"' || !s.skipString() {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
		}
		if !s.skip(depth + 1) {
			return false
		}
		s.ws()
		if s.eat(closer) {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// skipString skips a string: its escapes must be JSON's, and no control
// byte may stand in it. Bytes that are not UTF-8 are accepted, as json
// accepts (and replaces) them.
func (s *scanner) skipString() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.b) {
				return false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 > len(s.b) {
					return false
				}
				if _, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 16); err != nil {
					return false
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// skipNumber skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() == 0:
		return false
	}
	if s.eat('.') && s.digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}
