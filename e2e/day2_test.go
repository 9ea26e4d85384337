package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// docs/install.md, "Drain a node": after the documented commands the
// scheduler binds no new Pod to the node and nothing is claimed for it,
// the Pod whose owner lives keeps its VM, and the Sandbox the drain
// deletes has its VM released.
func TestTheDocumentedDrainClaimsNothingNewAndKeepsLiveOwnersVMs(t *testing.T) {
	env.StartSchedulerT(t)
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "kept", n.Name, ownedBy(createOwner(t, ns, "kept"))))
	createPod(t, sandboxPod(ns, "my-sandbox", n.Name, ownedBy(createOwner(t, ns, "my-sandbox"))))
	kept := waitRunning(t, ns, "kept").Annotations[kube.AnnClaimID]
	gone := waitRunning(t, ns, "my-sandbox").Annotations[kube.AnnClaimID]

	r := strings.NewReplacer(docNode, n.Name, "team-a", ns)
	outs := day2Host{dir: t.TempDir(), service: unitOf(t, n)}.run(t, day2Block(t, "drain", r))
	if all := strings.Join(outs, ""); !strings.Contains(all, "kept") || !strings.Contains(all, "my-sandbox") {
		t.Errorf("the drain's kubectl get pods does not list the node's Pods:\n%s", all)
	}
	// The garbage collector deletes a deleted Sandbox's Pod; this suite
	// runs none, so the test does.
	deletePod(t, ns, "my-sandbox")
	waitReleases(t, n, 1)
	if n.holds(gone) {
		t.Fatalf("the deleted Sandbox's VM %s is still live", gone)
	}

	createPod(t, unboundPod(ns, "after", n.Name))
	p := waitUnschedulable(t, ns, "after")
	if p.Spec.NodeName != "" {
		t.Fatalf("a Pod created after the cordon was bound to %q", p.Spec.NodeName)
	}
	if c := n.counter("claim"); c != 2 {
		t.Errorf("%d claims on the drained node, want 2 (the two Pods before the drain)", c)
	}
	if p := waitRunning(t, ns, "kept"); p.Annotations[kube.AnnClaimID] != kept || !n.holds(kept) {
		t.Errorf("the live owner's Pod runs %s (VM live: %v), want its VM %s kept", p.Annotations[kube.AnnClaimID], n.holds(kept), kept)
	}
	if r := n.counter("release"); r != 1 {
		t.Errorf("%d releases, want 1 (the deleted Sandbox's VM only)", r)
	}
}

// docs/install.md, "Upgrade": the documented commands around a package
// upgrade (the postinst's try-restart, here the test's binary restarted on
// the same state) keep every claim: the same claim ids before and after,
// nothing claimed again or released, the Pods Running on their VMs.
func TestTheDocumentedUpgradeKeepsEveryClaim(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	names := []string{"u0", "u1", "u2"}
	ids := map[string]string{}
	for _, name := range names {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range names {
		ids[name] = waitRunning(t, ns, name).Annotations[kube.AnnClaimID]
	}

	r := strings.NewReplacer(docNode, n.Name, "/var/lib/vk-sandbox", filepath.Dir(n.state))
	outs := day2Host{dir: t.TempDir(), service: unitOf(t, n)}.run(t, day2Block(t, "upgrade", r))
	if n.vk.Runs() != 2 {
		t.Fatalf("the documented upgrade ran vk-sandbox %d times, want 2 (restarted once)", n.vk.Runs())
	}
	testkit.WaitForCtx(t, waitFor, "quarantine lifted", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "quarantine verification", `"lifted":3`), nil
	})
	// The listings' key, claim id and Pod UID columns (the deadline and
	// the age move on).
	var listings []string
	for _, o := range outs {
		var rows []string
		for _, l := range strings.Split(o, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && strings.HasPrefix(f[0], ns+"/") {
				rows = append(rows, strings.Join(f[:3], " "))
			}
		}
		if len(rows) > 0 {
			listings = append(listings, strings.Join(rows, "\n"))
		}
	}
	if len(listings) != 2 || listings[0] != listings[1] || strings.Count(listings[0], "\n") != len(names)-1 {
		t.Errorf("vk-sandbox claims before and after the upgrade, want the same %d rows:\n%s", len(names), strings.Join(listings, "\n---\n"))
	}
	all := strings.Join(outs, "")
	for _, name := range names {
		p := waitRunning(t, ns, name)
		if p.Annotations[kube.AnnClaimID] != ids[name] || !strings.Contains(all, ids[name]) || !strings.Contains(all, name) {
			t.Errorf("%s runs %s after the upgrade, want %s, listed by vk-sandbox claims and named by kubectl", name, p.Annotations[kube.AnnClaimID], ids[name])
		}
	}
	if c, rel := n.counter("claim"), n.counter("release"); c != int64(len(names)) || rel != 0 {
		t.Errorf("claims=%d releases=%d across the upgrade, want %d and 0", c, rel, len(names))
	}
}

