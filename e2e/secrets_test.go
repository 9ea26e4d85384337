package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// r6Full switches TestR6Secrets to its full size (VK_RELIABILITY=full).
func r6Full() bool { return os.Getenv("VK_RELIABILITY") == "full" }

const nodeTokenR6 = "e2e-node-token-r6-fedcba9876543210"

// TestR6Secrets: no credential leaves the state file (the Pod contract (docs/pod-contract.md); the state file rules (docs/state-file.md); the telemetry contract (docs/observability.md)).
// The real binary claims and releases Pods, once holding only the node
// token and once the emulator's root token (with a lost claim response, so
// a sandbox token is recovered through GET /v1/sandboxes/{id}, the path
// where a token travels in a response body). The failure paths run too,
// since an error message is where a request's credential would slip out:
// claims answered 409 and 429, releases answered 409 (each carries the
// sandbox token it was sent with) and retried, and a lease that ends.
// Then every log line, every exported span (raw OTLP request bodies,
// resource included), a /metrics scrape in both formats (OpenMetrics
// carries exemplars), every Pod of the namespace, the Node object and
// every Event of every namespace are searched for the node token, the root
// token and each sandbox token. The state file must hold the sandbox
// tokens (it is the one place they belong, which also proves the token
// list is the real one) with mode 0600 in a 0700 directory.
func TestR6Secrets(t *testing.T) {
	pods := 6
	if r6Full() {
		pods = 60
	}
	t.Run("node-token", func(t *testing.T) { secretsRun(t, pods, false) })
	t.Run("root-token", func(t *testing.T) { secretsRun(t, pods, true) })
}

func secretsRun(t *testing.T, pods int, root bool) {
	sink := &rawOTLPSink{}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	margs, scrapeURL := metricsArgs(t)
	args := margs
	cfg := sim.Config{NodeToken: nodeTokenR6, Pools: map[pool.Key]int{{Template: "default"}: pods + 4}}
	if !root {
		// A later flag wins: this node holds the node token only.
		tokenFile := filepath.Join(t.TempDir(), "node-token")
		if err := os.WriteFile(tokenFile, []byte(nodeTokenR6+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--sandboxd-token-file", tokenFile)
	}
	// A failed release is retried by the re-authorization loop, and a
	// lease end is noticed by the lease watch: both quickly here.
	args = append(args, "--reauthorize-interval", "500ms", "--lease-check-interval", "200ms")
	n := startNodeEnv(t, cfg, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}, args...)
	if root {
		n.Sim.InjectFault(sim.Fault{Verb: "claim", Mode: "lose-response", Count: 1})
	}
	// Claim errors: a 409 is not retried inside the transaction, so it
	// surfaces as a Pending reason and an Event; a 429 as a capacity miss.
	n.Sim.InjectFault(sim.Fault{Verb: "claim", Mode: "409", Count: 1})
	n.Sim.InjectFault(sim.Fault{Verb: "claim", Mode: "429", Count: 1})

	ns := newNamespace(t)
	tokens := map[string]string{"root token": rootToken, "node token": nodeTokenR6}

	// A lease that ends: the emulator reaps the VM at its deadline, and
	// the Pod goes Failed with an Event. Its token is taken as soon as the
	// VM is listed, well before that deadline.
	const shortLived = "sec-lease"
	createPod(t, sandboxPod(ns, shortLived, n.Name, annotate(kube.AnnTTL, "5")))
	var leaseTok string
	testkit.WaitForCtx(t, waitFor, "the short-lived VM listed", func(context.Context) (bool, error) {
		for _, sb := range n.live() {
			if podKeyOf(sb) == ns+"/"+shortLived {
				leaseTok = sb.Token
				tokens["sandbox token of "+sb.ID+" (lease ends)"] = sb.Token
			}
		}
		return leaseTok != "", nil
	})

	owner := createOwner(t, ns, "owner")
	names := make([]string, pods)
	for i := range names {
		names[i] = fmt.Sprintf("sec-%d", i)
		var mut []func(*corev1.Pod)
		if i%2 == 0 {
			mut = append(mut, ownedBy(owner))
		}
		createPod(t, sandboxPod(ns, names[i], n.Name, mut...))
	}
	for _, name := range names {
		waitRunning(t, ns, name)
	}
	if root && n.counter("get") == 0 {
		t.Errorf("the lost claim response was not recovered through a root GET (emulator counters %v)", n.Sim.Counters())
	}

	// Every live sandbox token, taken while all Pods hold a claim.
	var sandboxTokens []string
	for _, sb := range n.live() {
		if sb.Token == "" {
			t.Fatalf("emulator row %s has no token", sb.ID)
		}
		if sb.Token == leaseTok {
			continue
		}
		tokens["sandbox token of "+sb.ID+" ("+sb.ClaimRef+")"] = sb.Token
		sandboxTokens = append(sandboxTokens, sb.Token)
	}
	if len(sandboxTokens) != pods {
		t.Fatalf("emulator holds %d sandboxes for %d Pods", len(sandboxTokens), pods)
	}
	state, err := os.ReadFile(n.state)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range sandboxTokens {
		if !bytes.Contains(state, []byte(tok)) {
			t.Errorf("the state file %s lacks a live sandbox token: the token list is not the release credentials", n.state)
		}
	}
	corpus := map[string][]byte{"Pods while Running": objectsJSON(t, ns)}

	// Release errors: the first releases are refused, each with the
	// sandbox token it carried, and retried until they succeed.
	n.Sim.InjectFault(sim.Fault{Verb: "release", Mode: "409", Count: 2})
	// Release half: bare Pods directly, owned ones through their owner.
	for i, name := range names {
		if i%2 == 1 {
			deletePod(t, ns, name)
		}
	}
	deleteOwner(t, ns, "owner")
	for i, name := range names {
		if i%2 == 0 {
			deletePod(t, ns, name)
		}
	}
	testkit.WaitForCtx(t, waitFor, "every sandbox released", func(context.Context) (bool, error) { return len(n.live()) == 0, nil })
	waitPod(t, ns, shortLived, "Failed at the end of its lease", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == kube.ReasonLeaseExpired
	})
	// Every failure path ran and left its Event, so its message is searched.
	failures := []string{kube.EventReleaseFailed, pipeline.ReasonClaimFailed, pipeline.ReasonCapacity, kube.EventExpired}
	testkit.WaitForCtx(t, waitFor, "an Event of every failure path", func(context.Context) (bool, error) {
		return len(missingReasons(t, ns, failures)) == 0, nil
	})
	if r := n.counter("release"); r < int64(pods)+2 {
		t.Errorf("%d release calls for %d Pods and 2 refused releases: the refused ones were not retried", r, pods)
	}

	corpus["Pods and Events after release"] = objectsJSON(t, ns)
	corpus["Node"] = nodeJSON(t, n.Name)
	corpus["Events of every namespace"] = objectsJSON(t, "")
	corpus["/metrics (text)"] = scrapeAs(t, scrapeURL, "")
	corpus["/metrics (OpenMetrics)"] = scrapeAs(t, scrapeURL, "application/openmetrics-text")
	if err := n.vk.Terminate(); err != nil { // flushes buffered spans
		t.Fatalf("graceful shutdown: %v", err)
	}
	corpus["log"] = n.allLogs()
	corpus["OTLP export"] = sink.all()

	// Not vacuous: each corpus holds what it should.
	nonEmpty := map[string]string{
		"log": "sec-0", "OTLP export": "claim.transaction", "/metrics (text)": "vksandbox_claims",
		"/metrics (OpenMetrics)": "vksandbox_claim_duration_seconds", "Pods while Running": "sandbox.cocoonstack.io/claim-id",
		"Pods and Events after release": kube.EventReleaseFailed, "Node": n.Name, "Events of every namespace": kube.EventExpired,
	}
	for what, marker := range nonEmpty {
		if !bytes.Contains(corpus[what], []byte(marker)) {
			t.Errorf("%s does not contain %q: nothing was searched (%d bytes)", what, marker, len(corpus[what]))
		}
	}
	sizes := []string{}
	for what, data := range corpus {
		sizes = append(sizes, fmt.Sprintf("%s %d B", what, len(data)))
		for name, tok := range tokens {
			if i := bytes.Index(data, []byte(tok)); i >= 0 {
				t.Errorf("%s contains the %s: …%s…", what, name, excerpt(data, i, len(tok)))
			}
		}
	}

	t.Logf("searched %d secrets (%d sandbox tokens) in: %s", len(tokens), len(sandboxTokens), strings.Join(sizes, ", "))

	fi, err := os.Stat(n.state)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("state file %s has mode %#o, want 0600", n.state, m)
	}
	di, err := os.Stat(filepath.Dir(n.state))
	if err != nil {
		t.Fatal(err)
	}
	if m := di.Mode().Perm(); m != 0o700 {
		t.Errorf("state directory %s has mode %#o, want 0700", filepath.Dir(n.state), m)
	}
}

