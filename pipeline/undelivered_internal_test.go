package pipeline

import (
	"testing"
	"time"
)

// The first-seen book keeps an id's first listing time for as long as it
// is listed, stamps a new id with the listing's time, and forgets an id
// the listing no longer has: it is exact, and never larger than the
// listing.
func TestFirstSeenKeepsTheFirstListingAndForgetsWhatLeftIt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	f := firstSeen{}.update([]string{"sb_a", "sb_b"}, t0)
	f = f.update([]string{"sb_b", "sb_c"}, t1)
	want := firstSeen{"sb_b": t0, "sb_c": t1}
	if len(f) != len(want) || !f["sb_b"].Equal(t0) || !f["sb_c"].Equal(t1) {
		t.Fatalf("book %v, want %v", f, want)
	}
	if f = f.update(nil, t1.Add(time.Minute)); len(f) != 0 {
		t.Fatalf("book %v after an empty listing, want empty", f)
	}
}
