package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// A power cut can leave, in the torn tail of the state file, a whole group
// of an older log whose del names a live claim. The real binary's startup
// cuts it into a cut file (logged, kept) and keeps the claim: the Pod runs
// on its VM after the restart. While the node runs, salvage of its state
// file is refused (it holds the lock); salvage of the cut file reports the
// stale del instead of replaying it; once the node is stopped, salvage of
// the state file keeps the claim.
func TestAStaleGroupInATornTailIsCutAndKeptAndNeverDropsAClaim(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "p", n.Name))
	id := waitRunning(t, ns, "p").Annotations[kube.AnnClaimID]
	key := ns + "/p"
	n.stop()

	older := filepath.Join(t.TempDir(), "claims.json")
	s, err := store.Open(older, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := s.Put(context.Background(), key, store.Claim{ID: id, Token: "older-token", PodUID: "u", ClaimedAt: now, Deadline: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(older)
	lines := bytes.SplitAfter(old, []byte("\n"))
	stale := bytes.Join(lines[len(lines)-3:], nil) // the del, its marker
	f, err := os.OpenFile(n.state, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(stale); err != nil {
		t.Fatal(err)
	}
	f.Close()

	n.start()
	n.waitReady()
	testkit.WaitForCtx(t, waitFor, "the startup repair logs its cut file", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "truncating torn tail", n.state+".cut-"), nil
	})
	cuts := store.CutFiles(n.state)
	if len(cuts) != 1 {
		t.Fatalf("cut files beside the state file: %+v, want one", cuts)
	}
	if got := waitRunning(t, ns, "p").Annotations[kube.AnnClaimID]; got != id || !n.holds(id) {
		t.Fatalf("after the restart the Pod runs %q (VM held: %v), want its claim %s", got, n.holds(id), id)
	}

	_, err = store.Salvage(n.state, filepath.Join(t.TempDir(), "live.json"), store.Options{})
	var le *store.LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "stop the service") {
		t.Fatalf("salvage of the live node's file: %v, want it refused", err)
	}
	rep, err := store.Salvage(cuts[0].Path, filepath.Join(t.TempDir(), "cut.json"), store.Options{})
	if err != nil || rep.Kept != 0 || len(rep.Lost) != 1 || rep.Lost[0].Op != "del" || rep.Lost[0].Key != key {
		t.Fatalf("salvage of the cut file: %+v, %v; want the stale del of %s reported, nothing kept", rep, err, key)
	}

	n.stop()
	dst := filepath.Join(t.TempDir(), "salvaged.json")
	if _, err := store.Salvage(n.state, dst, store.Options{}); err != nil {
		t.Fatalf("salvage of the stopped node's file: %v", err)
	}
	r, err := store.Inspect(dst)
	if err != nil || r.Rows[key].ID != id {
		t.Fatalf("the salvaged file: %+v, %v; want %s on %s", r.Rows, err, key, id)
	}
}
