package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Lifecycle tests: quarantine (docs/pod-contract.md) and the background
// loops (lease watch, orphan scan, NodeInventory; docs/architecture.md) in
// the real binary.

// simClient is a root-token client straight to the node's emulator, as an
// operator or another tool would use it.
func (n *vkNode) simClient(t *testing.T) *pool.Client {
	t.Helper()
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.srv.URL, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metricsArgs returns the flag pair enabling /metrics and the scrape URL.
func metricsArgs(t *testing.T) (args []string, scrapeURL string) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	return []string{"--metrics-addr", addr}, "http://" + addr + "/metrics"
}

// metricSum sums the samples of a metric whose label set contains every
// one of labels (e.g. `result="ok"`); ok is false if no sample matched or
// the scrape failed (the node may be restarting).
func metricSum(t *testing.T, scrapeURL, name string, labels ...string) (sum float64, ok bool) {
	t.Helper()
	resp, err := http.Get(scrapeURL)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	s, err := parseText(string(body))
	if err != nil {
		t.Fatalf("scrape %s: %v", scrapeURL, err)
	}
	var kv []string
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		kv = append(kv, k, strings.Trim(v, `"`))
	}
	return s.match(name, kv...)
}

// stateDeadline reads the deadline recorded for claim id in the state file
// (the last put record that carries it wins: the file is a log of
// framed {"crc","rec"} lines, pool/store/encode.go).
func (n *vkNode) stateDeadline(id string) (time.Time, bool) {
	f, err := os.Open(n.state)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	var d time.Time
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Rec struct {
				Claim *struct {
					ID       string    `json:"id"`
					Deadline time.Time `json:"deadline"`
				} `json:"claim"`
			} `json:"rec"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Rec.Claim == nil || line.Rec.Claim.ID != id {
			continue
		}
		d, found = line.Rec.Claim.Deadline, true
	}
	return d, found
}

func TestLifecycleQuarantineHoldsWhileSandboxdUnreachable(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	ids := map[string]string{}
	for _, name := range []string{"q0", "q1"} {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range []string{"q0", "q1"} {
		ids[name] = waitRunning(t, ns, name).Annotations[kube.AnnClaimID]
	}
	if err := n.vk.Terminate(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	n.Sim.InjectFault(sim.Fault{Verb: "list", Mode: "500"}) // every listing, until cleared
	n.start()
	n.waitReady()

	// Verification fails, and keeps failing: at least two failed tries.
	testkit.WaitForCtx(t, waitFor, "failed quarantine verifications", func(context.Context) (bool, error) {
		return strings.Count(n.vk.Log(), "rows stay quarantined") >= 2, nil
	})
	if containsLine(n.vk.Log(), `"msg":"quarantine verification"`) {
		t.Fatal("a verification completed while every listing fails")
	}
	if c, r := n.counter("claim_ok"), n.counter("release"); c != 2 || r != 0 {
		t.Fatalf("while quarantined: claims = %d, releases = %d; want 2 and 0", c, r)
	}

	n.Sim.ClearFaults()
	testkit.WaitForCtx(t, waitFor, "quarantine lifted", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "quarantine verification", `"lifted":2`), nil
	})
	cs, _ := clients(t)
	for name, id := range ids {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || p.Annotations[kube.AnnClaimID] != id {
			t.Fatalf("after the lift %s: err=%v phase=%s claim=%s (want Running with %s)", name, err, p.Status.Phase, p.Annotations[kube.AnnClaimID], id)
		}
	}
	if c, r := n.counter("claim_ok"), n.counter("release"); c != 2 || r != 0 {
		t.Fatalf("after the lift: claims = %d, releases = %d; want 2 and 0", c, r)
	}
	if len(n.live()) != 2 {
		t.Fatalf("emulator holds %d sandboxes, want 2", len(n.live()))
	}
}

func TestLifecycleLeaseExpiryFailsThePod(t *testing.T) {
	n := startNode(t, sim.Config{}, "--lease-check-interval", "200ms")
	ns := newNamespace(t)
	cs, _ := clients(t)

	// A lease that ends: the emulator reaps the VM at its deadline, the next
	// lease check sees it unlisted and pushes Failed.
	createPod(t, sandboxPod(ns, "short", n.Name, annotate(kube.AnnTTL, "4")))
	p := waitRunning(t, ns, "short")
	id := p.Annotations[kube.AnnClaimID]
	recorded, ok := n.stateDeadline(id)
	if !ok {
		t.Fatalf("state file holds no deadline for %s", id)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "short").String(), ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var failed *corev1.Pod
	var seen time.Time
	timeout := time.After(waitFor)
	for failed == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("pod watch closed")
			}
			if ev.Type != watch.Modified {
				continue
			}
			if q := ev.Object.(*corev1.Pod); q.Status.Phase == corev1.PodFailed {
				failed, seen = q, time.Now()
			}
		case <-timeout:
			t.Fatal("the Pod never went Failed after its lease ended")
		}
	}
	if failed.Status.Reason != kube.ReasonLeaseExpired {
		t.Fatalf("failed with reason %q, want %s", failed.Status.Reason, kube.ReasonLeaseExpired)
	}
	if len(failed.Status.ContainerStatuses) == 0 {
		t.Fatal("no container statuses")
	}
	for _, c := range failed.Status.ContainerStatuses {
		if c.State.Terminated == nil {
			t.Fatalf("container %s not terminated: %+v", c.Name, c.State)
		}
	}
	t.Logf("lease deadline → Pod Failed/%s observed by a watch: %v (deadline %s, --lease-check-interval 200ms, emulator reaper 50ms)",
		kube.ReasonLeaseExpired, seen.Sub(recorded).Round(time.Millisecond), recorded.Format(time.RFC3339Nano))
	if r := n.counter("release"); r != 0 {
		t.Fatalf("%d releases for an ended lease, want 0 (nothing to release)", r)
	}

	// A recorded deadline that passes while sandboxd lists a later one: the
	// row takes the listing's deadline, and the Pod stays Running.
	createPod(t, sandboxPod(ns, "renewed", n.Name, annotate(kube.AnnTTL, "4")))
	p = waitRunning(t, ns, "renewed")
	id = p.Annotations[kube.AnnClaimID]
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	n.Sim.SetDeadline(id, later) // the lease was extended behind the node's back
	first, _ := n.stateDeadline(id)
	if !first.Before(later.Add(-30 * time.Minute)) {
		t.Fatalf("recorded deadline %v is not the short lease", first)
	}
	testkit.WaitForCtx(t, waitFor, "the refreshed deadline recorded", func(context.Context) (bool, error) {
		d, _ := n.stateDeadline(id)
		return d.Equal(later), nil
	})
	if now := time.Now(); !now.After(first) {
		t.Fatalf("refreshed before the recorded deadline %v passed (now %v)", first, now)
	}
	q, err := cs.CoreV1().Pods(ns).Get(context.Background(), "renewed", metav1.GetOptions{})
	if err != nil || !isRunning(q) || q.Annotations[kube.AnnClaimID] != id {
		t.Fatalf("renewed Pod: err=%v phase=%s reason=%s", err, q.Status.Phase, q.Status.Reason)
	}
	if containsLine(n.vk.Log(), "lease ended", ns+"/renewed") {
		t.Fatal("the renewed lease was reported ended")
	}
}

func TestLifecycleOrphanIsReportedNotReleased(t *testing.T) {
	margs, scrape := metricsArgs(t)
	n := startNode(t, sim.Config{}, append([]string{"--orphan-scan-interval", "300ms"}, margs...)...)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "known", n.Name))
	waitRunning(t, ns, "known")

	// A VM this node made (its marks) that no claim holds: a lost claim
	// answer whose credential could not be recovered.
	id := n.identity(t)
	ghost, err := n.simClient(t).Claim(context.Background(), pool.ClaimRequest{Template: "default", TTLSeconds: 3600,
		ClaimRef: claimRefOf(t, id, "ghost/x", "uid-ghost"), Metadata: id.Labels(pipeline.PodRef{Key: "ghost/x", UID: "uid-ghost"})})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "orphan warning for "+ghost.ID, func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "no claim knows about", ghost.ID, claimRefOf(t, id, "ghost/x", "uid-ghost")), nil
	})
	testkit.WaitForCtx(t, waitFor, "vksandbox_orphan_sandboxes 1", func(context.Context) (bool, error) {
		v, ok := metricSum(t, scrape, "vksandbox_orphan_sandboxes")
		return ok && v == 1, nil
	})
	if v, ok := metricSum(t, scrape, "vksandbox_orphan_claims"); !ok || v != 0 {
		t.Errorf("vksandbox_orphan_claims = %v (present %v), want 0", v, ok)
	}
	// Several more scans: still reported once, never released.
	scans, _ := metricSum(t, scrape, "vksandbox_orphan_scans_total", `result="ok"`)
	testkit.WaitForCtx(t, waitFor, "three more orphan scans", func(context.Context) (bool, error) {
		v, _ := metricSum(t, scrape, "vksandbox_orphan_scans_total", `result="ok"`)
		return v >= scans+3, nil
	})
	if c := strings.Count(n.vk.Log(), "no claim knows about"); c != 1 {
		t.Errorf("the orphan was logged %d times, want once (when it first appears)", c)
	}
	if r := n.counter("release"); r != 0 {
		t.Fatalf("%d releases, want 0: the orphan scan only reports", r)
	}
	live := false
	for _, s := range n.live() {
		live = live || s.ID == ghost.ID
	}
	if !live {
		t.Fatalf("the orphan %s is gone from the emulator", ghost.ID)
	}
}

// The NodeInventory is published spec-less, in the shape its consumer
// reads, through the consumer's schema with strict field validation: a
// field the consumer lacks fails the write, and every field published is
// read back whole.
func TestLifecycleNodeInventoryMatchesEmulator(t *testing.T) {
	if err := env.InstallCRDs(context.Background(), "../manifests/test/nodeinventory-crd.yaml"); err != nil {
		t.Fatal(err)
	}
	margs, scrape := metricsArgs(t)
	n := startNode(t, sim.Config{}, append([]string{"--publish-inventory", "--publish-interval", "500ms"}, margs...)...)
	ns := newNamespace(t)
	keys := map[string]string{} // claim id → Pod key
	for _, name := range []string{"inv0", "inv1"} {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range []string{"inv0", "inv1"} {
		p := waitRunning(t, ns, name)
		keys[p.Annotations[kube.AnnClaimID]] = ns + "/" + name
	}
	// Another client's VM on the same sandboxd is not this node's to publish.
	if _, err := n.simClient(t).Claim(context.Background(), pool.ClaimRequest{Template: "default", ClaimRef: ns + "/inv0"}); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(n.srv.URL)
	_, dyn := clients(t)
	sc := n.simClient(t)
	rows := map[string]pool.Sandbox{}
	for _, s := range n.live() {
		rows[s.ID] = s
	}

	var obj map[string]any
	var mismatch string
	testkit.WaitForCtx(t, waitFor, "NodeInventory matching the emulator", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(kube.NodeInventoryGVR()).Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			mismatch = err.Error()
			return false, nil
		}
		info, err := sc.Info(ctx)
		if err != nil {
			return false, err
		}
		obj = got.Object
		mismatch = inventoryMismatch(obj, n, u.Host, keys, rows, info)
		return mismatch == "", nil
	})
	if mismatch != "" {
		t.Fatalf("inventory: %s\nobject: %v", mismatch, obj)
	}

	// Publish rate: one publish (listing + info, and an apply when the
	// object changed or the resync is due) per tick, whatever else happens.
	before, _ := metricSum(t, scrape, "vksandbox_inventory_publishes_total", `result="ok"`)
	lists := n.counter("list")
	start := time.Now()
	const window = 5 * time.Second
	time.Sleep(window) // a measurement window, not a wait for a condition
	after, _ := metricSum(t, scrape, "vksandbox_inventory_publishes_total", `result="ok"`)
	failedPub, _ := metricSum(t, scrape, "vksandbox_inventory_publishes_total", `result="failed"`)
	elapsed := time.Since(start)
	applies := after - before
	t.Logf("NodeInventory publishes over %v at --publish-interval 500ms: %.0f ok (%d failed), sandboxd listings %d; at 30s that is %.0f per 10 minutes",
		elapsed.Round(time.Millisecond), applies, int(failedPub), n.counter("list")-lists, (10*time.Minute).Seconds()/30)
	if maxN := elapsed.Seconds()/0.5 + 1; applies > maxN || applies < maxN/2-1 {
		t.Fatalf("%.0f applies in %v, want about one per 500ms tick (at most %.0f)", applies, elapsed, maxN)
	}
}

// inventoryMismatch compares a NodeInventory object read back from the
// apiserver with the emulator; it returns "" on a match.
func inventoryMismatch(obj map[string]any, n *vkNode, address string, keys map[string]string, rows map[string]pool.Sandbox, info pool.Info) string {
	if _, ok := obj["spec"]; ok {
		return "the object has a spec: its consumer reads the top level"
	}
	if obj["node"] != n.Name || obj["address"] != address {
		return fmt.Sprintf("node %v address %v, want %s %s", obj["node"], obj["address"], n.Name, address)
	}
	entries, _ := obj["entries"].([]any)
	if len(entries) != len(keys) {
		return fmt.Sprintf("%d entries, want %d (this node's VMs only)", len(entries), len(keys))
	}
	key, err := store.ReadNodeKey(n.state)
	if err != nil {
		return err.Error()
	}
	id := pipeline.Identity{Node: n.Name, Key: key}
	for _, e := range entries {
		m, _ := e.(map[string]any)
		vm := fmt.Sprint(m["id"])
		key, ok := keys[vm]
		if !ok {
			return "unexpected entry " + vm
		}
		row := rows[vm]
		if k, _, ok := id.Owns(row, true); !ok || string(k) != key {
			return fmt.Sprintf("entry %s: its VM's claim_ref %q is not this node's for %s", vm, row.ClaimRef, key)
		}
		// Exactly the consumer's fields: no template, no claimedAt.
		want := map[string]any{
			"name": key, "id": vm, "phase": "Running",
			"claimRef": row.ClaimRef, "addr": n.Sim.OwnerAddr(),
			"deadline": row.Deadline.UTC().Format(time.RFC3339),
		}
		if len(m) != len(want) {
			return fmt.Sprintf("entry %v has %d fields, want %d: a field was pruned or added", m, len(m), len(want))
		}
		for k, v := range want {
			if m[k] != v {
				return fmt.Sprintf("entry %s: %s = %v, want %v", vm, k, m[k], v)
			}
		}
	}
	pools, _ := obj["pools"].([]any)
	if len(pools) != len(info.Pools) {
		return fmt.Sprintf("%d pools, want %d", len(pools), len(info.Pools))
	}
	for i, pl := range info.Pools {
		m, _ := pools[i].(map[string]any)
		if m["template"] != pl.Key.Template || m["net"] != pl.Key.Net || m["size"] != pl.Key.Size ||
			fmt.Sprint(m["warm"]) != strconv.Itoa(pl.Warm) || fmt.Sprint(m["target"]) != strconv.Itoa(pl.Target) {
			return fmt.Sprintf("pool %v, want %+v", m, pl)
		}
	}
	return ""
}
