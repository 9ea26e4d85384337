package pool_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestGarbageBodyIsBadResponseAndNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "list", Mode: "garbage", Count: 1})
	_, err := h.node.List(ctx(t), pool.ListOptions{})
	h.err(err)
	if !errors.Is(err, pool.ErrBadResponse) || pool.IsRetryable(err) {
		t.Fatalf("err = %v: want ErrBadResponse, not retryable", err)
	}
	if n := h.count("list"); n != 1 {
		t.Errorf("lists sent = %d, want 1", n)
	}
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "garbage", Count: 1})
	_, err = h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	if !errors.Is(h.err(err), pool.ErrBadResponse) {
		t.Fatalf("claim: err = %v, want ErrBadResponse", err)
	}
}

func TestClaimWithNeitherIDNorRedirectIsBadResponse(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "missing-id", Count: 1})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	h.err(err)
	if !errors.Is(err, pool.ErrBadResponse) || errors.Is(err, pool.ErrCapacity) {
		t.Fatalf("err = %v: want ErrBadResponse and not ErrCapacity", err)
	}
}

func TestResetMidResponseIsARetryableTransportError(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "reset", Count: 1})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	h.err(err)
	var he *pool.HTTPError
	if err == nil || !pool.IsRetryable(err) || errors.As(err, &he) || errors.Is(err, pool.ErrBadResponse) {
		t.Fatalf("err = %v: want a retryable transport error", err)
	}
	if n := h.count("claim"); n != 1 {
		t.Errorf("claims sent = %d: a claim is never retried", n)
	}

	h.sim.InjectFault(sim.Fault{Verb: "list", Mode: "reset", Count: 1})
	if _, err := h.node.List(ctx(t), pool.ListOptions{}); h.err(err) != nil {
		t.Fatalf("list after one reset: %v, want the retry to succeed", err)
	}
	if n := h.count("list"); n != 2 {
		t.Errorf("lists sent = %d, want 2", n)
	}
}

func TestBodyOverTheLimitIsBadResponse(t *testing.T) {
	c := stub(t, 200, `{"pools":[],"x":"`+strings.Repeat("a", 2<<20)+`"}`)
	_, err := c.Info(ctx(t))
	if !errors.Is(err, pool.ErrBadResponse) || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v, want ErrBadResponse for the size", err)
	}
	if len(err.Error()) > 300 {
		t.Errorf("error is %d bytes: the body leaked into it", len(err.Error()))
	}
}

func TestNonObjectBodyIsBadResponse(t *testing.T) {
	for _, body := range []string{"null", "[]", "", `"sb_1"`} {
		_, err := stub(t, 200, body).List(ctx(t), pool.ListOptions{})
		if !errors.Is(err, pool.ErrBadResponse) {
			t.Errorf("body %q: err = %v, want ErrBadResponse", body, err)
		}
	}
}

func TestClaimWithIDButNoTokenIsBadResponseThatKeepsTheID(t *testing.T) {
	resp, err := stub(t, 200, `{"id":"sb_1","owner_addr":"10.0.0.1:7777"}`).Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	if !errors.Is(err, pool.ErrBadResponse) || resp.ID != "sb_1" {
		t.Fatalf("resp.ID=%q err=%v: want the id back with ErrBadResponse (the VM exists)", resp.ID, err)
	}
}

func TestNonJSONErrorBodyBecomesAShortExcerpt(t *testing.T) {
	page := "<html><body>" + strings.Repeat("Bad Gateway ", 100) + "</body></html>"
	_, err := stub(t, 502, page).Info(ctx(t))
	var he *pool.HTTPError
	if !errors.As(err, &he) || he.Status != 502 || !pool.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable HTTPError 502", err)
	}
	if len(he.Message) > 100 || !strings.HasPrefix(he.Message, "<html>") {
		t.Errorf("message %q: want a short excerpt", he.Message)
	}
}

func TestA3xxIsNotFollowed(t *testing.T) {
	ts := httptest.NewServer(http.RedirectHandler("http://203.0.113.1/steal", http.StatusTemporaryRedirect))
	t.Cleanup(ts.Close)
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: ts.URL, Token: nodeToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	_, err = c.Info(ctx(t))
	var he *pool.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v: a redirect must surface, not be followed with the bearer token", err)
	}
}

// A 2xx listing without its sandboxes array is a bad answer, never an
// empty node: read as empty, it would drop every reloaded claim.
func TestListingWithoutSandboxesArrayIsBadResponse(t *testing.T) {
	for _, body := range []string{`{}`, `{"sandboxes":null}`, `{"items":[]}`} {
		_, err := stub(t, 200, body).List(ctx(t), pool.ListOptions{})
		if !errors.Is(err, pool.ErrBadResponse) {
			t.Errorf("body %s: err = %v, want ErrBadResponse", body, err)
		}
	}
	rows, err := stub(t, 200, `{"sandboxes":[]}`).List(ctx(t), pool.ListOptions{})
	if err != nil || rows == nil || len(rows) != 0 {
		t.Errorf("an empty array: rows %v, err %v; want an empty node", rows, err)
	}
}

// Older servers ignore the filters: the client applies them to the answer.
func TestListFiltersTheAnswerOfAServerThatIgnoresFilters(t *testing.T) {
	body := `{"sandboxes":[{"id":"sb_1","claim_ref":"ns/a","metadata":{"managed-by":"vk-sandbox"}},{"id":"sb_2","claim_ref":"ns/a"},{"id":"sb_3","claim_ref":"ns/b","metadata":{"managed-by":"vk-sandbox"}}]}`
	rows, err := stub(t, 200, body).List(ctx(t), pool.ListOptions{ClaimRef: "ns/a", Metadata: map[string]string{"managed-by": "vk-sandbox"}})
	if err != nil || len(rows) != 1 || rows[0].ID != "sb_1" {
		t.Fatalf("rows %v, err %v; want only sb_1", rows, err)
	}
}

func TestRenewAnswerWithoutDeadlineIsBadResponse(t *testing.T) {
	_, err := stub(t, 200, `{}`).Renew(ctx(t), "sb_1", "sandbox-token-1234", 60)
	if !errors.Is(err, pool.ErrBadResponse) {
		t.Fatalf("err = %v, want ErrBadResponse", err)
	}
}

// Labels outside sandboxd's bounds are refused before anything is sent.
func TestClaimWithMetadataOutOfBoundsIsRefusedLocally(t *testing.T) {
	h := newHarness(t, sim.Config{})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default", Metadata: map[string]string{"a=b": "v"}})
	if err == nil || h.count("claim") != 0 {
		t.Fatalf("err %v, claims sent %d; want a local refusal", err, h.count("claim"))
	}
}
