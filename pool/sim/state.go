package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// stateFile is the emulator's own persistence, so that a restarted
// sandboxd-sim still knows the sandboxes (and tokens) it handed out, as a
// real node would. It is not the vk-sandbox claim store and makes none of
// its guarantees: it is rewritten whole, at most every 250ms and on Close.
// Tenants are not in it: they come from the Config on every start.
type stateFile struct {
	Version   int        `json:"version"`
	AddrSeq   uint64     `json:"addr_seq"`
	Sandboxes []stateRow `json:"sandboxes"`
}

// stateRow is one sandbox, its token, tenant, labels and archived flag
// included. OwnerAddr is only set in per-claim mode.
type stateRow struct {
	Sandbox   pool.Sandbox `json:"sandbox"`
	OwnerAddr string       `json:"owner_addr,omitempty"`
}

// Version 2 rows carry tenant, metadata and archived. A version 1 file has
// the same shape without them, so it loads as root's unlabelled sandboxes.
const (
	stateVersion       = 2
	stateVersionLegacy = 1
)

// loadState fills ix from path. A missing file is an empty node.
func loadState(path string, ix *index) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sim: read state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("sim: state file %s is corrupt: %w", path, err)
	}
	if st.Version != stateVersion && st.Version != stateVersionLegacy {
		return fmt.Errorf("sim: state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.addrs.seq = st.AddrSeq
	for _, r := range st.Sandboxes {
		if r.Sandbox.ID == "" || r.Sandbox.Token == "" {
			return fmt.Errorf("sim: state file %s: row without id or token", path)
		}
		if r.Sandbox.ClaimedAt == nil { // list sorts on it
			t := r.Sandbox.Deadline
			r.Sandbox.ClaimedAt = &t
		}
		// Rows written before the axes had defaults meet today's pools.
		r.Sandbox.Key = normalizeKey(r.Sandbox.Key)
		if !ix.perClaim {
			r.OwnerAddr = "" // the node's own address answers for it now
		}
		ix.put(&row{sb: r.Sandbox, ownerAddr: r.OwnerAddr})
	}
	ix.dirty = false
	return nil
}

func saveStateIfDirty(path string, ix *index) error {
	ix.mu.Lock()
	dirty := ix.dirty
	ix.mu.Unlock()
	if !dirty {
		return nil
	}
	return saveState(path, ix)
}

// saveState writes a snapshot atomically: temp file, fsync, rename, fsync
// of the directory, so that a crash leaves the old or the new file whole.
func saveState(path string, ix *index) error {
	ix.mu.Lock()
	st := stateFile{Version: stateVersion, AddrSeq: ix.addrs.seq, Sandboxes: make([]stateRow, 0, len(ix.rows))}
	for _, r := range ix.rows {
		st.Sandboxes = append(st.Sandboxes, stateRow{Sandbox: r.sb, OwnerAddr: r.ownerAddr})
	}
	ix.dirty = false
	ix.mu.Unlock()

	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sim: encode state: %w", err)
	}
	if err := writeFileSync(path, data); err != nil {
		ix.mu.Lock()
		ix.dirty = true // try again next time
		ix.mu.Unlock()
		return fmt.Errorf("sim: save state: %w", err)
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
