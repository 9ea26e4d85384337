package store

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// TestPowerCutKeepsEveryAcknowledgedCommit is TestCrashKeepsEveryAcknowledged
// Commit with the machine's power cut instead of the process killed: the
// store runs on a powercut filesystem, which loses (or keeps a random subset
// of the pages or sectors of) everything not fsynced, and reverts every
// create and rename whose directory was not fsynced. Each round commits
// from several goroutines, cuts the power after a random number of
// acknowledgements (inside a group commit, a compaction or its switch,
// wherever the writer is), remounts and opens the store again: Open must
// succeed and every acknowledged Put and Delete must be there.
func TestPowerCutKeepsEveryAcknowledgedCommit(t *testing.T) {
	backing := t.TempDir()
	modes := []powercut.Mode{powercut.DropUnsynced, powercut.KeepSomePages, powercut.KeepSomeSectors}
	cuts := []struct {
		op powercut.Op
		n  int // at most the n-th such operation of the round
	}{ // an fsync most often: the last group is then written and not synced
		{powercut.OpFsync, 60}, {powercut.OpFsync, 60}, {powercut.OpFsync, 5}, {powercut.OpFsync, 5},
		{powercut.OpDirFsync, 3}, {powercut.OpDirFsync, 3}, {powercut.OpRename, 2},
		{powercut.OpWrite, 60}, {powercut.OpCreate, 3},
	}
	const minRounds, maxRounds = 30, 400
	deadline := time.Now().Add(20 * time.Second)
	model := map[string]string{}
	var (
		tally  stormTally
		lines  []string // what the last round's workers said
		rounds int
		seeds  []uint64
	)
	for ; rounds < maxRounds && (rounds < minRounds || time.Now().Before(deadline)); rounds++ {
		fsys := powercut.Mount(t, backing)
		seeds = append(seeds, fsys.Seed())
		path := filepath.Join(fsys.Dir(), "state", "claims.json")
		lg, logs := capture()
		s, err := Open(path, Options{Logger: lg, CompactMin: 64})
		if err != nil {
			t.Fatalf("round %d: Open after a power cut (seeds %v): %v", rounds, seeds, err)
		}
		// Before the unmount (cleanups run last first), so that no file is
		// left open on the mount if the test fails.
		t.Cleanup(func() { s.Close() })
		model = checkStorm(t, rounds, model, lines, s, &tally)
		if strings.Contains(logs.String(), "torn tail") {
			tally.tornRecoveries++
		}

		var (
			mu     sync.Mutex
			acked  atomic.Int64
			cut    atomic.Bool
			failed []error
		)
		lines = nil
		emit := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			l := fmt.Sprintf(format, args...)
			lines = append(lines, l)
			if l[0] == 'A' {
				acked.Add(1)
			}
		}
		wait := commitStorm(s, strconv.Itoa(rounds), emit, func(err error) {
			if !cut.Load() {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
		mode := modes[rand.IntN(len(modes))]
		if rand.IntN(3) == 0 {
			// At whatever the writer is doing after a number of commits...
			target := int64(1 + rand.IntN(250))
			testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("round %d: %d acknowledged commits", rounds, target), func() bool {
				mu.Lock()
				defer mu.Unlock()
				return acked.Load() >= target || len(failed) > 0
			})
			cut.Store(true)
			if err := fsys.PowerCut(mode); err != nil {
				t.Fatal(err)
			}
		} else {
			// ...or at the moment a write, fsync, rename... arrives: a
			// group written and not fsynced, a compaction renamed and its
			// directory not synced.
			at := cuts[rand.IntN(len(cuts))]
			cut.Store(true) // a failure from here on may be the cut's
			n := 1 + rand.IntN(at.n)
			fsys.PowerCutAt(at.op, n, mode)
			within(t, fmt.Sprintf("round %d: the power cut armed at %v #%d", rounds, at.op, n), fsys.Off())
			if err := fsys.Err(); err != nil {
				t.Fatal(err)
			}
		}
		wait() // every worker stops at its first failed commit
		if len(failed) > 0 {
			t.Fatalf("round %d: a commit failed before the power cut: %v", rounds, failed[0])
		}
		st := fsys.Stats()
		tally.unsynced += st.UnsyncedSectors
		tally.kept += st.KeptSectors
		s.Close() // fails: the disk is gone; it still releases the lock
		if err := fsys.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
	fsys := powercut.Mount(t, backing)
	s, err := Open(filepath.Join(fsys.Dir(), "state", "claims.json"), Options{Logger: quiet()})
	if err != nil {
		t.Fatalf("Open after the last power cut (seeds %v): %v", seeds, err)
	}
	t.Cleanup(func() { s.Close() })
	model = checkStorm(t, rounds, model, lines, s, &tally)
	mustClose(t, s)
	t.Logf("%d power cuts: %d acknowledged puts and %d acknowledged deletes all kept; "+
		"in-flight ops at the cut: %d landed, %d did not; %d torn tails truncated; %d rows at the end; %d unsynced sectors at the cuts, %d kept",
		rounds, tally.ackedPuts, tally.ackedDels, tally.inFlightLanded, tally.inFlightLost, tally.tornRecoveries, len(model), tally.unsynced, tally.kept)
	if tally.ackedPuts == 0 || tally.tornRecoveries == 0 || tally.inFlightLanded == 0 {
		t.Fatal("no acknowledged put, no torn tail, or no unacknowledged group kept whole by a cut: the test proved little")
	}
}
