package pipeline_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// ownersGone is an OwnerAuthority under which the listed owner UIDs are
// gone (release) and every other owner lives (preserve); a bare row goes.
func ownersGone(gone ...string) pipeline.OwnerAuthority {
	return func(_ context.Context, _ pipeline.PodKey, c pipeline.ClaimView) pipeline.Verdict {
		if c.OwnerUID == "" && c.OwnerKnown() {
			return pipeline.Verdict{Release: true, Reason: "bare-pod"}
		}
		for _, g := range gone {
			if c.OwnerUID == g {
				return pipeline.Verdict{Release: true, Reason: "owner-gone", FromOwner: true}
			}
		}
		return pipeline.Verdict{Reason: "owner-alive", FromOwner: true}
	}
}

// "Adoption checks the owner": a same-name Pod adopts a preserved claim
// only under the same controller owner (or when neither has one). Under
// another owner, the claim's recorded owner is asked: gone, the old VM is
// released and the new Pod claims fresh.
func TestAdoptionRequiresSameOwner(t *testing.T) {
	cases := []struct {
		name           string
		oldOwner, next string
		adopt          bool
	}{
		{"same-owner-adopts", "owner-1", "owner-1", true},
		{"bare-pods-adopt", "", "", true},
		{"other-owner-releases-and-claims-fresh", "owner-1", "owner-2", false},
		{"owned-then-bare-releases", "owner-1", "", false},
		{"bare-then-owned-releases", "", "owner-2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = ownersGone("owner-1") })
			key := "ns/sandbox"
			create(t, r.eng, intent(key, "uid-1", tc.oldOwner))
			first := r.rep.running(t, "uid-1")

			// The next generation arrives without a delete of the first, as
			// virtual-kubelet hands a replacement synced with its delete.
			create(t, r.eng, intent(key, "uid-2", tc.next))
			second := r.rep.running(t, "uid-2")
			row, _ := r.store.Get(key)
			if row.PodUID != "uid-2" {
				t.Errorf("durable row bound to %q, want uid-2", row.PodUID)
			}
			live := r.env.sandboxesFor(key)
			if tc.adopt {
				if !second.adopted || second.claim.ID != first.claim.ID {
					t.Errorf("Running(adopted=%v, id=%s), want adopted %s", second.adopted, second.claim.ID, first.claim.ID)
				}
				if got := r.env.count("claim_ok"); got != 1 {
					t.Errorf("claim_ok = %d, want 1", got)
				}
				if got := r.env.count("release"); got != 0 {
					t.Errorf("release requests = %d, want 0", got)
				}
			} else {
				if second.adopted || second.claim.ID == first.claim.ID {
					t.Errorf("Running(adopted=%v, id=%s): an old owner's VM was handed to a new owner", second.adopted, second.claim.ID)
				}
				if got := r.env.count("claim_ok"); got != 2 {
					t.Errorf("claim_ok = %d, want 2", got)
				}
				if got := r.env.count("release_ok"); got != 1 {
					t.Errorf("release_ok = %d, want 1 (the old owner's VM)", got)
				}
				if row.OwnerUID != tc.next {
					t.Errorf("fresh row records owner %q, want %q", row.OwnerUID, tc.next)
				}
			}
			if len(live) != 1 || live[0].ID != second.claim.ID {
				t.Errorf("live sandboxes for %s = %v, want only %s", key, live, second.claim.ID)
			}
		})
	}
}

