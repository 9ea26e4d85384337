package sim_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// execAs posts an exec and returns the status, the decoded result and the
// raw body.
func (n *node) execAs(id, token string, req pool.ExecRequest) (int, pool.ExecResult, []byte) {
	n.t.Helper()
	status, body := n.do("POST", "/v1/sandboxes/"+id+"/exec", token, req)
	var res pool.ExecResult
	if status == 200 {
		if err := json.Unmarshal(body, &res); err != nil {
			n.t.Fatalf("exec answer %q: %v", body, err)
		}
	}
	return status, res, body
}

func TestExecRunsTheFixedCommands(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	cases := []struct {
		req            pool.ExecRequest
		code           int
		stdout, stderr string
		what           string
	}{
		{req: pool.ExecRequest{Argv: []string{"echo", "hello", "world"}}, stdout: "hello world\n", what: "echo"},
		{req: pool.ExecRequest{Argv: []string{"echo", "-n", "x"}}, stdout: "x", what: "echo -n"},
		{req: pool.ExecRequest{Argv: []string{"false"}}, code: 1, what: "false"},
		{req: pool.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}}, code: 3, stdout: "out\n", stderr: "err\n", what: "sh -c"},
		{req: pool.ExecRequest{Argv: []string{"sh", "-c", "nosuch arg"}}, code: 127, stderr: "sh: nosuch: not found\n", what: "sh unknown"},
		{req: pool.ExecRequest{Argv: []string{"env"}, Env: map[string]string{"B": "2", "A": "1"}}, stdout: "A=1\nB=2\n", what: "env"},
		{req: pool.ExecRequest{Argv: []string{"pwd"}, Cwd: "/srv/app"}, stdout: "/srv/app\n", what: "pwd"},
		{req: pool.ExecRequest{Argv: []string{"head", "-c", "3", "/dev/zero"}}, stdout: "\x00\x00\x00", what: "head zero"},
	}
	for _, c := range cases {
		status, res, body := n.execAs(a.ID, a.Token, c.req)
		if status != 200 || res.ExitCode != c.code || res.Stdout != c.stdout || res.Stderr != c.stderr {
			t.Errorf("%s: %d %s, want exit %d stdout %q stderr %q", c.what, status, body, c.code, c.stdout, c.stderr)
		}
	}
	// Bytes that are not UTF-8 arrive replaced, never as invalid JSON text.
	status, res, body := n.execAs(a.ID, a.Token, pool.ExecRequest{Argv: []string{"head", "-c", "4096", "/dev/urandom"}})
	if status != 200 || !utf8.ValidString(res.Stdout) || !strings.ContainsRune(res.Stdout, utf8.RuneError) {
		t.Errorf("random bytes: %d, %d bytes of stdout, valid %v (body %.80q)", status, len(res.Stdout), utf8.ValidString(res.Stdout), body)
	}
	if c := n.sim.Counters()["exec"]; c != int64(len(cases))+1 {
		t.Errorf("exec counter %d, want %d", c, len(cases)+1)
	}
}

// Every error answer of the spec, each an {"error": ...} body.
func TestExecErrorAnswers(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	b := n.claim("ns/b", 60)
	echo := pool.ExecRequest{Argv: []string{"echo", "hi"}}
	check := func(what, id, token string, req any, want int) {
		t.Helper()
		status, body := n.do("POST", "/v1/sandboxes/"+id+"/exec", token, req)
		if status != want {
			t.Errorf("%s: %d %s, want %d", what, status, body, want)
		}
		errorBody(t, what, body)
	}
	check("no token", a.ID, "", echo, 401)
	check("another sandbox's token", a.ID, b.Token, echo, 404)
	check("the tenant token", a.ID, tenantToken, echo, 404)
	check("unknown id", "sb_0000000000000000", a.Token, echo, 404)
	check("empty argv", a.ID, a.Token, pool.ExecRequest{}, 400)
	check("missing command", a.ID, a.Token, pool.ExecRequest{Argv: []string{"vim"}}, 400)
	check("relative cwd", a.ID, a.Token, pool.ExecRequest{Argv: []string{"pwd"}, Cwd: "srv"}, 400)
	check("unclean cwd", a.ID, a.Token, pool.ExecRequest{Argv: []string{"pwd"}, Cwd: "/srv/../etc"}, 400)
	check("bad body", a.ID, a.Token, "{", 400)
	check("too much output", a.ID, a.Token, pool.ExecRequest{Argv: []string{"head", "-c", fmt.Sprint(pool.MaxExecOutput + 1), "/dev/zero"}}, 413)
	check("output on both streams past the cap", a.ID, a.Token, pool.ExecRequest{Argv: []string{"sh", "-c",
		fmt.Sprintf("head -c %d /dev/zero; head -c 2 /dev/zero >&2", pool.MaxExecOutput-1)}}, 413)
	check("past its timeout", a.ID, a.Token, pool.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutSeconds: 1}, 504)

	n.sim.SetGuestUnreachable(a.ID, true)
	check("unreachable guest", a.ID, a.Token, echo, 502)
	n.sim.SetGuestUnreachable(a.ID, false)
	if status, _, body := n.execAs(a.ID, a.Token, echo); status != 200 {
		t.Errorf("reachable again: %d %s", status, body)
	}
	n.sim.Fail(a.ID)
	check("failed sandbox", a.ID, a.Token, echo, 409)
}

