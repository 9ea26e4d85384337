package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The move of docs/install.md, "From the unit to the DaemonSet": the
// unit's state directory, as systemd's DynamicUser leaves it, is moved by
// the documented commands to where the DaemonSet's user (uid 0 without
// capabilities) serves it.

// unitUID is the unit's dynamic user, as systemd allocates them
// (61184-65519).
const unitUID = 61234

// moveMarker precedes the documented block of commands.
const moveMarker = "<!-- e2e/unitmove_test.go runs the commands of this block"

// daemonSetUser runs argv as the DaemonSet's container does: uid 0 with
// every capability gone (securityContext drops ALL), so that only an
// owner's file permissions apply.
func daemonSetUser(argv ...string) []string {
	return append([]string{"--reuid=0", "--regid=0", "--clear-groups", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs"}, argv...)
}

// documentedMove returns the shell commands of the move procedure, with
// every /var/lib/ path moved below hostRoot.
func documentedMove(t *testing.T, hostRoot string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), moveMarker)
	if !ok {
		t.Fatalf("docs/install.md has no %q", moveMarker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/install.md: no ```sh block after the move marker")
	}
	return strings.ReplaceAll(block, "/var/lib/", hostRoot+"/var/lib/")
}

// layOutAsSystemd moves the state directory src to where the unit keeps
// it: hostRoot/var/lib/private/vk-sandbox, owned by its dynamic user,
// 0700 and 0600, with hostRoot/var/lib/vk-sandbox linked to it. The
// node.key the first run made there must move with the state file.
func layOutAsSystemd(t *testing.T, src, hostRoot string) {
	t.Helper()
	private := filepath.Join(hostRoot, "var/lib/private")
	dir := filepath.Join(private, "vk-sandbox")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.key")); err != nil {
		t.Fatalf("the unit's state directory has no node key to move: %v", err)
	}
	if err := os.Symlink("private/vk-sandbox", filepath.Join(hostRoot, "var/lib/vk-sandbox")); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if fi.IsDir() {
			mode = 0o700
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chown(p, unitUID, unitUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkStateUser: the DaemonSet runs vk-sandbox as the user, on the
// hostPath and the state path, that the move procedure prepares. The move
// test checks manifests/daemonset.yaml, and the chart test the chart.
func checkStateUser(t *testing.T, what string, ds *appsv1.DaemonSet) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: vk-sandbox runs as %+v, want uid 0 dropping ALL capabilities (the move procedure's chown)", what, sc)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "state" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/vk-sandbox") {
			t.Errorf("%s: the state volume is %+v, want the hostPath /var/lib/vk-sandbox", what, v.VolumeSource)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "VK_STATE_PATH" && e.Value == "/var/lib/vk-sandbox/claims.json"
	}) {
		t.Errorf("%s: vk-sandbox has no VK_STATE_PATH=/var/lib/vk-sandbox/claims.json", what)
	}
}

func TestStateMovedFromTheUnitIsServedByTheDaemonSetsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test chowns the state to the unit's uid and back")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to run vk-sandbox without capabilities")
	}
	checkStateUser(t, shippedDaemon, shippedDaemonSet(t))

	// A node with one running sandbox Pod, stopped: its state file holds
	// the claim and the VM's release credential.
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "moved", n.Name))
	id := waitRunning(t, ns, "moved").Annotations[kube.AnnClaimID]
	if err := n.vk.Terminate(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	hostRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(hostRoot, "var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	layOutAsSystemd(t, filepath.Dir(n.state), hostRoot)
	key, err := os.ReadFile(filepath.Join(hostRoot, "var/lib/private/vk-sandbox/node.key"))
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(hostRoot, "var/lib/vk-sandbox/claims.json")

	// Where systemd left it, the DaemonSet's user cannot read it.
	out, err := exec.Command(setpriv, daemonSetUser(vkBin, "claims", "--state-path", moved)...).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("permission denied")) {
		t.Fatalf("uid 0 without capabilities read the unit's state file (err=%v):\n%s", err, out)
	}

	// The documented commands, with a systemctl that records its calls.
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >>'"+calls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vkBin, filepath.Join(bin, "vk-sandbox")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-e", "-c", documentedMove(t, hostRoot))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the documented move failed: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(ns+"/moved")) || !bytes.Contains(out, []byte(id)) {
		t.Errorf("the move's vk-sandbox claims does not list %s/moved on %s:\n%s", ns, id, out)
	}
	if b, _ := os.ReadFile(calls); string(b) != "disable --now vk-sandbox\n" {
		t.Errorf("the move called systemctl %q, want disable --now vk-sandbox", b)
	}
	checkMovedState(t, hostRoot, key)

	// vk-sandbox as the DaemonSet's user, on the moved file: the Pod keeps
	// its VM without a new claim, and the moved credential releases it.
	v, err := kubetest.NewVKSandbox(kubetest.VKSandboxOptions{Bin: setpriv, Dir: t.TempDir(), Node: n.Name})
	if err != nil {
		t.Fatal(err)
	}
	v.Args = daemonSetUser(append(append([]string{vkBin}, n.vk.Args...), "--state-path", moved)...)
	n.vk, n.state = v, moved
	n.start()
	// The Node is still Ready from the first run for a while, so an exit
	// (an unreadable state file) ends the wait instead of its deadline.
	testkit.WaitForCtx(t, waitFor, "the moved claim vouched for", func(context.Context) (bool, error) {
		if err, exited := n.vk.Exited(); exited {
			return false, fmt.Errorf("vk-sandbox exited on the moved state file (%v):\n%s", err, n.vk.Tail(5))
		}
		return containsLine(n.vk.Log(), "quarantine verification", `"lifted":1`), nil
	})
	if c := n.counter("claim_ok"); c != 1 {
		t.Fatalf("claim_ok = %d after the move, want 1 (the Pod's claim only)", c)
	}
	if got := waitRunning(t, ns, "moved").Annotations[kube.AnnClaimID]; got != id {
		t.Fatalf("after the move the Pod runs %s, want %s", got, id)
	}
	deletePod(t, ns, "moved")
	waitReleases(t, n, 1)
	if n.holds(id) {
		t.Fatalf("the VM %s is still claimed after its Pod's deletion", id)
	}
}

// checkMovedState: the moved directory is real, uid 0's, 0700 and its
// files 0600, holding every file the unit's did; nothing is left behind.
func checkMovedState(t *testing.T, hostRoot string, key []byte) {
	t.Helper()
	dir := filepath.Join(hostRoot, "var/lib/vk-sandbox")
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = os.ModeDir | 0o700
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 || fi.Mode() != want {
			t.Errorf("moved %s: uid %d gid %d mode %v, want 0 0 %v", p, st.Uid, st.Gid, fi.Mode(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "node.key")); err != nil || !bytes.Equal(b, key) {
		t.Errorf("the node.key beside the state file was not moved with it: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(hostRoot, "var/lib/private/vk-sandbox")); !os.IsNotExist(err) {
		t.Errorf("a copy of the release credentials is left in /var/lib/private/vk-sandbox (lstat: %v)", err)
	}
}
