package kube

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// fakeProbe answers the health check as told; it is the unit tests'
// stand-in for sandboxd behind the sandboxdProbe interface.
type fakeProbe struct {
	healthz error
	info    pool.Info
	infoErr error
}

func (f fakeProbe) Healthz(context.Context) error { return f.healthz }
func (f fakeProbe) Info(context.Context) (pool.Info, error) {
	return f.info, f.infoErr
}

// httpStatus is the error a real client returns for an answer with status
// code, made by a real client against a server that answers it.
func httpStatus(t *testing.T, code int) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":"as told"}`))
	}))
	defer srv.Close()
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: srv.URL, Token: "t", Retry: pool.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info(t.Context())
	if err == nil {
		t.Fatalf("status %d: no error", code)
	}
	return err
}

// unreachable is a real transport error: a client dialling a closed port.
func unreachable(t *testing.T) error {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: url, Retry: pool.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Healthz(t.Context())
	if err == nil {
		t.Fatal("a closed port answered /healthz")
	}
	return err
}

// Each SandboxdReady reason, its status and whether it taints the node.
func TestSandboxdConditionReasons(t *testing.T) {
	down := unreachable(t)
	for _, tc := range []struct {
		name       string
		probe      fakeProbe
		status     corev1.ConditionStatus
		reason     string
		taint      string
		inMessage  string
		usableWant bool
	}{
		{"answers", fakeProbe{info: pool.Info{Claimed: 3}}, corev1.ConditionTrue, reasonSandboxdReady, "", "neither draining nor at capacity", true},
		{"unreachable", fakeProbe{healthz: down}, corev1.ConditionFalse, ReasonSandboxdUnreachable, "unreachable", "connection refused", false},
		{"info connection lost", fakeProbe{infoErr: down}, corev1.ConditionFalse, ReasonSandboxdUnreachable, "unreachable", "connection refused", false},
		{"token refused", fakeProbe{infoErr: httpStatus(t, http.StatusUnauthorized)}, corev1.ConditionFalse, reasonSandboxdTokenRefused, "token-refused", "--sandboxd-token-file", false},
		{"tenant token", fakeProbe{infoErr: httpStatus(t, http.StatusForbidden)}, corev1.ConditionTrue, reasonSandboxdTenantToken, "", "tenant token", true},
		{"info fails", fakeProbe{infoErr: httpStatus(t, http.StatusInternalServerError)}, corev1.ConditionUnknown, reasonSandboxdInfoFailed, "", "500", true},
		{"draining", fakeProbe{info: pool.Info{Draining: true, AtCapacity: true}}, corev1.ConditionFalse, reasonSandboxdDraining, "draining", "draining", true},
		{"at capacity", fakeProbe{info: pool.Info{AtCapacity: true, AtCapacityReason: "max_claims"}}, corev1.ConditionFalse, reasonSandboxdAtCapacity, "at-capacity", "max_claims", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := checkSandboxd(t.Context(), tc.probe)
			if h.status != tc.status || h.reason != tc.reason || h.taint != tc.taint {
				t.Errorf("verdict = %s/%s taint %q, want %s/%s taint %q", h.status, h.reason, h.taint, tc.status, tc.reason, tc.taint)
			}
			if !strings.Contains(h.message, tc.inMessage) {
				t.Errorf("message %q does not say %q", h.message, tc.inMessage)
			}
			if h.usable() != tc.usableWant {
				t.Errorf("usable = %v, want %v", h.usable(), tc.usableWant)
			}
		})
	}
}

func TestDiskPressureFollowsTheStateDirectorysFreeSpace(t *testing.T) {
	dir := t.TempDir()
	if c := diskPressure(dir, 1); c.Status != corev1.ConditionFalse || c.Reason != "StateDirHasSpace" {
		t.Errorf("1 byte needed: %s/%s %q", c.Status, c.Reason, c.Message)
	}
	if c := diskPressure(dir, 1<<62); c.Status != corev1.ConditionTrue || c.Reason != "StateDirLowOnSpace" || !strings.Contains(c.Message, dir) {
		t.Errorf("4 EiB needed: %s/%s %q", c.Status, c.Reason, c.Message)
	}
	if c := diskPressure(dir+"/missing", 1); c.Status != corev1.ConditionUnknown || c.Reason != "StateDirUnreadable" {
		t.Errorf("missing dir: %s/%s %q", c.Status, c.Reason, c.Message)
	}
}

// The taint is added, its value changed, and removed, and a taint of
// someone else's stays wherever it was.
func TestSandboxdTaintLeavesOtherTaints(t *testing.T) {
	other := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}}
	cs := fake.NewClientset(node)
	s := newNodeStatus(cs.CoreV1().Nodes(), node, NodeHealthOptions{})
	taints := func() []corev1.Taint {
		n, err := cs.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Spec.Taints
	}
	for _, value := range []string{"unreachable", "at-capacity", ""} {
		s.reconcileTaint(t.Context(), value)
		got := taints()
		want := []corev1.Taint{other}
		if value != "" {
			want = append(want, corev1.Taint{Key: TaintSandboxdUnavailable, Value: value, Effect: corev1.TaintEffectNoSchedule})
		}
		if len(got) != len(want) || !s.taintOK {
			t.Fatalf("value %q: taints %v (ok %v), want %v", value, got, s.taintOK, want)
		}
		for i := range want {
			if !got[i].MatchTaint(&want[i]) || got[i].Value != want[i].Value {
				t.Fatalf("value %q: taints %v, want %v", value, got, want)
			}
		}
	}
}