func TestExecWakesAHibernatedSandbox(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	if !n.sim.Hibernate(a.ID) || !hibernated(n, a.ID) {
		t.Fatal("Hibernate did not take")
	}
	if status, _, body := n.execAs(a.ID, a.Token, pool.ExecRequest{Argv: []string{"true"}}); status != 200 {
		t.Fatalf("exec: %d %s", status, body)
	}
	if hibernated(n, a.ID) {
		t.Error("the exec did not wake the sandbox")
	}
}

// A node out of buffered-exec memory answers 503 with Retry-After: 1 (here
// it never has the 8 MiB one command holds).
func TestExecMemoryExhaustedIs503(t *testing.T) {
	n := newNode(t, sim.Config{ExecMemory: pool.MaxExecOutput - 1})
	a := n.claim("ns/a", 60)
	resp, body := n.send("POST", "/v1/sandboxes/"+a.ID+"/exec", a.Token, pool.ExecRequest{Argv: []string{"true"}})
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("exec without memory: %d %s, Retry-After %q; want 503 and 1", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	errorBody(t, "503", body)
}

// Bytes go both ways, and a half-close from the client reaches the guest,
// whose own half-close comes back as EOF: the whole payload is echoed.
func TestPortsRelayCarriesBytesBothWaysWithHalfClose(t *testing.T) {
	guest := testkit.EchoService(t)
	n := newNode(t, sim.Config{GuestPorts: map[int]string{8080: guest}})
	a := n.claim("ns/a", 60)
	resp, c, br := n.upgrade(a.ID, a.Token, "8080", tcpUpgrade)
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "tcp" {
		t.Fatalf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	payload := make([]byte, 4<<20)
	_, _ = rand.Read(payload)
	go func() {
		_, _ = c.Write(payload)
		_ = c.CloseWrite()
	}()
	got, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo: %d of %d bytes, equal %v, err %v", len(got), len(payload), bytes.Equal(got, payload), err)
	}
	if c := n.sim.Counters()["ports"]; c != 1 {
		t.Errorf("ports counter %d, want 1", c)
	}
}

// GuestLoopback: guest port P is 127.0.0.1:P on the host.
func TestPortsRelayLoopbackMapsThePortAsIs(t *testing.T) {
	guest := testkit.EchoService(t)
	n := newNode(t, sim.Config{GuestLoopback: true})
	a := n.claim("ns/a", 60)
	_, port, _ := net.SplitHostPort(guest)
	resp, c, br := n.upgrade(a.ID, a.Token, port, tcpUpgrade)
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	_, _ = c.Write([]byte("ping"))
	_ = c.CloseWrite()
	if got, _ := io.ReadAll(br); string(got) != "ping" {
		t.Errorf("echo %q, want ping", got)
	}
}

func TestPortsRelayErrorAnswers(t *testing.T) {
	guest := testkit.EchoService(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	n := newNode(t, sim.Config{GuestPorts: map[int]string{8080: guest, 9090: closedAddr}})
	a := n.claim("ns/a", 60)
	b := n.claim("ns/b", 60)
	check := func(what, id, token, port string, hdr map[string]string, want int) string {
		t.Helper()
		resp, _, _ := n.upgrade(id, token, port, hdr)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, body, want)
		}
		errorBody(t, what, body)
		return string(body)
	}
	check("port 0", a.ID, a.Token, "0", tcpUpgrade, 400)
	check("port 70000", a.ID, a.Token, "70000", tcpUpgrade, 400)
	check("port x", a.ID, a.Token, "x", tcpUpgrade, 400)
	check("no token", a.ID, "", "8080", tcpUpgrade, 401)
	check("another sandbox's token", a.ID, b.Token, "8080", tcpUpgrade, 404)
	check("the tenant token", a.ID, tenantToken, "8080", tcpUpgrade, 404)
	check("unknown id", "sb_0000000000000000", rootToken, "8080", tcpUpgrade, 404)
	check("no upgrade header", a.ID, a.Token, "8080", nil, 426)
	check("upgrade without Connection", a.ID, a.Token, "8080", map[string]string{"Upgrade": "tcp"}, 426)
	if body := check("an unmapped port", a.ID, a.Token, "7000", tcpUpgrade, 502); !strings.Contains(body, "nothing listens on port 7000") {
		t.Errorf("unmapped port: %s", body)
	}
	check("a port whose listener is gone", a.ID, a.Token, "9090", tcpUpgrade, 502)
	n.sim.SetGuestUnreachable(a.ID, true)
	check("unreachable guest", a.ID, a.Token, "8080", tcpUpgrade, 502)
	n.sim.SetGuestUnreachable(a.ID, false)
	n.sim.Fail(a.ID)
	check("failed sandbox", a.ID, a.Token, "8080", tcpUpgrade, 409)
}

