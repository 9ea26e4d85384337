package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Through the apiserver: a guest whose silkd goes silent after started
// and never answers info (so the kill of a left session cannot get
// through) does not keep kubectl exec's slot once kubectl has left: with
// a cap of one session per Pod, the next kubectl exec runs. And
// port-forward is capped like exec: with a cap of one connection per Pod,
// a second forwarded connection is refused, naming the Pod and the flag.
// /metrics shows the open sessions by kind and counts the refusal by its
// cap.
func TestKubectlHostileGuestFreesItsExecSlotAndPortForwardIsCapped(t *testing.T) {
	margs, scrape := metricsArgs(t)
	k := startKubectlNodeWith(t, sim.Config{}, append(margs, "--exec-max-sessions-per-pod", "1", "--port-forward-max-sessions-per-pod", "1")...)
	if err := k.Sim.SetHostileGuest(k.sandbox.ID, sim.HostileSilentNoInfo); err != nil {
		t.Fatal(err)
	}
	ctx, leave := context.WithCancel(t.Context())
	done := make(chan execResult, 1)
	go func() { done <- k.execWithin(ctx, t, viaSPDY, nil, false, "cat") }()
	testkit.WaitFor(t, waitFor, "the hostile session live", func() bool { return len(k.Sim.GuestProcs(k.sandbox.ID)) == 1 })
	waitMetric(t, scrape, "vksandbox_kubelet_sessions", 1, `kind="exec"`)
	leave()
	<-done
	// The guest stays hostile: a probe that reaches it was admitted, so
	// the left session's slot is free (a refused probe names the cap and
	// never reaches the guest). An admitted probe is itself left after 5s.
	testkit.WaitFor(t, waitFor, "the Pod's exec slot free again, the guest still hostile", func() bool {
		before := len(k.Sim.GuestProcs(k.sandbox.ID))
		probe, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_ = k.execWithin(probe, t, viaSPDY, nil, false, "true")
		return len(k.Sim.GuestProcs(k.sandbox.ID)) > before
	})

	first, _ := k.forwardOnce(t, guestPort)
	defer first.Close()
	if _, err := first.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(first, b); err != nil || string(b) != "ping" {
		t.Fatalf("the first forwarded connection echoed %q, %v", b, err)
	}
	waitMetric(t, scrape, "vksandbox_kubelet_sessions", 1, `kind="port_forward"`)
	second, msg := k.forwardOnce(t, guestPort)
	defer second.Close()
	var m string
	select {
	case m = <-msg:
	case <-time.After(waitFor):
		t.Fatal("no answer on the second connection's error stream")
	}
	if !strings.Contains(m, "pod "+k.ns+"/box") || !strings.Contains(m, "--port-forward-max-sessions-per-pod") {
		t.Errorf("the second forwarded connection's error %q, want it to name the Pod and --port-forward-max-sessions-per-pod", m)
	}
	waitMetric(t, scrape, "vksandbox_kubelet_session_refusals_total", 1, `kind="port_forward"`, `cap="pod"`)
	if v, _ := metricSum(t, scrape, "vksandbox_kubelet_session_refusals_total", `cap="node"`); v != 0 {
		t.Errorf("refusals at the node's cap = %v, want 0 (only the per-Pod cap was reached)", v)
	}
}

// waitMetric waits until the samples of name matching labels sum to want.
func waitMetric(t *testing.T, scrape, name string, want float64, labels ...string) {
	t.Helper()
	testkit.WaitFor(t, waitFor, fmt.Sprintf("%s{%s} = %v", name, strings.Join(labels, ","), want), func() bool {
		v, ok := metricSum(t, scrape, name, labels...)
		return ok && v == want
	})
}
