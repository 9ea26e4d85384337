package e2e

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// breakStoredToken stops the node, replaces the stored release token of
// key with a wrong one (as a restored backup or a rotated sandbox might),
// and starts the node again.
func (n *vkNode) breakStoredToken(key string) {
	n.t.Helper()
	n.stop()
	st, err := store.Open(n.state, store.Options{})
	if err != nil {
		n.t.Fatal(err)
	}
	c, ok := st.Get(key)
	if !ok {
		n.t.Fatalf("no row for %s", key)
	}
	c.Token = "wrong-sandbox-token-00000000"
	if err := st.Put(context.Background(), key, c); err != nil {
		n.t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		n.t.Fatal(err)
	}
	n.start()
	n.waitReady()
	// The restarted provider has the Pod back (its restored stub replaced
	// by the Pod's first sync), so a delete from here on is an ordinary one.
	testkit.WaitForCtx(n.t, waitFor, "the Pod "+key+" synced after the restart", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), `"msg":"CreatePod"`, key), nil
	})
}

func (n *vkNode) holds(id string) bool {
	for _, s := range n.live() {
		if s.ID == id {
			return true
		}
	}
	return false
}

// rowLive reports whether the state file holds a live row for key. The
// running node holds the file's lock, so a copy of the file is opened.
func rowLive(n *vkNode, key string) bool {
	n.t.Helper()
	b, err := os.ReadFile(n.state)
	if err != nil {
		n.t.Fatalf("read %s: %v", n.state, err)
	}
	cp := filepath.Join(n.t.TempDir(), "claims.json")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		n.t.Fatal(err)
	}
	st, err := store.Open(cp, store.Options{UnsafeNoFsync: true})
	if err != nil {
		n.t.Fatalf("open a copy of %s: %v", n.state, err)
	}
	defer st.Close()
	_, ok := st.Get(key)
	return ok
}
