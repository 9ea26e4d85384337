package main

import (
	"os"
	"testing"
)

// `make demo </dev/null` from a script must not hold: /dev/null is a
// character device, but not a terminal.
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("/dev/null was taken for a terminal: the demo would hold forever")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(r) {
		t.Fatal("a pipe was taken for a terminal")
	}
}
