package e2e

import (
	"context"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The real binary's /metrics moves with the work it does (the telemetry contract (docs/observability.md)):
// three Pods claimed, one bare Pod deleted (release), one Pod whose owner
// is alive deleted (preserve). Each asserted series is read before and
// after, so a series stuck at a constant, or absent, fails the test.
func TestMetricsMoveWithClaimsAndDecisions(t *testing.T) {
	args, scrapeURL := metricsArgs(t)
	base := strings.TrimSuffix(scrapeURL, "/metrics")
	n := startNode(t, sim.Config{}, args...)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, base+path); code != http.StatusOK {
			t.Errorf("GET %s on node %s = %d %q, want 200", path, n.Name, code, body)
		}
	}
	before := scrape(t, scrapeURL)

	ns := newNamespace(t)
	owner := createOwner(t, ns, "keep")
	createPod(t, sandboxPod(ns, "owned", n.Name, ownedBy(owner)))
	createPod(t, sandboxPod(ns, "bare-a", n.Name))
	createPod(t, sandboxPod(ns, "bare-b", n.Name))
	for _, p := range []string{"owned", "bare-a", "bare-b"} {
		waitRunning(t, ns, p)
	}
	held := waitSeries(t, scrapeURL, "three claims held", func(s series) bool {
		return s.get("vksandbox_claims", "state", "held") == before.get("vksandbox_claims", "state", "held")+3
	})
	deletePod(t, ns, "bare-a") // bare Pod: release
	deletePod(t, ns, "owned")  // owner alive: preserve
	after := waitSeries(t, scrapeURL, "one release and one preserve decision", func(s series) bool {
		return s.delta(before, "vksandbox_decisions_total", "kind", "release", "reason", "bare-pod") == 1 &&
			s.delta(before, "vksandbox_decisions_total", "kind", "preserve", "reason", "owner-alive") == 1
	})

	type want struct {
		what   string
		name   string
		labels []string
		check  func(d float64) bool
		expect string
	}
	exactly := func(n float64) func(float64) bool { return func(d float64) bool { return d == n } }
	atLeast := func(n float64) func(float64) bool { return func(d float64) bool { return d >= n } }
	for _, w := range []want{
		{"claim latency count, outcome running", "vksandbox_claim_duration_seconds_count", []string{"outcome", "running"}, exactly(3), "+3"},
		{"claim latency +Inf bucket, outcome running", "vksandbox_claim_duration_seconds_bucket", []string{"outcome", "running", "le", "+Inf"}, exactly(3), "+3"},
		{"sandboxd claim 200s", "vksandbox_sandboxd_requests_total", []string{"verb", "claim", "code", "200"}, exactly(3), "+3"},
		{"sandboxd release 204s", "vksandbox_sandboxd_requests_total", []string{"verb", "release", "code", "204"}, exactly(1), "+1"},
		{"sandboxd claim latency count", "vksandbox_sandboxd_request_duration_seconds_count", []string{"verb", "claim"}, exactly(3), "+3"},
		{"store fsync count", "vksandbox_store_fsync_duration_seconds_count", nil, atLeast(1), ">= +1"},
		{"records committed (3 claims, 1 release)", "vksandbox_store_commit_batch_size_sum", nil, atLeast(4), ">= +4"},
		{"store bytes", "vksandbox_store_commit_bytes_total", nil, atLeast(1), "> 0"},
		{"release decision", "vksandbox_decisions_total", []string{"kind", "release", "reason", "bare-pod"}, exactly(1), "+1"},
		{"preserve decision", "vksandbox_decisions_total", []string{"kind", "preserve", "reason", "owner-alive"}, exactly(1), "+1"},
		// virtual-kubelet's queues and client-go: 3 creates and 2 deletes
		// went through the sync queue, and each Running was a status push.
		{"virtual-kubelet sync queue adds", "vksandbox_vk_queue_adds_total", []string{"queue", "syncPodsFromKubernetes"}, atLeast(3), ">= +3"},
		{"virtual-kubelet sync queue items done", "vksandbox_vk_queue_item_duration_seconds_count", []string{"queue", "syncPodsFromKubernetes"}, atLeast(3), ">= +3"},
		{"virtual-kubelet status queue adds", "vksandbox_vk_queue_adds_total", []string{"queue", "syncPodStatusFromProvider"}, atLeast(3), ">= +3"},
		{"Pod status updates through client-go", "rest_client_requests_total", []string{"method", "PUT", "code", "200"}, atLeast(3), ">= +3"},
		{"client-go request latency", "rest_client_request_duration_seconds_count", []string{"verb", "PUT"}, atLeast(3), ">= +3"},
	} {
		if d := after.delta(before, w.name, w.labels...); !w.check(d) {
			t.Errorf("%s: %s%v moved by %v, want %s", w.what, w.name, w.labels, d, w.expect)
		}
	}
	// Gauges: three held at the peak; the preserved claim stays held after
	// its Pod is gone, the released one does not.
	if got := held.get("vksandbox_claims", "state", "held"); got != 3 {
		t.Errorf("vksandbox_claims{state=held} = %v with three Pods Running, want 3", got)
	}
	if got := after.get("vksandbox_claims", "state", "held"); got != 2 {
		t.Errorf("vksandbox_claims{state=held} = %v after one release and one preserve, want 2", got)
	}
	for _, st := range []string{"quarantined", "tentative"} {
		if !after.has("vksandbox_claims", "state", st) || after.get("vksandbox_claims", "state", st) != 0 {
			t.Errorf("vksandbox_claims{state=%s} = %v (present %v), want 0 and present", st, after.get("vksandbox_claims", "state", st), after.has("vksandbox_claims", "state", st))
		}
	}
	if !after.has("vksandbox_queue_depth", "shard", "0") {
		t.Error("vksandbox_queue_depth{shard=\"0\"} is not exposed")
	}
	if after.get("vksandbox_pipeline_shards") < 1 || after.get("vksandbox_pipeline_workers_per_shard") < 1 {
		t.Errorf("pipeline shape gauges: shards %v, workers/shard %v; want both >= 1",
			after.get("vksandbox_pipeline_shards"), after.get("vksandbox_pipeline_workers_per_shard"))
	}
	for _, q := range []string{"syncPodsFromKubernetes", "deletePodsFromKubernetes", "syncPodStatusFromProvider"} {
		if !after.has("vksandbox_vk_queue_items", "queue", q) || !after.has("vksandbox_vk_queue_oldest_item_seconds", "queue", q) {
			t.Errorf("queue %s: vksandbox_vk_queue_items or vksandbox_vk_queue_oldest_item_seconds is not exposed", q)
		}
	}
	// The kubelet API's gauges are wired, at 0 with no session open
	// (TestKubectlHostileGuestFreesItsExecSlotAndPortForwardIsCapped
	// moves them).
	for _, kind := range []string{"exec", "port_forward"} {
		if !after.has("vksandbox_kubelet_sessions", "kind", kind) || after.get("vksandbox_kubelet_sessions", "kind", kind) != 0 {
			t.Errorf("vksandbox_kubelet_sessions{kind=%s} = %v (present %v), want 0 and present", kind, after.get("vksandbox_kubelet_sessions", "kind", kind), after.has("vksandbox_kubelet_sessions", "kind", kind))
		}
	}
	if !after.has("vksandbox_exec_buffer_held_bytes") || after.get("vksandbox_exec_buffer_held_bytes") != 0 {
		t.Errorf("vksandbox_exec_buffer_held_bytes = %v (present %v), want 0 and present", after.get("vksandbox_exec_buffer_held_bytes"), after.has("vksandbox_exec_buffer_held_bytes"))
	}
	if after.get("vksandbox_build_info") != 1 || !after.has("vksandbox_build_info", "version", "dev") {
		t.Errorf("vksandbox_build_info: %v, want 1 with version=\"dev\" (an unstamped build)", after["vksandbox_build_info"])
	}
	// HTTP client metrics of the sandboxd client would repeat
	// vksandbox_sandboxd_*; it makes none.
	if n := after.names("http_client_"); len(n) != 0 {
		t.Errorf("http_client_* families reach /metrics: %v", n)
	}
	// The exposed vksandbox_* names, for the dashboard and docs.
	t.Logf("exposed vksandbox series names:\n  %s", strings.Join(after.names("vksandbox_"), "\n  "))
}

