package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// `vk-sandbox claims` reads a state file while a store holds its lock,
// lists every row without its token, exports JSON, and names damage.
func TestClaimsListsRowsReadOnlyWithoutTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "claims.json")
	s, err := store.Open(path, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Second)
	const secret = "sandbox-token-do-not-print-0000"
	for key, c := range map[string]store.Claim{
		"ns/a": {ID: "sb_a", Token: secret, PodUID: "uid-a", OwnerUID: "o-1", Owner: "agents.x-k8s.io/v1alpha1/Sandbox/a", ClaimedAt: now, Deadline: now.Add(time.Hour)},
		"ns/m": {ID: "sb_m", Token: secret, PodUID: "uid-m", Owner: store.OwnerUnknown, ClaimedAt: now, Deadline: now.Add(time.Hour)},
	} {
		if err := s.Put(context.Background(), key, c); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if rc := claimsCommand([]string{"--state-path", path}, &out, &errOut); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	table := out.String()
	for _, want := range []string{"ns/a", "sb_a", "uid-a", "agents.x-k8s.io/v1alpha1/Sandbox/a", "ns/m", "(unknown)", "2 claims; format version 2"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	out.Reset()
	if rc := claimsCommand([]string{"--state-path", path, "--json"}, &out, &errOut); rc != 0 {
		t.Fatalf("json rc %d: %s", rc, errOut.String())
	}
	var doc struct {
		Claims []claimRow `json:"claims"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Claims) != 2 || doc.Claims[0].Token != "[redacted]" {
		t.Fatalf("json %s: %+v, %v", out.String(), doc, err)
	}
	if strings.Contains(table+out.String(), secret) {
		t.Fatal("a token was printed")
	}

	bad := filepath.Join(t.TempDir(), "claims.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if rc := claimsCommand([]string{"--state-path", bad}, &out, &errOut); rc != 1 || !strings.Contains(errOut.String(), bad) {
		t.Fatalf("damaged file: rc %d, %q; want 1 and the file named", rc, errOut.String())
	}
}
