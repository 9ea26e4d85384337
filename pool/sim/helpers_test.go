package sim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	rootToken   = "root-tok-5d1e-secret"
	tenantToken = "tenant-tok-a77c-secret"
	otherToken  = "tenant-tok-93b0-secret"
	tenantName  = "acme"
	otherName   = "globex"
)

// defaultKey is the pool every test node has. The answers name it with the
// server's default axes filled in (fullKey).
var (
	defaultKey = pool.Key{Template: "default"}
	fullKey    = pool.Key{Template: "default", Net: "none", Size: "small"}
)

// node is an emulator behind a real HTTP server, spoken to with raw HTTP
// so that the wire format itself is what is checked.
type node struct {
	t   *testing.T
	sim *sim.Server
	ts  *httptest.Server
}

func newNode(t *testing.T, cfg sim.Config) *node {
	t.Helper()
	if cfg.RootToken == "" {
		cfg.RootToken = rootToken
	}
	if cfg.TenantTokens == nil {
		cfg.TenantTokens = map[string]string{tenantToken: tenantName, otherToken: otherName}
	}
	if cfg.Pools == nil {
		cfg.Pools = map[pool.Key]int{defaultKey: 4}
	}
	if cfg.ColdLatency == 0 {
		cfg.ColdLatency = -1
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &node{t: t, sim: s, ts: ts}
}

// do sends one request and returns the status and body.
func (n *node) do(method, path, token string, body any) (int, []byte) {
	n.t.Helper()
	return do(n.t, n.ts.Client(), n.ts.URL, method, path, token, body)
}

func do(t *testing.T, hc *http.Client, base, method, path, token string, body any) (int, []byte) {
	t.Helper()
	resp, data := send(t, hc, base, method, path, token, body)
	return resp.StatusCode, data
}

// send is do with the whole response, for the tests that read headers.
func (n *node) send(method, path, token string, body any) (*http.Response, []byte) {
	n.t.Helper()
	return send(n.t, n.ts.Client(), n.ts.URL, method, path, token, body)
}

func send(t *testing.T, hc *http.Client, base, method, path, token string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, data
}

// claim makes a tenant claim of the default pool that must succeed.
func (n *node) claim(ref string, ttl int64) pool.ClaimResponse {
	n.t.Helper()
	return n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", TTLSeconds: ttl, ClaimRef: ref})
}

// claimWith makes a claim that must succeed with an id.
func (n *node) claimWith(token string, req pool.ClaimRequest) pool.ClaimResponse {
	n.t.Helper()
	status, body := n.do("POST", "/v1/claim", token, req)
	if status != 200 {
		n.t.Fatalf("claim %s: %d %s", req.ClaimRef, status, body)
	}
	var r pool.ClaimResponse
	if err := json.Unmarshal(body, &r); err != nil || r.ID == "" {
		n.t.Fatalf("claim %s: %q: %v", req.ClaimRef, body, err)
	}
	return r
}

// list is GET /v1/sandboxes (with query) that must answer 200.
func (n *node) list(token, query string) []pool.Sandbox {
	n.t.Helper()
	status, body := n.do("GET", "/v1/sandboxes"+query, token, nil)
	var l pool.SandboxList
	if status != 200 || json.Unmarshal(body, &l) != nil || l.Sandboxes == nil {
		n.t.Fatalf("list%s: %d %s", query, status, body)
	}
	return l.Sandboxes
}

// info is a root GET /v1/info that must answer 200.
func (n *node) info() pool.Info {
	n.t.Helper()
	status, body := n.do("GET", "/v1/info", rootToken, nil)
	var info pool.Info
	if status != 200 || json.Unmarshal(body, &info) != nil {
		n.t.Fatalf("info: %d %s", status, body)
	}
	return info
}

func ids(rows []pool.Sandbox) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// errorBody asserts body is {"error": "<non-empty>"}.
func errorBody(t *testing.T, what string, body []byte) {
	t.Helper()
	var eb pool.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
		t.Errorf("%s: error body %q is not {\"error\": ...}", what, body)
	}
}

func hibernated(n *node, id string) bool {
	for _, sb := range n.sim.Sandboxes() {
		if sb.ID == id {
			return sb.Hibernated
		}
	}
	n.t.Fatalf("sandbox %s is gone", id)
	return false
}

// upgrade dials the emulator and asks for the relay with raw HTTP. It
// returns the answer and, after a 101, the connection and its reader.
func (n *node) upgrade(id, token, port string, hdr map[string]string) (*http.Response, *net.TCPConn, *bufio.Reader) {
	n.t.Helper()
	c, err := net.Dial("tcp", n.ts.Listener.Addr().String())
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "GET /v1/sandboxes/%s/ports/%s HTTP/1.1\r\nHost: sim\r\n", id, port)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		n.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		n.t.Fatalf("relay answer: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, c.(*net.TCPConn), br
}

var tcpUpgrade = map[string]string{"Upgrade": "tcp", "Connection": "Upgrade"}

func renew(t *testing.T, n *node, id, token string, body any) (int, pool.RenewResponse, []byte) {
	t.Helper()
	status, data := n.do("POST", "/v1/sandboxes/"+id+"/renew", token, body)
	var r pool.RenewResponse
	if status == 200 && (json.Unmarshal(data, &r) != nil || r.Deadline.IsZero()) {
		t.Fatalf("renew %s: 200 with body %s", id, data)
	}
	return status, r, data
}