// the stale-UID guard (docs/pod-contract.md): a delete carrying a previous generation's UID
// has no authority over the claim the new generation adopted.
func TestStaleUIDDeleteIsIgnored(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	key := "ns/sandbox"
	create(t, r.eng, intent(key, "uid-1", "owner-1"))
	first := r.rep.running(t, "uid-1")
	if _, err := r.eng.Delete(context.Background(), first.ref, verdict(false, "owner-alive")); err != nil {
		t.Fatal(err)
	}
	create(t, r.eng, intent(key, "uid-2", "owner-1"))
	if ev := r.rep.running(t, "uid-2"); !ev.adopted {
		t.Fatal("uid-2 did not adopt")
	}

	var asked atomic.Int32
	stale := pipeline.PodRef{Key: pipeline.PodKey(key), UID: "uid-1", OwnerUID: "owner-1"}
	res, err := r.eng.Delete(context.Background(), stale, func(context.Context) pipeline.Verdict {
		asked.Add(1)
		return pipeline.Verdict{Release: true, Reason: "owner-gone"}
	})
	if err != nil || res.Held {
		t.Fatalf("stale Delete = %+v, %v; want not held, no error", res, err)
	}
	if asked.Load() != 0 {
		t.Error("authorize was called for a stale UID")
	}
	if got := r.env.count("release"); got != 0 {
		t.Errorf("release requests = %d, want 0", got)
	}
	if cv, ok := r.eng.Lookup(pipeline.PodKey(key)); !ok || cv.PodUID != "uid-2" || cv.ID != first.claim.ID {
		t.Errorf("Claim(%s) = %+v %v, want the claim still bound to uid-2", key, cv, ok)
	}
}

// the delete authorization table (docs/pod-contract.md): a 404 from sandboxd on release means already gone: converged,
// not an error. The row is forgotten.
func TestReleaseNotFoundIsConverged(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	create(t, r.eng, intent("ns/gone", "uid-gone", ""))
	run := r.rep.running(t, "uid-gone")
	r.env.sim.Expire(run.claim.ID)

	res, err := r.eng.Delete(context.Background(), run.ref, verdict(true, "bare-pod"))
	if err != nil || !res.Held {
		t.Fatalf("Delete = %+v, %v; want held, nil", res, err)
	}
	if got := r.env.count("release_notfound"); got != 1 {
		t.Errorf("release_notfound = %d, want 1", got)
	}
	if _, ok := r.store.Get("ns/gone"); ok {
		t.Error("the durable row survived a converged release")
	}
	if _, ok := r.eng.Lookup("ns/gone"); ok {
		t.Error("the engine still holds a converged claim")
	}
}

// the delete authorization table (docs/pod-contract.md): any release error other than 404 keeps the claim and its
// credential, so the delete can be retried. The error names the pod key and
// never a token.
func TestReleaseErrorKeepsClaim(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	create(t, r.eng, intent("ns/keep", "uid-keep", ""))
	run := r.rep.running(t, "uid-keep")
	r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbRelease, Mode: "500"})

	res, err := r.eng.Delete(context.Background(), run.ref, verdict(true, "bare-pod"))
	if err == nil {
		t.Fatal("Delete succeeded although sandboxd answered 500")
	}
	if !res.Held || !res.Verdict.Release {
		t.Errorf("DeleteResult = %+v, want held with the release verdict", res)
	}
	if !strings.Contains(err.Error(), "ns/keep") {
		t.Errorf("error %q does not name the pod key", err)
	}
	row, ok := r.store.Get("ns/keep")
	if strings.Contains(err.Error(), row.Token) || strings.Contains(err.Error(), rootToken) {
		t.Errorf("error leaks a token: %q", err)
	}
	if !ok || row.ID != run.claim.ID || row.Token == "" || !r.env.holdsToken(row.ID, row.Token) {
		t.Fatal("the release credential was dropped after a failed release")
	}
	if cv, ok := r.eng.Lookup("ns/keep"); !ok || cv.State != pipeline.StateDurable {
		t.Fatalf("Claim = %v %v, want durable", cv.State, ok)
	}
	if got := len(r.env.sim.Sandboxes()); got != 1 {
		t.Fatalf("live sandboxes = %d, want 1", got)
	}

	r.env.sim.ClearFaults()
	res, err = r.eng.Delete(context.Background(), run.ref, verdict(true, "bare-pod"))
	if err != nil || !res.Held {
		t.Fatalf("retried Delete = %+v, %v", res, err)
	}
	if got := len(r.env.sim.Sandboxes()); got != 0 {
		t.Errorf("live sandboxes = %d after the retried delete, want 0", got)
	}
	if _, ok := r.store.Get("ns/keep"); ok {
		t.Error("row survived the successful release")
	}
}

