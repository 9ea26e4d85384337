package kube

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func newTestHolder(t *testing.T, cs kubernetes.Interface, identity string, now time.Time) *Holder {
	t.Helper()
	h, err := NewHolder(HolderOptions{Client: cs, Node: "n", Identity: identity, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func holderOf(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(HolderLeaseNamespace).Get(t.Context(), HolderLeaseName("n"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// A second process refuses a node whose holder lease another identity
// holds unexpired, naming the holder and when its lease ends; once that
// lease has expired, or was cleared, it takes the node; the holder's own
// identity (the same host restarting) takes it back at once.
func TestTheHolderLeaseIsTakenOnlyWhenFreeExpiredOrOwn(t *testing.T) {
	cs := fake.NewClientset()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := newTestHolder(t, cs, "host-a/1111", t0)
	if err := first.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := holderOf(t, cs); got != "host-a/1111" || !first.Held() {
		t.Fatalf("after Acquire the holder is %q (held %v)", got, first.Held())
	}

	err := newTestHolder(t, cs, "host-b/2222", t0.Add(39*time.Second)).Acquire(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"host-a/1111"`) || !strings.Contains(err.Error(), "2026-01-02T03:04:45Z") {
		t.Fatalf("a second holder within the lease: %v, want a refusal naming host-a/1111 and 03:04:45", err)
	}
	if got := holderOf(t, cs); got != "host-a/1111" {
		t.Fatalf("a refused holder changed the lease to %q", got)
	}

	if err := newTestHolder(t, cs, "host-a/1111", t0.Add(20*time.Second)).Acquire(t.Context()); err != nil {
		t.Fatalf("the same identity restarting: %v", err)
	}

	late := newTestHolder(t, cs, "host-b/2222", t0.Add(61*time.Second))
	if err := late.Acquire(t.Context()); err != nil {
		t.Fatalf("after the lease expired: %v", err)
	}
	if got := holderOf(t, cs); got != "host-b/2222" {
		t.Fatalf("after an expired lease was taken the holder is %q", got)
	}

	if err := late.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := holderOf(t, cs); got != "" {
		t.Fatalf("after Release the holder is %q, want none", got)
	}
	if err := newTestHolder(t, cs, "host-c/3333", t0.Add(62*time.Second)).Acquire(t.Context()); err != nil {
		t.Fatalf("after a clean release: %v", err)
	}
}

// A Node that exists and is not a virtual-kubelet node (a host's real
// Node, which its kubelet serves) is refused, and no lease is written; a
// virtual-kubelet Node left by an earlier process is served.
func TestTheHolderRefusesANodeThatIsNotAVirtualKubeletNode(t *testing.T) {
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"kubernetes.io/hostname": "n"}}}
	cs := fake.NewClientset(real)
	err := newTestHolder(t, cs, "host-a/1111", time.Now()).Acquire(t.Context())
	if err == nil || !strings.Contains(err.Error(), "not a virtual-kubelet node") {
		t.Fatalf("a kubelet's Node: %v", err)
	}
	if _, gerr := cs.CoordinationV1().Leases(HolderLeaseNamespace).Get(t.Context(), HolderLeaseName("n"), metav1.GetOptions{}); gerr == nil {
		t.Fatal("a refused start wrote the holder lease")
	}

	cs = fake.NewClientset(newNodeSpec("n"))
	if err := newTestHolder(t, cs, "host-a/1111", time.Now()).Acquire(t.Context()); err != nil {
		t.Fatalf("a virtual-kubelet Node: %v", err)
	}
}

// Held turns false once renewals have not succeeded for a lease duration
// less one renewal interval: the holder stops before anyone else can take
// the lease.
func TestHeldEndsBeforeTheLeaseCanExpire(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h, err := NewHolder(HolderOptions{Client: fake.NewClientset(), Node: "n", Identity: "a/1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if h.Held() {
		t.Fatal("held before Acquire")
	}
	if err := h.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	now = now.Add(29 * time.Second)
	if !h.Held() {
		t.Fatal("not held 29 s after the last renewal of a 40 s lease renewed every 10 s")
	}
	now = now.Add(time.Second)
	if h.Held() {
		t.Fatal("still held 30 s after the last renewal: the lease could expire before the next renewal")
	}
}

// An apiserver that cannot be reached, or answers 503, does not end
// Acquire: it tries again until the apiserver answers and then takes the
// lease. One that refuses the node's credentials ends it at once, and so
// does the end of ctx, naming the last failure.
func TestAcquireWaitsForAnUnreachableApiserver(t *testing.T) {
	down := func(n int) (*fake.Clientset, *atomic.Int64) {
		cs := fake.NewClientset()
		var calls atomic.Int64
		cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			switch c := calls.Add(1); {
			case c <= int64(n) && c%2 == 1:
				return true, nil, &url.Error{Op: "Get", URL: "https://apiserver:6443/api/v1/nodes/n", Err: syscall.ECONNREFUSED}
			case c <= int64(n):
				return true, nil, apierrors.NewServiceUnavailable("the apiserver is starting")
			}
			return false, nil, nil
		})
		return cs, &calls
	}
	quick := func(cs kubernetes.Interface) *Holder {
		h, err := NewHolder(HolderOptions{Client: cs, Node: "n", Identity: "host-a/1111", AcquireRetryMax: 5 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	cs, calls := down(4)
	h := quick(cs)
	if err := h.Acquire(t.Context()); err != nil {
		t.Fatalf("Acquire after four failed attempts: %v", err)
	}
	if c := calls.Load(); c != 5 {
		t.Errorf("%d attempts, want 5 (four failures, then the one that took it)", c)
	}
	if got := holderOf(t, cs); got != "host-a/1111" || !h.Held() {
		t.Errorf("the lease names %q (held %v), want this process", got, h.Held())
	}

	cs = fake.NewClientset()
	var denied atomic.Int64
	cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		denied.Add(1)
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("RBAC: no rule"))
	})
	bounded, stop := context.WithTimeout(t.Context(), 5*time.Second) // a retried 403 fails, not hangs
	defer stop()
	if err := quick(cs).Acquire(bounded); !apierrors.IsForbidden(err) || denied.Load() != 1 {
		t.Errorf("a forbidden read: %v after %d attempts, want the 403 after 1", err, denied.Load())
	}

	cs, _ = down(1 << 30)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := quick(cs).Acquire(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the last attempt") {
		t.Errorf("Acquire when ctx ends during an outage: %v, want the deadline and the last failure", err)
	}
}