// excerpt shows where a token was found, with the token itself masked.
func excerpt(data []byte, at, n int) string {
	lo, hi := max(0, at-60), min(len(data), at+n+20)
	return strings.ReplaceAll(string(data[lo:at])+"<TOKEN>"+string(data[at+n:hi]), "\n", " ")
}

// missingReasons are the Event reasons of want that no Event in ns has.
func missingReasons(t *testing.T, ns string, want []string) []string {
	t.Helper()
	cs, _ := clients(t)
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range l.Items {
		seen[e.Reason] = true
	}
	var out []string
	for _, r := range want {
		if !seen[r] {
			out = append(out, r)
		}
	}
	return out
}

// nodeJSON is the Node object as the apiserver serves it.
func nodeJSON(t *testing.T, name string) []byte {
	t.Helper()
	cs, _ := clients(t)
	node, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// objectsJSON is every Pod and Event of ns ("": of every namespace), as
// the apiserver serves them.
func objectsJSON(t *testing.T, ns string) []byte {
	t.Helper()
	cs, _ := clients(t)
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{pods, evs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func scrapeAs(t *testing.T, url, accept string) []byte {
	t.Helper()
	code, b := testkit.Get(t, url, accept)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d", url, code)
	}
	return b
}

// allLogs is the vk-sandbox log of every start of this node.
func (n *vkNode) allLogs() []byte {
	var all []byte
	for _, path := range n.vk.LogPaths() {
		b, err := os.ReadFile(path)
		if err != nil {
			n.t.Fatalf("read vk-sandbox log: %v", err)
		}
		all = append(all, b...)
	}
	return all
}

// rawOTLPSink keeps every OTLP/HTTP request body as sent (uncompressed
// protobuf: strings appear verbatim), then answers like otlpSink.
type rawOTLPSink struct {
	otlpSink
	mu     sync.Mutex
	bodies [][]byte
}

func (s *rawOTLPSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Encoding") != "" {
		http.Error(w, "compressed export: the token search needs plain bodies", http.StatusUnsupportedMediaType)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.otlpSink.ServeHTTP(w, r)
}

func (s *rawOTLPSink) all() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.bodies, nil)
}