// The sandbox's token wakes a hibernated sandbox; the root token's relay is
// passive: it never wakes one, and is refused while the sandbox is paused.
func TestPortsRelayRootIsPassive(t *testing.T) {
	guest := testkit.EchoService(t)
	n := newNode(t, sim.Config{GuestPorts: map[int]string{8080: guest}})
	a := n.claim("ns/a", 60)
	if resp, _, _ := n.upgrade(a.ID, rootToken, "8080", tcpUpgrade); resp.StatusCode != 101 {
		t.Errorf("root relay to an awake sandbox: %d", resp.StatusCode)
	}
	n.sim.Hibernate(a.ID)
	if resp, _, _ := n.upgrade(a.ID, rootToken, "8080", tcpUpgrade); resp.StatusCode != 409 {
		t.Errorf("root relay to a paused sandbox: %d, want 409", resp.StatusCode)
	}
	if !hibernated(n, a.ID) {
		t.Error("the root relay woke the sandbox")
	}
	if resp, _, _ := n.upgrade(a.ID, a.Token, "8080", tcpUpgrade); resp.StatusCode != 101 {
		t.Errorf("sandbox-token relay to a paused sandbox: %d, want 101", resp.StatusCode)
	}
	if hibernated(n, a.ID) {
		t.Error("the sandbox-token relay did not wake the sandbox")
	}
}

// Close ends relays that are still open: a hijacked connection is no
// longer the HTTP server's to close.
func TestCloseEndsOpenRelays(t *testing.T) {
	guest := testkit.EchoService(t)
	n := newNode(t, sim.Config{GuestPorts: map[int]string{8080: guest}})
	a := n.claim("ns/a", 60)
	resp, _, br := n.upgrade(a.ID, a.Token, "8080", tcpUpgrade)
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	if err := n.sim.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("read after Close: %v (want the relay ended)", err)
	}
}

func TestStatsReportsMemoryAndHibernation(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	read := func() pool.Stats {
		t.Helper()
		status, body := n.do("GET", "/v1/sandboxes/"+a.ID+"/stats", rootToken, nil)
		var st pool.Stats
		if status != 200 || json.Unmarshal(body, &st) != nil {
			t.Fatalf("stats: %d %s", status, body)
		}
		return st
	}
	st := read()
	if st.ID != a.ID || st.CPUCount != 1 || st.MemTotalBytes <= 0 || !st.MemUsedMeasured ||
		st.MemUsedBytes != st.MemTotalBytes/4 || st.Hibernated || time.Since(st.MeasuredAt) > time.Minute {
		t.Errorf("awake sandbox: %+v", st)
	}
	n.sim.SetMemUsed(a.ID, 123<<20)
	if st := read(); st.MemUsedBytes != 123<<20 || !st.MemUsedMeasured {
		t.Errorf("after SetMemUsed: %+v", st)
	}
	n.sim.Hibernate(a.ID)
	if st := read(); st.MemUsedMeasured || st.MemUsedBytes != 0 || !st.Hibernated {
		t.Errorf("hibernated: %+v, want unmeasured", st)
	}
	if !hibernated(n, a.ID) {
		t.Error("reading stats woke the sandbox")
	}
}

func TestConfigRejectsBadGuestPortsAndExecMemory(t *testing.T) {
	for what, cfg := range map[string]sim.Config{
		"port 0":          {GuestPorts: map[int]string{0: "127.0.0.1:1"}},
		"port 65536":      {GuestPorts: map[int]string{65536: "127.0.0.1:1"}},
		"address":         {GuestPorts: map[int]string{80: "localhost"}},
		"negative memory": {ExecMemory: -1},
	} {
		cfg.RootToken = rootToken
		if s, err := sim.New(cfg); err == nil {
			_ = s.Close()
			t.Errorf("%s: accepted", what)
		}
	}
}