// docs/install.md, "Move a node to another host": the old process stops
// cleanly, the state (claims.json and node.key, not holder-id) goes to the
// new host's directory, and the new process, on the same sandboxd, takes
// the node at once as another holder and serves the same Pods on the same
// VMs. The old process started again is refused and claims nothing.
func TestTheDocumentedMoveServesTheSamePodsAndRefusesTheOldHost(t *testing.T) {
	old := startNode(t, sim.Config{})
	ns := newNamespace(t)
	owner := createOwner(t, ns, "moved")
	createPod(t, sandboxPod(ns, "moved", old.Name, ownedBy(owner)))
	id := waitRunning(t, ns, "moved").Annotations[kube.AnnClaimID]
	oldHolder, err := os.ReadFile(filepath.Join(filepath.Dir(old.state), "holder-id"))
	if err != nil {
		t.Fatal(err)
	}

	oldWork := t.TempDir()
	oldR := strings.NewReplacer(docNode, old.Name, "/var/lib/vk-sandbox", filepath.Dir(old.state))
	outs := day2Host{dir: oldWork, service: unitOf(t, old)}.run(t, day2Block(t, "move-old", oldR))
	if !strings.Contains(strings.Join(outs, ""), id) {
		t.Errorf("the old host's vk-sandbox claims does not list %s:\n%s", id, strings.Join(outs, ""))
	}
	newWork, newDir := t.TempDir(), filepath.Join(t.TempDir(), "var/lib/vk-sandbox")
	tarball, err := os.ReadFile(filepath.Join(oldWork, "vk-sandbox-state.tar")) // the copy to the new host
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(newWork, "vk-sandbox-state.tar"), tarball, 0o600); err != nil {
		t.Fatal(err)
	}

	// The new host: the same node name, sandboxd and token, its own state
	// directory.
	v, err := kubetest.NewVKSandbox(kubetest.VKSandboxOptions{
		Bin: vkBin, Dir: t.TempDir(), Node: old.Name, Kubeconfig: env.Kubeconfig,
		SandboxdURL: old.srv.URL, Token: rootToken,
		Args: []string{"--requeue-max", "2s", "--orphan-scan-interval", "0", "--log-level", "debug", "--state-path", filepath.Join(newDir, "claims.json")},
	})
	if err != nil {
		t.Fatal(err)
	}
	moved := &vkNode{t: t, Name: old.Name, Sim: old.Sim, srv: old.srv, state: filepath.Join(newDir, "claims.json"), vk: v}
	t.Cleanup(func() {
		moved.stop()
		if t.Failed() {
			moved.dumpLog()
		}
	})
	newR := strings.NewReplacer(docNode, old.Name, "/var/lib/vk-sandbox", newDir)
	outs = day2Host{dir: newWork, service: unitOf(t, moved)}.run(t, day2Block(t, "move-new", newR))
	all := strings.Join(outs, "")
	if !strings.Contains(all, id) {
		t.Errorf("the new host's vk-sandbox claims does not list %s:\n%s", id, all)
	}
	if _, err := os.Stat(filepath.Join(newDir, "holder-id")); err != nil {
		t.Fatalf("the new host has no holder-id of its own: %v", err)
	}
	if strings.Contains(all, strings.TrimSpace(string(oldHolder))) || !strings.Contains(all, "/") {
		t.Errorf("the holder lease names %q, want the new host's holder, not the old id %s", all, oldHolder)
	}
	testkit.WaitForCtx(t, waitFor, "the moved claim vouched for", func(context.Context) (bool, error) {
		return containsLine(moved.vk.Log(), "quarantine verification", `"lifted":1`), nil
	})
	if p := waitRunning(t, ns, "moved"); p.Annotations[kube.AnnClaimID] != id || !moved.holds(id) {
		t.Errorf("after the move the Pod runs %s, want %s on the same VM", p.Annotations[kube.AnnClaimID], id)
	}

	// The old unit started again: refused while the new host holds the node.
	old.start()
	if err := old.vk.Wait(); err == nil || !strings.Contains(old.vk.Log(), "is served by another vk-sandbox") {
		t.Errorf("the old host started again was not refused (exit %v):\n%s", err, old.vk.Tail(5))
	}
	if c, r := old.counter("claim"), old.counter("release"); c != 1 || r != 0 {
		t.Errorf("claims=%d releases=%d, want 1 and 0 (the Pod's one claim, kept)", c, r)
	}

	// The moved credential releases the VM once its owner is gone.
	deleteOwner(t, ns, "moved")
	deletePod(t, ns, "moved")
	waitReleases(t, moved, 1)
}

