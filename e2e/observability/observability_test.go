//go:build observability

package observability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// claimCase is one Pod of the test and the sandboxd fault its first claim
// meets.
type claimCase struct {
	name  string
	fault *sim.Fault
	pod   *corev1.Pod // once Running
}

// Three Pods are claimed through the real binary: one plainly, one whose
// first sandboxd claim answers 500 (retried inside the transaction), one
// whose first claim answers 429 (a capacity miss: the Pod is requeued and
// its next transaction is a new trace linked to the first). Then:
//
//   - /metrics, scraped as OpenMetrics, carries exemplars whose trace-id
//     label is the one the dashboard's trace links and the docs use;
//   - vk-sandbox is sent SIGTERM, and only then is each claim's trace
//     complete in Jaeger (its exporter holds spans for 10 minutes, so they
//     got there by the shutdown flush): the span tree, its attributes, the
//     emulator's server spans in the same trace, the retry and the link;
//   - Prometheus (if installed) stored exemplars of those traces;
//   - headless Chromium (if installed) opens one trace in the Jaeger UI.
func TestClaimTracesInJaeger(t *testing.T) {
	ctx := t.Context()
	s, sandboxdURL := startSim(t)
	vk := startVK(t, sandboxdURL)

	prom, err := kubetest.StartPrometheus(ctx, kubetest.PrometheusOptions{Dir: t.TempDir(), Logf: t.Logf, Targets: []string{vk.MetricsAddr}})
	switch {
	case errors.Is(err, kubetest.ErrNoPrometheus):
		t.Logf("SKIPPING the Prometheus part: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		t.Cleanup(func() {
			if t.Failed() {
				var targets any
				_ = getJSON(prom.URL+"/api/v1/targets", &targets)
				t.Logf("prometheus targets: %v\nlog (tail):\n%s", targets, tail(prom.Log, 30))
			}
			_ = prom.Stop()
		})
	}

	cs := env.Clientset()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "obs-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []*claimCase{
		{name: "obs-plain"},
		{name: "obs-retried", fault: &sim.Fault{Verb: pool.VerbClaim, Mode: "500", Count: 1}},
		{name: "obs-requeued", fault: &sim.Fault{Verb: pool.VerbClaim, Mode: "429", Count: 1}},
	}
	for _, c := range cases {
		if c.fault != nil {
			s.InjectFault(*c.fault)
		}
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, kubetest.SandboxPod(ns.Name, c.name, vk.Node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod "+c.name+" Running", func(ctx context.Context) bool {
			p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, c.name, metav1.GetOptions{})
			c.pod = p
			return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
	}

	exemplarIDs := checkExemplarsAndDashboard(t, vk.MetricsAddr)
	if prom != nil {
		checkPrometheusExemplars(t, prom, exemplarIDs)
	}

	// Nothing of vk-sandbox may have reached Jaeger yet, or the check below
	// would not show that the shutdown flushed it.
	services, err := jaeger.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(services, "vk-sandbox") {
		t.Fatalf("Jaeger has vk-sandbox spans before SIGTERM (services %v): the flush-on-shutdown check proves nothing", services)
	}
	if err := vk.Terminate(); err != nil {
		t.Fatalf("vk-sandbox after SIGTERM: %v", err)
	}

	traces := map[string][]kubetest.Span{} // trace id → spans
	for _, c := range cases {
		want := 1
		if c.fault != nil && c.fault.Mode == "429" {
			want = 2
		}
		ids := claimTraces(t, c, want)
		for _, id := range ids {
			traces[id] = fullTrace(t, id)
		}
		switch c.name {
		case "obs-plain":
			checkRunningTree(t, c, traces[ids[0]], false)
		case "obs-retried":
			checkRetriedInside(t, c, traces[ids[0]])
		case "obs-requeued":
			checkRequeued(t, c, traces)
		}
	}
	for id := range exemplarIDs {
		if _, ok := traces[id]; !ok {
			t.Errorf("exemplar trace %s is none of the claims' traces %v", id, keys(traces))
		}
	}
	for id, spans := range traces {
		for _, sp := range spans {
			for k, v := range sp.Attrs {
				if s, ok := v.(string); ok && strings.Contains(s, rootToken) {
					t.Errorf("trace %s span %s attribute %s holds the token", id, sp.Name, k)
				}
			}
		}
	}
	checkInBrowser(t, claimTraceID(t, cases[0]))
}

