package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TakeChanged lists what was put since its last call, and says when its
// list cannot be trusted alone: right after Open (the recovered rows were
// never listed) and after more puts than it keeps.
func TestTakeChangedListsThePutsSinceTheLastCall(t *testing.T) {
	path := statePath(t)
	s := mustOpen(t, path, Options{UnsafeNoFsync: true})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/recovered", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)

	s = mustOpen(t, path, Options{UnsafeNoFsync: true})
	defer mustClose(t, s)
	if _, all := s.TakeChanged(nil); !all {
		t.Fatal("the first call after Open did not say that every row must be looked at")
	}
	if got, all := s.TakeChanged(nil); all || len(got) != 0 {
		t.Fatalf("nothing was put, yet TakeChanged = %q, all %v", got, all)
	}
	for i, k := range []string{"ns/a", "ns/b"} {
		if err := s.Put(ctx, k, testClaim(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "ns/recovered"); err != nil {
		t.Fatal(err)
	}
	got, all := s.TakeChanged([]string{"kept"})
	if all || !slices.Equal(got, []string{"kept", "ns/a", "ns/b"}) {
		t.Fatalf("TakeChanged = %q, all %v; want the caller's slice extended by ns/a and ns/b (deletes are not listed)", got, all)
	}
	if got, all := s.TakeChanged(nil); all || len(got) != 0 {
		t.Fatalf("a second call listed %q (all %v): the first did not forget", got, all)
	}

	ops := make([]Op, maxChanged+1)
	for i := range ops {
		ops[i] = Op{Key: fmt.Sprintf("ns/p-%06d", i), Claim: testClaim(100 + i)}
	}
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if got, all := s.TakeChanged(nil); !all || len(got) != maxChanged {
		t.Fatalf("after %d puts TakeChanged kept %d and said all %v; want the bound kept and all", len(ops), len(got), all)
	}
	if _, all := s.TakeChanged(nil); all {
		t.Fatal("all outlived the call that reported it")
	}
}
