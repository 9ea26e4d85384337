package sim_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestMetricsServesCountersAndGaugesAsPrometheusText(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.claim("ns/a", 60)
	n.do("GET", "/v1/sandboxes", tenantToken, nil)
	status, body := n.do("GET", "/metrics", rootToken, nil)
	text := string(body)
	for _, want := range []string{
		"# TYPE sandboxd_sim_requests_total counter",
		`sandboxd_sim_requests_total{counter="claim"} 1`,
		`sandboxd_sim_requests_total{counter="claim_ok"} 1`,
		`sandboxd_sim_requests_total{counter="list"} 1`,
		"sandboxd_sim_claimed 1",
		`sandboxd_sim_requests_total{counter="renew"} 0`,
		`sandboxd_sim_pool_target{template="default",net="none",size="small"} 4`,
	} {
		if status != 200 || !strings.Contains(text, want) {
			t.Errorf("/metrics (%d) lacks %q:\n%s", status, want, text)
		}
	}
}

// By default /metrics is an operator surface; MetricsNoAuth opens it to a
// scraper without a token.
func TestMetricsNoAuthOpensTheScrape(t *testing.T) {
	n := newNode(t, sim.Config{MetricsNoAuth: true})
	for _, tok := range []string{"", tenantToken} {
		if status, body := n.do("GET", "/metrics", tok, nil); status != 200 || !strings.Contains(string(body), "sandboxd_sim_claimed 0") {
			t.Errorf("/metrics with %q: %d", tok, status)
		}
	}
}

func TestRequestLogHasTheClaimButNeverAToken(t *testing.T) {
	var logs testkit.Buffer
	n := newNode(t, sim.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	c := n.claim("ns/a", 60)
	n.do("GET", "/v1/sandboxes/"+c.ID, rootToken, nil)
	n.do("POST", "/v1/sandboxes/"+c.ID+"/renew", c.Token, pool.RenewRequest{TTLSeconds: 60})
	n.do("POST", "/v1/sandboxes/"+c.ID+"/release", c.Token, nil)
	n.do("POST", "/v1/claim", "wrong-token-zzz", pool.ClaimRequest{Template: "default"})

	out := logs.String()
	for _, tok := range []string{rootToken, tenantToken, c.Token, "wrong-token-zzz"} {
		if strings.Contains(out, tok) {
			t.Errorf("log contains a token:\n%s", out)
		}
	}
	if !strings.Contains(out, `"id":"`+c.ID+`"`) || !strings.Contains(out, `"claim_ref":"ns/a"`) {
		t.Errorf("log lacks the claim id or ref:\n%s", out)
	}
}