// The owner GET of a delete can take --owner-get-timeout. It must not hold
// the key's lock, which the key's other work needs: here
// a same-owner replacement of the key, which needs that lock, adopts the VM
// while the old generation's delete is still waiting for its verdict. The
// delete then finds the row moved on and has no authority over it, even
// with a release verdict.
func TestDeleteTakesTheOwnerVerdictOutsideTheKeyLock(t *testing.T) {
	asked, answer := make(chan struct{}), make(chan struct{})
	reply := sync.OnceFunc(func() { close(answer) })
	var calls atomic.Int32
	slow := func(context.Context, pipeline.PodKey, pipeline.ClaimView) pipeline.Verdict {
		if calls.Add(1) == 1 {
			close(asked)
			<-answer
		}
		return pipeline.Verdict{Release: true, Reason: "owner-deleted", FromOwner: true}
	}
	r := newRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = slow })
	t.Cleanup(reply) // runs before the rig's: a failed wait must not hang its shutdown
	key := "ns/slow-owner"
	create(t, r.eng, intent(key, "uid-1", "owner-1"))
	first := r.rep.running(t, "uid-1")

	done := make(chan error, 1)
	var res pipeline.DeleteResult
	go func() {
		var err error
		res, err = r.eng.Delete(context.Background(), first.ref, verdict(true, "bare-pod"))
		done <- err
	}()
	<-asked
	create(t, r.eng, intent(key, "uid-2", "owner-1"))
	second := r.rep.running(t, "uid-2") // fails by its deadline if the lock is held
	reply()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !second.adopted || second.claim.ID != first.claim.ID {
		t.Fatalf("replacement Running(adopted=%v, id=%s), want it to adopt %s", second.adopted, second.claim.ID, first.claim.ID)
	}
	if res.Held {
		t.Fatalf("the old generation's delete acted on the adopted row: %+v", res)
	}
	if got := r.env.count("release"); got != 0 {
		t.Fatalf("sandboxd saw %d releases of the adopted VM", got)
	}
	if row, ok := r.store.Get(key); !ok || row.PodUID != "uid-2" {
		t.Fatalf("row = %+v, %v; want it bound to uid-2", row, ok)
	}
}

// A same-name Pod under another ownerReference (a bare Pod, or a forged
// owner) is no authority over a VM whose recorded owner still lives: the
// VM is kept, and the new Pod waits with a reason.
func TestForgedOwnerDoesNotReleaseALiveOwnersVM(t *testing.T) {
	for _, next := range []string{"", "forged-owner"} {
		r := newRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = ownersGone() }) // owner-1 lives
		create(t, r.eng, intent("ns/p", "uid-1", "owner-1"))
		first := r.rep.running(t, "uid-1")
		if _, err := r.eng.Delete(context.Background(), first.ref, verdict(false, "owner-alive")); err != nil {
			t.Fatal(err)
		}
		create(t, r.eng, intent("ns/p", "uid-2", next))
		r.rep.pending(t, "uid-2", pipeline.ReasonOwnerConflict, 1)
		if got := r.env.count("release"); got != 0 {
			t.Fatalf("next owner %q: %d releases of a live owner's VM", next, got)
		}
		if row, _ := r.store.Get("ns/p"); row.ID != first.claim.ID || row.OwnerUID != "owner-1" {
			t.Fatalf("next owner %q: row %s for %s, want the live owner's %s", next, row.ID, row.OwnerUID, first.claim.ID)
		}
	}
}