// claimTraces waits for the want claim.transaction traces of a Pod's UID
// in Jaeger and returns them, oldest first.
func claimTraces(t *testing.T, c *claimCase, want int) []string {
	t.Helper()
	var ids []string
	eventually(t, fmt.Sprintf("%d claim.transaction trace(s) of %s in Jaeger", want, c.name), func(ctx context.Context) bool {
		got, err := jaeger.TraceIDs(ctx, "vk-sandbox", "claim.transaction", map[string]string{"k8s.pod.uid": string(c.pod.UID)}, 20)
		if err != nil {
			t.Logf("jaeger: %v", err)
			return false
		}
		ids = got
		return len(got) >= want
	})
	if len(ids) != want {
		t.Fatalf("%s has %d claim traces, want %d", c.name, len(ids), want)
	}
	// Oldest first, by the root's start.
	start := func(id string) int64 {
		for _, sp := range fullTrace(t, id) {
			if sp.Name == "claim.transaction" {
				return sp.StartNanos
			}
		}
		return 0
	}
	slices.SortFunc(ids, func(a, b string) int { return int(start(a) - start(b)) })
	return ids
}

// claimTraceID is the Pod's (only) claim trace.
func claimTraceID(t *testing.T, c *claimCase) string { return claimTraces(t, c, 1)[0] }

// fullTrace waits until the trace holds the emulator's spans as well: the
// two services export separately.
func fullTrace(t *testing.T, id string) []kubetest.Span {
	t.Helper()
	var spans []kubetest.Span
	eventually(t, "trace "+id+" with both services", func(ctx context.Context) bool {
		got, err := jaeger.Trace(ctx, id)
		spans = got
		return err == nil && slices.ContainsFunc(got, func(s kubetest.Span) bool { return s.Service == simService }) &&
			slices.ContainsFunc(got, func(s kubetest.Span) bool { return s.Service == "vk-sandbox" })
	})
	return spans
}

// tree indexes one trace's spans.
type tree struct {
	t     *testing.T
	spans []kubetest.Span
}

func (tr tree) byID(id string) (kubetest.Span, bool) {
	for _, s := range tr.spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return kubetest.Span{}, false
}

// children are p's child spans named name (any name for ""), in start order.
func (tr tree) children(p kubetest.Span, name string) []kubetest.Span {
	var out []kubetest.Span
	for _, s := range tr.spans {
		if s.ParentSpanID == p.SpanID && (name == "" || s.Name == name) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b kubetest.Span) int { return int(a.StartNanos - b.StartNanos) })
	return out
}

// one is p's only child named name.
func (tr tree) one(p kubetest.Span, name string) kubetest.Span {
	tr.t.Helper()
	got := tr.children(p, name)
	if len(got) != 1 {
		tr.t.Fatalf("%s has %d %s children, want 1; trace:\n%s", p.Name, len(got), name, tr.dump())
	}
	return got[0]
}

func (tr tree) root(outcome string) kubetest.Span {
	tr.t.Helper()
	for _, s := range tr.spans {
		if s.Name == "claim.transaction" && s.Str("vksandbox.outcome") == outcome {
			return s
		}
	}
	tr.t.Fatalf("no claim.transaction with outcome %s; trace:\n%s", outcome, tr.dump())
	return kubetest.Span{}
}

func (tr tree) dump() string {
	var b strings.Builder
	for _, s := range tr.spans {
		fmt.Fprintf(&b, "  %s/%s %s parent=%s kind=%d status=%d attrs=%v events=%d links=%v\n",
			s.Service, s.SpanID, s.Name, s.ParentSpanID, s.Kind, s.StatusCode, s.Attrs, len(s.Events), s.Links)
	}
	return b.String()
}

// checkRoot checks the Pod's identity and outcome on a claim.transaction.
func checkRoot(t *testing.T, c *claimCase, root kubetest.Span, outcome string) {
	t.Helper()
	for k, want := range map[string]string{
		"k8s.pod.name": c.name, "k8s.pod.uid": string(c.pod.UID), "k8s.namespace.name": c.pod.Namespace, "vksandbox.outcome": outcome,
	} {
		if got := root.Str(k); got != want {
			t.Errorf("%s claim.transaction %s = %q, want %q", c.name, k, got, want)
		}
	}
}

