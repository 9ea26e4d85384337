package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const benchCommitters = 256

var benchHeld = []int{1_000, 10_000, 100_000}

func heldName(n int) string { return fmt.Sprintf("held=%dk", n/1000) }

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/sandbox-%07d", i%50, i)
	}
	return keys
}

// benchClaims is a pool of realistic claims, built once so that committers
// spend their time committing, not formatting.
var benchClaims = sync.OnceValue(func() []Claim {
	cs := make([]Claim, 1024)
	for i := range cs {
		cs[i] = testClaim(i)
	}
	return cs
})

// preload fills a store with one row per key, in large Apply batches.
func preload(b *testing.B, s *Store, keys []string) {
	b.Helper()
	claims := benchClaims()
	for lo := 0; lo < len(keys); lo += 5000 {
		ops := make([]Op, 0, 5000)
		for i := lo; i < min(lo+5000, len(keys)); i++ {
			ops = append(ops, Op{Key: keys[i], Claim: claims[i%len(claims)]})
		}
		if err := s.Apply(context.Background(), ops...); err != nil {
			b.Fatal(err)
		}
	}
}

// storm makes n Puts from benchCommitters goroutines, each overwriting a
// random one of keys, and returns the latency of every commit.
func storm(b *testing.B, s *Store, keys []string, n int, seed uint64) []time.Duration {
	claims := benchClaims()
	var next atomic.Int64
	ctx := context.Background()
	lat := make([][]time.Duration, benchCommitters)
	var wg sync.WaitGroup
	for w := range benchCommitters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			mine := make([]time.Duration, 0, n/benchCommitters+1)
			defer func() { lat[w] = mine }()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				start := time.Now()
				if err := s.Put(ctx, keys[rng.IntN(len(keys))], claims[i%int64(len(claims))]); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(start))
			}
		})
	}
	wg.Wait()
	return slices.Concat(lat...)
}

// BenchmarkCommit: 256 committer goroutines; each op is one Put that
// overwrites a random one of the held rows (so the table stays at held rows
// and compaction runs at its steady-state rate: once per ~held commits).
// ns/op is wall time per commit, i.e. 1/throughput.
func BenchmarkCommit(b *testing.B) {
	for _, held := range benchHeld {
		for _, fsync := range []bool{true, false} {
			name := heldName(held) + "/fsync=off"
			if fsync {
				name = heldName(held) + "/fsync=on"
			}
			b.Run(name, func(b *testing.B) {
				obs := &countingObserver{}
				s := mustOpen(b, statePath(b), Options{UnsafeNoFsync: !fsync, Observer: obs})
				defer s.Close()
				keys := benchKeys(held)
				preload(b, s, keys)
				base, baseNanos := obs.commits.Load(), obs.fsyncNanos.Load()
				b.ResetTimer()
				all := storm(b, s, keys, b.N, 42)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)*999/1000].Microseconds())/1000, "p99.9-ms")
					b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
				}
				commits := float64(obs.commits.Load() - base)
				b.ReportMetric(float64(b.N)/commits, "puts/fsync")
				if fsync {
					b.ReportMetric(float64(obs.fsyncNanos.Load()-baseNanos)/commits/1e6, "ms/fsync")
				}
			})
		}
	}
}

