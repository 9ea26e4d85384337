package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
)

// r1Disk is the state directory of an R1 run, on a power-cut filesystem
// (internal/powercut): every SIGKILL is also a power cut, so whatever
// vk-sandbox wrote and had not fsynced is lost, or survives in random
// pages or sectors, as on a real disk. A SIGKILL alone keeps the page
// cache, so it cannot tell a durable claim from one that is not.
type r1Disk struct {
	backing, mnt string
	fs           *powercut.FS
	rng          *rand.Rand
	seed         uint64

	cuts, unsynced, kept int // totals over every cut, for the summary
}

// newR1Disk mounts the state directory, or returns nil (and logs why)
// where FUSE cannot be mounted: R1 then runs with SIGKILLs only.
func newR1Disk(t *testing.T, seed uint64) *r1Disk {
	t.Helper()
	if err := powercut.Available(t.TempDir()); err != nil {
		t.Logf("R1: no power cuts, SIGKILL only: %v", err)
		return nil
	}
	d := &r1Disk{backing: t.TempDir(), mnt: t.TempDir(), rng: rand.New(rand.NewPCG(seed, 0x70777263)), seed: seed}
	if err := d.mount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.fs.Unmount(); err != nil {
			t.Errorf("R1 state disk: %v", err)
		}
	})
	return d
}

// statePath is where vk-sandbox keeps its state file on the disk.
func (d *r1Disk) statePath() string { return filepath.Join(d.mnt, "state", "claims.json") }

func (d *r1Disk) mount() error {
	fs, err := powercut.MountAt(d.backing, d.mnt, d.rng.Uint64())
	if err != nil {
		return fmt.Errorf("R1 state disk: mount: %w", err)
	}
	d.fs = fs
	return nil
}

// powerCut cuts the power with a random mode, once vk-sandbox is dead, and
// powers the disk on again: from then on the state path holds exactly what
// survived. It must not be called while vk-sandbox runs.
func (d *r1Disk) powerCut(k int) (string, error) {
	modes := []powercut.Mode{powercut.DropUnsynced, powercut.KeepSomePages, powercut.KeepSomeSectors}
	mode := modes[d.rng.IntN(len(modes))]
	before, seed := d.fs.Stats(), d.fs.Seed()
	if err := d.fs.PowerCut(mode); err != nil {
		return "", fmt.Errorf("kill %d: power cut: %w", k, err)
	}
	after := d.fs.Stats()
	if err := d.fs.Unmount(); err != nil {
		return "", fmt.Errorf("kill %d: unmount after the power cut: %w", k, err)
	}
	if err := d.mount(); err != nil {
		return "", fmt.Errorf("kill %d: %w", k, err)
	}
	d.cuts++
	unsynced, kept := after.UnsyncedSectors-before.UnsyncedSectors, after.KeptSectors-before.KeptSectors
	d.unsynced += unsynced
	d.kept += kept
	return fmt.Sprintf("power cut %s (fs seed %d): unsynced_sectors=%d kept=%d", mode, seed, unsynced, kept), nil
}
