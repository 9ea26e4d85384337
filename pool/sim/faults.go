package sim

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Fault makes the next Count requests of Verb misbehave.
type Fault struct {
	// Verb is "claim", "release", "renew", "list", "get", "stats", "info",
	// "exec", "ports", or "" for any.
	Verb string
	// Mode is one of:
	//   "500", "503" (with Retry-After), "429", "409": that status; a 429
	//   carries no Retry-After, as real sandboxd never sends one with it;
	//   "429-retry-after": a 429 with Retry-After, which real sandboxd never
	//   answers, to check that a client does not depend on it;
	//   "garbage": 200 with a body that is not JSON;
	//   "missing-id": 200 {} (a claim with neither id nor redirect);
	//   "reset": headers and part of a body, then the connection closes;
	//   "slow": sleep Delay, then answer normally;
	//   "lose-response": perform the request, then close the connection
	//   mid-response, so a claimed VM exists that the caller never learns of.
	Mode string
	// Count is how many requests it applies to; 0 is until ClearFaults.
	Count int
	// RetryAfter is the Retry-After (whole seconds, rounded up) of "503"
	// and "429-retry-after". 0 is one second, since a real 503 always has
	// one; negative sends none.
	RetryAfter time.Duration
	// Delay is the sleep of "slow".
	Delay time.Duration
}

var faultModes = map[string]bool{
	"500": true, "503": true, "429": true, "429-retry-after": true, "409": true, "garbage": true,
	"missing-id": true, "reset": true, "slow": true, "lose-response": true,
}

// faultSet holds the injected faults, first injected first applied.
type faultSet struct {
	mu     sync.Mutex
	active []*activeFault
	// n is len(active), stored under mu, so that take skips the lock in
	// the usual case of no fault at all. A request racing an InjectFault
	// may miss it, as it could have arrived just before it anyway.
	n atomic.Int32
}

type activeFault struct {
	Fault
	left int // remaining uses; ignored when Count is 0 (until cleared)
}

// InjectFault makes the next f.Count requests of f.Verb misbehave (all of
// them until ClearFaults when Count is 0). An unknown mode panics: a typo
// in a test must not pass as "no fault".
func (s *Server) InjectFault(f Fault) {
	if !faultModes[f.Mode] {
		panic(fmt.Sprintf("sim: unknown fault mode %q", f.Mode))
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.active = append(s.faults.active, &activeFault{Fault: f, left: f.Count})
	s.faults.n.Store(int32(len(s.faults.active)))
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.active = nil
	s.faults.n.Store(0)
}

// take consumes one use of the first fault that matches verb.
func (fs *faultSet) take(verb string) (Fault, bool) {
	if fs.n.Load() == 0 {
		return Fault{}, false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.active {
		if f.Verb != "" && f.Verb != verb {
			continue
		}
		if f.Count > 0 {
			f.left--
			if f.left <= 0 {
				fs.active = append(fs.active[:i], fs.active[i+1:]...)
				fs.n.Store(int32(len(fs.active)))
			}
		}
		return f.Fault, true
	}
	return Fault{}, false
}

// applyFault answers r according to f. h is the real handler, for the modes
// that still perform the request.
func (s *Server) applyFault(f Fault, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	switch f.Mode {
	case "500":
		writeError(w, http.StatusInternalServerError, "injected fault")
	case "503":
		faultRetryAfter(w, f.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, "unavailable")
	case "429":
		writeError(w, http.StatusTooManyRequests, "node at max_claims")
	case "429-retry-after":
		faultRetryAfter(w, f.RetryAfter)
		writeError(w, http.StatusTooManyRequests, "node at max_claims")
	case "409":
		writeError(w, http.StatusConflict, "conflict")
	case "garbage":
		// Starts like JSON so that it gets past a content sniff and fails in
		// the decoder, as a truncated or corrupted document would.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id": <html><body>502 Bad Gateway</body></html>`))
	case "missing-id":
		writeJSON(w, http.StatusOK, struct{}{})
	case "reset":
		breakConnection(w)
	case "slow":
		if sleepCtx(r.Context(), f.Delay) {
			h(w, r)
		}
	case "lose-response":
		h(discardWriter{h: http.Header{}}, r)
		breakConnection(w)
	}
}

func faultRetryAfter(w http.ResponseWriter, d time.Duration) {
	switch {
	case d == 0:
		setRetryAfter(w, defaultRetryAfter)
	case d > 0:
		setRetryAfter(w, d)
	}
}

// partialResponse promises more body than it sends. The client sees a
// status line and then a broken body: a transport error after the request
// was surely received. Closing before any byte would instead let net/http
// silently replay an idempotent request on a reused connection, and the
// fault would never reach the caller.
const partialResponse = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"id\":"

// breakConnection hijacks the connection, writes partialResponse and
// closes it. Without hijack support (HTTP/2) it aborts the stream.
func breakConnection(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_, _ = buf.WriteString(partialResponse)
	_ = buf.Flush()
	_ = conn.Close()
}

// discardWriter swallows a response that is to be "lost".
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
