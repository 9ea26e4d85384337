package e2e

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// staleRig is the real provider and engine, driven directly: the owner is
// read from the real apiserver, sandboxd is the emulator over HTTP. Tests
// here deliver virtual-kubelet's calls themselves, because its timing
// decides when the orders they test arrive.
type staleRig struct {
	prov *kube.Provider
	eng  *pipeline.Engine
	sim  *sim.Server
	ns   string
}

func newStaleRig(t *testing.T) *staleRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	emu := simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4}})
	s := emu.Sim
	client := emu.Client(t, pool.ClientOptions{Token: rootToken})
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.json"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	key, err := st.NodeKey()
	if err != nil {
		t.Fatal(err)
	}
	cs, dyn := clients(t)
	// The daemon is assembled whole, but only its provider and pipeline
	// run: the virtual node is never started, so nothing but the test
	// calls the provider.
	d, err := kube.NewDaemon(kube.DaemonConfig{
		Provider: kube.ProviderOptions{Authorizer: &kube.Authorizer{Dynamic: dyn}, Log: slog.Default()},
		Pipeline: pipeline.Config{NodeKey: key, Sandboxd: client, Store: st},
		Node:     kube.NodeOptions{Name: "stale-uid-rig", Client: cs, EventRecorder: &record.FakeRecorder{}, NoAuth: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	go d.Engine().Run(ctx)
	return &staleRig{prov: d.Provider(), eng: d.Engine(), sim: s, ns: newNamespace(t)}
}

// running waits until the provider reports generation uid of pod name
// Running, and returns that Pod.
func (r *staleRig) running(t *testing.T, name string, uid types.UID) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	testkit.WaitForCtx(t, waitFor, "provider reports "+string(uid)+" Running", func(ctx context.Context) (bool, error) {
		p, _ = r.prov.GetPod(ctx, r.ns, name)
		return p != nil && p.UID == uid && p.Status.Phase == corev1.PodRunning, nil
	})
	return p
}

// A delete or update that carries an older generation's UID must be
// ignored.
func TestStaleUIDUpdateAndDeleteAreIgnored(t *testing.T) {
	r := newStaleRig(t)
	ctx, prov, eng, s, ns := t.Context(), r.prov, r.eng, r.sim, r.ns
	owner := createOwner(t, ns, "gen")
	podA := sandboxPod(ns, "gen", "n", ownedBy(owner))
	podA.UID, podA.CreationTimestamp = types.UID("uid-a"), metav1.NewTime(time.Now().Add(-time.Minute))
	podB := podA.DeepCopy()
	podB.UID, podB.CreationTimestamp = types.UID("uid-b"), metav1.Now()

	if err := prov.CreatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	a := r.running(t, "gen", "uid-a")
	if err := prov.DeletePod(ctx, podA); err != nil { // owner alive: preserve
		t.Fatal(err)
	}
	if err := prov.CreatePod(ctx, podB); err != nil {
		t.Fatal(err)
	}
	b := r.running(t, "gen", "uid-b")
	if a.Annotations[kube.AnnClaimID] != b.Annotations[kube.AnnClaimID] {
		t.Fatalf("uid-b did not adopt uid-a's VM: %s vs %s", b.Annotations[kube.AnnClaimID], a.Annotations[kube.AnnClaimID])
	}

	// The stale generation comes back: an update, then a delete.
	stale := podA.DeepCopy()
	stale.Labels = map[string]string{"late": "update"}
	if err := prov.UpdatePod(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if err := prov.DeletePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	p, err := prov.GetPod(ctx, ns, "gen")
	if err != nil || p.UID != "uid-b" || p.Labels["late"] != "" || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("stale events changed the current Pod: %+v err=%v", p, err)
	}
	if c, ok := eng.Lookup(pipeline.JoinKey(ns, "gen")); !ok || c.PodUID != "uid-b" {
		t.Fatalf("claim = %+v, want bound to uid-b", c)
	}
	if got := s.Counters(); got["claim_ok"] != 1 || got["release"] != 0 {
		t.Fatalf("sandboxd counters %v: want exactly 1 claim and no release", got)
	}
}

// When a Pod is deleted and its same-name replacement created before
// virtual-kubelet's worker takes the key, the two informer events make one
// sync: DeletePod never comes for the old generation, and the replacement
// arrives as UpdatePod while the provider still holds the old one. Both
// were created in the same second (creation timestamps have no finer
// grain), so the timestamp cannot say which is newer; the replacement must
// still be created and adopt the VM, not be taken for a stale update and
// left Pending forever.
func TestReplacementArrivingAsAnUpdateInTheSameSecondIsCreated(t *testing.T) {
	r := newStaleRig(t)
	ctx := t.Context()
	owner := createOwner(t, r.ns, "same")
	podA := sandboxPod(r.ns, "same", "n", ownedBy(owner))
	podA.UID, podA.CreationTimestamp = types.UID("uid-a"), metav1.Now()
	podB := podA.DeepCopy()
	podB.UID = types.UID("uid-b") // the same CreationTimestamp: created in the same second

	if err := r.prov.CreatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	a := r.running(t, "same", "uid-a")
	if err := r.prov.UpdatePod(ctx, podB); err != nil {
		t.Fatal(err)
	}
	if p, err := r.prov.GetPod(ctx, r.ns, "same"); err != nil || p.UID != "uid-b" {
		t.Fatalf("after UpdatePod of uid-b the node holds %+v (%v): the replacement was taken for a stale update", p, err)
	}
	b := r.running(t, "same", "uid-b")
	if a.Annotations[kube.AnnClaimID] != b.Annotations[kube.AnnClaimID] {
		t.Fatalf("uid-b runs %s, want uid-a's VM %s adopted", b.Annotations[kube.AnnClaimID], a.Annotations[kube.AnnClaimID])
	}
	if c, ok := r.eng.Lookup(pipeline.JoinKey(r.ns, "same")); !ok || c.PodUID != "uid-b" {
		t.Fatalf("claim = %+v, want bound to uid-b", c)
	}
	if got := r.sim.Counters(); got["claim_ok"] != 1 || got["release"] != 0 {
		t.Fatalf("sandboxd counters %v: want exactly 1 claim and no release", got)
	}

	// The old generation, deleted since, comes back in the same second: it
	// is stale, and must not displace uid-b.
	if err := r.prov.DeletePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	if err := r.prov.UpdatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	if p, err := r.prov.GetPod(ctx, r.ns, "same"); err != nil || p.UID != "uid-b" || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("a deleted generation's late update displaced the current Pod: %+v err=%v", p, err)
	}
}