// BenchmarkCommitFullRewrite is the JSON claims document's way of writing
// (the whole table per commit) made durable, as the O(n) baseline: every
// commit marshals the whole table, writes a temp file, fsyncs it, renames it
// and fsyncs the directory. Commits are serialized (one mutex guards the
// document), so one goroutine drives it.
func BenchmarkCommitFullRewrite(b *testing.B) {
	for _, held := range benchHeld {
		b.Run(heldName(held), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "claims.json")
			keys := benchKeys(held)
			claims := benchClaims()
			doc := struct {
				Claims map[string]Claim `json:"claims"`
			}{Claims: make(map[string]Claim, held)}
			for i, k := range keys {
				doc.Claims[k] = claims[i%len(claims)]
			}
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				doc.Claims[keys[rng.IntN(held)]] = claims[i%len(claims)]
				data, err := json.Marshal(&doc)
				if err != nil {
					b.Fatal(err)
				}
				tmp := path + ".tmp"
				f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				if err := os.Rename(tmp, path); err != nil {
					b.Fatal(err)
				}
				if err := fsyncDir(dir); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkRestart measures Open of a 100k-row log and the heap it keeps
// per row. "held=100k" is a compacted log (100k records, what compaction or
// migration leaves); "held=100k/log=2x" is the worst case just below the
// compaction threshold (200k records: every row written twice).
func BenchmarkRestart(b *testing.B) {
	const held = 100_000
	for _, passes := range []int{1, 2} {
		name := heldName(held)
		if passes == 2 {
			name += "/log=2x"
		}
		b.Run(name, func(b *testing.B) {
			path := statePath(b)
			s := mustOpen(b, path, Options{UnsafeNoFsync: true})
			keys := benchKeys(held)
			for range passes {
				preload(b, s, keys)
			}
			mustClose(b, s)
			fi, _ := os.Stat(path)
			var heap uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				s := mustOpen(b, path, Options{})
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				if s.Len() != held {
					b.Fatalf("loaded %d rows", s.Len())
				}
				heap = after.HeapAlloc - before.HeapAlloc
				mustClose(b, s)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(heap)/held, "heapB/claim")
			b.ReportMetric(float64(fi.Size())/held, "fileB/claim")
		})
	}
}

// BenchmarkCommitGather is BenchmarkCommit at node scale (2,000 held rows,
// one committer per claim worker: 256) with the writer's gather on and off,
// interleaved: what the yields earn in commits per fsync and throughput.
func BenchmarkCommitGather(b *testing.B) {
	const held = 2_000
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("held=2k/fsync=on/gather=%s", onOff(on)), func(b *testing.B) {
			gatherOn = on
			defer func() { gatherOn = true }()
			obs := &countingObserver{}
			s := mustOpen(b, statePath(b), Options{Observer: obs})
			defer s.Close()
			keys := benchKeys(held)
			preload(b, s, keys)
			base := obs.commits.Load()
			b.ResetTimer()
			storm(b, s, keys, b.N, 42)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(float64(b.N)/float64(obs.commits.Load()-base), "puts/fsync")
		})
	}
}

// BenchmarkRestartDecode is Open of a compacted 100k-row log with the fast
// record decoder and with encoding/json alone, interleaved.
func BenchmarkRestartDecode(b *testing.B) {
	const held = 100_000
	path := statePath(b)
	s := mustOpen(b, path, Options{UnsafeNoFsync: true})
	preload(b, s, benchKeys(held))
	mustClose(b, s)
	for _, fast := range []bool{true, false} {
		name := "held=100k/decode=json"
		if fast {
			name = "held=100k/decode=fast"
		}
		b.Run(name, func(b *testing.B) {
			fastDecodeOn = fast
			defer func() { fastDecodeOn = true }()
			for i := 0; i < b.N; i++ {
				s := mustOpen(b, path, Options{})
				if s.Len() != held {
					b.Fatalf("loaded %d rows", s.Len())
				}
				b.StopTimer()
				mustClose(b, s)
				b.StartTimer()
			}
		})
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// BenchmarkRange is one pass over a table of 5,000 rows, as the lease
// pass makes each second.
func BenchmarkRange(b *testing.B) {
	s := mustOpen(b, statePath(b), Options{UnsafeNoFsync: true})
	defer s.Close()
	preload(b, s, benchKeys(5000))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		s.Range(func(string, Claim) bool { n++; return true })
		if n != 5000 {
			b.Fatalf("ranged over %d rows, want 5000", n)
		}
	}
}
