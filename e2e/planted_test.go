package e2e

import (
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Another client of the node's sandboxd claims VMs under the claim_refs a
// Pod will have (this node's old unmarked form, as a tenant, and a guessed
// mark, with the root token), with this node's labels forged, before the
// Pod exists. On every sandboxd version the binary runs the Pod on a VM of
// its own, the orphan scan (with a settle window far shorter than the
// planted VMs' age) reports them as another client's and releases none, and
// the Pod's delete releases only its own VM: the planted VMs are still
// there, and no release ever named them.
func TestAPlantedVMIsNeverTakenForThePodsOwn(t *testing.T) {
	for _, v := range []string{sim.V1, sim.V2, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) {
			margs, scrape := metricsArgs(t)
			n := startNode(t, sim.Config{APIVersion: v, TenantTokens: map[string]string{tenantToken: "team-a"}},
				append(margs, "--sandboxd-claim-timeout", "500ms", "--orphan-scan-interval", "300ms", "--settle-window", "1s")...)
			ns := newNamespace(t)
			tenant, err := pool.NewClient(pool.ClientOptions{BaseURL: n.srv.URL, Token: tenantToken})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name  string
				owned bool
			}{{"owned", true}, {"bare", false}} {
				t.Run(tc.name, func(t *testing.T) {
					plantedVM(t, n, tenant, scrape, ns, tc.name, tc.owned)
				})
			}
		})
	}
}

func plantedVM(t *testing.T, n *vkNode, tenant *pool.Client, scrape, ns, name string, owned bool) {
	ctx := context.Background()
	key := pipeline.JoinKey(ns, name)
	forged := pipeline.Identity{Node: n.Name}.Labels(pipeline.PodRef{Key: key, UID: "uid-planter", OwnerUID: "owner-planter"})
	old := "vk-sandbox/" + n.Name + "/" + string(key)
	var planted []pool.ClaimResponse
	for c, ref := range map[*pool.Client]string{tenant: old, n.simClient(t): old + "/" + strings.Repeat("0", 32)} {
		r, err := c.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: ref, TTLSeconds: 3600, Metadata: forged})
		if err != nil {
			t.Fatalf("plant %s: %v", ref, err)
		}
		planted = append(planted, r)
	}
	plantedAt := time.Now()
	releases := n.counter("release")

	var opts []func(*corev1.Pod)
	if owned {
		opts = append(opts, ownedBy(createOwner(t, ns, name)))
	}
	createPod(t, sandboxPod(ns, name, n.Name, opts...))
	vm := waitRunning(t, ns, name).Annotations[kube.AnnClaimID]
	for _, p := range planted {
		if vm == p.ID {
			t.Fatalf("Pod %s runs the planted VM %s", key, vm)
		}
	}
	if n.identity(t).ClaimRef(key) == old {
		t.Fatal("the node claims under the old unmarked form")
	}

	// Scans past the settle window: a planted VM taken for this node's
	// would be released as undelivered by now.
	testkit.WaitForCtx(t, waitFor, "the planted VMs past the settle window", func(context.Context) (bool, error) {
		return time.Since(plantedAt) > 2*time.Second, nil
	})
	scans, _ := metricSum(t, scrape, "vksandbox_orphan_scans_total", `result="ok"`)
	testkit.WaitForCtx(t, waitFor, "three more orphan scans", func(context.Context) (bool, error) {
		v, _ := metricSum(t, scrape, "vksandbox_orphan_scans_total", `result="ok"`)
		return v >= scans+3, nil
	})
	for _, p := range planted {
		if !containsLine(n.vk.Log(), "without this node's mark", p.ID) {
			t.Errorf("the planted VM %s is not reported as another client's", p.ID)
		}
		if strings.Contains(n.vk.Log(), p.Token) {
			t.Fatal("a planted VM's token is in the node's log")
		}
	}
	if strings.Contains(n.vk.Log(), hex.EncodeToString(n.identity(t).Key)) {
		t.Fatal("the node key is in the node's log")
	}

	if owned {
		deleteOwner(t, ns, name)
	}
	deletePod(t, ns, name)
	testkit.WaitForCtx(t, waitFor, "the Pod's own VM released", func(context.Context) (bool, error) { return !n.holds(vm), nil })
	for _, p := range planted {
		if !n.holds(p.ID) {
			t.Errorf("the planted VM %s was released", p.ID)
		}
	}
	if got := n.counter("release") - releases; got != 1 {
		t.Errorf("%d releases, want 1 (the Pod's own VM only)", got)
	}
}

// The binary makes its node key at the first start and reads the same key
// back on a restart: the same Pod key gets the same claim_ref. A damaged
// key stops it at startup with an error that says to restore the backup,
// and the file is left as it was (never replaced, never logged).
func TestTheNodeKeyIsKeptAcrossRestartsAndADamagedOneStopsTheNode(t *testing.T) {
	n := startNode(t, sim.Config{})
	key := store.NodeKeyPath(n.state)
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatalf("no node key after the first start: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("node.key mode %v, want 0600", fi.Mode().Perm())
	}
	before := n.identity(t)
	n.restart()
	if after := n.identity(t); after.ClaimRef("ns/x") != before.ClaimRef("ns/x") {
		t.Fatal("a restart changed the node's claim_ref for the same Pod key")
	}
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "kept", n.Name))
	vm := waitRunning(t, ns, "kept").Annotations[kube.AnnClaimID]
	for _, s := range n.live() {
		if s.ID == vm && s.ClaimRef != before.ClaimRef(pipeline.JoinKey(ns, "kept")) {
			t.Fatalf("the Pod's VM is under claim_ref %q, want the key's marked one", s.ClaimRef)
		}
	}

	if err := n.vk.Terminate(); err != nil {
		t.Fatal(err)
	}
	damaged := []byte(hex.EncodeToString(before.Key)[:40] + "\n")
	if err := os.WriteFile(key, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()
	if err := n.vk.Wait(); err == nil {
		t.Fatal("the node started with a damaged node key")
	}
	if !containsLine(n.vk.Log(), "node key", "malformed", "restore it from the backup") {
		t.Errorf("the exit does not say the node key is damaged and to restore it: %s", n.vk.Tail(5))
	}
	if b, _ := os.ReadFile(key); string(b) != string(damaged) {
		t.Error("the damaged node key was replaced")
	}
	if strings.Contains(n.vk.Log(), hex.EncodeToString(before.Key)) {
		t.Fatal("the node key is in the node's log")
	}
}