// checkServerSpan checks the emulator's span under a sandboxd.claim
// client span: same trace (traceparent), its child, and what it answered.
func checkServerSpan(t *testing.T, tr tree, c *claimCase, client kubetest.Span, status int64, fault string) {
	t.Helper()
	if client.Kind != kubetest.SpanKindClient {
		t.Errorf("%s: sandboxd.claim kind %d, want client", c.name, client.Kind)
	}
	srv := tr.one(client, "POST /v1/claim")
	if srv.Service != simService || srv.Kind != kubetest.SpanKindServer {
		t.Errorf("%s: sandboxd's span is %s kind %d, want a server span of %s", c.name, srv.Service, srv.Kind, simService)
	}
	if got, _ := srv.Attrs["http.response.status_code"].(int64); got != status {
		t.Errorf("%s: sandboxd answered %d, want %d", c.name, got, status)
	}
	if got := srv.Str("sandboxd_sim.fault"); got != fault {
		t.Errorf("%s: sandboxd fault %q, want %q", c.name, got, fault)
	}
	// A faulted answer never reached the handler that reads the body.
	// The claim_ref names the Pod key and generation, then the node's mark.
	if ref := srv.Str("sandboxd.claim_ref"); fault == "" && !strings.Contains(ref, "/"+c.pod.Namespace+"/"+c.name+"/"+string(c.pod.UID)+"/") {
		t.Errorf("%s: sandboxd saw claim_ref %q", c.name, ref)
	}
	if status >= 500 && srv.StatusCode != 2 {
		t.Errorf("%s: a %d is not an error on sandboxd's span (status %d)", c.name, status, srv.StatusCode)
	}
	if status == 200 {
		if id := srv.Str("sandboxd.id"); id != c.pod.Annotations[kube.AnnClaimID] {
			t.Errorf("%s: sandboxd handed out %q, the Pod says %q", c.name, id, c.pod.Annotations[kube.AnnClaimID])
		}
	}
}

// checkRunningTree checks a claim that ended Running:
//
//	[createOrUpdatePod] → claim.transaction → queue.wait, claim.reconcile →
//	sandboxd.claim (→ sandboxd's POST /v1/claim), store.commit, status.push
//
// and returns the claim.reconcile span. A requeued claim's transaction has no
// virtual-kubelet parent but a link instead.
func checkRunningTree(t *testing.T, c *claimCase, spans []kubetest.Span, requeued bool) (tree, kubetest.Span) {
	t.Helper()
	tr := tree{t: t, spans: spans}
	root := tr.root("running")
	checkRoot(t, c, root, "running")
	if parent, ok := tr.byID(root.ParentSpanID); !requeued && (!ok || parent.Name != "createOrUpdatePod") {
		t.Errorf("%s: claim.transaction's parent is %q, want virtual-kubelet's createOrUpdatePod", c.name, parent.Name)
	}
	qw := tr.one(root, "queue.wait")
	for _, k := range []string{"vksandbox.shard", "vksandbox.queue.depth"} {
		if _, ok := qw.Attrs[k].(int64); !ok {
			t.Errorf("%s: queue.wait has no %s", c.name, k)
		}
	}
	sf := tr.one(root, "claim.reconcile")
	claims := tr.children(sf, "sandboxd.claim")
	if len(claims) == 0 {
		t.Fatalf("%s: no sandboxd.claim under claim.reconcile; trace:\n%s", c.name, tr.dump())
	}
	last := claims[len(claims)-1]
	checkServerSpan(t, tr, c, last, 200, "")
	commit := tr.one(sf, "store.commit")
	id := c.pod.Annotations[kube.AnnClaimID]
	if commit.Str("vksandbox.claim.id") != id {
		t.Errorf("%s: store.commit claim id %q, the Pod says %q", c.name, commit.Str("vksandbox.claim.id"), id)
	}
	if n, _ := commit.Attrs["vksandbox.store.batch_size"].(int64); n < 1 {
		t.Errorf("%s: store.commit batch size %v", c.name, commit.Attrs["vksandbox.store.batch_size"])
	}
	if n, _ := commit.Attrs["vksandbox.store.bytes"].(int64); n < 1 {
		t.Errorf("%s: store.commit bytes %v", c.name, commit.Attrs["vksandbox.store.bytes"])
	}
	if _, ok := commit.Attrs["vksandbox.store.fsync_ms"].(float64); !ok {
		t.Errorf("%s: store.commit has no fsync time (vksandbox.store.fsync_ms): %v", c.name, commit.Attrs)
	}
	push := tr.one(sf, "status.push")
	if push.Str("vksandbox.claim.id") != id {
		t.Errorf("%s: status.push claim id %q, want %q", c.name, push.Str("vksandbox.claim.id"), id)
	}
	if commit.StartNanos < last.EndNanos || push.StartNanos < commit.EndNanos {
		t.Errorf("%s: out of order: the claim, the durable commit and the Running push must follow each other", c.name)
	}
	return tr, sf
}

