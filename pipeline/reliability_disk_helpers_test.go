//go:build linux

package pipeline_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// smallFS mounts a 64 KiB tmpfs for the state directory and unmounts it at
// cleanup. It skips the test when that is impossible (not root, no mount).
func smallFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("R4 needs root to mount a small tmpfs for the state directory")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("R4: cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		// Another process walking the temp directory can keep the mount
		// busy for a moment, so EBUSY is retried for a while; a file this
		// test left open keeps it busy for good, and that is reported.
		unmount := func() error {
			err := syscall.Unmount(dir, 0)
			if errors.Is(err, syscall.EBUSY) {
				return err
			}
			return backoff.Permanent(err)
		}
		if err := backoff.Retry(unmount, backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(10*time.Second))); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fill writes a filler file until the filesystem answers ENOSPC.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{4096, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
				}
				break
			}
		}
	}
	return path
}

// r4Rig is the engine over a real, fsynced store on the small filesystem.
type r4Rig struct {
	env  *simEnv
	path string
	st   *store.Store
	rep  *reporter
	eng  *pipeline.Engine
}

func newR4Rig(t *testing.T, dir string) *r4Rig {
	env := newSim(t, sim.Config{})
	path := filepath.Join(dir, "state", "claims.json")
	st := openStore(t, path, true)
	rep := newReporter()
	cfg := testConfig(env.root, st, rep)
	// One transaction per failing Pod while the disk is bad, so the live
	// VM count can be read between transactions; a re-Create retries.
	cfg.RequeueMin, cfg.RequeueMax = time.Hour, time.Hour
	return &r4Rig{env: env, path: path, st: st, rep: rep, eng: startEngine(t, cfg)}
}

// claimOK creates Pods and waits until each is Running.
func (r *r4Rig) claimOK(t *testing.T, prefix string, n int) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for i := range n {
		it := intent(fmt.Sprintf("r4/%s-%d", prefix, i), fmt.Sprintf("uid-%s-%d", prefix, i), "")
		create(t, r.eng, it)
		ids[string(it.Ref.Key)] = r.rep.running(t, it.Ref.UID).claim.ID
	}
	return ids
}

// createRolledBack creates n Pods while the state disk fails, waits for n
// rolled-back transactions, and checks that each Pod is Pending with a
// message naming the pod key and the disk error (errText, errName), never
// Running, and holds no VM at sandboxd.
func (r *r4Rig) createRolledBack(t *testing.T, prefix string, n int, errText, errName string) []pipeline.Intent {
	t.Helper()
	var failed []pipeline.Intent
	for i := range n {
		it := intent(fmt.Sprintf("r4/%s-%d", prefix, i), fmt.Sprintf("uid-%s-%d", prefix, i), "")
		failed = append(failed, it)
		create(t, r.eng, it)
	}
	r.rep.outcome(t, pipeline.OutcomeRolledBack, n)
	for _, it := range failed {
		ev := r.rep.pending(t, it.Ref.UID, pipeline.ReasonStateWrite, 1)
		if !strings.Contains(ev.msg, string(it.Ref.Key)) || !strings.Contains(ev.msg, errText) {
			t.Errorf("Pending message %q does not name the pod and %s", ev.msg, errName)
		}
		if find(r.rep.snapshot(), "running", it.Ref.UID, "") >= 0 {
			t.Fatalf("%s went Running while the state disk failed (%s)", it.Ref.Key, errName)
		}
		if live := liveFor(r.env.sim, it.Ref.Key); len(live) != 0 {
			t.Errorf("%s: %d VMs live after the failed commit: not rolled back", it.Ref.Key, len(live))
		}
	}
	return failed
}

func mergeIDs(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// checkReload closes the store and checks the reload.
func checkReload(t *testing.T, r *r4Rig, acked map[string]string) {
	t.Helper()
	if err := r.st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkReloadOnly(t, r, acked)
}

// checkReloadOnly: the reloaded store holds exactly the acknowledged claims
// (each with the id reported Running, and live at sandboxd), so no failed
// claim and no rolled-back VM came back.
func checkReloadOnly(t *testing.T, r *r4Rig, acked map[string]string) {
	t.Helper()
	st, err := store.Open(r.path, store.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("reload %s: %v", r.path, err)
	}
	defer st.Close()
	got := map[string]string{}
	st.Range(func(k string, c store.Claim) bool { got[k] = c.ID; return true })
	if len(got) != len(acked) {
		t.Errorf("reload holds %d rows %v, want the %d acknowledged %v", len(got), got, len(acked), acked)
	}
	live := map[string]bool{}
	for _, sb := range r.env.sim.Sandboxes() {
		live[sb.ID] = true
	}
	for k, id := range acked {
		if got[k] != id {
			t.Errorf("%s: reloaded claim %q, want the acknowledged %s", k, got[k], id)
		}
		if !live[id] {
			t.Errorf("%s: acknowledged claim %s is not live at sandboxd", k, id)
		}
	}
	if len(live) != len(acked) {
		t.Errorf("%d VMs live at sandboxd for %d acknowledged claims", len(live), len(acked))
	}
}

// ext4Shutdown is EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)) and its flag
// that drops the journal: from then on every write and fsync on the
// filesystem fails with EIO, as on a dying disk, until it is remounted.
const (
	ext4Shutdown           = 0x8004587d
	ext4GoingNoLogFlush    = 2
	loopImageBytes         = 8 << 20
	ioErrorPods, ackedPods = 2, 2
)

// loopExt4 makes an ext4 image, mounts it on a loop device, and returns the
// mount point and a remount function. It skips when not root or when the
// tools or loop devices are missing.
func loopExt4(t *testing.T) (dir string, remount func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("R4 needs root to mount a loop filesystem")
	}
	base := t.TempDir()
	img, dir := filepath.Join(base, "state.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, loopImageBytes); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
		}
		return nil
	}
	if err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		t.Skipf("R4: %v", err)
	}
	mount := func() error { return run("mount", "-t", "ext4", "-o", "loop", img, dir) }
	if err := mount(); err != nil {
		t.Skipf("R4: %v", err)
	}
	t.Cleanup(func() {
		if err := run("umount", dir); err != nil {
			t.Errorf("%v", err)
			_ = run("umount", "-l", dir)
		}
	})
	return dir, func() {
		t.Helper()
		if err := run("umount", dir); err != nil {
			t.Fatal(err)
		}
		if err := mount(); err != nil {
			t.Fatal(err)
		}
	}
}
