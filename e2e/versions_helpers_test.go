package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// profileRun is one sandboxd version's run of the contract suite: one node,
// one namespace, each step leaving only Running Pods (and their claims)
// behind it.
type profileRun struct {
	api    string
	has    sim.Features
	ns     string
	n      *vkNode
	scrape string
}

// detected: vksandbox_sandboxd_feature says what the version has.
func (p *profileRun) detected(t *testing.T) {
	t.Helper()
	want := map[string]bool{
		"metadata": p.has.Metadata, "claim_ref_filter": p.has.ClaimRefFilter, "token_read": p.has.TokenRead,
		"renew": p.has.Renew, "exec": p.has.Exec, "ports": p.has.Ports, "stats": p.has.Stats,
	}
	// Detection is the node's first exchange with sandboxd: a node Ready
	// without its profile for half a minute has none. Not fatal, so that a
	// run without detection (VK_E2E_DETECT=off) goes on to show what else
	// fails.
	var got map[string]bool
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = map[string]bool{}
		for name := range want {
			v, ok := metricSum(t, p.scrape, "vksandbox_sandboxd_feature", `feature="`+name+`"`)
			if !ok {
				return false, nil
			}
			got[name] = v == 1
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("no sandboxd profile exported on %s (vksandbox_sandboxd_feature): %v", p.api, err)
		return
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("vksandbox_sandboxd_feature{feature=%q} = %t on %s, want %t", name, got[name], p.api, w)
		}
	}
}

// ownerContracts: a claim runs; an eviction with a live owner preserves
// the VM and the replacement adopts it; the owner's delete releases it; a
// bare Pod's delete releases its VM.
func (p *profileRun) ownerContracts(t *testing.T) {
	t.Helper()
	n, ns := p.n, p.ns
	owner, vm := p.runOwned(t, "owned")
	deletePod(t, ns, "owned") // an eviction: the owner lives
	createPod(t, sandboxPod(ns, "owned", n.Name, ownedBy(owner)))
	if got := waitRunning(t, ns, "owned").Annotations[kube.AnnClaimID]; got != vm {
		t.Fatalf("the replacement runs %s, want the preserved %s", got, vm)
	}
	if r := n.counter("release"); r != 0 {
		t.Fatalf("%d releases while the owner lives", r)
	}
	deleteOwner(t, ns, "owned")
	deletePod(t, ns, "owned")
	testkit.WaitForCtx(t, waitFor, "the owner's VM released", func(context.Context) (bool, error) { return !n.holds(vm), nil })

	createPod(t, sandboxPod(ns, "bare", n.Name))
	bare := waitRunning(t, ns, "bare").Annotations[kube.AnnClaimID]
	deletePod(t, ns, "bare")
	testkit.WaitForCtx(t, waitFor, "the bare Pod's VM released", func(context.Context) (bool, error) { return !n.holds(bare), nil })
}

// restartKeepsRows: a graceful restart keeps every row: the Pod runs the
// same VM, nothing is claimed or released, and its owner still decides.
func (p *profileRun) restartKeepsRows(t *testing.T) {
	t.Helper()
	n, ns := p.n, p.ns
	_, vm := p.runOwned(t, "kept")
	claims, releases := n.counter("claim_ok"), n.counter("release")
	n.restart()
	testkit.WaitForCtx(t, waitFor, "the row restored", func(context.Context) (bool, error) {
		return n.r2StateClaims(t)[ns+"/kept"] == vm, nil
	})
	if got := waitRunning(t, ns, "kept").Annotations[kube.AnnClaimID]; got != vm || !n.holds(vm) {
		t.Fatalf("after the restart the Pod runs %s (held: %t), want %s", got, n.holds(vm), vm)
	}
	if c, r := n.counter("claim_ok")-claims, n.counter("release")-releases; c != 0 || r != 0 {
		t.Fatalf("the restart made %d claims and %d releases, want none", c, r)
	}
}

