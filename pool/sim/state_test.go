package sim_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestStateSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim", "state.json")
	cfg := sim.Config{RootToken: rootToken, NodeToken: nodeToken, Pools: map[pool.Key]int{defaultKey: 1}, StatePath: path}

	s1, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s1.Handler())
	status, _ := do(t, ts.Client(), ts.URL, "POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/a", TTLSeconds: 600})
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
	if len(after) != 1 || after[0].ID != before[0].ID || after[0].Token != before[0].Token || after[0].ClaimRef != "ns/a" {
		t.Fatalf("after restart %v, want %v", after, before)
	}
	// The old credential still works, and a new claim gets a fresh address.
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
