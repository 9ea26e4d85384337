package sim

import (
	"bytes"
	"testing"
)

// logs and attach replay the last ringSize bytes a process wrote, however
// it wrote them, and the ring stays within a few times that.
func TestTheRingKeepsTheLastOutput(t *testing.T) {
	p := &proc{subs: map[chan []byte]struct{}{}}
	var all []byte
	writes := []int{10, 32 << 10, 200 << 10, 1, 300 << 10, 7, ringSize, 5000, 64 << 10}
	for range 12 { // a stream's writes, past a few cuts
		writes = append(writes, 100<<10)
	}
	for i, n := range append(writes, 3) {
		b := bytes.Repeat([]byte{byte(i)}, n)
		b[0] = byte(n) // make each write's bytes tell apart where it starts
		p.record(b)
		all = append(all, b...)
		if got, want := p.tail(), all[max(0, len(all)-ringSize):]; !bytes.Equal(got, want) {
			t.Fatalf("after write %d: the ring's tail is %d bytes, not the last %d written", i, len(got), len(want))
		}
		if cap(p.ring) > 3*ringSize {
			t.Fatalf("after write %d: the ring holds %d bytes", i, cap(p.ring))
		}
	}
}