// lostAnswers: k Pods whose claim answers are all lost until k were end
// with exactly one VM each and none leaked.
func (p *profileRun) lostAnswers(t *testing.T, k int) {
	t.Helper()
	n, ns := p.n, p.ns
	before := n.counter("claim_answer_lost")
	n.Sim.SetLoseAnswerRate(1)
	for i := range k {
		createPod(t, sandboxPod(ns, "lost"+strconv.Itoa(i), n.Name))
	}
	testkit.WaitForCtx(t, waitFor, fmt.Sprintf("%d claim answers lost", k), func(context.Context) (bool, error) {
		return n.counter("claim_answer_lost")-before >= int64(k), nil
	})
	n.Sim.SetLoseAnswerRate(0)
	for i := range k {
		waitRunning(t, ns, "lost"+strconv.Itoa(i))
	}
	p.oneVMPerPod(t)
}

// finalizedAfterGiveUp: a claim held at sandboxd past its attempt's
// deadline finishes after the Pod got another VM (it was not in the index
// when the key looked); that undelivered VM is released once older than
// the settle window, by claimed_at or, on V1 whose rows have none, from
// when the node first listed it, and the Pod keeps its own.
func (p *profileRun) finalizedAfterGiveUp(t *testing.T) {
	t.Helper()
	n, ns := p.n, p.ns
	release := n.Sim.HoldNextClaim()
	t.Cleanup(release)
	createPod(t, sandboxPod(ns, "late", n.Name))
	pod := waitRunning(t, ns, "late")
	vm := pod.Annotations[kube.AnnClaimID]
	ref := claimRefOf(t, n.identity(t), pipeline.JoinKey(ns, "late"), string(pod.UID))
	if live := p.vmsOf(ref); len(live) != 1 || live[0] != vm {
		t.Fatalf("VMs of the late Pod before its held claim finished: %v, want only the delivered %s", live, vm)
	}
	release()
	testkit.WaitForCtx(t, waitFor, "the abandoned claim finalized", func(context.Context) (bool, error) {
		return len(p.vmsOf(ref)) == 2, nil
	})
	testkit.WaitForCtx(t, waitFor, "the undelivered VM released", func(context.Context) (bool, error) {
		live := p.vmsOf(ref)
		return len(live) == 1 && live[0] == vm, nil
	})
	p.oneVMPerPod(t)
}

// orphanAudit: another client's VM on the same sandboxd is neither
// reported nor released, however many scans pass.
func (p *profileRun) orphanAudit(t *testing.T) {
	t.Helper()
	n := p.n
	other, err := n.simClient(t).Claim(context.Background(), pool.ClaimRequest{Template: "default", ClaimRef: p.ns + "/late"})
	if err != nil {
		t.Fatal(err)
	}
	scans, _ := metricSum(t, p.scrape, "vksandbox_orphan_scans_total", `result="ok"`)
	testkit.WaitForCtx(t, waitFor, "three more orphan scans", func(context.Context) (bool, error) {
		v, _ := metricSum(t, p.scrape, "vksandbox_orphan_scans_total", `result="ok"`)
		return v >= scans+3, nil
	})
	if v, ok := metricSum(t, p.scrape, "vksandbox_orphan_sandboxes"); !ok || v != 0 {
		t.Errorf("vksandbox_orphan_sandboxes = %v (present %t), want 0: another client's VM is not this node's", v, ok)
	}
	if !n.holds(other.ID) {
		t.Fatalf("another client's VM %s was released", other.ID)
	}
	if err := n.simClient(t).Release(context.Background(), other.ID, other.Token); err != nil {
		t.Fatal(err)
	}
}