// series is one text-format scrape: metric name → label sets → value.
type series map[string][]sampleLine

type sampleLine struct {
	labels map[string]string
	value  float64
}

// match sums the samples of name whose labels include every k, v pair.
func (s series) match(name string, kv ...string) (float64, bool) {
	sum, found := 0.0, false
	for _, l := range s[name] {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && l.labels[kv[i]] == kv[i+1]
		}
		if ok {
			sum, found = sum+l.value, true
		}
	}
	return sum, found
}

func (s series) get(name string, kv ...string) float64 { v, _ := s.match(name, kv...); return v }
func (s series) has(name string, kv ...string) bool    { _, ok := s.match(name, kv...); return ok }

func (s series) delta(before series, name string, kv ...string) float64 {
	return s.get(name, kv...) - before.get(name, kv...)
}

func (s series) names(prefix string) []string {
	var out []string
	for n := range s {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads /metrics in the classic text format.
func scrape(t *testing.T, url string) series {
	t.Helper()
	code, body := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", url, code, body)
	}
	s, err := parseText(body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// waitSeries scrapes until cond holds, and returns that scrape.
func waitSeries(t *testing.T, url, what string, cond func(series) bool) series {
	t.Helper()
	var last series
	testkit.WaitForCtx(t, waitFor, "metrics: "+what, func(context.Context) (bool, error) {
		last = scrape(t, url)
		return cond(last), nil
	})
	return last
}

// parseText parses a text-format scrape with Prometheus's own parser. A
// histogram's samples are filed as name_bucket (with le), name_sum and
// name_count, as the exposition names them.
func parseText(body string) (series, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := series{}
	add := func(name string, m *dto.Metric, v float64, extra ...string) {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		out[name] = append(out[name], sampleLine{labels: labels, value: v})
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					if math.IsInf(b.GetUpperBound(), 1) {
						le, inf = "+Inf", true
					}
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), "le", le)
				}
				if !inf {
					add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf")
				}
				add(name+"_sum", m, h.GetSampleSum())
				add(name+"_count", m, float64(h.GetSampleCount()))
			case m.GetCounter() != nil:
				add(name, m, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				add(name, m, m.GetGauge().GetValue())
			case m.GetUntyped() != nil:
				add(name, m, m.GetUntyped().GetValue())
			}
		}
	}
	return out, nil
}
