package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func queued(e *pipeline.Engine) int {
	n := 0
	for _, d := range e.QueueDepths() {
		n += d
	}
	return n
}

// virtual-kubelet may force-delete a Pending Pod without calling DeletePod.
// When the same-name replacement arrives, the old generation's intent is
// cancelled: it can neither rebind the replacement's claim (same owner)
// nor release it (another owner).
func TestReplacedGenerationsIntentIsCancelled(t *testing.T) {
	for _, tc := range []struct{ name, oldOwner, newOwner string }{
		{"same-owner", "owner-1", "owner-1"},
		{"other-owner", "owner-1", "owner-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, sim.Config{MaxClaims: 1}, nil)
			blocker, err := r.env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, ClaimRef: "other/blocker"})
			if err != nil {
				t.Fatal(err)
			}
			create(t, r.eng, intent("ns/p", "uid-old", tc.oldOwner))
			r.rep.pending(t, "uid-old", pipeline.ReasonCapacity, 1) // retrying at capacity
			create(t, r.eng, intent("ns/p", "uid-new", tc.newOwner))
			if err := r.env.root.Release(context.Background(), blocker.ID, blocker.Token); err != nil {
				t.Fatal(err)
			}
			run := r.rep.running(t, "uid-new")
			eventually(t, "no intent left queued", func() bool { return queued(r.eng) == 0 })
			row, _ := r.store.Get("ns/p")
			if row.PodUID != "uid-new" || row.ID != run.claim.ID {
				t.Fatalf("row bound to %s/%s, want the replacement's uid-new/%s", row.PodUID, row.ID, run.claim.ID)
			}
			if n := countOf(r.rep.snapshot(), "running", "uid-old", ""); n != 0 {
				t.Errorf("the replaced generation went Running %d times", n)
			}
			if got := r.env.count("release_ok"); got != 1 { // the blocker only
				t.Errorf("release_ok = %d, want 1 (the test's blocker): the replacement's VM was released", got)
			}
		})
	}
}

// A delete tombstones its UID: a create for it that arrives afterwards (an
// update routed to CreatePod once the Pod left the cache) claims nothing.
func TestCreateAfterDeleteOfTheSameUIDClaimsNothing(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	ref := pipeline.PodRef{Key: "ns/gone", UID: "uid-gone"}
	if _, err := r.eng.Delete(context.Background(), ref, verdict(true, "bare-pod")); err != nil {
		t.Fatal(err)
	}
	create(t, r.eng, intent("ns/gone", "uid-gone", ""))
	create(t, r.eng, intent("ns/live", "uid-live", "")) // a later Pod still runs
	r.rep.running(t, "uid-live")
	eventually(t, "no intent left queued", func() bool { return queued(r.eng) == 0 })
	if n := len(r.env.sandboxesFor("ns/gone")); n != 0 {
		t.Fatalf("%d VMs claimed for a Pod already deleted", n)
	}
	if _, ok := r.store.Get("ns/gone"); ok {
		t.Fatal("a claim was made durable for a deleted Pod")
	}
}

// CreatePod runs on virtual-kubelet's shared workers: Create never waits
// for a queue slot, whatever the number of Pods in retry. A Pod that finds
// its shard full is Pending SandboxQueueFull and offered again later, and
// once capacity returns every Pod runs.
func TestCreateNeverBlocksOnAFullQueue(t *testing.T) {
	r := newRig(t, sim.Config{MaxClaims: 1}, func(c *pipeline.Config) { c.Shards, c.QueueDepth = 1, 2 })
	blocker, err := r.env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, ClaimRef: "other/blocker"})
	if err != nil {
		t.Fatal(err)
	}
	const pods = 8
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i := range pods {
			_ = r.eng.Create(context.Background(), intent(fmt.Sprintf("ns/q%d", i), fmt.Sprintf("uid-q%d", i), ""))
		}
	}()
	select {
	case <-created:
	case <-time.After(20 * time.Second):
		t.Fatal("Create blocked on a full queue")
	}
	r.rep.waitFor(t, "Pods deferred on the full queue", func(evs []event) bool {
		return countOf(evs, "pending", "", pipeline.ReasonQueueFull) >= pods-2
	})
	r.env.sim.SetMaxClaims(0)
	if err := r.env.root.Release(context.Background(), blocker.ID, blocker.Token); err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		r.rep.running(t, fmt.Sprintf("uid-q%d", i))
	}
}