// lease: on a node that renews, a Pod without ttl-seconds keeps its VM
// across several grants; on one that cannot, a Pod asking to outlive its
// grant is told so (SandboxLeaseNotRenewable) and no renewal is tried.
func (p *profileRun) lease(t *testing.T) {
	t.Helper()
	n, ns := p.n, p.ns
	if p.has.Renew {
		vm := waitRunning(t, ns, "kept").Annotations[kube.AnnClaimID]
		var claimed time.Time
		for _, s := range n.live() {
			if s.ID == vm && s.ClaimedAt != nil {
				claimed = *s.ClaimedAt
			}
		}
		if claimed.IsZero() {
			t.Fatalf("the emulator does not list %s with its claim time", vm)
		}
		testkit.WaitForCtx(t, waitFor, "the kept Pod's VM past two and a half grants", func(context.Context) (bool, error) {
			return time.Since(claimed) > 5*profileGrant/2 || !n.holds(vm), nil
		})
		if got := waitRunning(t, ns, "kept"); got.Annotations[kube.AnnClaimID] != vm || !n.holds(vm) {
			t.Fatalf("after several %v grants the Pod runs %s (held: %t), want %s", profileGrant, got.Annotations[kube.AnnClaimID], n.holds(vm), vm)
		}
		return
	}
	createPod(t, sandboxPod(ns, "long", n.Name, annotate(kube.AnnTTL, "7200")))
	waitRunning(t, ns, "long")
	if r := n.counter("renew"); r != 0 {
		t.Errorf("%d renewals asked of a server without the verb", r)
	}
	testkit.WaitForCtx(t, waitFor, pipeline.ReasonLeaseNotRenewable+" on the Pod", func(context.Context) (bool, error) {
		return len(events(t, ns, "long", pipeline.ReasonLeaseNotRenewable)) > 0, nil
	})
}

// inventory: the NodeInventory lists exactly the node's claims.
func (p *profileRun) inventory(t *testing.T) {
	t.Helper()
	_, dyn := clients(t)
	var got, want []string
	testkit.WaitForCtx(t, waitFor, "NodeInventory entries equal to the node's claims", func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(kube.NodeInventoryGVR()).Get(ctx, p.n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		entries, _ := obj.Object["entries"].([]any)
		got = got[:0]
		for _, e := range entries {
			m, _ := e.(map[string]any)
			got = append(got, fmt.Sprint(m["id"]))
		}
		want = want[:0]
		for _, id := range p.n.r2StateClaims(t) {
			want = append(want, id)
		}
		slices.Sort(got)
		slices.Sort(want)
		return slices.Equal(got, want) && len(want) > 0, nil
	})
}

// oneVMPerPod: every VM this node made is held by a row, and no row holds
// a VM sandboxd no longer has.
func (p *profileRun) oneVMPerPod(t *testing.T) {
	t.Helper()
	id := p.n.identity(t)
	var extra []string
	testkit.WaitForCtx(t, waitFor, "one VM per Pod, none leaked", func(context.Context) (bool, error) {
		held := map[string]bool{}
		for _, vm := range p.n.r2StateClaims(t) {
			held[vm] = true
		}
		extra = extra[:0]
		mine := 0
		for _, s := range p.n.live() {
			if _, _, ok := id.Owns(s, true); ok {
				mine++
				if !held[s.ID] {
					extra = append(extra, s.ID)
				}
			}
		}
		return len(extra) == 0 && mine == len(held), nil
	})
}

// vmsOf lists the ids of the live VMs made under claim_ref ref.
func (p *profileRun) vmsOf(ref string) []string {
	var out []string
	for _, s := range p.n.live() {
		if s.ClaimRef == ref {
			out = append(out, s.ID)
		}
	}
	return out
}

// runOwned creates a Sandbox owner and its Pod name, and returns the owner
// and the VM the Pod runs.
func (p *profileRun) runOwned(t *testing.T, name string) (*unstructured.Unstructured, string) {
	t.Helper()
	owner := createOwner(t, p.ns, name)
	createPod(t, sandboxPod(p.ns, name, p.n.Name, ownedBy(owner)))
	return owner, waitRunning(t, p.ns, name).Annotations[kube.AnnClaimID]
}
