package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// r2Full reports whether the R2 suite runs at full size (make
// test-reliability); otherwise it runs at CI size.
func r2Full() bool { return os.Getenv("VK_RELIABILITY") == "full" }

// r2Pods is the number of owned sandbox Pods per R2 test.
func r2Pods() int {
	if r2Full() {
		return 200
	}
	return 20
}

// r2Parallel bounds the test's own concurrent apiserver calls.
const r2Parallel = 16

// r2VM is what a Running sandbox Pod was given: the VM identity that an
// adopting replacement must carry unchanged.
type r2VM struct {
	UID types.UID
	ID  string
	IP  string
}

// r2Fleet is N sandbox Pods, each owned by its own live Sandbox CR of the
// same name, on one virtual node.
type r2Fleet struct {
	t      *testing.T
	n      *vkNode
	ns     string
	names  []string
	owners map[string]*unstructured.Unstructured
	vms    map[string]r2VM // as first claimed
}

// r2SimConfig keeps the whole fleet warm, so claim latency is loopback.
func r2SimConfig(pods int) sim.Config {
	return sim.Config{Pools: map[pool.Key]int{{Template: "default"}: pods + 4}}
}

// newR2Fleet creates the owners and Pods and waits until every Pod runs.
func newR2Fleet(t *testing.T, n *vkNode, count int) *r2Fleet {
	t.Helper()
	f := &r2Fleet{t: t, n: n, ns: newNamespace(t), owners: map[string]*unstructured.Unstructured{}}
	for i := range count {
		f.names = append(f.names, fmt.Sprintf("sb-%03d", i))
	}
	owners := make([]*unstructured.Unstructured, count)
	f.each(f.names, func(ctx context.Context, i int, name string) error {
		_, dyn := clients(t)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox",
			"metadata": map[string]any{"name": name, "namespace": f.ns},
		}}
		out, err := dyn.Resource(sandboxGVR).Namespace(f.ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create owner %s/%s: %w", f.ns, name, err)
		}
		owners[i] = out
		return nil
	})
	for i, name := range f.names {
		f.owners[name] = owners[i]
	}
	f.createPods(f.names)
	f.vms = f.waitRunning(f.names)
	return f
}

func (f *r2Fleet) key(name string) string { return f.ns + "/" + name }

// each runs fn for every name, r2Parallel at a time; the first error fails
// the test (fn names the Pod in it).
func (f *r2Fleet) each(names []string, fn func(ctx context.Context, i int, name string) error) {
	f.t.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(r2Parallel)
	for i, name := range names {
		g.Go(func() error { return fn(ctx, i, name) })
	}
	if err := g.Wait(); err != nil {
		f.t.Fatal(err)
	}
}

// createPods creates (or recreates) the named Pods, owned by their Sandbox.
func (f *r2Fleet) createPods(names []string) {
	f.t.Helper()
	cs, _ := clients(f.t)
	f.each(names, func(ctx context.Context, _ int, name string) error {
		p := sandboxPod(f.ns, name, f.n.Name, ownedBy(f.owners[name]))
		if _, err := cs.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", f.key(name), err)
		}
		return nil
	})
}

// deletePods deletes the named Pods with opts and does not wait.
func (f *r2Fleet) deletePods(names []string, opts metav1.DeleteOptions) {
	f.t.Helper()
	cs, _ := clients(f.t)
	f.each(names, func(ctx context.Context, _ int, name string) error {
		if err := cs.CoreV1().Pods(f.ns).Delete(ctx, name, opts); err != nil {
			return fmt.Errorf("delete pod %s: %w", f.key(name), err)
		}
		return nil
	})
}

// podsNow lists the namespace's Pods by name.
func (f *r2Fleet) podsNow(ctx context.Context) (map[string]*corev1.Pod, error) {
	cs, _ := clients(f.t)
	l, err := cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out, nil
}