// A transaction still running for a replaced generation must not report
// it on the replacement: the old Pod's claim finishes after the new Pod,
// of another owner, took the key, and its Running push is dropped (the
// cache re-checks the UID under its lock). Otherwise the new Pod would be
// shown Running on a VM that another owner's Pod claimed, and its own
// owner-conflict wait could never undo it (Pending never regresses
// Running).
func TestAReplacedGenerationsClaimIsNotReportedOnItsReplacement(t *testing.T) {
	r := newStaleRig(t)
	ctx := t.Context()
	podA := sandboxPod(r.ns, "swap", "n", ownedBy(createOwner(t, r.ns, "owner-a")))
	podA.UID, podA.CreationTimestamp = types.UID("uid-a"), metav1.Now()
	podB := sandboxPod(r.ns, "swap", "n", ownedBy(createOwner(t, r.ns, "owner-b")))
	podB.UID, podB.CreationTimestamp = types.UID("uid-b"), podA.CreationTimestamp

	release := r.sim.HoldNextClaim()
	t.Cleanup(release)
	if err := r.prov.CreatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "uid-a's claim held at sandboxd", func(context.Context) (bool, error) {
		return r.sim.Counters()["claim"] == 1, nil
	})
	// virtual-kubelet hands the replacement over as an update (see
	// TestReplacementArrivingAsAnUpdateInTheSameSecondIsCreated).
	if err := r.prov.UpdatePod(ctx, podB); err != nil {
		t.Fatal(err)
	}
	release()

	var got *corev1.Pod
	testkit.WaitForCtx(t, waitFor, "uid-b Running or waiting for owner-a", func(ctx context.Context) (bool, error) {
		got, _ = r.prov.GetPod(ctx, r.ns, "swap")
		return got != nil && got.UID == "uid-b" &&
			(got.Status.Phase == corev1.PodRunning || got.Status.Reason == pipeline.ReasonOwnerConflict), nil
	})
	if got.Status.Phase == corev1.PodRunning {
		t.Fatalf("uid-b is reported Running on VM %s, which uid-a (owner-a) claimed", got.Annotations[kube.AnnClaimID])
	}
	if c, ok := r.eng.Lookup(pipeline.JoinKey(r.ns, "swap")); !ok || c.PodUID != "uid-a" {
		t.Fatalf("claim = %+v, want uid-a's, kept for owner-a", c)
	}
}

// Apiservers' clocks may disagree by more than the one-second grain of a
// creation timestamp. A replacement stamped seconds before the Pod it
// replaces is still the newer generation, and an update of the replaced
// generation is still stale: the resource versions order them, not the
// clocks.
func TestAReplacementStampedByASkewedClockIsCreated(t *testing.T) {
	r := newStaleRig(t)
	ctx := t.Context()
	owner := createOwner(t, r.ns, "skew")
	podA := sandboxPod(r.ns, "skew", "n", ownedBy(owner))
	podA.UID, podA.ResourceVersion, podA.CreationTimestamp = types.UID("uid-a"), "1000", metav1.Now()
	podB := podA.DeepCopy()
	podB.UID, podB.ResourceVersion = types.UID("uid-b"), "1200"
	podB.CreationTimestamp = metav1.NewTime(podA.CreationTimestamp.Add(-5 * time.Second)) // a lagging apiserver

	if err := r.prov.CreatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	a := r.running(t, "skew", "uid-a")
	if err := r.prov.UpdatePod(ctx, podB); err != nil {
		t.Fatal(err)
	}
	b := r.running(t, "skew", "uid-b")
	if a.Annotations[kube.AnnClaimID] != b.Annotations[kube.AnnClaimID] {
		t.Fatalf("uid-b runs %s, want uid-a's VM %s adopted", b.Annotations[kube.AnnClaimID], a.Annotations[kube.AnnClaimID])
	}
	stale := podA.DeepCopy()
	stale.ResourceVersion = "1100"
	stale.CreationTimestamp = metav1.NewTime(podB.CreationTimestamp.Add(10 * time.Second))
	if err := r.prov.UpdatePod(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if p, err := r.prov.GetPod(ctx, r.ns, "skew"); err != nil || p.UID != "uid-b" {
		t.Fatalf("after a stale update of uid-a the node holds %v (%v), want uid-b", p.UID, err)
	}
}
