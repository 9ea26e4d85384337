package e2e

import (
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
//
// The replay row: a claim_ref is not secret (the NodeInventory shows it),
// and a Pod name comes back with the next generation. The planter reads a
// Pod's claim_ref off the NodeInventory, waits for that generation to be
// released, replays the exact claim_ref, and, once the next generation's
// Pod exists and its claim is held at sandboxd, plants again under the
// previous mark with the next generation's UID. The next generation's
// lookup (its claim attempt timed out) takes neither: it runs a VM of its
// own. The rewritten one carries no valid mark and is never touched; the
// exact replay carries this node's mark for the previous generation, so
// only the orphan scan releases it, as an undelivered VM of a generation
// no Pod holds.
func TestAPlantedVMIsNeverTakenForThePodsOwn(t *testing.T) {
	if err := env.InstallCRDs(context.Background(), "../manifests/test/nodeinventory-crd.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{sim.V1, sim.V2, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) {
			margs, scrape := metricsArgs(t)
			n := startNode(t, sim.Config{APIVersion: v, TenantTokens: map[string]string{tenantToken: "team-a"}},
				append(margs, "--sandboxd-claim-timeout", "500ms", "--orphan-scan-interval", "300ms", "--settle-window", "1s",
					"--publish-inventory", "--publish-interval", "300ms")...)
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
			t.Run("replay", func(t *testing.T) { replayedVM(t, n, ns, "replay") })
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
	pod := waitRunning(t, ns, name)
	vm := pod.Annotations[kube.AnnClaimID]
	for _, p := range planted {
		if vm == p.ID {
			t.Fatalf("Pod %s runs the planted VM %s", key, vm)
		}
	}
	if ref := vmClaimRef(n, vm); ref != claimRefOf(t, n.identity(t), key, string(pod.UID)) {
		t.Fatalf("the Pod's VM is under claim_ref %q, not its generation's marked one", ref)
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

// vmClaimRef is the claim_ref sandboxd lists for VM id ("" if none).
func vmClaimRef(n *vkNode, id string) string {
	for _, s := range n.live() {
		if s.ID == id {
			return s.ClaimRef
		}
	}
	return ""
}

// inventoryClaimRef is the claimRef the node's NodeInventory shows for key:
// what any reader of the cluster-scoped object sees.
func inventoryClaimRef(t *testing.T, n *vkNode, key pipeline.PodKey) string {
	t.Helper()
	_, dyn := clients(t)
	var ref string
	testkit.WaitForCtx(t, waitFor, "the NodeInventory entry of "+string(key), func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(kube.NodeInventoryGVR()).Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		entries, _ := obj.Object["entries"].([]any)
		for _, e := range entries {
			if m, _ := e.(map[string]any); m["name"] == string(key) {
				ref, _ = m["claimRef"].(string)
			}
		}
		return ref != "", nil
	})
	return ref
}

// replayedVM: see TestAPlantedVMIsNeverTakenForThePodsOwn, the replay row.
func replayedVM(t *testing.T, n *vkNode, ns, name string) {
	ctx := context.Background()
	key := pipeline.JoinKey(ns, name)
	root := n.simClient(t)
	plant := func(ref string, owner types.UID) pool.ClaimResponse {
		t.Helper()
		r, err := root.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: ref, TTLSeconds: 3600,
			Metadata: pipeline.Identity{Node: n.Name}.Labels(pipeline.PodRef{Key: key, UID: "uid-planter", OwnerUID: string(owner)})})
		if err != nil {
			t.Fatalf("plant %s: %v", ref, err)
		}
		return r
	}

	// The first generation runs; its claim_ref is read off the inventory.
	first := createOwner(t, ns, name)
	createPod(t, sandboxPod(ns, name, n.Name, ownedBy(first)))
	gen1 := waitRunning(t, ns, name)
	vm1 := gen1.Annotations[kube.AnnClaimID]
	prevRef := inventoryClaimRef(t, n, key)
	if prevRef != vmClaimRef(n, vm1) {
		t.Fatalf("the NodeInventory shows claimRef %q, sandboxd lists %q", prevRef, vmClaimRef(n, vm1))
	}
	deleteOwner(t, ns, name)
	deletePod(t, ns, name)
	testkit.WaitForCtx(t, waitFor, "the first generation's VM released", func(context.Context) (bool, error) { return !n.holds(vm1), nil })

	// The exact replay, before the next generation exists.
	replay := plant(prevRef, first.GetUID())
	releases := n.counter("release")

	// The next generation: its first claim is held at sandboxd past its
	// attempt's deadline, so its retry looks its claim_ref up first.
	hold := n.Sim.HoldNextClaim()
	t.Cleanup(hold)
	next := createOwner(t, ns, name)
	gen2 := createPod(t, sandboxPod(ns, name, n.Name, ownedBy(next)))
	testkit.WaitForCtx(t, waitFor, "the next generation's claim held", func(context.Context) (bool, error) {
		return n.counter("claim_held") >= 1, nil
	})
	mark := prevRef[strings.LastIndexByte(prevRef, '/')+1:]
	rewritten := plant("vk-sandbox/"+n.Name+"/"+string(key)+"/"+string(gen2.UID)+"/"+mark, next.GetUID())

	// The held attempt times out; only then is the hold let go (earlier, the
	// held claim would simply answer and no lookup would run).
	vm2 := waitRunning(t, ns, name).Annotations[kube.AnnClaimID]
	hold()
	if vm2 == replay.ID || vm2 == rewritten.ID || vm2 == vm1 {
		t.Fatalf("the next generation runs VM %s: the replayed %s, the rewritten %s or the first generation's %s", vm2, replay.ID, rewritten.ID, vm1)
	}
	if ref := vmClaimRef(n, vm2); ref != claimRefOf(t, n.identity(t), key, string(gen2.UID)) {
		t.Fatalf("the next generation's VM is under claim_ref %q, not its own generation's", ref)
	}
	// Past the settle window the exact replay, by its mark this node's VM of
	// a generation no Pod holds, is released as undelivered; the rewritten
	// one is another client's and stays.
	testkit.WaitForCtx(t, waitFor, "the exact replay released", func(context.Context) (bool, error) {
		return !n.holds(replay.ID), nil
	})
	// The node logs the release once sandboxd's answer is back, a moment
	// after sandboxd dropped the VM: wait for the line, do not race it.
	testkit.WaitForCtx(t, waitFor, "the exact replay's release logged as an undelivered VM's", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "never delivered", replay.ID), nil
	})
	testkit.WaitForCtx(t, waitFor, "the rewritten replay reported as another client's", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "without this node's mark", rewritten.ID), nil
	})
	deleteOwner(t, ns, name)
	deletePod(t, ns, name)
	testkit.WaitForCtx(t, waitFor, "the next generation's VM released", func(context.Context) (bool, error) { return !n.holds(vm2), nil })
	if !n.holds(rewritten.ID) {
		t.Errorf("the rewritten replay %s was released", rewritten.ID)
	}
	if got := n.counter("release") - releases; got != 2 {
		t.Errorf("%d releases, want 2 (the exact replay as undelivered, the next generation's own VM)", got)
	}
}

// The binary makes its node key at the first start and reads the same key
// back on a restart: the same Pod generation gets the same claim_ref. A damaged
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
	if claimRefOf(t, n.identity(t), "ns/x", "uid-x") != claimRefOf(t, before, "ns/x", "uid-x") {
		t.Fatal("a restart changed the node's claim_ref for the same Pod generation")
	}
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "kept", n.Name))
	pod := waitRunning(t, ns, "kept")
	vm := pod.Annotations[kube.AnnClaimID]
	for _, s := range n.live() {
		if s.ID == vm && s.ClaimRef != claimRefOf(t, before, pipeline.JoinKey(ns, "kept"), string(pod.UID)) {
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
