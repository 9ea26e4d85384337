package pipeline

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Every tombstone is kept, up to maxTombstones, and for tombstoneTTL: a
// just-deleted Pod generation is always known as deleted. (A lossy cache
// here once kept about 1,150 of 65,536 and refused the newest.)
func TestTombstonesAreKeptUpToTheirBoundAndTTL(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	const maxTombstones = 1 << 16
	if DefaultConfig().Tombstones != maxTombstones {
		t.Fatalf("the default bound is %d, want %d", DefaultConfig().Tombstones, maxTombstones)
	}
	g := newRecords(nil, clk, DefaultConfig().Tombstones)
	uid := func(i int) string { return fmt.Sprintf("uid-%06d", i) }
	for i := range maxTombstones {
		g.died(PodKey(fmt.Sprintf("ns/p%d", i)), uid(i))
	}
	for i := range maxTombstones {
		if !g.deleted(uid(i)) {
			t.Fatalf("tombstone %d of %d is missing", i, maxTombstones)
		}
	}
	g.died("ns/newest", "uid-newest")
	if !g.deleted("uid-newest") {
		t.Fatal("the newest tombstone was not kept")
	}
	if g.deleted(uid(0)) {
		t.Error("past the bound, the oldest tombstone should be the one dropped")
	}
	clk.SetTime(clk.Now().Add(tombstoneTTL + time.Second))
	if g.deleted("uid-newest") {
		t.Error("a tombstone outlived its TTL")
	}
}

// A create lifts its UID's tombstone at once.
func TestACreateLiftsItsTombstone(t *testing.T) {
	g := newRecords(nil, clocktesting.NewFakePassiveClock(time.Now()), 8)
	g.died("ns/p", "uid-a")
	if g.live("ns/p", "uid-a") {
		t.Fatal("a deleted generation is live")
	}
	if replaced := g.born("ns/p", "uid-a"); replaced != "" {
		t.Fatalf("born replaced %q, want none", replaced)
	}
	if g.deleted("uid-a") || !g.live("ns/p", "uid-a") {
		t.Fatal("the create did not lift the tombstone")
	}
}
