package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The real sandboxd's behaviour, end to end: the provider binary on a real
// apiserver, the emulator in the real server's mode (its default) unless a
// test names the behaviour it needs.

const tenantToken = "e2e-tenant-token-fedcba9876543210"

// owner_addr is the node's sandboxd address, and it may be an origin, a
// hostname or absent. Each Pod is Running with a valid IP as its podIP: the
// owner_addr host when that is an IP, else --node-ip.
func TestConformanceOwnerAddrFormsGiveAValidPodIP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    sim.Config
		nodeIP string
		want   string
	}{
		{"omitted", sim.Config{OwnerAddrMode: sim.OwnerAddrNone}, "127.0.0.21", "127.0.0.21"},
		{"origin", sim.Config{OwnerAddrMode: sim.OwnerAddrOrigin, OwnerAddr: "https://10.77.0.9:8443"}, "", "10.77.0.9"},
		{"hostname", sim.Config{OwnerAddrMode: sim.OwnerAddrHostname}, "127.0.0.22", "127.0.0.22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.nodeIP != "" {
				args = []string{"--node-ip", tc.nodeIP}
			}
			n := startNode(t, tc.cfg, args...)
			ns := newNamespace(t)
			createPod(t, sandboxPod(ns, "p", n.Name))
			p := waitRunning(t, ns, "p")
			if _, err := netip.ParseAddr(p.Status.PodIP); err != nil || p.Status.PodIP != tc.want {
				t.Fatalf("owner_addr %q: podIP %q, want %s", n.Sim.OwnerAddr(), p.Status.PodIP, tc.want)
			}
			if len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != tc.want || p.Status.HostIP != tc.want {
				t.Errorf("podIPs %v hostIP %q, want %s", p.Status.PodIPs, p.Status.HostIP, tc.want)
			}
		})
	}
}