// checkRetriedInside: the first claim answered 500, the transaction
// retried it (a claim.retry event, a claim_ref lookup, a second claim) and
// ended Running, all in one trace with both of sandboxd's answers.
func checkRetriedInside(t *testing.T, c *claimCase, spans []kubetest.Span) {
	t.Helper()
	tr, sf := checkRunningTree(t, c, spans, false)
	claims := tr.children(sf, "sandboxd.claim")
	if len(claims) != 2 {
		t.Fatalf("%s: %d sandboxd.claim spans, want 2 (the 500, then the retry); trace:\n%s", c.name, len(claims), tr.dump())
	}
	checkServerSpan(t, tr, c, claims[0], 500, "500")
	if claims[0].StatusCode != 2 {
		t.Errorf("%s: the 500 attempt's client span is not an error", c.name)
	}
	var retries int
	for _, e := range sf.Events {
		if e.Name == "claim.retry" {
			retries++
			if a, _ := e.Attrs["attempt"].(int64); a != 1 {
				t.Errorf("%s: claim.retry attempt %v, want 1", c.name, e.Attrs["attempt"])
			}
		}
	}
	if retries != 1 {
		t.Errorf("%s: %d claim.retry events on claim.reconcile, want 1", c.name, retries)
	}
	lookups := tr.children(sf, "sandboxd.list")
	if len(lookups) == 0 || lookups[0].StartNanos < claims[0].EndNanos || lookups[0].EndNanos > claims[1].StartNanos {
		t.Errorf("%s: no claim_ref lookup (sandboxd.list) between the 500 and the retry; trace:\n%s", c.name, tr.dump())
	}
}

// checkRequeued: the first transaction met a 429 and ended capacity_miss;
// the next one is a new trace, marked as a retry and linked to the first.
func checkRequeued(t *testing.T, c *claimCase, traces map[string][]kubetest.Span) {
	t.Helper()
	ids := claimTraces(t, c, 2)
	first := tree{t: t, spans: traces[ids[0]]}
	miss := first.root("capacity_miss")
	checkRoot(t, c, miss, "capacity_miss")
	sf := first.one(miss, "claim.reconcile")
	claims := first.children(sf, "sandboxd.claim")
	if len(claims) != 1 {
		t.Fatalf("%s: %d claims in the capacity-miss transaction, want 1; trace:\n%s", c.name, len(claims), first.dump())
	}
	checkServerSpan(t, first, c, claims[0], 429, "429")
	pending := first.one(sf, "status.push")
	if r := pending.Str("vksandbox.pending.reason"); r == "" {
		t.Errorf("%s: the capacity miss pushed no Pending reason", c.name)
	}

	second, _ := checkRunningTree(t, c, traces[ids[1]], true)
	root := second.root("running")
	if b, _ := root.Attrs["vksandbox.retry"].(bool); !b {
		t.Errorf("%s: the requeued transaction lacks vksandbox.retry=true", c.name)
	}
	if !slices.Contains(root.Links, kubetest.SpanLink{TraceID: miss.TraceID, SpanID: miss.SpanID}) {
		t.Errorf("%s: the requeued transaction's links %v do not name the capacity miss %s/%s", c.name, root.Links, miss.TraceID, miss.SpanID)
	}
	if root.ParentSpanID != "" {
		t.Errorf("%s: the requeued transaction has a parent; it should start its own trace", c.name)
	}
}

