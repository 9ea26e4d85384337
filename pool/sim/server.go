package sim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Server is one emulated sandboxd node. All methods are safe for concurrent
// use.
type Server struct {
	cfg      Config // immutable after New; runtime knobs live below
	log      *slog.Logger
	ix       *index
	faults   faultSet
	counters *counterSet
	traces   traceLog
	mux      *http.ServeMux

	failRate     atomic.Uint64 // math.Float64bits
	maxClaims    atomic.Int64
	capacity     atomic.Pointer[string]
	claimLatency atomic.Int64 // time.Duration

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New builds a Server, loading StatePath if it exists, and starts the
// reaper. Call Close to stop it.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ix, err := newIndex(cfg.Pools, cfg.AddrPrefix, cfg.RefillDelay)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, ix: ix, counters: newCounterSet(),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.StatePath != "" {
		if err := loadState(cfg.StatePath, ix); err != nil {
			return nil, err
		}
	}
	s.SetFailRate(cfg.FailRate)
	s.SetMaxClaims(cfg.MaxClaims)
	s.capacity.Store(&cfg.Capacity)
	s.SetClaimLatency(cfg.ClaimLatency)
	s.mux = s.routes()
	go s.run()
	return s, nil
}

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("POST /v1/claim", s.route(pool.VerbClaim, s.handleClaim))
	m.Handle("POST /v1/sandboxes/{id}/release", s.route(pool.VerbRelease, s.handleRelease))
	m.Handle("GET /v1/sandboxes", s.route(pool.VerbList, s.handleList))
	m.Handle("GET /v1/sandboxes/{id}", s.route(pool.VerbGet, s.handleGet))
	m.Handle("GET /v1/info", s.route(pool.VerbInfo, s.handleInfo))
	m.HandleFunc("GET /metrics", s.handleMetrics)
	return m
}

// Handler serves the protocol.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the reaper and the warm refills and saves the state file.
// Requests still in flight are the HTTP server's to drain.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.ix.close()
		if s.cfg.StatePath != "" {
			s.closeErr = saveState(s.cfg.StatePath, s.ix)
		}
	})
	return s.closeErr
}

// Reaper tick: DESIGN §7 has claims reaped at their deadline; 50ms keeps a
// 1s-lease test quick without a heap of deadlines to maintain.
const (
	reapEvery = 50 * time.Millisecond
	saveEvery = 5 // reaper ticks between state saves
)

func (s *Server) run() {
	defer close(s.done)
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			if gone := s.ix.reap(now); len(gone) > 0 {
				s.log.Info("lease reaped", "ids", gone)
			}
			if s.cfg.StatePath != "" && tick%saveEvery == 0 {
				if err := saveStateIfDirty(s.cfg.StatePath, s.ix); err != nil {
					s.log.Error("save state", "err", err)
				}
			}
		}
	}
}

// SetFailRate sets the share of claims answered 500, clamped to [0,1].
func (s *Server) SetFailRate(f float64) {
	s.failRate.Store(math.Float64bits(min(max(f, 0), 1)))
}

// SetMaxClaims caps live sandboxes; 0 is unlimited.
func (s *Server) SetMaxClaims(n int) { s.maxClaims.Store(int64(max(n, 0))) }

// SetCapacity sets the capacity-miss answer: "429" or "redirect". Any other
// value panics: a typo in a test must not silently test the other mode.
func (s *Server) SetCapacity(mode string) {
	if err := validCapacity(mode); err != nil {
		panic(err)
	}
	s.capacity.Store(&mode)
}

// SetClaimLatency sets the pre-admission latency of every claim.
func (s *Server) SetClaimLatency(d time.Duration) { s.claimLatency.Store(int64(max(d, 0))) }

// Sandboxes is the live index, with tokens (test use).
func (s *Server) Sandboxes() []pool.Sandbox {
	rows := s.ix.list("")
	for i := range rows {
		if r, ok := s.ix.get(rows[i].ID); ok {
			rows[i].Token = r.sb.Token
		}
	}
	return rows
}

// Expire makes a sandbox vanish, as if its lease ended or the node lost it.
func (s *Server) Expire(id string) { s.ix.remove(id) }

// SetDeadline moves a sandbox's lease end; the reaper honours it.
func (s *Server) SetDeadline(id string, t time.Time) { s.ix.setDeadline(id, t) }

// TraceIDs returns the W3C trace ids seen on claim requests, oldest first.
func (s *Server) TraceIDs() []string { return s.traces.snapshot() }

type role int

const (
	roleNone role = iota
	roleNode
	roleRoot
)

func bearer(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

func tokenEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) roleOf(tok string) role {
	switch {
	case tokenEqual(tok, s.cfg.RootToken):
		return roleRoot
	case tokenEqual(tok, s.cfg.NodeToken):
		return roleNode
	}
	return roleNone
}

// traceProp reads the caller's traceparent; the emulator never starts spans.
var traceProp = propagation.TraceContext{}

// route wraps a verb's handler with what every request gets: the verb
// counter, the trace id, fault injection and one log line. It never logs a
// header, so the bearer token cannot reach the log.
func (s *Server) route(verb string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.counters.inc(verb)
		// The log line is all that needs the recorder, the note and (but for
		// claims) the trace id: with logging off, none of it is built.
		logging := s.log.Enabled(r.Context(), slog.LevelInfo)
		var sc trace.SpanContext
		if verb == pool.VerbClaim || logging {
			sc = trace.SpanContextFromContext(traceProp.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		if verb == pool.VerbClaim && sc.HasTraceID() {
			s.traces.add(sc.TraceID().String())
		}
		if !logging {
			s.serve(verb, w, r, h)
			return
		}
		note := &reqNote{}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, note))
		rec := &statusRecorder{ResponseWriter: w}
		fault := s.serve(verb, rec, r, h)
		attrs := append([]slog.Attr{
			slog.String("verb", verb), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("dur", time.Since(start)), slog.String("fault", fault),
		}, note.attrs...)
		if sc.HasTraceID() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// serve answers r with h, or with the next fault injected for verb, and
// returns the fault's mode ("-" for none).
func (s *Server) serve(verb string, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) string {
	if f, ok := s.faults.take(verb); ok {
		s.applyFault(f, w, r, h)
		return f.Mode
	}
	h(w, r)
	return "-"
}

// reqNote lets a handler add fields (claim id, claim_ref) to the request's
// single log line.
type reqNote struct{ attrs []slog.Attr }

type noteKey struct{}

func annotate(r *http.Request, attrs ...slog.Attr) {
	if n, ok := r.Context().Value(noteKey{}).(*reqNote); ok {
		n.attrs = append(n.attrs, attrs...)
	}
}

// statusRecorder keeps the status for the log line. A hijacked (reset)
// response logs status 0.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, pool.ErrorBody{Error: msg})
}