// waitRunning waits until every named Pod runs and returns its VM.
func (f *r2Fleet) waitRunning(names []string) map[string]r2VM {
	f.t.Helper()
	var missing []string
	out := map[string]r2VM{}
	testkit.WaitForCtx(f.t, waitFor, fmt.Sprintf("%d pods Running in %s", len(names), f.ns), func(ctx context.Context) (bool, error) {
		pods, err := f.podsNow(ctx)
		if err != nil {
			return false, nil
		}
		missing = missing[:0]
		for _, name := range names {
			p := pods[name]
			if p == nil || !isRunning(p) || p.Annotations[kube.AnnClaimID] == "" {
				missing = append(missing, name)
				continue
			}
			out[name] = r2VM{UID: p.UID, ID: p.Annotations[kube.AnnClaimID], IP: p.Status.PodIP}
		}
		return len(missing) == 0, nil
	})
	return out
}

// waitGone waits until none of the named Pods exists in the apiserver.
func (f *r2Fleet) waitGone(names []string) {
	f.t.Helper()
	testkit.WaitForCtx(f.t, waitFor, fmt.Sprintf("%d pods gone from %s", len(names), f.ns), func(ctx context.Context) (bool, error) {
		pods, err := f.podsNow(ctx)
		if err != nil {
			return false, nil
		}
		for _, name := range names {
			if pods[name] != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// r2Decision is one delete verdict vk-sandbox logged.
type r2Decision struct {
	Msg    string `json:"msg"`
	Pod    string `json:"pod"`
	Claim  string `json:"claim"`
	Reason string `json:"reason"`
}

const (
	r2MsgPreserved = "pod deleted without owner authority: VM preserved for adoption"
	r2MsgReleased  = "released VM"
)

// decisions parses every preserve and release verdict from all of the
// node's logs (every start), in order, by Pod key.
func (n *vkNode) decisions() map[string][]r2Decision {
	out := map[string][]r2Decision{}
	for _, path := range n.vk.LogPaths() {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, r2MsgPreserved) && !strings.Contains(line, r2MsgReleased) {
				continue
			}
			var d r2Decision
			if json.Unmarshal([]byte(line), &d) == nil && (d.Msg == r2MsgPreserved || d.Msg == r2MsgReleased) {
				out[d.Pod] = append(out[d.Pod], d)
			}
		}
	}
	return out
}

// r2DeleteCalls counts the DeletePod calls vk-sandbox logged (at debug, on
// entry), by Pod key, across all of the node's logs.
func (n *vkNode) r2DeleteCalls() map[string]int {
	out := map[string]int{}
	for _, path := range n.vk.LogPaths() {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `"msg":"DeletePod"`) {
				continue
			}
			var d r2Decision
			if json.Unmarshal([]byte(line), &d) == nil && d.Msg == "DeletePod" {
				out[d.Pod]++
			}
		}
	}
	return out
}

// waitDecisions waits until each named Pod has at least round verdicts
// logged, then requires verdict number round of each to be want (a
// message and a reason). A wrong verdict fails with the Pod and the cause.
func (f *r2Fleet) waitDecisions(names []string, round int, wantMsg, wantReason string) {
	f.t.Helper()
	var all map[string][]r2Decision
	testkit.WaitForCtx(f.t, waitFor, fmt.Sprintf("%d delete verdicts (round %d)", len(names), round), func(context.Context) (bool, error) {
		all = f.n.decisions()
		for _, name := range names {
			if len(all[f.key(name)]) < round {
				return false, nil
			}
		}
		return true, nil
	})
	for _, name := range names {
		d := all[f.key(name)][round-1]
		if d.Msg != wantMsg || d.Reason != wantReason {
			f.t.Fatalf("pod %s: delete verdict %q (reason %s) for claim %s, want %q (reason %s)",
				f.key(name), d.Msg, d.Reason, d.Claim, wantMsg, wantReason)
		}
	}
}

