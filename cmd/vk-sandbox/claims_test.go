package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// A state file that cannot be read is an error (exit 1, the path named),
// never "0 claims": an operator deletes state on the word of an empty list.
func TestClaimsFailsOnAMissingOrUnreadablePath(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent", "claims.json")
	for name, path := range map[string]string{"missing": missing, "a directory": dir} {
		var out, errOut bytes.Buffer
		rc := claimsCommand([]string{"--state-path", path}, &out, &errOut)
		if rc != 1 || !strings.Contains(errOut.String(), path) || strings.Contains(out.String(), "0 claims") {
			t.Errorf("%s: rc %d, stdout %q, stderr %q; want 1, the path named, no listing", name, rc, out.String(), errOut.String())
		}
	}
}

// Words are checked and flags work on either side of them: a flag after
// the word is parsed, and an unknown word is refused.
func TestClaimsArguments(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"extra", "--state-path", dir}, 2, `unknown argument "extra"`},
		{[]string{"salvage", "--state-path", dir}, 2, "needs --out"},
		{[]string{"--out", "x", "--state-path", dir}, 2, "--out is for salvage"},
		{[]string{"salvage", "--json", "--out", "x"}, 2, "--json is for the listing"},
		{[]string{"--no-such-flag"}, 2, "no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		if rc := claimsCommand(tc.args, &out, &errOut); rc != tc.rc || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("claims %q: rc %d, %q; want %d and %q", tc.args, rc, errOut.String(), tc.rc, tc.want)
		}
	}
}

