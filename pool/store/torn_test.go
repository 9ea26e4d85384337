package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// tornGroups is a workload whose last group spans several pages: a few
// acknowledged groups, then one large Apply of puts, overwrites and
// deletes.
func tornGroups(seed int) [][]Op {
	var groups [][]Op
	for g := range 4 {
		var ops []Op
		for i := range 1 + g {
			ops = append(ops, Op{Key: fmt.Sprintf("ns/g%d-%d", g, i), Claim: testClaim(seed + 10*g + i)})
		}
		groups = append(groups, ops)
	}
	var last []Op
	for i := range 60 {
		switch {
		case i%7 == 3:
			last = append(last, Op{Key: fmt.Sprintf("ns/g%d-0", i%4), Delete: true})
		case i%5 == 1:
			last = append(last, Op{Key: fmt.Sprintf("ns/g3-%d", i%4), Claim: testClaim(seed + 500 + i)})
		default:
			last = append(last, Op{Key: fmt.Sprintf("ns/new-%d", i), Claim: testClaim(seed + 1000 + i)})
		}
	}
	return append(groups, last)
}

// TestAnySubsetOfTheLastGroupsSectorsLosesNothingAcknowledged writes what a
// power cut can leave of the last group commit: the acknowledged groups
// whole, the file's size either extended or not, and of the last group's
// 512-byte sectors (or 4 KiB pages) a random subset, the rest holding what
// was there before: zeros, garbage, or the blocks of an older log of the
// same workload (records and markers that are whole, but of another file).
// Every time, Open must succeed and load exactly the acknowledged groups,
// plus the last one only if all of it is there.
func TestAnySubsetOfTheLastGroupsSectorsLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	groups := tornGroups(0)
	full, wants := writeGroups(t, dir+"/build", groups)
	ends := groupEnds(t, full)
	prefix := ends[len(ends)-2] // end of the last acknowledged group
	if len(full)-prefix < 3*4096 {
		t.Fatalf("last group is %d bytes; want several pages", len(full)-prefix)
	}
	// An older log of the same workload: the same layout and records in
	// places, under another salt, and one shifted by a few records.
	older, _ := writeGroups(t, dir+"/older", groups)
	shifted, _ := writeGroups(t, dir+"/shifted", append(tornGroups(7)[:1], groups...))
	garbage := make([]byte, len(full))
	for i := range garbage {
		garbage[i] = byte(rand.IntN(256))
	}
	stales := map[string][]byte{"zeros": make([]byte, len(full)), "garbage": garbage,
		"older log": older, "shifted older log": shifted[:min(len(shifted), len(full))]}
	names := []string{"zeros", "garbage", "older log", "shifted older log"}

	path := dir + "/claims.json"
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	deadline := time.Now().Add(20 * time.Second)
	var iters, whole, torn int
	for ; iters < 4000 && time.Now().Before(deadline); iters++ {
		unit := []int{512, 4096}[rng.IntN(2)]
		stale := names[rng.IntN(len(names))]
		size := len(full) // the size update reached the disk...
		if rng.IntN(4) == 0 {
			size = prefix + rng.IntN(len(full)-prefix+1) // ...or only part of the extension did
		}
		keep := []float64{0.1, 0.5, 0.9, 1}[rng.IntN(4)]
		img := make([]byte, size)
		copy(img, full[:prefix])
		copy(img[prefix:], stales[stale][prefix:min(size, len(stales[stale]))])
		for u := prefix / unit * unit; u < size; u += unit {
			if rng.Float64() < keep {
				lo := max(u, prefix)
				copy(img[lo:min(u+unit, size)], full[lo:min(u+unit, size)])
			}
		}
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("iteration %d (seed %d): %d-byte units, %s underneath, size %d of %d, keep %.1f",
			iters, seed, unit, stale, size, len(full), keep)
		s, err := Open(path, Options{Logger: quiet(), UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		want, wantSize := wants[len(wants)-2], prefix
		if bytes.Equal(img, full) {
			want, wantSize = wants[len(wants)-1], len(full)
			whole++
		} else {
			torn++
		}
		checkTable(t, s, want)
		// What the repair cut is kept behind the header, byte for byte (and
		// removed here, so the directory stays small).
		cuts := CutFiles(path)
		if len(img) > wantSize {
			if len(cuts) != 1 {
				t.Fatalf("%s: cut files %+v, want one", what, cuts)
			}
			if got, _ := os.ReadFile(cuts[0].Path); !bytes.Equal(got, append(full[:ends[0]:ends[0]], img[wantSize:]...)) {
				t.Fatalf("%s: the cut file does not hold the header and the cut bytes", what)
			}
			if err := os.Remove(cuts[0].Path); err != nil {
				t.Fatal(err)
			}
		} else if len(cuts) != 0 {
			t.Fatalf("%s: cut files %+v of a file with nothing to cut", what, cuts)
		}
		if iters%64 == 0 { // the recovered log takes appends and reloads
			if err := s.Put(t.Context(), "ns/after", testClaim(9999)); err != nil {
				t.Fatalf("%s: Put after recovery: %v", what, err)
			}
			mustClose(t, s)
			s = mustOpen(t, path, Options{UnsafeNoFsync: true})
			want = clone(want)
			want["ns/after"] = testClaim(9999)
			checkTable(t, s, want)
			mustClose(t, s)
			continue
		}
		mustClose(t, s)
		if fi, err := os.Stat(path); err != nil || fi.Size() != int64(wantSize) {
			t.Fatalf("%s: file is %v bytes after recovery, want %d (%v)", what, fi.Size(), wantSize, err)
		}
	}
	t.Logf("%d torn last groups (seed %d): %d dropped and truncated, %d whole and kept", iters, seed, torn, whole)
	if iters < 500 || whole == 0 || torn == 0 {
		t.Fatalf("only %d iterations (%d whole, %d torn): the test proved little", iters, whole, torn)
	}
}