// r2StateClaims replays the state file (framed {"crc","rec"} records, the
// last record per key wins) and returns the claim id held per key.
func (n *vkNode) r2StateClaims(t *testing.T) map[string]string {
	t.Helper()
	fh, err := os.Open(n.state)
	if err != nil {
		t.Fatalf("open state file: %v", err)
	}
	defer fh.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Rec struct {
				Op    string `json:"op"`
				Key   string `json:"key"`
				Claim *struct {
					ID string `json:"id"`
				} `json:"claim"`
			} `json:"rec"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // a tail being written
		}
		switch {
		case line.Rec.Op == "del":
			delete(out, line.Rec.Key)
		case line.Rec.Op == "put" && line.Rec.Claim != nil:
			out[line.Rec.Key] = line.Rec.Claim.ID
		}
	}
	return out
}

// assertHeld checks, for every named Pod, that its first VM is still held:
// listed by the emulator and recorded under its key in the state file.
func (f *r2Fleet) assertHeld(names []string) {
	f.t.Helper()
	live := map[string]bool{}
	for _, s := range f.n.live() {
		live[s.ID] = true
	}
	state := f.n.r2StateClaims(f.t)
	for _, name := range names {
		vm := f.vms[name]
		if !live[vm.ID] {
			f.t.Fatalf("pod %s: VM %s is no longer at sandboxd", f.key(name), vm.ID)
		}
		if got := state[f.key(name)]; got != vm.ID {
			f.t.Fatalf("pod %s: state file holds claim %q, want %s", f.key(name), got, vm.ID)
		}
	}
}

// assertNoRelease checks the emulator saw no release call at all and the
// node logged none.
func (f *r2Fleet) assertNoRelease(phase string) {
	f.t.Helper()
	if r := f.n.counter("release"); r != 0 {
		f.t.Fatalf("%s: sandboxd got %d release calls, want 0", phase, r)
	}
	for key, ds := range f.n.decisions() {
		for _, d := range ds {
			if d.Msg == r2MsgReleased {
				f.t.Fatalf("%s: pod %s: claim %s released (reason %s) without owner authority", phase, key, d.Claim, d.Reason)
			}
		}
	}
}

// recreateAndAssertAdopted recreates the named Pods (same owner, same
// name) and requires each to run on its first VM: same claim id and IP,
// a new Pod UID, and no claim attempt at sandboxd. It returns the count.
func (f *r2Fleet) recreateAndAssertAdopted(names []string) int {
	f.t.Helper()
	claims := f.n.counter("claim")
	f.createPods(names)
	now := f.waitRunning(names)
	for _, name := range names {
		was, is := f.vms[name], now[name]
		if is.UID == was.UID {
			f.t.Fatalf("pod %s: the replacement carries the old UID %s", f.key(name), was.UID)
		}
		if is.ID != was.ID || is.IP != was.IP {
			f.t.Fatalf("pod %s: replacement got claim %s at %s, want the held VM %s at %s", f.key(name), is.ID, is.IP, was.ID, was.IP)
		}
	}
	if c := f.n.counter("claim"); c != claims {
		f.t.Fatalf("recreating %d Pods made %d claim calls, want 0 (adoption)", len(names), c-claims)
	}
	return len(names)
}

// r2Alive fails unless the node's vk-sandbox process is still running.
func (n *vkNode) r2Alive(t *testing.T, phase string) {
	t.Helper()
	if err, exited := n.vk.Exited(); exited {
		t.Fatalf("%s: vk-sandbox exited: %v", phase, err)
	}
}

// reasons summarises verdict reasons across the fleet, for the log line.
func (f *r2Fleet) reasons() string {
	counts, total := map[string]int{}, 0
	for _, ds := range f.n.decisions() {
		for _, d := range ds {
			counts[d.Reason]++
			total++
		}
	}
	// virtual-kubelet may call DeletePod twice for one graceful delete
	// (deletionTimestamp, then the final removal), so there can be more
	// verdicts than deletes.
	parts := []string{fmt.Sprintf("total=%d", total)}
	for r, c := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", r, c))
	}
	sort.Strings(parts[1:])
	return strings.Join(parts, " ")
}
