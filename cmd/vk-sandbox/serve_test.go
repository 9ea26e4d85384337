package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// heldNode is a nodeHolder of node "n" as "host-a/1", acquired, renewing
// every 10 ms, on a fake apiserver that refuses (409) an update of the
// lease by a holder other than the one it stores, as the real one does
// through the resourceVersion precondition.
func heldNode(t *testing.T) (*nodeHolder, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		want := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := cs.Tracker().Get(gvr, want.Namespace, want.Name)
		if err != nil {
			return false, nil, nil
		}
		if h := cur.(*coordinationv1.Lease).Spec.HolderIdentity; h != nil && *h == "other/2" && (want.Spec.HolderIdentity == nil || *want.Spec.HolderIdentity != "other/2") {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), want.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	h, err := kube.NewHolder(kube.HolderOptions{Client: cs, Node: "n", Identity: "host-a/1", Duration: time.Minute, RenewInterval: 10 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &nodeHolder{Holder: h, identity: "host-a/1", lease: "kube-node-lease/vk-sandbox-n", log: slog.New(slog.DiscardHandler)}, cs
}

func leaseHolder(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(kube.HolderLeaseNamespace).Get(t.Context(), kube.HolderLeaseName("n"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// A process whose lease another holder took stops serving (the daemon's
// context ends, as on SIGTERM) and fails, and leaves the other holder's
// lease as it is.
func TestLosingTheHolderLeaseStopsServingAndFails(t *testing.T) {
	h, cs := heldNode(t)
	stopped := make(chan struct{})
	run := func(ctx context.Context) error {
		l, err := cs.CoordinationV1().Leases(kube.HolderLeaseNamespace).Get(ctx, kube.HolderLeaseName("n"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		other := "other/2"
		l.Spec.HolderIdentity = &other
		if _, err := cs.CoordinationV1().Leases(kube.HolderLeaseNamespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return err
		}
		<-ctx.Done() // serving until told to stop
		close(stopped)
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- h.serve(t.Context(), run) }()
	select {
	case err := <-done:
		if !errors.Is(err, kube.ErrHolderLost) {
			t.Fatalf("serve after the lease was taken: %v, want ErrHolderLost", err)
		}
	case <-time.After(20 * time.Second): // a hang, not a timing goal
		t.Fatal("serve went on after its lease was taken")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("serve returned before the daemon stopped")
	}
	if got := leaseHolder(t, cs); got != "other/2" {
		t.Errorf("the lease after losing it names %q, want the other holder", got)
	}
}

// A clean shutdown clears the holder, so that the next process takes
// the node at once.
func TestACleanShutdownClearsTheHolder(t *testing.T) {
	h, cs := heldNode(t)
	if err := h.serve(t.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := leaseHolder(t, cs); got != "" {
		t.Errorf("the lease after a clean shutdown names %q, want none", got)
	}
}