// docs/install.md, "Backup and restore": the documented backup of a
// running node, restored into a fresh directory, serves the same claims,
// and a Pod's delete releases its VM with the restored token. Restored
// without its node.key, the rows still hold their VMs, but a VM no row
// holds (claimed after the backup) is another client's to the node:
// never adopted nor released.
func TestTheDocumentedBackupRestoresTheClaimsWithTheNodeKey(t *testing.T) {
	for _, withKey := range []bool{true, false} {
		name := map[bool]string{true: "with-node-key", false: "without-node-key"}[withKey]
		t.Run(name, func(t *testing.T) {
			n := startNode(t, sim.Config{}, "--sandboxd-claim-timeout", "500ms", "--orphan-scan-interval", "300ms", "--settle-window", "1s")
			ns := newNamespace(t)
			createPod(t, sandboxPod(ns, "backed", n.Name))
			id := waitRunning(t, ns, "backed").Annotations[kube.AnnClaimID]

			work := t.TempDir()
			r := strings.NewReplacer(docNode, n.Name, "/var/lib/vk-sandbox", filepath.Dir(n.state))
			outs := day2Host{dir: work, service: unitOf(t, n)}.run(t, day2Block(t, "backup", r))
			if all := strings.Join(outs, ""); !strings.Contains(all, id) {
				t.Errorf("the backup's check does not list %s:\n%s", id, all)
			}
			if _, err := os.Stat(filepath.Join(work, "check")); !os.IsNotExist(err) {
				t.Errorf("the backup's check directory is left: %v", err)
			}
			late := ""
			if !withKey {
				createPod(t, sandboxPod(ns, "late", n.Name))
				late = waitRunning(t, ns, "late").Annotations[kube.AnnClaimID]
				// A backup without node.key: the same archive, claims.json only.
				untarOnly(t, work, "claims.json")
			}

			// The directory is lost; the restore goes into a fresh one.
			fresh := filepath.Join(t.TempDir(), "var/lib/vk-sandbox")
			for i, a := range n.vk.Args {
				if a == "--state-path" {
					n.vk.Args[i+1] = filepath.Join(fresh, "claims.json")
				}
			}
			n.state = filepath.Join(fresh, "claims.json")
			r = strings.NewReplacer(docNode, n.Name, "/var/lib/vk-sandbox", fresh)
			outs = day2Host{dir: work, service: unitOf(t, n)}.run(t, day2Block(t, "restore", r))
			if all := strings.Join(outs, ""); !strings.Contains(all, id) {
				t.Errorf("the restore's vk-sandbox claims does not list %s:\n%s", id, all)
			}
			testkit.WaitForCtx(t, waitFor, "the restored claim vouched for", func(context.Context) (bool, error) {
				return containsLine(n.vk.Log(), "quarantine verification", `"lifted":1`), nil
			})
			if p := waitRunning(t, ns, "backed"); p.Annotations[kube.AnnClaimID] != id {
				t.Errorf("after the restore the Pod runs %s, want %s", p.Annotations[kube.AnnClaimID], id)
			}
			if !withKey {
				testkit.WaitForCtx(t, waitFor, "the late VM reported as another client's", func(context.Context) (bool, error) {
					return containsLine(n.vk.Log(), "without this node's mark", late), nil
				})
				// The late Pod's VM is another client's now: the Pod gets a
				// claim of its own under the new key.
				waitPod(t, ns, "late", "running on a new claim", func(p *corev1.Pod) bool {
					return isRunning(p) && p.Annotations[kube.AnnClaimID] != late
				})
				if c := n.counter("claim"); c != 3 {
					t.Errorf("%d claims, want 3 (backed, late, and late again under the new key)", c)
				}
			}
			releases := n.counter("release")
			deletePod(t, ns, "backed")
			testkit.WaitForCtx(t, waitFor, "the restored claim's VM released", func(context.Context) (bool, error) { return !n.holds(id), nil })
			if got := n.counter("release_ok") - releases; got != 1 {
				t.Errorf("%d releases for the backed-up Pod's delete, want 1", got)
			}
			if !withKey && !n.holds(late) {
				t.Errorf("the foreign VM %s was released", late)
			}
		})
	}
}

// untarOnly rewrites work's vk-sandbox-state.tar to hold only files.
func untarOnly(t *testing.T, work string, files ...string) {
	t.Helper()
	dir := t.TempDir()
	for _, argv := range [][]string{
		{"tar", "-C", dir, "-xpf", filepath.Join(work, "vk-sandbox-state.tar")},
		append([]string{"tar", "-C", dir, "-cpf", filepath.Join(work, "vk-sandbox-state.tar")}, files...),
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
}
