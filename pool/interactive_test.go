package pool_test

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestExecPassesOutputAndExitCode(t *testing.T) {
	h := newHarness(t, sim.Config{})
	obs := &statuses{}
	c := h.client(nodeToken, func(o *pool.ClientOptions) { o.Observer = obs })
	a := h.claim("ns/a", 60)
	res, err := c.Exec(ctx(t), a.ID, a.Token, pool.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}})
	if h.err(err) != nil || res != (pool.ExecResult{ExitCode: 7, Stdout: "out\n", Stderr: "err\n"}) {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	res, err = c.Exec(ctx(t), a.ID, a.Token, pool.ExecRequest{Argv: []string{"env"}, Env: map[string]string{"K": "V"}, TimeoutSeconds: 5})
	if h.err(err) != nil || res.ExitCode != 0 || res.Stdout != "K=V\n" {
		t.Fatalf("exec env: %+v, %v", res, err)
	}
	if got := obs.list(); !slices.Equal(got, []int{200, 200}) {
		t.Errorf("observed %v, want two 200s", got)
	}
}

// Each refusal keeps its status for the caller to explain, and no error
// carries a token (the harness audits every one).
func TestExecRefusalsKeepTheirStatus(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	b := h.claim("ns/b", 60)
	echo := pool.ExecRequest{Argv: []string{"echo"}}
	check := func(what, token string, req pool.ExecRequest, want int) error {
		t.Helper()
		_, err := h.node.Exec(ctx(t), a.ID, token, req)
		if h.err(err) == nil || pool.StatusCode(err) != want {
			t.Errorf("%s: %v (status %d), want %d", what, err, pool.StatusCode(err), want)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: %q names the token", what, err)
		}
		return err
	}
	if err := check("another sandbox's token", b.Token, echo, 404); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("404 is not ErrNotFound: %v", err)
	}
	check("missing command", a.Token, pool.ExecRequest{Argv: []string{"vim"}}, 400)
	check("too much output", a.Token, pool.ExecRequest{Argv: []string{"head", "-c", "9000000", "/dev/zero"}}, 413)
	check("past its timeout", a.Token, pool.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutSeconds: 1}, 504)
	h.sim.InjectFault(sim.Fault{Verb: "exec", Mode: "503", Count: 1})
	if err := check("out of exec memory", a.Token, echo, 503); pool.RetryAfter(err) != time.Second {
		t.Errorf("503 Retry-After %v, want 1s", pool.RetryAfter(err))
	}
	h.sim.SetGuestUnreachable(a.ID, true)
	check("unreachable guest", a.Token, echo, 502)
	h.sim.SetGuestUnreachable(a.ID, false)
	h.sim.Fail(a.ID)
	check("failed sandbox", a.Token, echo, 409)
	if _, err := h.node.Exec(ctx(t), a.ID, a.Token, pool.ExecRequest{}); err == nil {
		t.Error("an empty argv was sent")
	}
}

// A command is not idempotent: a 5xx is never retried, and an answer
// without exit_code is a bad response, never a success.
func TestExecIsOneAttempt(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	h.sim.InjectFault(sim.Fault{Verb: "exec", Mode: "500", Count: 1})
	if _, err := h.node.Exec(ctx(t), a.ID, a.Token, pool.ExecRequest{Argv: []string{"true"}}); h.err(err) == nil || pool.StatusCode(err) != 500 {
		t.Errorf("exec under a 500: %v", err)
	}
	if n := h.count("exec"); n != 1 {
		t.Errorf("%d exec attempts, want 1", n)
	}
	h.sim.InjectFault(sim.Fault{Verb: "exec", Mode: "missing-id", Count: 1})
	if _, err := h.node.Exec(ctx(t), a.ID, a.Token, pool.ExecRequest{Argv: []string{"true"}}); !errors.Is(h.err(err), pool.ErrBadResponse) {
		t.Errorf("exec answered {}: %v, want ErrBadResponse", err)
	}
}

