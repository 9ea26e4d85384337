package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

func newTestRecords(t *testing.T) (*records, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.json"), store.Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newRecords(st, clocktesting.NewFakePassiveClock(time.Now()), 8), st
}

func (rs *records) size() int {
	n := 0
	for i := range rs.shards {
		rs.shards[i].mu.Lock()
		n += len(rs.shards[i].m)
		rs.shards[i].mu.Unlock()
	}
	return n
}

// A record lives only while it says something or its lock is held or
// awaited: memory is O(keys in use), however many keys came and went.
func TestARecordGoesOnceItSaysNothing(t *testing.T) {
	rs, _ := newTestRecords(t)
	steps := []struct {
		name string
		do   func(key PodKey)
		want int
	}{
		{"born", func(k PodKey) { rs.born(k, "uid-"+string(k)) }, 1},
		{"lifetime", func(k PodKey) { rs.setLifetime(k, 60) }, 1},
		{"died", func(k PodKey) { rs.died(k, "uid-"+string(k)) }, 1},
		{"forget", func(k PodKey) { rs.forget(k) }, 0},
		{"tentative", func(k PodKey) { rs.setTentative(k, store.Claim{ID: "sb-" + string(k)}) }, 1},
		{"cleared", func(k PodKey) { rs.clearTentative(k) }, 0},
		{"lease failed", func(k PodKey) { rs.leaseFailed(k, time.Now(), time.Second) }, 1},
		{"lease decided", func(k PodKey) { rs.leaseDecided(k) }, 0},
		{"locked and unlocked", func(k PodKey) { rs.lock(k)() }, 0},
		{"tried and unlocked", func(k PodKey) {
			unlock, ok := rs.tryLock(k)
			if !ok {
				t.Fatal("tryLock of a free key failed")
			}
			unlock()
		}, 0},
	}
	const keys = 100
	for _, s := range steps {
		for i := range keys {
			s.do(PodKey(fmt.Sprintf("ns/p%d", i)))
		}
		if got := rs.size(); got != s.want*keys {
			t.Fatalf("after %s: %d records for %d keys, want %d", s.name, got, keys, s.want*keys)
		}
	}
	if _, _, tentative := rs.counts(); tentative != 0 {
		t.Fatalf("tentative count %d after every tentative claim was cleared", tentative)
	}
}

// A sandbox id handed to two keys at once is taken by one of them only:
// the holder check and the tentative record are one step.
func TestOneSandboxIDIsHeldByOneKeyEvenWhenHandedToTwoAtOnce(t *testing.T) {
	rs, st := newTestRecords(t)
	for round := range 200 {
		id := fmt.Sprintf("sb-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		took := 0
		for k := range 4 {
			key := PodKey(fmt.Sprintf("ns/p%d-%d", round, k))
			wg.Go(func() {
				if _, held := rs.holdTentative(key, store.Claim{ID: id}); !held {
					mu.Lock()
					took++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if took != 1 {
			t.Fatalf("round %d: %d keys took sandbox %s, want 1", round, took, id)
		}
	}
	// A durable row is a holder as well.
	if err := st.Put(context.Background(), "ns/durable", store.Claim{ID: "sb-durable"}); err != nil {
		t.Fatal(err)
	}
	if holder, held := rs.holdTentative("ns/other", store.Claim{ID: "sb-durable"}); !held || holder != "ns/durable" {
		t.Fatalf("holdTentative of a durable row's id = %q, %v; want ns/durable, true", holder, held)
	}
}

// tryLock never waits: a key held by a transaction is skipped, and taken
// again once it is free.
func TestTryLockSkipsABusyKey(t *testing.T) {
	rs, _ := newTestRecords(t)
	unlock := rs.lock("ns/p")
	if _, ok := rs.tryLock("ns/p"); ok {
		t.Fatal("tryLock took a held key")
	}
	unlock()
	again, ok := rs.tryLock("ns/p")
	if !ok {
		t.Fatal("tryLock refused a free key")
	}
	again()
}
