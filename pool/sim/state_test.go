package sim_test

import (
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestStateSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim", "state.json")
	cfg := sim.Config{RootToken: rootToken, TenantTokens: map[string]string{tenantToken: tenantName}, Pools: map[pool.Key]int{defaultKey: 1}, StatePath: path}

	s1, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s1.Handler())
	labels := map[string]string{"app": "web"}
	status, _ := do(t, ts.Client(), ts.URL, "POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/a", TTLSeconds: 600, Metadata: labels})
	ts.Close()
	if status != 200 {
		t.Fatalf("claim: %d", status)
	}
	before := s1.Sandboxes()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, mode %v; want 0600 (it holds tokens)", err, fi.Mode())
	}

	s2, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	after := s2.Sandboxes()
	ts = httptest.NewServer(s2.Handler())
	defer func() { ts.Close(); _ = s2.Close() }()
	if len(after) != 1 || after[0].ID != before[0].ID || after[0].Token != before[0].Token || after[0].ClaimRef != "ns/a" ||
		after[0].Tenant != tenantName || !maps.Equal(after[0].Metadata, labels) || !after[0].Deadline.Equal(before[0].Deadline) {
		t.Fatalf("after restart %+v, want %+v", after, before)
	}
	// The tenant still sees it, and the old credential still works.
	if status, body := do(t, ts.Client(), ts.URL, "GET", "/v1/sandboxes?metadata=app%3Dweb", tenantToken, nil); status != 200 || !strings.Contains(string(body), after[0].ID) {
		t.Errorf("tenant list after restart: %d %s", status, body)
	}
	status, _ = do(t, ts.Client(), ts.URL, "POST", "/v1/sandboxes/"+after[0].ID+"/release", after[0].Token, nil)
	if status != 204 {
		t.Errorf("release with the pre-restart token: %d", status)
	}
}

func TestCorruptStateFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"sandboxes":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sim.New(sim.Config{RootToken: rootToken, StatePath: path}); err == nil {
		_ = s.Close()
		t.Fatal("New accepted a corrupt state file")
	}
}

// A version 1 file (before tenants and labels) loads as root's sandboxes,
// its keys given the default axes and its per-claim address dropped.
func TestVersion1StateFileLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	v1 := `{"version":1,"addr_seq":3,"sandboxes":[{"sandbox":{"id":"sb_00000000000000aa","key":{"template":"default"},` +
		`"deadline":"2999-01-01T00:00:00Z","claim_ref":"ns/old","token":"0123456789abcdef0123456789abcdef"},"owner_addr":"10.77.0.3:7777"}]}`
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{RootToken: rootToken, StatePath: path, Pools: map[pool.Key]int{defaultKey: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Sandboxes()
	if len(got) != 1 || got[0].ID != "sb_00000000000000aa" || got[0].Key != fullKey || got[0].Tenant != "" || got[0].ClaimedAt == nil {
		t.Errorf("loaded %+v", got)
	}
}