func TestDialPortRelaysBothWaysWithHalfClose(t *testing.T) {
	h := newHarness(t, sim.Config{GuestPorts: map[int]string{8080: testkit.EchoService(t)}})
	obs := &statuses{}
	c := h.client(nodeToken, func(o *pool.ClientOptions) { o.Observer = obs })
	a := h.claim("ns/a", 60)
	conn, err := c.DialPort(ctx(t), a.ID, a.Token, 8080)
	if h.err(err) != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := make([]byte, 8<<20)
	_, _ = rand.Read(payload)
	testkit.EchoRoundTrip(t, conn, payload)
	if got := obs.list(); !slices.Equal(got, []int{101}) {
		t.Errorf("observed %v, want one 101", got)
	}
}

func TestDialPortRefusals(t *testing.T) {
	h := newHarness(t, sim.Config{GuestPorts: map[int]string{8080: testkit.EchoService(t)}})
	a := h.claim("ns/a", 60)
	b := h.claim("ns/b", 60)
	_, err := h.node.DialPort(ctx(t), a.ID, a.Token, 7000)
	if h.err(err) == nil || pool.StatusCode(err) != 502 || !strings.Contains(err.Error(), "nothing listens on port 7000") {
		t.Errorf("unmapped port: %v", err)
	}
	_, err = h.node.DialPort(ctx(t), a.ID, b.Token, 8080)
	if h.err(err) == nil || !errors.Is(err, pool.ErrNotFound) || strings.Contains(err.Error(), b.Token) {
		t.Errorf("another sandbox's token: %v", err)
	}
	h.sim.Hibernate(a.ID)
	if _, err := h.root.DialPort(ctx(t), a.ID, "", 8080); h.err(err) == nil || pool.StatusCode(err) != 409 {
		t.Errorf("passive relay to a paused sandbox: %v", err)
	}
	h.sim.InjectFault(sim.Fault{Verb: "ports", Mode: "garbage", Count: 1})
	if _, err := h.node.DialPort(ctx(t), a.ID, a.Token, 8080); !errors.Is(h.err(err), pool.ErrBadResponse) {
		t.Errorf("a 200 instead of 101: %v, want ErrBadResponse", err)
	}
	for _, p := range []int{0, 65536} {
		if _, err := h.node.DialPort(ctx(t), a.ID, a.Token, p); err == nil {
			t.Errorf("port %d was dialed", p)
		}
	}
}

// A sandboxd that takes the connection and never answers cannot hold the
// caller past the attempt deadline.
func TestDialPortHandshakeIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	held.Add(1)
	go func() {
		defer held.Done()
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c) // never answers; ends when the client gives up
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); held.Wait() })
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: "http://" + ln.Addr().String(), Token: nodeToken, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DialPort(ctx(t), "sb_1", "sandbox-token-secret-0123456789abcdef", 80)
	if err == nil || !pool.IsRetryable(err) || strings.Contains(err.Error(), "sandbox-token-secret") {
		t.Errorf("hung upgrade: %v, want a transport error without the token", err)
	}
}

func TestStatsIsRootOnly(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	h.sim.SetMemUsed(a.ID, 64<<20)
	st, err := h.root.Stats(ctx(t), a.ID)
	if h.err(err) != nil || st.ID != a.ID || !st.MemUsedMeasured || st.MemUsedBytes != 64<<20 || st.MemTotalBytes == 0 {
		t.Fatalf("root stats: %+v, %v", st, err)
	}
	if h.node.Tenant() {
		t.Fatal("a fresh client reports a tenant token")
	}
	if _, err := h.node.Stats(ctx(t), a.ID); !errors.Is(h.err(err), pool.ErrForbidden) || !h.node.Tenant() {
		t.Errorf("tenant stats: %v, Tenant %v; want ErrForbidden and Tenant", err, h.node.Tenant())
	}
	h.sim.InjectFault(sim.Fault{Verb: "stats", Mode: "garbage", Count: 1})
	if _, err := h.root.Stats(ctx(t), a.ID); !errors.Is(h.err(err), pool.ErrBadResponse) {
		t.Errorf("garbage stats: %v", err)
	}
	if n := h.count("stats"); n != 3 {
		t.Errorf("%d stats requests, want 3 (one attempt each)", n)
	}
}
