// Package simtest is the one way a test starts the sandboxd emulator
// (pool/sim) over real loopback HTTP: Start builds the server from a
// sim.Config, fills the defaults a test leaves zero, serves it, and closes
// both at the end of the test. An emulator can go down (connections refused,
// open ones cut) and come back on the same address, as a restarted sandboxd
// does. It is test support: only tests and nothing in production import it.
package simtest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// RootToken is the api_token of an emulator whose Config names none.
const RootToken = "simtest-root-token-0123456789abcdef"

// DefaultPool is the one warm pool of an emulator whose Config names none,
// DefaultWarm VMs deep.
var DefaultPool = pool.Key{Template: "default"}

// DefaultWarm is the warm target of DefaultPool.
const DefaultWarm = 4

// Emulator is a sim.Server served over real HTTP on a loopback address
// that stays the same across Down and Up.
type Emulator struct {
	Sim *sim.Server
	// URL is http://127.0.0.1:port, the base URL of a pool.Client.
	URL string

	addr      string
	handler   http.Handler
	connState func(net.Conn, http.ConnState)

	mu  sync.Mutex
	srv *httptest.Server // nil while down
}

// Option adjusts how Start serves the emulator.
type Option func(*options)

type options struct {
	front     func(*sim.Server) http.Handler
	connState func(net.Conn, http.ConnState)
}

// Front serves what front builds in front of the emulator (a recorder, a
// fault, an extra route) instead of its bare Handler. front is called once,
// before the server takes its first connection.
func Front(front func(*sim.Server) http.Handler) Option {
	return func(o *options) { o.front = front }
}

// ConnState is the server's http.Server.ConnState hook, to follow the
// client connections.
func ConnState(f func(net.Conn, http.ConnState)) Option {
	return func(o *options) { o.connState = f }
}

// Start builds the emulator from cfg and serves it. A zero RootToken is
// RootToken and nil Pools is DefaultPool with DefaultWarm VMs; every other
// field is the test's, as sim.New reads it (ColdLatency 0 is sim's default,
// not none). At the end of the test the server stops and the emulator is
// closed; an error from its Close (saving StatePath) fails the test.
func Start(t testing.TB, cfg sim.Config, opts ...Option) *Emulator {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.RootToken == "" {
		cfg.RootToken = RootToken
	}
	if cfg.Pools == nil {
		cfg.Pools = map[pool.Key]int{DefaultPool: DefaultWarm}
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	e := &Emulator{Sim: s, handler: s.Handler(), connState: o.connState}
	if o.front != nil {
		e.handler = o.front(s)
	}
	// Closed before anything can fail below: the emulator's reaper never
	// outlives the test.
	t.Cleanup(func() {
		e.Down()
		if err := s.Close(); err != nil {
			t.Errorf("sim.Close: %v", err)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	e.addr = ln.Addr().String()
	e.URL = "http://" + e.addr
	e.serve(ln)
	return e
}

func (e *Emulator) serve(ln net.Listener) {
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: e.handler, ConnState: e.connState}}
	srv.Start()
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
}

// Down stops serving, as a sandboxd that went away: the listener closes, so
// new connections are refused, and every open connection is cut. It
// returns once every handler has returned. A no-op while down.
func (e *Emulator) Down() {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv != nil {
		// Cut first: Close alone would wait for the clients' requests.
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Up serves the emulator again on the same address, as a restarted
// sandboxd. It fails the test if that address was taken meanwhile.
func (e *Emulator) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		t.Fatalf("re-listen on %s: %v", e.addr, err)
	}
	e.serve(ln)
}

// CloseClientConnections cuts every open connection and keeps serving.
func (e *Emulator) CloseClientConnections() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		e.srv.CloseClientConnections()
	}
}

// Client is a pool.Client of the emulator: o with BaseURL set to URL when
// o leaves it empty. Its idle connections close at the end of the test,
// before the emulator's server does.
func (e *Emulator) Client(t testing.TB, o pool.ClientOptions) *pool.Client {
	t.Helper()
	if o.BaseURL == "" {
		o.BaseURL = e.URL
	}
	c, err := pool.NewClient(o)
	if err != nil {
		t.Fatalf("pool.NewClient: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}
