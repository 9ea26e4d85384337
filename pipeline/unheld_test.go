package pipeline_test

import (
	"context"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A process killed between the sandboxd claim and the fsync leaves a VM that
// sandboxd holds under the key's claim_ref and no row holds. The next
// process must neither claim a second VM for that key nor lose the first:
// a create recovers it, an owner-authorized delete releases it, and a
// delete without authority keeps it for the next create.

// preClaim is the previous process's claim that never became durable: made
// by this node (its claim_ref and labels) for a Pod of owner ownerUID.
func preClaim(t *testing.T, c *pool.Client, key, ownerUID string) pool.ClaimResponse {
	t.Helper()
	r, err := c.Claim(context.Background(), pool.ClaimRequest{
		Template: template, ClaimRef: testID.ClaimRef(pipeline.PodKey(key)), TTLSeconds: 3600,
		Metadata: testID.Labels(pipeline.PodRef{Key: pipeline.PodKey(key), UID: "uid-previous", OwnerUID: ownerUID}),
	})
	if err != nil {
		t.Fatalf("pre-claim %s: %v", key, err)
	}
	return r
}

func TestUnheldVMIsRecoveredByTheNextCreate(t *testing.T) {
	env := newSim(t, sim.Config{})
	lost := preClaim(t, env.root, "ns/p", "owner-1")
	rep := newReporter()
	e := startEngine(t, testConfig(env.root, openStore(t, tempStorePath(t), false), rep))

	create(t, e, intent("ns/p", "uid-1", "owner-1"))
	run := rep.running(t, "uid-1")
	if run.claim.ID != lost.ID {
		t.Fatalf("Running with %s, want the unheld %s recovered", run.claim.ID, lost.ID)
	}
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1 (the pre-claim): a second VM was claimed", got)
	}
	if got := len(env.sandboxesFor("ns/p")); got != 1 {
		t.Errorf("sandboxes under ns/p = %d, want 1", got)
	}
}

func TestUnheldVMIsReleasedOnlyWithOwnerAuthority(t *testing.T) {
	env := newSim(t, sim.Config{})
	lost := preClaim(t, env.root, "ns/p", "owner-1")
	other := preClaim(t, env.root, "ns/q", "")
	rep := newReporter()
	e := startEngine(t, testConfig(env.root, openStore(t, tempStorePath(t), false), rep))
	ref := pipeline.PodRef{Key: "ns/p", UID: "uid-1", OwnerUID: "owner-1"}

	res, err := e.Delete(context.Background(), ref, verdict(false, "owner-alive"))
	if err != nil || !res.Held || res.Verdict.Release {
		t.Fatalf("preserve delete = %+v, %v; want held, preserved", res, err)
	}
	if got := env.count("release"); got != 0 {
		t.Fatalf("release requests = %d after a preserve verdict, want 0", got)
	}
	// The replacement Pod gets the preserved VM, not a new one.
	create(t, e, intent("ns/p", "uid-2", "owner-1"))
	if run := rep.running(t, "uid-2"); run.claim.ID != lost.ID {
		t.Fatalf("replacement Running with %s, want %s", run.claim.ID, lost.ID)
	}

	// The other lost claim: an authorized delete of its key releases it.
	res, err = e.Delete(context.Background(), pipeline.PodRef{Key: "ns/q", UID: "uid-q"}, verdict(true, "owner-gone"))
	if err != nil || !res.Held || !res.Verdict.Release {
		t.Fatalf("release delete = %+v, %v; want held, released", res, err)
	}
	if got := len(env.sandboxesFor("ns/q")); got != 0 {
		t.Errorf("sandbox %s still held after an authorized delete", other.ID)
	}
	if got := env.count("release"); got != 1 {
		t.Errorf("release requests = %d, want 1", got)
	}
}

// Without the root token the credential of an unheld VM cannot be fetched:
// the create does not claim over it (that would double the VM) and says why.
func TestUnheldVMWithoutRootTokenIsNeverClaimedOver(t *testing.T) {
	env := newSim(t, sim.Config{})
	// A tenant sees only its own claims: the previous process held the
	// same tenant token.
	preClaim(t, env.node, "ns/p", "")
	rep := newReporter()
	e := startEngine(t, testConfig(env.node, openStore(t, tempStorePath(t), false), rep))
	create(t, e, intent("ns/p", "uid-1", ""))
	rep.pending(t, "uid-1", pipeline.ReasonLostClaim, 1)
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1: an unrecoverable VM was claimed over", got)
	}
}
