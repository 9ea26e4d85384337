package e2e

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
	"github.com/cocoonstack/vk-sandbox/pool/testkit"
)

// A delete or update that carries an older generation's UID must be
// ignored. virtual-kubelet's timing decides when such events arrive, so
// this test drives the real provider and engine directly (the owner is
// read from the real apiserver, sandboxd is the emulator over HTTP) and
// delivers the stale events itself.
func TestStaleUIDUpdateAndDeleteAreIgnored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := sim.New(sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	defer s.Close()
	client, err := pool.NewClient(pool.ClientOptions{BaseURL: srv.URL, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.json"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, dyn := clients(t)
	prov := kube.NewProvider(&kube.Authorizer{Dynamic: dyn}, nil, slog.Default())
	eng, err := pipeline.New(pipeline.Config{Sandboxd: client, Store: st, Reporter: prov})
	if err != nil {
		t.Fatal(err)
	}
	prov.SetEngine(eng)
	go eng.Run(ctx)

	ns := newNamespace(t)
	owner := createOwner(t, ns, "gen")
	podA := sandboxPod(ns, "gen", "n", ownedBy(owner))
	podA.UID, podA.CreationTimestamp = types.UID("uid-a"), metav1.NewTime(time.Now().Add(-time.Minute))
	podB := podA.DeepCopy()
	podB.UID, podB.CreationTimestamp = types.UID("uid-b"), metav1.Now()

	running := func(uid types.UID) *corev1.Pod {
		var p *corev1.Pod
		testkit.WaitForCtx(t, waitFor, "provider reports "+string(uid)+" Running", func(ctx context.Context) (bool, error) {
			p, _ = prov.GetPod(ctx, ns, "gen")
			return p != nil && p.UID == uid && p.Status.Phase == corev1.PodRunning, nil
		})
		return p
	}
	if err := prov.CreatePod(ctx, podA); err != nil {
		t.Fatal(err)
	}
	a := running("uid-a")
	if err := prov.DeletePod(ctx, podA); err != nil { // owner alive: preserve
		t.Fatal(err)
	}
	if err := prov.CreatePod(ctx, podB); err != nil {
		t.Fatal(err)
	}
	b := running("uid-b")
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
	if c, ok := eng.Lookup(ns + "/gen"); !ok || c.PodUID != "uid-b" {
		t.Fatalf("claim = %+v, want bound to uid-b", c)
	}
	if got := s.Counters(); got["claim_ok"] != 1 || got["release"] != 0 {
		t.Fatalf("sandboxd counters %v: want exactly 1 claim and no release", got)
	}
}
