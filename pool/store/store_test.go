package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// --- helpers shared by the package's tests ---

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// capture is a logger and what it wrote, for tests that check what is
// (not) logged.
func capture() (*slog.Logger, *testkit.Buffer) {
	b := &testkit.Buffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

func statePath(t testing.TB) string { return filepath.Join(t.TempDir(), "claims.json") }

func mustOpen(t testing.TB, path string, o Options) *Store {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	s, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

const secretPrefix = "SECRET-TOKEN-"

func testClaim(i int) Claim {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC).Add(time.Duration(i) * time.Second)
	return Claim{
		ID:        fmt.Sprintf("sb-%06d", i),
		Token:     fmt.Sprintf("%s%06d-0123456789abcdef0123456789abcdef", secretPrefix, i),
		Address:   fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff),
		PodUID:    fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		ClaimedAt: at,
		Deadline:  at.Add(time.Hour),
	}
}

func sameClaim(a, b Claim) bool {
	return a.ID == b.ID && a.Token == b.Token && a.Address == b.Address && a.PodUID == b.PodUID &&
		a.OwnerUID == b.OwnerUID && a.Owner == b.Owner && a.ClaimedAt.Equal(b.ClaimedAt) && a.Deadline.Equal(b.Deadline)
}

func snapshot(s *Store) map[string]Claim {
	m := map[string]Claim{}
	s.Range(func(k string, c Claim) bool { m[k] = c; return true })
	return m
}

func checkTable(t testing.TB, s *Store, want map[string]Claim) {
	t.Helper()
	got := snapshot(s)
	if len(got) != len(want) || s.Len() != len(want) {
		t.Fatalf("table has %d rows (Len %d), want %d", len(got), s.Len(), len(want))
	}
	for k, w := range want {
		g, ok := s.Get(k)
		if !ok || !sameClaim(g, w) || !sameClaim(got[k], w) {
			t.Fatalf("row %s: got %+v (present %v), want %+v", k, g, ok, w)
		}
	}
}

func noToken(t testing.TB, what, s string) {
	t.Helper()
	if strings.Contains(s, secretPrefix) {
		t.Fatalf("%s contains a token: %s", what, s)
	}
}

// --- contracts of Open, Get, Delete, Range and Close ---

func TestMissingFileIsEmptyTableCreated0600In0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "claims.json")
	s := mustOpen(t, path, Options{})
	defer mustClose(t, s)
	if s.Len() != 0 || s.path != path {
		t.Fatalf("Len %d path %q", s.Len(), s.path)
	}
	if err := s.Put(context.Background(), "ns/a", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    string
		want os.FileMode
	}{{dir, 0o700}, {filepath.Dir(dir), 0o700}, {path, 0o600}, {path + ".lock", 0o600}} {
		fi, err := os.Stat(c.p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.want {
			t.Errorf("%s: mode %v, want %v", c.p, fi.Mode().Perm(), c.want)
		}
	}
}

