package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

// R1 plumbing: a vk-sandbox node whose emulator sits behind a recorder,
// SIGKILL with a settled emulator, and a lock-free read of the state file.

// r1Recorder wraps the emulator's handler. It reports every successful
// release together with the claim_ref the sandbox carried just before it
// went, so the test can judge the release against the owner's liveness.
type r1Recorder struct {
	sim       *sim.Server
	next      http.Handler
	onRelease func(id, claimRef string)

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open client connections (vk-sandbox's)

	logPath string // the emulator's request log: one line per request, claim_ref and id included
}

func (r *r1Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id, ok := r1ReleaseID(req)
	if !ok {
		r.next.ServeHTTP(w, req)
		return
	}
	ref := ""
	for _, s := range r.sim.Sandboxes() {
		if s.ID == id {
			ref = podKeyOf(s)
		}
	}
	sw := &r1StatusWriter{ResponseWriter: w, code: http.StatusOK}
	r.next.ServeHTTP(sw, req)
	if sw.code == http.StatusNoContent {
		r.onRelease(id, ref)
	}
}

// connState tracks connections: a connection reaches StateClosed only after
// its last handler returned, so "no open connection" after a kill means the
// emulator finished every request the dead process had sent.
func (r *r1Recorder) connState(c net.Conn, s http.ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch s {
	case http.StateNew:
		r.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(r.conns, c)
	}
}

func (r *r1Recorder) openConns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

func r1ReleaseID(req *http.Request) (string, bool) {
	if req.Method != http.MethodPost {
		return "", false
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v1/sandboxes/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/release")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

type r1StatusWriter struct {
	http.ResponseWriter
	code int
}

func (w *r1StatusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *r1StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// startR1Node is startNode with the emulator behind an r1Recorder. It does
// not wait for Ready (the caller does, once).
func startR1Node(t *testing.T, simCfg sim.Config, onRelease func(id, claimRef string), extraArgs ...string) (*vkNode, *r1Recorder) {
	t.Helper()
	simCfg.RootToken = rootToken
	logPath := filepath.Join(t.TempDir(), "sandboxd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	simCfg.Logger = slog.New(slog.NewJSONHandler(logf, nil))
	var rec *r1Recorder
	srv := simtest.Start(t, simCfg, simtest.Front(func(s *sim.Server) http.Handler {
		rec = &r1Recorder{sim: s, next: s.Handler(), onRelease: onRelease, conns: map[net.Conn]struct{}{}, logPath: logPath}
		return rec
	}), simtest.ConnState(func(c net.Conn, st http.ConnState) { rec.connState(c, st) }))
	n := launchNode(t, srv, rootToken, nil, extraArgs)
	return n, rec
}

// r1Kill SIGKILLs vk-sandbox, then cuts its connections and waits until the
// emulator has finished every request it had received: from then on the
// emulator and the state file hold still. A process that had already died
// on its own is an error, not a kill.
func (n *vkNode) r1Kill(rec *r1Recorder) error {
	if err := n.vk.Kill(waitFor); err != nil {
		return err
	}
	n.srv.CloseClientConnections()
	// The killer's goroutine may not fail the test: it returns the error.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	closed, _ := testkit.Eventually(ctx, func(context.Context) (bool, error) { return rec.openConns() == 0, nil })
	if !closed {
		return fmt.Errorf("emulator still serving %d connections of the killed vk-sandbox after %v", rec.openConns(), waitFor)
	}
	return nil
}

// r1Row is one live row of the state file.
type r1Row struct {
	ID, PodUID, OwnerUID string
}

// r1ReadState replays the state file (docs/state-file.md) without taking
// its lock: frames whose checksum does not match (a torn tail the next
// start truncates) are skipped, exactly the records a reload would drop.
// It is read while vk-sandbox is dead, so the file holds still.
func r1ReadState(path string) (map[string]r1Row, error) {
	rows := map[string]r1Row{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const prefix, mid = `{"crc":"`, `","rec":`
	table := crc32.MakeTable(crc32.Castagnoli)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) < len(prefix)+8+len(mid)+1 || !bytes.HasPrefix(b, []byte(prefix)) || b[len(b)-1] != '}' {
			continue
		}
		body := b[len(prefix)+8+len(mid) : len(b)-1]
		if fmt.Sprintf("%08x", crc32.Checksum(body, table)) != string(b[len(prefix):len(prefix)+8]) {
			continue
		}
		var rec struct {
			Op    string `json:"op"`
			Key   string `json:"key"`
			Claim *struct {
				ID       string `json:"id"`
				PodUID   string `json:"podUID"`
				OwnerUID string `json:"ownerUID"`
			} `json:"claim"`
		}
		if err := json.Unmarshal(body, &rec); err != nil {
			return nil, fmt.Errorf("state file %s: a checksummed record does not parse: %v", path, err)
		}
		switch {
		case rec.Op == "del":
			delete(rows, rec.Key)
		case rec.Op == "put" && rec.Claim != nil:
			rows[rec.Key] = r1Row{ID: rec.Claim.ID, PodUID: rec.Claim.PodUID, OwnerUID: rec.Claim.OwnerUID}
		}
	}
	return rows, sc.Err()
}

// r1Settle waits until the emulator holds no sandbox, or the deadline; it
// returns what is left.
func r1Settle(ctx context.Context, s *sim.Server, d time.Duration) []pool.Sandbox {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	testkit.Eventually(ctx, func(context.Context) (bool, error) { return len(s.Sandboxes()) == 0, nil })
	return s.Sandboxes()
}

// r1SettleState waits until the state file at path holds no row, or until
// d has passed; the caller asserts what is left.
func r1SettleState(ctx context.Context, path string, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	testkit.Eventually(ctx, func(context.Context) (bool, error) {
		rows, err := r1ReadState(path)
		return err == nil && len(rows) == 0, nil
	})
}

// r1LogLines returns the lines of the emulator's request log, then of
// every vk-sandbox start's log, that mention needle: the last max of them.
func (n *vkNode) r1LogLines(rec *r1Recorder, needle string, max int) string {
	var out []string
	b, _ := os.ReadFile(rec.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, needle) {
			out = append(out, "[sandboxd] "+line)
		}
	}
	for i, path := range n.vk.LogPaths() {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, needle) {
				out = append(out, fmt.Sprintf("[start %d] %s", i+1, line))
			}
		}
	}
	if len(out) > max { // the newest lines tell where it stopped
		out = append([]string{fmt.Sprintf("[%d earlier lines left out]", len(out)-max)}, out[len(out)-max:]...)
	}
	return strings.Join(out, "\n")
}