// A tenant token claims, but sandboxd answers it 403 on its operator
// surfaces: the Pods run, one warning says what is off, and nothing asks a
// root-only surface in a loop.
func TestConformanceTenantTokenRunsPodsWithOneWarning(t *testing.T) {
	n := startNodeAs(t, sim.Config{TenantTokens: map[string]string{tenantToken: "team-a"}}, tenantToken, nil,
		"--publish-inventory", "--publish-interval", "200ms")
	ns := newNamespace(t)
	for _, name := range []string{"t0", "t1", "t2"} {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range []string{"t0", "t1", "t2"} {
		waitRunning(t, ns, name)
	}
	// The startup probe, the feature detection, the node's health check and
	// the first inventory publish may all ask /v1/info before an answer is
	// in (4 at most);
	// after the first 403 nothing asks again, however many publish ticks
	// pass.
	testkit.WaitForCtx(t, waitFor, "three inventory listings", func(context.Context) (bool, error) { return n.counter("list") >= 3, nil })
	info := n.counter("info")
	lists := n.counter("list")
	testkit.WaitForCtx(t, waitFor, "three more inventory listings", func(context.Context) (bool, error) { return n.counter("list") >= lists+3, nil })
	if got := strings.Count(n.vk.Log(), "the sandboxd token is a tenant token"); got != 1 {
		t.Errorf("%d tenant-token warnings in the log, want exactly 1", got)
	}
	if info > 4 || n.counter("info") != info || n.counter("get") != 0 {
		t.Errorf("info requests %d then %d, get requests %d; want at most 4, no more after the first 403, and no get",
			info, n.counter("info"), n.counter("get"))
	}
}

// sandbox-operator claims on the same node under a bare "<namespace>/<name>".
// Such a VM is never recovered, adopted or released: not through a claim,
// not across a restart, not on the Pod's delete.
func TestConformanceAnotherClientsVMUnderTheSameNameIsNeverTouched(t *testing.T) {
	n := startNode(t, sim.Config{}, "--orphan-scan-interval", "200ms")
	ns := newNamespace(t)
	foreign, err := n.simClient(t).Claim(context.Background(), pool.ClaimRequest{Template: "default", ClaimRef: ns + "/p", TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	owner := createOwner(t, ns, "p")
	createPod(t, sandboxPod(ns, "p", n.Name, ownedBy(owner)))
	id := waitRunning(t, ns, "p").Annotations[kube.AnnClaimID]
	if id == foreign.ID {
		t.Fatal("the Pod was given another client's VM")
	}
	n.restart()
	p := waitRunning(t, ns, "p")
	if got := p.Annotations[kube.AnnClaimID]; got != id {
		t.Fatalf("after a restart the Pod holds %s, want its own %s", got, id)
	}
	deleteOwner(t, ns, "p")
	deletePod(t, ns, "p")
	testkit.WaitForCtx(t, waitFor, "the Pod's own VM released", func(context.Context) (bool, error) { return !n.holds(id), nil })
	if !n.holds(foreign.ID) {
		t.Fatal("another client's VM under the same name was released")
	}
	if strings.Contains(n.vk.Log(), foreign.ID) {
		t.Errorf("the log names the foreign VM %s: it was looked at as this node's", foreign.ID)
	}
}

// A meshed node answers a warm miss with a redirect unless the claim asks
// for none; vk-sandbox wants its VMs on its own node.
func TestConformanceRedirectModeNodeClaimsLocally(t *testing.T) {
	n := startNode(t, sim.Config{Mesh: true, Pools: map[pool.Key]int{{Template: "default"}: 0}})
	ns := newNamespace(t)
	for _, name := range []string{"r0", "r1"} {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range []string{"r0", "r1"} {
		waitRunning(t, ns, name)
	}
	if got := n.counter("claim_redirect"); got != 0 {
		t.Errorf("claim_redirect = %d: a claim did not ask for no redirect", got)
	}
}

// sandboxd answers a release with a wrong token 404, like an unknown id.
// With the root token vk-sandbox confirms the VM is still there and
// releases it by id; the row goes only then.
func TestConformanceWrongStoredTokenRootReleasesAnyway(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "w", n.Name))
	id := waitRunning(t, ns, "w").Annotations[kube.AnnClaimID]
	n.breakStoredToken(ns + "/w")
	waitRunning(t, ns, "w")
	deletePod(t, ns, "w") // a bare Pod: its delete releases
	testkit.WaitForCtx(t, waitFor, "the VM released by id", func(context.Context) (bool, error) { return !n.holds(id), nil })
	testkit.WaitForCtx(t, waitFor, "the row forgotten", func(context.Context) (bool, error) { return !rowLive(n, ns+"/w"), nil })
	if !strings.Contains(n.vk.Log(), "releasing it by id with the root token") {
		t.Error("the root-token release is not logged")
	}
	if strings.Contains(n.vk.Log(), "wrong-sandbox-token") {
		t.Error("the log carries the stored token")
	}
}

// Without the root token a release 404 cannot be confirmed: the VM and the
// row are kept, a Warning Event says why, and the release is retried.
func TestConformanceWrongStoredTokenTenantKeepsAndRetries(t *testing.T) {
	n := startNodeAs(t, sim.Config{TenantTokens: map[string]string{tenantToken: "team-a"}}, tenantToken, nil)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "w", n.Name))
	id := waitRunning(t, ns, "w").Annotations[kube.AnnClaimID]
	n.breakStoredToken(ns + "/w")
	waitRunning(t, ns, "w")
	cs, _ := clients(t)
	// A graceful delete, as a user's: the Pod stays Terminating while the
	// provider has not released its VM.
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "the release retried", func(context.Context) (bool, error) { return n.counter("release") >= 2, nil })
	testkit.WaitForCtx(t, waitFor, "a Warning Event naming the unconfirmed release", func(context.Context) (bool, error) {
		for _, e := range events(t, ns, "w", kube.EventReleaseFailed) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "cannot be confirmed") {
				return true, nil
			}
		}
		return false, nil
	})
	if !n.holds(id) || !rowLive(n, ns+"/w") {
		t.Fatal("an unconfirmed release dropped the VM or its row")
	}
}

// A Pod that asks for two days on a node that grants at most 3s (24 h on a
// real node) is renewed ahead of each grant and stays Running past it.
func TestConformanceTwoDayLeaseIsRenewedPastTheGrant(t *testing.T) {
	n := startNode(t, sim.Config{MaxTTL: 3 * time.Second})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "long", n.Name, annotate(kube.AnnTTL, "172800")))
	first := waitRunning(t, ns, "long")
	firstDeadline, err := time.Parse(time.RFC3339, first.Annotations[kube.AnnDeadline])
	if err != nil {
		t.Fatalf("deadline annotation %q: %v", first.Annotations[kube.AnnDeadline], err)
	}
	id := first.Annotations[kube.AnnClaimID]
	p := waitPod(t, ns, "long", "showing a deadline past its first grant", func(p *corev1.Pod) bool {
		d, err := time.Parse(time.RFC3339, p.Annotations[kube.AnnDeadline])
		return err == nil && d.After(firstDeadline.Add(3*time.Second))
	})
	if !isRunning(p) || p.Annotations[kube.AnnClaimID] != id {
		t.Fatalf("phase %s claim %s, want Running on %s", p.Status.Phase, p.Annotations[kube.AnnClaimID], id)
	}
	if time.Now().Before(firstDeadline) {
		t.Fatalf("the first grant (%v) has not passed yet", firstDeadline)
	}
	if !n.holds(id) {
		t.Fatal("the VM was reaped at its first grant")
	}
	if len(events(t, ns, "long", kube.ReasonLeaseExpired)) != 0 {
		t.Error("the lease was reported expired")
	}
}
