package store

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// A Delete called while a Put of the same key is pending (in the writer's
// fsync, or queued behind another group) must not return before that Put,
// or the key comes back after the Delete said it was gone. The store
// orders them itself, so callers need no per-key lock for this.
func TestDeleteIsOrderedAfterAPendingPutOfItsKey(t *testing.T) {
	for _, queued := range []bool{false, true} {
		name := "put in the writer's fsync"
		if queued {
			name = "put queued behind another group"
		}
		t.Run(name, func(t *testing.T) {
			path := statePath(t)
			b := newBlockingFsync()
			s := mustOpen(t, path, Options{failpoint: b.failpoint})
			b.armed.Store(true)
			ctx := context.Background()
			const key = "ns/k"
			puts := make(chan error, 2)
			if queued {
				go func() { puts <- s.Put(ctx, "ns/other", testClaim(1)) }()
				within(t, "the first group's fsync", b.entered)
				go func() { puts <- s.Put(ctx, key, testClaim(2)) }()
				testkit.WaitFor(t, 10*time.Second, "the Put to queue", func() bool { return s.q.len() == 1 })
			} else {
				go func() { puts <- s.Put(ctx, key, testClaim(2)) }()
				within(t, "the Put's fsync", b.entered)
			}
			if _, ok := s.Get(key); ok {
				t.Fatal("Get shows a Put that is not durable")
			}
			before := s.q.len()
			del := make(chan error, 1)
			go func() { del <- s.Delete(ctx, key) }()
			// Either the Delete returns at once (wrong: the Put is still
			// pending) or it queues behind the Put.
			testkit.WaitFor(t, 10*time.Second, "the Delete to return or queue", func() bool { return len(del) > 0 || s.q.len() > before })
			close(b.release)
			n := 1
			if queued {
				n = 2
			}
			for range n {
				if err := within(t, "a Put", puts); err != nil {
					t.Fatal(err)
				}
			}
			if err := within(t, "the Delete", del); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Get(key); ok {
				t.Fatalf("Delete(%s) returned before the Put it follows was durable: the key is back", key)
			}
			mustClose(t, s)
			s = mustOpen(t, path, Options{})
			defer mustClose(t, s)
			if _, ok := s.Get(key); ok {
				t.Fatalf("%s is present after a reopen, though its Delete followed its Put", key)
			}
		})
	}
}

func TestDeleteOfAnAbsentKeyWithNoPendingPutCostsNothing(t *testing.T) {
	obs := &countingObserver{}
	s := mustOpen(t, statePath(t), Options{Observer: obs})
	defer mustClose(t, s)
	ctx := context.Background()
	if err := s.Put(ctx, "ns/a", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	commits := obs.commits.Load()
	if err := s.Delete(ctx, "ns/never"); err != nil {
		t.Fatal(err)
	}
	if obs.commits.Load() != commits {
		t.Fatal("deleting an absent key took a group commit")
	}
}

// A Put that failed, or was withdrawn, holds back no Delete: once settled,
// the table alone decides.
func TestDeleteAfterAFailedOrWithdrawnPutReturnsAtOnce(t *testing.T) {
	obs := &countingObserver{}
	f := newFaults()
	s := mustOpen(t, statePath(t), Options{Observer: obs, failpoint: f.failpoint})
	defer mustClose(t, s)
	ctx := context.Background()
	f.set("write", 1)
	failedCommit(t, s, "ns/a", s.Put(ctx, "ns/a", testClaim(1)), errInjected.Error())
	commits := obs.commits.Load()
	if err := s.Delete(ctx, "ns/a"); err != nil {
		t.Fatal(err)
	}
	if obs.commits.Load() != commits {
		t.Fatal("a Delete waited for a Put that had already failed")
	}
}
