package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
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
			testkit.WaitFor(t, waitTimeout, "no intent left queued", func() bool { return queued(r.eng) == 0 })
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

// A delete tombstones its UID: a transaction that took the UID's intent
// before the delete, and waits for the key's lock meanwhile, finds the
// tombstone under the lock and claims nothing for the deleted Pod.
func TestDeleteTombstoneStopsATransactionThatTookItsIntent(t *testing.T) {
	env := newSim(t, sim.Config{})
	rep := newReporter()
	hung := &hungRelease{Sandboxd: env.root, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	e := startEngine(t, testConfig(hung, openStore(t, tempStorePath(t), false), rep))
	create(t, e, intent("ns/k", "uid-a", ""))
	hung.id = rep.running(t, "uid-a").claim.ID
	delA := make(chan error, 1)
	go func() {
		_, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/k", UID: "uid-a"}, verdict(true, "bare-pod"))
		delA <- err
	}()
	<-hung.entered // the delete of uid-a holds ns/k, inside sandboxd
	create(t, e, intent("ns/k", "uid-b", ""))
	// uid-b's transaction now waits for ns/k; its Pod is deleted meanwhile.
	// That delete tombstones uid-b and drops its intent before it waits for
	// the key lock too.
	delB := make(chan error, 1)
	go func() {
		_, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/k", UID: "uid-b"}, verdict(true, "bare-pod"))
		delB <- err
	}()
	testkit.WaitFor(t, waitTimeout, "uid-b's intent dropped by its delete", func() bool { return queued(e) == 0 })
	close(hung.gate)
	if err := <-delA; err != nil {
		t.Fatal(err)
	}
	if err := <-delB; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitTimeout, "no intent left queued", func() bool { return queued(e) == 0 })
	if n := len(env.sandboxesFor("ns/k")); n != 0 {
		t.Fatalf("%d VMs for ns/k: a claim was made for a Pod deleted while it waited", n)
	}
	if n := countOf(rep.snapshot(), "running", "uid-b", ""); n != 0 {
		t.Fatalf("the deleted uid-b went Running")
	}
}

// virtual-kubelet creates only Pods its informer shows alive, and it can
// call DeletePod for a Pod that still lives: a create after a delete of the
// same UID lifts the tombstone, and the Pod is claimed for.
func TestCreateAfterDeleteOfTheSameUIDRevivesIt(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	ref := pipeline.PodRef{Key: "ns/back", UID: "uid-back"}
	if _, err := r.eng.Delete(context.Background(), ref, verdict(true, "bare-pod")); err != nil {
		t.Fatal(err)
	}
	create(t, r.eng, intent("ns/back", "uid-back", ""))
	r.rep.running(t, "uid-back")
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
