package simtest_test

import (
	"errors"
	"net/http"
	"syscall"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

// A Config that names no root token and no pool gets the defaults; one
// that names them keeps its own, and only its own.
func TestStartFillsOnlyWhatTheConfigLeavesZero(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   sim.Config
		token string
		want  map[pool.Key]int
	}{
		{"zero", sim.Config{}, simtest.RootToken, map[pool.Key]int{simtest.DefaultPool: simtest.DefaultWarm}},
		{"named", sim.Config{RootToken: "own-root", Pools: map[pool.Key]int{{Template: "py"}: 1}}, "own-root", map[pool.Key]int{{Template: "py"}: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := simtest.Start(t, tc.cfg)
			info, err := e.Client(t, pool.ClientOptions{Token: tc.token}).Info(t.Context())
			if err != nil {
				t.Fatalf("Info with the root token %q: %v", tc.token, err)
			}
			got := map[pool.Key]int{}
			for _, p := range info.Pools {
				got[pool.Key{Template: p.Key.Template}] = p.Target
			}
			if len(got) != len(tc.want) {
				t.Fatalf("pools %v, want %v", got, tc.want)
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Errorf("pool %v targets %d, want %d (all: %v)", k, got[k], n, got)
				}
			}
		})
	}
}

// Down refuses connections; Up serves the same emulator, with what it
// holds, on the same URL again.
func TestDownRefusesAndUpServesTheSameEmulatorAgain(t *testing.T) {
	e := simtest.Start(t, sim.Config{})
	c := e.Client(t, pool.ClientOptions{Token: simtest.RootToken, Retry: pool.RetryPolicy{MaxAttempts: 1}})
	vm, err := c.Claim(t.Context(), pool.ClaimRequest{Template: simtest.DefaultPool.Template, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	e.Down()
	e.Down() // a no-op while down
	if _, err := c.Get(t.Context(), vm.ID); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Get while down: %v, want connection refused", err)
	}
	e.Up(t)
	if sb, err := c.Get(t.Context(), vm.ID); err != nil || sb.ID != vm.ID {
		t.Fatalf("Get after Up: %+v, %v, want %s", sb, err, vm.ID)
	}
}

// Front puts a handler in front of the emulator: what it answers, the
// client gets; what it passes on, the emulator serves.
func TestFrontServesInFrontOfTheEmulator(t *testing.T) {
	e := simtest.Start(t, sim.Config{}, simtest.Front(func(s *sim.Server) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/", s.Handler())
		mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		return mux
	}))
	c := e.Client(t, pool.ClientOptions{Token: simtest.RootToken, Retry: pool.RetryPolicy{MaxAttempts: 1}})
	if _, err := c.Info(t.Context()); err == nil {
		t.Fatal("Info answered through a front that refuses it")
	}
	if err := c.Healthz(t.Context()); err != nil {
		t.Fatalf("Healthz through the front: %v", err)
	}
}
