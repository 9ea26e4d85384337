package sim

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// verbRenew is the one call the pool client names differently; the other
// verbs are pool's.
const verbRenew = "renew"

// Server is one emulated sandboxd node. All methods are safe for concurrent
// use.
type Server struct {
	cfg       Config   // immutable after New; runtime knobs live below
	api       Features // cfg.APIVersion's row of the version table
	log       *slog.Logger
	tracer    trace.Tracer // nil: no server spans
	ix        *index
	tenants   *tenantSet
	ownerAddr string // node-wide owner_addr; "" in none and per-claim modes
	peers     map[string]bool
	faults    faultSet
	counters  *counterSet
	traces    traceLog
	mux       *http.ServeMux
	execMem   execBudget
	relays    relaySet
	guests    guestSet // silkd behind the agent relay (agent.go)

	failRate     atomic.Uint64 // math.Float64bits
	loseAnswer   atomic.Uint64 // math.Float64bits
	maxClaims    atomic.Int64
	capacity     atomic.Pointer[string]
	claimLatency atomic.Int64              // time.Duration
	claimHold    atomic.Pointer[claimHold] // see HoldNextClaims
	mesh         atomic.Bool
	draining     atomic.Bool
	tenantDBDown atomic.Bool
	agentProto   atomic.Int64

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
	ar, err := newAddrRange(cfg.AddrPrefix)
	if err != nil {
		return nil, err
	}
	owner, err := nodeOwnerAddr(cfg, ar)
	if err != nil {
		return nil, err
	}
	api, err := FeaturesOf(cfg.APIVersion)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, api: api, log: cfg.Logger, ownerAddr: owner,
		ix:       newIndex(cfg.Pools, ar, cfg.OwnerAddrMode == ownerAddrPerClaim, cfg.RefillDelay),
		tenants:  newTenantSet(cfg.TenantTokens),
		peers:    map[string]bool{},
		counters: newCounterSet(),
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	for _, t := range cfg.PeerTemplates {
		s.peers[t] = true
	}
	if cfg.StatePath != "" {
		if err := loadState(cfg.StatePath, s.ix); err != nil {
			return nil, err
		}
	}
	s.setFailRate(cfg.FailRate)
	s.SetLoseAnswerRate(cfg.LoseAnswerRate)
	s.SetMaxClaims(cfg.MaxClaims)
	s.capacity.Store(&cfg.Capacity)
	s.SetClaimLatency(cfg.ClaimLatency)
	s.mesh.Store(cfg.Mesh)
	s.draining.Store(cfg.Draining)
	s.tenantDBDown.Store(cfg.TenantDBDown)
	s.execMem.left.Store(cfg.ExecMemory)
	s.initGuests()
	s.mux = s.routes()
	go s.run()
	return s, nil
}

// routes is the route table. A verb the API version lacks is not routed at
// all, so that it is answered as by real sandboxd of that version: the
// plain ServeMux's 404 "404 page not found" (text, not JSON), or 405 for a
// known path with another method.
func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("POST /v1/claim", s.route(pool.VerbClaim, s.handleClaim))
	m.Handle("POST /v1/sandboxes/{id}/release", s.route(pool.VerbRelease, s.handleRelease))
	m.Handle("GET /v1/sandboxes", s.route(pool.VerbList, s.handleList))
	m.Handle("GET /v1/sandboxes/{id}", s.route(pool.VerbGet, s.handleGet))
	m.Handle("GET /v1/info", s.route(pool.VerbInfo, s.handleInfo))
	for _, v := range []struct {
		has           bool
		pattern, verb string
		h             http.HandlerFunc
	}{
		{s.api.Renew, "POST /v1/sandboxes/{id}/renew", verbRenew, s.handleRenew},
		{s.api.Stats, "GET /v1/sandboxes/{id}/stats", pool.VerbStats, s.handleStats},
		{s.api.Exec, "POST /v1/sandboxes/{id}/exec", pool.VerbExec, s.handleExec},
		{s.api.Ports, "GET /v1/sandboxes/{id}/ports/{port}", pool.VerbPorts, s.handlePorts},
		{s.api.Agent, "GET /v1/sandboxes/{id}/agent", pool.VerbAgent, s.handleAgent},
	} {
		if v.has {
			m.Handle(v.pattern, s.route(v.verb, v.h))
		}
	}
	m.HandleFunc("GET /metrics", s.handleMetrics)
	m.HandleFunc("GET /healthz", handleHealthz)
	return m
}

// Handler serves the protocol.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the reaper and the warm refills, ends every open ports
// relay and saves the state file. Requests still in flight are the HTTP
// server's to drain; a claim still provisioning finishes at once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.guests.close() // first: an exec's relay ends when its process does
		s.relays.close()
		s.ix.close()
		if s.cfg.StatePath != "" {
			s.closeErr = saveState(s.cfg.StatePath, s.ix)
		}
	})
	return s.closeErr
}

// Claims are reaped at their deadline; a 50ms tick keeps a 1s-lease test
// quick without a heap of deadlines to maintain.
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