// Only a change of verdict reaches virtual-kubelet: a steady node is not
// rewritten on every check, and a transition keeps nothing stale.
func TestNodeStatusPushesOnlyOnChange(t *testing.T) {
	probe := &switchProbe{}
	s, pushes, logs := watchedNodeStatus(t, probe)
	step := func() { s.tick(t.Context()) }
	step()
	step()
	if len((*pushes)) != 1 {
		t.Fatalf("%d pushes for one verdict, want 1", len((*pushes)))
	}
	probe.fail.Store(true)
	step()
	step()
	if len((*pushes)) != 2 {
		t.Fatalf("%d pushes after one change, want 2", len((*pushes)))
	}
	c := condition((*pushes)[1], ConditionSandboxdReady)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonSandboxdUnreachable {
		t.Errorf("SandboxdReady after the outage = %+v", c)
	}
	if r := condition((*pushes)[1], corev1.NodeReady); r == nil || r.Status != corev1.ConditionTrue {
		t.Errorf("Ready after the outage = %+v: the node must stay Ready", r)
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		if p := condition((*pushes)[1], typ); p == nil || p.Status == "" || p.Reason == "" {
			t.Errorf("%s = %+v: want a status and a reason", typ, p)
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), ReasonSandboxdUnreachable) {
		t.Errorf("the outage was not logged at warn:\n%s", logs.String())
	}
}

func TestReadinessChecksNameWhatFails(t *testing.T) {
	node := newNodeSpec("n")
	s := newNodeStatus(fake.NewClientset(node.DeepCopy()).CoreV1().Nodes(), node, NodeHealthOptions{Sandboxd: fakeProbe{healthz: errors.New("dial tcp 127.0.0.1:7777: connection refused")}, Log: slog.New(slog.DiscardHandler)})
	got := s.checks()
	if got[0].Err == nil || got[0].Err.Error() != "not registered yet" || got[1].Err == nil || got[1].Err.Error() != "not checked yet" {
		t.Fatalf("before the first check: %v", got)
	}
	if err := s.first(t.Context()); err != nil {
		t.Fatal(err)
	}
	got = s.checks()
	if got[0].Err != nil {
		t.Errorf("virtual node: %v after first", got[0].Err)
	}
	if got[1].Err == nil || !strings.HasPrefix(got[1].Err.Error(), "unreachable: ") || !strings.Contains(got[1].Err.Error(), "connection refused") {
		t.Errorf("sandboxd check = %v", got[1].Err)
	}
	// Readiness is serving the node: sandboxd's health is reported, and
	// told to the scheduler by the condition and the taint, but a host
	// whose sandboxd is down must not hold up a DaemonSet rollout.
	if got[0].Info || !got[1].Info {
		t.Errorf("informational lines: virtual node %v, sandboxd %v; want only sandboxd's", got[0].Info, got[1].Info)
	}
}

// switchProbe is sandboxd up, or down once fail is set.
type switchProbe struct{ fail atomic.Bool }

func (p *switchProbe) Healthz(context.Context) error {
	if p.fail.Load() {
		return errors.New("dial tcp 127.0.0.1:7777: connection refused")
	}
	return nil
}

func (p *switchProbe) Info(context.Context) (pool.Info, error) { return pool.Info{}, nil }

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// countingProbe is a healthy sandboxd whose claim count grows on every
// /v1/info, as on a busy node.
type countingProbe struct{ claimed atomic.Int64 }

func (p *countingProbe) Healthz(context.Context) error { return nil }
func (p *countingProbe) Info(context.Context) (pool.Info, error) {
	return pool.Info{Claimed: int(p.claimed.Add(1))}, nil
}

// A healthy node whose claim count changes between checks keeps its
// SandboxdReady condition, message included: no status write reaches
// virtual-kubelet, and no "sandboxd health changed" is logged.
func TestHealthyNodeWithAChangingClaimCountWritesNoNewCondition(t *testing.T) {
	probe := &countingProbe{}
	s, pushes, logs := watchedNodeStatus(t, probe)
	first := *condition((*pushes)[0], ConditionSandboxdReady)
	for range 3 {
		s.tick(t.Context())
	}
	if probe.claimed.Load() < 4 {
		t.Fatalf("the probe was asked %d times, want 4", probe.claimed.Load())
	}
	if len((*pushes)) != 1 {
		t.Errorf("%d status pushes while healthy with a changing claim count, want 1 (the first); the last SandboxdReady: %+v",
			len((*pushes)), condition((*pushes)[len((*pushes))-1], ConditionSandboxdReady))
	}
	s.mu.Lock()
	now := *condition(s.node, ConditionSandboxdReady)
	s.mu.Unlock()
	if now.Status != first.Status || now.Reason != first.Reason || now.Message != first.Message {
		t.Errorf("SandboxdReady changed while healthy: %+v, was %+v", now, first)
	}
	if strings.Contains(logs.String(), "sandboxd health changed") {
		t.Errorf("a health change was logged while healthy:\n%s", logs.String())
	}
}

// watchedNodeStatus is a node's status over a fake apiserver, its first
// check done: pushed collects what reaches virtual-kubelet, logs what is
// logged.
func watchedNodeStatus(t *testing.T, probe sandboxdProbe) (s *nodeStatus, pushed *[]*corev1.Node, logs *bytes.Buffer) {
	t.Helper()
	node := newNodeSpec("n")
	cs := fake.NewClientset(node.DeepCopy())
	logs = new(bytes.Buffer)
	s = newNodeStatus(cs.CoreV1().Nodes(), node, NodeHealthOptions{Sandboxd: probe, Log: slog.New(slog.NewTextHandler(logs, nil))})
	pushed = new([]*corev1.Node)
	s.NotifyNodeStatus(t.Context(), func(n *corev1.Node) { *pushed = append(*pushed, n) })
	if err := s.first(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, pushed, logs
}
