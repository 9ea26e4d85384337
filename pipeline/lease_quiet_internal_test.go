package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// A node that keeps claiming does not rescan its table each interval: a
// row put far from its deadline leaves the lease watch quiet, and only a
// row put within its renewal lead wakes it (the rows put since the last
// full pass are looked at alone).
func TestAClaimFarFromItsDeadlineLeavesTheLeaseWatchQuiet(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.json"), store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	ctx := context.Background()
	far := func(i int) store.Claim {
		return store.Claim{ID: fmt.Sprintf("sb-%03d", i), Token: "t", PodUID: fmt.Sprintf("uid-%03d", i),
			ClaimedAt: now, Deadline: now.Add(24 * time.Hour)}
	}
	for i := range 100 {
		if err := st.Put(ctx, fmt.Sprintf("ns/pod-%03d", i), far(i)); err != nil {
			t.Fatal(err)
		}
	}
	e := idleEngine(t, st)
	e.checkLeases(ctx, now) // the full pass: nothing is due for a day
	if !e.leases.quiet(st, now) {
		t.Fatal("the pass after a full pass with nothing due was not quiet")
	}

	if err := st.Put(ctx, "ns/new", far(100)); err != nil {
		t.Fatal(err)
	}
	if !e.leases.quiet(st, now) {
		t.Fatal("a claim a day from its deadline made the next pass scan the table")
	}

	soon := store.Claim{ID: "sb-soon", Token: "t", PodUID: "uid-soon", ClaimedAt: now.Add(-5 * time.Minute), Deadline: now.Add(2 * time.Second)}
	if err := st.Put(ctx, "ns/soon", soon); err != nil {
		t.Fatal(err)
	}
	if e.leases.quiet(st, now) {
		t.Fatal("a claim within its renewal lead left the lease watch quiet")
	}
}