// `vk-sandbox claims salvage` writes the records that verify to a new
// file that the store opens, lists the damaged line without its token,
// leaves the source alone, and refuses to overwrite.
func TestClaimsSalvage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claims.json")
	s, err := store.Open(path, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	const secret = "sandbox-token-do-not-print-0000"
	for _, k := range []string{"ns/a", "ns/b", "ns/c"} {
		if err := s.Put(context.Background(), k, store.Claim{ID: "sb-" + k, Token: secret + k, PodUID: "u", ClaimedAt: now, Deadline: now}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	data, _ := os.ReadFile(path)
	data[bytes.Index(data, []byte(secret+"ns/b"))] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if rc := claimsCommand([]string{"--state-path", path}, &out, &errOut); rc != 1 || !strings.Contains(errOut.String(), "claims salvage") {
		t.Fatalf("listing a damaged file: rc %d, %q; want 1 and the salvage hint", rc, errOut.String())
	}
	dst := filepath.Join(t.TempDir(), "claims.json")
	out.Reset()
	// Flags after the word.
	if rc := claimsCommand([]string{"salvage", "--state-path", path, "--out", dst}, &out, &errOut); rc != 0 {
		t.Fatalf("salvage: rc %d: %s", rc, errOut.String())
	}
	report := out.String()
	for _, want := range []string{"2 claims kept", "1 lines could not be kept", "line 4 "} {
		if !strings.Contains(report, want) {
			t.Errorf("salvage report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, secret) {
		t.Fatal("salvage printed a token")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
		t.Error("salvage changed its source")
	}
	out.Reset()
	if rc := claimsCommand([]string{"--state-path", dst}, &out, &errOut); rc != 0 || !strings.Contains(out.String(), "2 claims; format version 2") {
		t.Errorf("the salvaged file: rc %d, %s", rc, out.String())
	}
	errOut.Reset()
	// Flags before the word; the new file exists now.
	if rc := claimsCommand([]string{"--state-path", path, "--out", dst, "salvage"}, &out, &errOut); rc != 1 || !strings.Contains(errOut.String(), "exists") {
		t.Errorf("salvage onto an existing file: rc %d, %q; want 1", rc, errOut.String())
	}
}

// AGE reads like kubectl's.
func TestClaimsAgeLikeKubectl(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	for age, want := range map[time.Duration]string{
		5*time.Minute + 3*time.Second: "5m3s",
		3 * time.Hour:                 "3h",
		2 * 24 * time.Hour:            "2d",
	} {
		var out bytes.Buffer
		printClaimsTable(&out, store.Report{Version: 2, Rows: map[string]store.Claim{"ns/a": {ID: "sb", ClaimedAt: now.Add(-age)}}}, now)
		if !regexp.MustCompile(`\s` + want + `\n`).MatchString(out.String()) {
			t.Errorf("age %s: want %s in\n%s", age, want, out.String())
		}
	}
}

// `vk-sandbox help` and --help list every command; the daemon refuses a
// word it does not know instead of starting.
func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if rc, done := command([]string{"help"}, &out, &out); rc != 0 || !done {
		t.Fatalf("help: rc %d, handled %v", rc, done)
	}
	for _, c := range commands {
		if !strings.Contains(out.String(), "  "+c.name+" ") {
			t.Errorf("help lacks the command %q:\n%s", c.name, out.String())
		}
	}
	if !strings.Contains(out.String(), "--state-path") {
		t.Error("help lacks the daemon's flags")
	}
	if _, done := command([]string{"--node-name", "x"}, &out, &out); done {
		t.Error("a flag was taken for a command")
	}
	for _, args := range [][]string{{"helpp"}, {"--node-name", "x", "extra"}} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "unknown command or argument") {
			t.Errorf("daemon %q: %v, want an unknown-word error", args, err)
		}
	}
}

// putClaims commits one group per key to a new state file at path and
// closes it.
func putClaims(t *testing.T, path string, ops ...store.Op) {
	t.Helper()
	s, err := store.Open(path, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if err := s.Apply(context.Background(), op); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func testOp(key string) store.Op {
	now := time.Now().UTC().Truncate(time.Second)
	return store.Op{Key: key, Claim: store.Claim{ID: "sb-" + key, Token: "sandbox-token-do-not-print-" + key, PodUID: "u", ClaimedAt: now, Deadline: now}}
}

// A file with a damaged tail is never "0 claims" with exit 0 (the
// uninstall guide deletes state on that word): `vk-sandbox claims` exits 3
// and says "damaged: salvage first" with the tail's offset and size. Once a
// start has cut the tail, the listing is whole again (exit 0) and names
// the cut file.
func TestClaimsSaysDamagedSalvageFirstForATornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claims.json")
	putClaims(t, path, testOp("ns/a"))
	data, _ := os.ReadFile(path)
	tail := []byte(`{"crc":"12345678","rec":{"op":"put","key":"ns/b","claim":{"id":"sb-ns/b","tok`)
	if err := os.WriteFile(path, append(data, tail...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--state-path", path}, {"--state-path", path, "--json"}} {
		var out, errOut bytes.Buffer
		rc := claimsCommand(args, &out, &errOut)
		msg := errOut.String()
		want := fmt.Sprintf("damaged: salvage first: a damaged tail of %d bytes at byte offset %d", len(tail), len(data))
		if rc != exitDamaged || !strings.Contains(msg, want) || strings.Contains(out.String(), "1 claims;") {
			t.Errorf("claims %q on a torn file: rc %d, stdout %q, stderr %q; want %d and %q", args, rc, out.String(), msg, exitDamaged, want)
		}
	}

	s, err := store.Open(path, store.Options{UnsafeNoFsync: true}) // the startup repair cuts the tail
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cuts := store.CutFiles(path)
	if len(cuts) != 1 {
		t.Fatalf("cut files after a start: %+v", cuts)
	}
	var out, errOut bytes.Buffer
	if rc := claimsCommand([]string{"--state-path", path}, &out, &errOut); rc != 0 ||
		!strings.Contains(out.String(), "1 claims; format version 2") || !strings.Contains(out.String(), "cut file kept by a startup repair: "+cuts[0].Path) {
		t.Errorf("claims after the repair: rc %d, %q, %q; want 0, 1 claim and the cut file named", rc, out.String(), errOut.String())
	}
}

// salvage-replays-stale-log, through the command: a whole group of an
// older log in the torn tail, whose del would drop the acknowledged claim
// ns/a, is reported by key and not applied; the new file keeps ns/a.
func TestClaimsSalvageNeverReplaysAStaleGroupOfAnOlderLog(t *testing.T) {
	dir := t.TempDir()
	path, older := filepath.Join(dir, "claims.json"), filepath.Join(dir, "older.json")
	putClaims(t, path, testOp("ns/a"), testOp("ns/b"))
	putClaims(t, older, testOp("ns/a"), store.Op{Key: "ns/a", Delete: true})
	data, _ := os.ReadFile(path)
	old, _ := os.ReadFile(older)
	lines := bytes.SplitAfter(old, []byte("\n"))
	stale := bytes.Join(lines[len(lines)-3:], nil) // del ns/a, its marker (and the empty remainder)
	if err := os.WriteFile(path, append(data, stale...), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "salvaged.json")
	var out, errOut bytes.Buffer
	if rc := claimsCommand([]string{"salvage", "--state-path", path, "--out", dst}, &out, &errOut); rc != 0 {
		t.Fatalf("salvage: rc %d: %s", rc, errOut.String())
	}
	report := out.String()
	for _, want := range []string{"2 claims kept", "does not verify against this file's salt", "[del key ns/a]"} {
		if !strings.Contains(report, want) {
			t.Errorf("salvage report lacks %q:\n%s", want, report)
		}
	}
	s, err := store.Open(dst, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, ok := s.Get("ns/a"); !ok || c.Token != testOp("ns/a").Claim.Token {
		t.Errorf("ns/a in the salvaged file: %+v, %v; want it with its token", c, ok)
	}
}

// salvage-live-file, through the command: salvage of a file a live store
// holds exits 1 saying to stop the service, makes no new file and leaves
// the source alone.
func TestClaimsSalvageRefusesALiveFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.json")
	putClaims(t, path, testOp("ns/a"))
	before, _ := os.ReadFile(path)
	s, err := store.Open(path, store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := filepath.Join(dir, "salvaged.json")
	var out, errOut bytes.Buffer
	rc := claimsCommand([]string{"salvage", "--state-path", path, "--out", dst}, &out, &errOut)
	if msg := errOut.String(); rc != 1 || !strings.Contains(msg, "is in use") || !strings.Contains(msg, "stop the service first") {
		t.Errorf("salvage of a live file: rc %d, %q; want 1, in use, stop the service", rc, msg)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused salvage made %s: %v", dst, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Error("a refused salvage changed the source")
	}
}