// checkExemplarsAndDashboard scrapes /metrics as OpenMetrics (what
// Prometheus asks for) and returns the trace ids its exemplars carry. The
// dashboard's trace links must read the label those exemplars use, and so
// must the docs' exemplar set-up.
//
// expfmt decodes the text and protobuf formats only: its text decoder
// drops OpenMetrics exemplars and stops at OpenMetrics' counter naming. So
// the exemplars are decoded by expfmt from the same endpoint in the
// delimited protobuf format, which carries them field by field (promhttp
// fills in the same exemplars as in OpenMetrics), and each trace id is
// checked to be in the OpenMetrics text too.
func checkExemplarsAndDashboard(t *testing.T, addr string) map[string]bool {
	t.Helper()
	om, omHeader := scrape(t, addr, `application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.1`)
	// expfmt.ResponseFormat knows only the text and protobuf formats; the
	// Content-Type itself is an expfmt.Format.
	omFormat := expfmt.Format(omHeader.Get("Content-Type"))
	if ft := omFormat.FormatType(); ft != expfmt.TypeOpenMetrics {
		t.Fatalf("/metrics answered %q (format %v) to an OpenMetrics Accept", omFormat, ft)
	}
	if !strings.HasSuffix(om, "# EOF\n") || !strings.Contains(om, "# TYPE vksandbox_claim_duration_seconds histogram") {
		t.Fatalf("the OpenMetrics scrape is cut short or lacks vksandbox_claim_duration_seconds")
	}
	pb, pbHeader := scrape(t, addr, string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	fams := decode(t, pb, expfmt.ResponseFormat(pbHeader))
	labels := map[string]bool{}
	ids := map[string]bool{}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, m := range fams["vksandbox_claim_duration_seconds"].GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			for _, lp := range b.GetExemplar().GetLabel() {
				labels[lp.GetName()] = true
				if lp.GetName() == "trace_id" && hex32.MatchString(lp.GetValue()) {
					ids[lp.GetValue()] = true
					if !strings.Contains(om, `trace_id="`+lp.GetValue()+`"`) {
						t.Errorf("exemplar trace %s is missing from the OpenMetrics text", lp.GetValue())
					}
				}
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no vksandbox_claim_duration_seconds exemplar carries a trace_id (exemplar labels %v)", keys(labels))
	}
	t.Logf("exemplar labels %v; %d trace ids", keys(labels), len(ids))

	// The dashboard: every ${__data.fields.X} of a data link names an
	// exemplar label, and the claim-latency panel (whose p99 query has
	// exemplars on) links its trace id into the trace_id variable.
	raw, err := os.ReadFile(filepath.Join(repo, "telemetry/dashboards/vk-sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	fieldRe := regexp.MustCompile(`__data\.fields\.([A-Za-z0-9_]+)`)
	var traceLinks int
	for _, p := range dash.flat() {
		exemplars := slices.ContainsFunc(p.Targets, func(tg dashTarget) bool { return tg.Exemplar })
		for _, l := range p.FieldConfig.Defaults.Links {
			for _, m := range fieldRe.FindAllStringSubmatch(l.Title+" "+l.URL, -1) {
				if !labels[m[1]] {
					t.Errorf("panel %q link uses field %q; the exemplars carry %v", p.Title, m[1], keys(labels))
				}
			}
			if exemplars && strings.Contains(l.URL, "var-trace_id=${__data.fields.trace_id}") {
				traceLinks++
			}
		}
	}
	if traceLinks == 0 {
		t.Error("no panel with exemplars links an exemplar's trace_id to the trace_id variable")
	}
	doc, err := os.ReadFile(filepath.Join(repo, "docs/observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "label name `trace_id`") {
		t.Error("docs/observability.md does not name the exemplar label (`trace_id`) for the datasource's exemplar link")
	}
	return ids
}

type dashPanel struct {
	Title       string       `json:"title"`
	Panels      []dashPanel  `json:"panels"`
	Targets     []dashTarget `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Links []struct {
				Title string `json:"title"`
				URL   string `json:"url"`
			} `json:"links"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type dashTarget struct {
	Exemplar bool `json:"exemplar"`
}

type dashboard struct {
	Panels []dashPanel `json:"panels"`
}

func (d dashboard) flat() []dashPanel {
	var out []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func scrape(t *testing.T, addr, accept string) (string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b), resp.Header
}

// decode parses a scrape with expfmt into its metric families.
func decode(t *testing.T, body string, f expfmt.Format) map[string]*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(strings.NewReader(body), f)
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("expfmt (%s): %v", f, err)
		}
		out[mf.GetName()] = &mf
	}
}

// checkPrometheusExemplars waits until the real Prometheus has stored an
// exemplar of one of the traces /metrics showed, under the same label.
func checkPrometheusExemplars(t *testing.T, prom *kubetest.Prometheus, traces map[string]bool) {
	t.Helper()
	eventually(t, "Prometheus to store an exemplar of a claim trace", func(ctx context.Context) bool {
		ex, err := prom.Exemplars(ctx, "vksandbox_claim_duration_seconds_bucket")
		if err != nil {
			t.Logf("prometheus: %v", err)
			return false
		}
		for _, e := range ex {
			if traces[e.Labels["trace_id"]] {
				t.Logf("Prometheus holds exemplar trace_id=%s on %v", e.Labels["trace_id"], e.Series)
				return true
			}
		}
		return false
	})
}

// checkInBrowser opens the trace in the Jaeger UI in headless Chromium
// (bin/vk-jaegerui). With VK_SCREENSHOT set it is the docs' screenshot and
// must succeed; otherwise a machine without Chromium skips this part, and a
// Jaeger without UI assets is reported plainly.
func checkInBrowser(t *testing.T, traceID string) {
	t.Helper()
	shot := os.Getenv("VK_SCREENSHOT") // the PNG to write (make observability-screenshot)
	if shot == "" {
		if _, err := exec.LookPath("chromium"); err != nil {
			t.Logf("SKIPPING the browser part: no chromium on PATH (apt-get install chromium)")
			return
		}
	}
	bin, err := kubetest.Binary(t.Context(), "vk-jaegerui")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"claim.transaction", "queue.wait", "claim.reconcile", "sandboxd.claim", "store.commit", "status.push", "POST /v1/claim"}
	cmd := exec.CommandContext(t.Context(), bin, "-url", jaeger.TraceURL(traceID), "-expect", strings.Join(names, ","), "-out", shot)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Logf("Chromium shows trace %s with every span: %s", traceID, strings.TrimSpace(string(out)))
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		msg := fmt.Sprintf("the Jaeger UI is not in this Jaeger build (its module build embeds only a placeholder page), so the trace cannot be shown in a browser: %s", strings.TrimSpace(string(out)))
		if shot != "" {
			t.Fatalf("no screenshot written: %s (set VK_JAEGER_UI_ASSETS to a built Jaeger UI)", msg)
		}
		t.Logf("BROWSER: %s; the trace was checked through the API above", msg)
	default:
		t.Fatalf("vk-jaegerui: %v\n%s", err, out)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The chart's alerts, loaded into a real Prometheus that scrapes a real
// vk-sandbox: VkSandboxDown is evaluated and quiet while the process
// runs, and turns pending for its instance once the process is gone (it
// fires after its 5 minutes).
func TestDownAlertFires(t *testing.T) {
	ctx := t.Context()
	_, sandboxdURL := startSim(t)
	vk := startVK(t, sandboxdURL)
	rules, err := filepath.Abs("../../charts/vk-sandbox/files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prom, err := kubetest.StartPrometheus(ctx, kubetest.PrometheusOptions{Dir: t.TempDir(), Logf: t.Logf,
		Targets: []string{vk.MetricsAddr}, RuleFiles: []string{rules}})
	if errors.Is(err, kubetest.ErrNoPrometheus) {
		t.Skipf("SKIPPING: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log (tail):\n%s", tail(prom.Log, 30))
		}
		_ = prom.Stop()
	})

	// Up, with its build info scraped: the rule's join has both sides.
	eventually(t, "vk-sandbox scraped, VkSandboxDown evaluated and inactive", func(ctx context.Context) bool {
		n, err := prom.Query(ctx, `up == 1 and on (job, instance) last_over_time(vksandbox_build_info[1d])`)
		if err != nil || n != 1 {
			return false
		}
		a, err := prom.Alert(ctx, "VkSandboxDown")
		return err == nil && a.Health == "ok" && a.State == "inactive"
	})
	if err := vk.Terminate(); err != nil {
		t.Fatalf("vk-sandbox after SIGTERM: %v", err)
	}
	var last kubetest.AlertRule
	eventually(t, "VkSandboxDown pending for the stopped instance", func(ctx context.Context) bool {
		last, err = prom.Alert(ctx, "VkSandboxDown")
		return err == nil && last.State == "pending" && len(last.Alerts) == 1 && last.Alerts[0]["instance"] == vk.MetricsAddr
	})
	if last.Alerts[0]["severity"] != "critical" {
		t.Errorf("VkSandboxDown labels %v, want severity critical", last.Alerts[0])
	}
}