func TestAcknowledgedPutsAndDeletesSurviveReopen(t *testing.T) {
	path := statePath(t)
	ctx := context.Background()
	s := mustOpen(t, path, Options{})
	want := map[string]Claim{}
	for i := range 10 {
		k := fmt.Sprintf("ns/p%d", i)
		c := testClaim(i)
		if i == 3 {
			c.OwnerUID = "owner-3"
			c.Owner = "agents.x-k8s.io/v1beta1/Sandbox/box"
			loc := time.FixedZone("x", 2*3600)
			c.ClaimedAt = time.Now().In(loc) // has a monotonic reading; stripped
		}
		if err := s.Put(ctx, k, c); err != nil {
			t.Fatal(err)
		}
		want[k] = c
	}
	for _, k := range []string{"ns/p1", "ns/p5"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	if err := s.Delete(ctx, "ns/never"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	checkTable(t, s, want)
	mustClose(t, s)

	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
	if c, _ := s.Get("ns/p3"); c.OwnerUID != "owner-3" || c.Owner != "agents.x-k8s.io/v1beta1/Sandbox/box" {
		t.Fatalf("OwnerUID lost: %+v", c)
	}
}

func TestSecondOpenFailsWhileLockedAndSucceedsAfterClose(t *testing.T) {
	path := statePath(t)
	s := mustOpen(t, path, Options{})
	_, err := Open(path, Options{Logger: quiet()})
	if err == nil {
		t.Fatal("second Open succeeded while the first holds the lock")
	}
	// The holder is named by pid where /proc/locks can tell (here this
	// very process), and described otherwise.
	holder := "another process"
	if _, perr := os.Stat("/proc/locks"); perr == nil {
		holder = fmt.Sprintf("pid %d (", os.Getpid())
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("error does not name the file and the holder %q: %v", holder, err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	mustClose(t, s)
}

func TestUnwritablePathFailsAtOpenNamingIt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(file, "claims.json"),        // parent is a regular file
		filepath.Join(file, "sub", "claims.json"), // ancestor is a regular file
		"/proc/vk-sandbox-claims.json",            // not writable, even for root
	} {
		_, err := Open(path, Options{Logger: quiet()})
		if err == nil {
			t.Fatalf("Open(%s) succeeded", path)
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("Open(%s): error does not name the path: %v", path, err)
		}
	}
}

func TestClosedStoreRejectsMutationsButServesReads(t *testing.T) {
	s := mustOpen(t, statePath(t), Options{})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/a", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	for name, err := range map[string]error{
		"Put":           s.Put(ctx, "ns/b", testClaim(2)),
		"Delete":        s.Delete(ctx, "ns/a"),
		"Delete absent": s.Delete(ctx, "ns/zz"),
		"Apply":         s.Apply(ctx, Op{Key: "ns/c", Claim: testClaim(3)}),
		"Close":         s.Close(),
	} {
		if !errors.Is(err, errClosed) {
			t.Errorf("%s after Close: %v, want errClosed", name, err)
		}
	}
	if _, ok := s.Get("ns/a"); !ok || s.Len() != 1 {
		t.Fatal("reads after Close lost the table")
	}
}

func TestWideDirectoryIsReportedNotChanged(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lg, logs := capture()
	s := mustOpen(t, filepath.Join(dir, "claims.json"), Options{Logger: lg})
	defer mustClose(t, s)
	if !strings.Contains(logs.String(), "state directory is accessible") {
		t.Fatalf("no warning for a 0755 directory; logs:\n%s", logs)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("directory mode changed to %v", fi.Mode().Perm())
	}
}

func TestWideStateFileIsTightenedTo0600(t *testing.T) {
	path := statePath(t)
	mustClose(t, mustOpen(t, path, Options{}))
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path, Options{})
	defer mustClose(t, s)
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestRangeIsASnapshotThatMayMutate(t *testing.T) {
	s := mustOpen(t, statePath(t), Options{UnsafeNoFsync: true})
	defer mustClose(t, s)
	ctx := context.Background()
	for i := range 5 {
		if err := s.Put(ctx, fmt.Sprintf("ns/%d", i), testClaim(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	s.Range(func(k string, c Claim) bool {
		seen++
		// Would deadlock if Range held the table lock while calling fn.
		if err := s.Delete(ctx, k); err != nil {
			t.Error(err)
		}
		return true
	})
	if seen != 5 || s.Len() != 0 {
		t.Fatalf("seen %d, left %d", seen, s.Len())
	}
}

func TestUnstorableClaimIsRejectedWithoutQuotingIt(t *testing.T) {
	s := mustOpen(t, statePath(t), Options{})
	defer mustClose(t, s)
	ctx := context.Background()
	bad := testClaim(1)
	bad.Token = secretPrefix + "\xff\xfe"
	far := testClaim(2)
	far.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		key   string
		claim Claim
	}{{"ns/bad", bad}, {"ns/far", far}, {"", testClaim(3)}, {"ns/\xff", testClaim(4)}} {
		err := s.Put(ctx, c.key, c.claim)
		if err == nil {
			t.Fatalf("Put(%q) of an unstorable claim succeeded", c.key)
		}
		noToken(t, "error", err.Error())
	}
	if s.Len() != 0 {
		t.Fatal("a rejected claim is in the table")
	}
}

func TestCanceledContextCommitsNothing(t *testing.T) {
	path := statePath(t)
	s := mustOpen(t, path, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "ns/a", testClaim(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a canceled context: %v", err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	if s.Len() != 0 {
		t.Fatal("a canceled Put was committed")
	}
}
