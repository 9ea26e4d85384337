package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The holder Lease: one vk-sandbox process serves a node name at a time
// (docs/install.md, "One process per node name"). It lives beside the node
// heartbeat Lease that virtual-kubelet keeps, under its own name.
const (
	HolderLeaseNamespace = corev1.NamespaceNodeLease
	holderLeasePrefix    = "vk-sandbox-"
	// defaultHolderLeaseDuration is how long a holder's lease lasts past its
	// last renewal.
	defaultHolderLeaseDuration = 40 * time.Second
)

// HolderLeaseName is the name of the holder Lease of node.
func HolderLeaseName(node string) string { return holderLeasePrefix + node }

// ErrHolderLost is returned by Holder.Run once this process no longer
// holds its node: another process holds the lease, or renewals failed
// until the lease could have expired.
var ErrHolderLost = errors.New("lost the node's holder lease")

// HolderOptions configure a Holder.
type HolderOptions struct {
	Client kubernetes.Interface // required
	Node   string               // required
	// Identity is this process's holderIdentity, "<host>/<instance id>";
	// required. A process that finds its own identity on an unexpired
	// lease takes it at once (the same host restarting).
	Identity string
	// Duration is the lease's leaseDurationSeconds; default
	// defaultHolderLeaseDuration.
	Duration time.Duration
	// RenewInterval is how often the lease is renewed; default a quarter
	// of Duration. It must be below Duration.
	RenewInterval time.Duration
	// AcquireRetryMax is the longest wait between Acquire's attempts
	// while the apiserver is unreachable; default 30s.
	AcquireRetryMax time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Holder holds the node's holder Lease: Acquire takes it (or refuses),
// Run renews it, Release clears it.
//
// Invariant: only one goroutine at a time calls Acquire, Run and Release
// (the binary calls them in that order); mu guards lease and renewed,
// which Held reads.
type Holder struct {
	o HolderOptions

	mu      sync.Mutex
	lease   *coordinationv1.Lease // as last written by this process; nil when not held
	renewed time.Time             // when lease was last written
}

// NewHolder checks o and fills its defaults.
func NewHolder(o HolderOptions) (*Holder, error) {
	if o.Client == nil || o.Node == "" || o.Identity == "" {
		return nil, errors.New("holder lease: a client, a node name and an identity are required")
	}
	if o.Duration <= 0 {
		o.Duration = defaultHolderLeaseDuration
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = o.Duration / 4
	}
	if o.RenewInterval >= o.Duration {
		return nil, fmt.Errorf("holder lease: the renewal interval %s must be below the lease duration %s", o.RenewInterval, o.Duration)
	}
	if o.AcquireRetryMax <= 0 {
		o.AcquireRetryMax = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Holder{o: o}, nil
}

// Held reports whether this process holds its node: acquired, and renewed
// recently enough that no one else can have taken it.
func (h *Holder) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease != nil && h.o.Now().Sub(h.renewed) < h.o.Duration-h.o.RenewInterval
}

// Acquire takes the holder Lease of the node, or refuses: with an error
// naming the other holder and when its lease ends while another holder's
// lease is unexpired, and with an error saying so when the Node exists and
// is not a virtual-kubelet node (such as the host's own Node, which a
// kubelet serves). It must succeed before the node is registered and
// before any claim is made.
//
// While the apiserver cannot be reached or answers with a server error
// (a control-plane outage or upgrade), Acquire logs each failure and tries
// again, backing off to AcquireRetryMax, until ctx ends: a process started
// during an outage (or restarted after losing its lease to one) waits for
// the apiserver instead of exiting at once, again and again, into its
// supervisor's restart limits. The refusals above, and an apiserver that
// refuses the node's credentials (401, 403), end it at once.
func (h *Holder) Acquire(ctx context.Context) error {
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(min(time.Second, h.o.AcquireRetryMax)),
		backoff.WithMaxInterval(h.o.AcquireRetryMax), backoff.WithMaxElapsedTime(0))
	var last error
	op := func() error {
		last = h.acquireOnce(ctx)
		if last != nil && !retriable(last) {
			return backoff.Permanent(last)
		}
		return last
	}
	notify := func(err error, next time.Duration) {
		h.o.Log.Warn("cannot take the node's holder lease yet: the apiserver is unreachable or failing; retrying",
			"node", h.o.Node, "retry_in", next.Round(time.Millisecond).String(), "error", err)
	}
	err := backoff.RetryNotify(op, backoff.WithContext(bo, ctx), notify)
	if err != nil && ctx.Err() != nil && last != nil && !errors.Is(last, ctx.Err()) {
		return fmt.Errorf("node %s: stopped waiting to take the holder lease (%w); the last attempt: %w", h.o.Node, ctx.Err(), last)
	}
	return err
}

// refusal is an Acquire refusal that waiting does not change: the Node is
// another kubelet's, or another process holds the lease.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// retriable reports whether Acquire should try again after err: anything
// but a refusal, a request the apiserver judged (bad, unauthorized,
// forbidden, invalid) or the end of ctx.
func retriable(err error) bool {
	var r refusal
	switch {
	case errors.As(err, &r), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err), apierrors.IsInvalid(err):
		return false
	}
	return true
}

// acquireOnce is one attempt of Acquire.
func (h *Holder) acquireOnce(ctx context.Context) error {
	node, err := h.o.Client.CoreV1().Nodes().Get(ctx, h.o.Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("node %s: reading the Node before taking it: %w", h.o.Node, err)
	case node.Labels["type"] != "virtual-kubelet":
		// virtual-kubelet would take over a Node it finds; a kubelet's Node
		// (a host's real one) is never this process's to serve.
		return refusal{fmt.Errorf("node %s exists and is not a virtual-kubelet node (no type=virtual-kubelet label): another kubelet serves it; give this process another --node-name", h.o.Node)}
	}
	leases := h.o.Client.CoordinationV1().Leases(HolderLeaseNamespace)
	name := HolderLeaseName(h.o.Node)
	// A conflict means another process wrote the Lease between the read
	// and the write: read it again and decide again.
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		now := h.o.Now()
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cur = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: HolderLeaseNamespace}}
		case err != nil:
			return fmt.Errorf("node %s: reading the holder lease %s/%s: %w", h.o.Node, HolderLeaseNamespace, name, err)
		}
		if holder, ends, held := heldByAnother(cur, h.o.Identity, now); held {
			return refusal{fmt.Errorf("node %s is served by another vk-sandbox, %q: its holder lease %s/%s ends at %s unless renewed; "+
				"stop that process or give this one another --node-name", h.o.Node, holder, HolderLeaseNamespace, name, ends.UTC().Format(time.RFC3339))}
		}
		want := cur.DeepCopy()
		h.stamp(want, now, cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != h.o.Identity)
		var out *coordinationv1.Lease
		if !exists {
			out, err = leases.Create(ctx, want, metav1.CreateOptions{})
		} else {
			out, err = leases.Update(ctx, want, metav1.UpdateOptions{})
		}
		if err != nil {
			return err
		}
		if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity != "" && *cur.Spec.HolderIdentity != h.o.Identity {
			h.o.Log.Warn("took over the holder lease of a process whose lease had expired", "node", h.o.Node, "previous_holder", *cur.Spec.HolderIdentity)
		}
		h.set(out, now)
		return nil
	})
}

// heldByAnother reports whether l is held by someone other than identity
// and unexpired at now, and if so by whom and until when. A lease whose
// holder is cleared (a clean shutdown) or has expired is free.
func heldByAnother(l *coordinationv1.Lease, identity string, now time.Time) (holder string, ends time.Time, held bool) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == identity {
		return "", time.Time{}, false
	}
	holder = *l.Spec.HolderIdentity
	last := l.CreationTimestamp.Time
	switch {
	case l.Spec.RenewTime != nil:
		last = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		last = l.Spec.AcquireTime.Time
	}
	dur := defaultHolderLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	ends = last.Add(dur)
	return holder, ends, now.Before(ends)
}

// stamp makes l this process's, renewed at now; acquired sets the acquire
// time and counts a transition.
func (h *Holder) stamp(l *coordinationv1.Lease, now time.Time, acquired bool) {
	id, secs := h.o.Identity, int32(h.o.Duration/time.Second)
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &t
	if acquired {
		l.Spec.AcquireTime = &t
		n := int32(1)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &n
	}
}

func (h *Holder) set(l *coordinationv1.Lease, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease, h.renewed = l, at
}

// Run renews the lease every RenewInterval until ctx ends (it then returns
// nil), or until the node is lost: another process holds the lease (a
// renewal finds it changed), or renewals have failed for so long that the
// lease could expire before the next one. It then returns ErrHolderLost,
// and the caller must stop serving the node.
func (h *Holder) Run(ctx context.Context) error {
	t := time.NewTicker(h.o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := h.renew(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrHolderLost):
			return err
		case !h.Held():
			// Invariant: stop before the lease can expire for others (one
			// renewal interval ahead of it), so two processes never serve
			// the node at once.
			return fmt.Errorf("%w: node %s: renewals failed for %s, the lease (%s) could expire before the next one: %v",
				ErrHolderLost, h.o.Node, h.o.Now().Sub(h.renewedAt()), h.o.Duration, err)
		default:
			h.o.Log.Warn("renewing the holder lease failed; retried at the next tick", "node", h.o.Node, "error", err)
		}
	}
}

func (h *Holder) renewedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewed
}

// renew writes the lease with the resourceVersion this process last
// wrote: a conflict means someone else wrote it, and the lease is read to
// see whether it is still this process's.
func (h *Holder) renew(ctx context.Context) error {
	h.mu.Lock()
	want := h.lease.DeepCopy()
	h.mu.Unlock()
	leases := h.o.Client.CoordinationV1().Leases(HolderLeaseNamespace)
	now := h.o.Now()
	h.stamp(want, now, false)
	out, err := leases.Update(ctx, want, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		cur, gerr := leases.Get(ctx, want.Name, metav1.GetOptions{})
		if gerr != nil && !apierrors.IsNotFound(gerr) {
			return gerr
		}
		if gerr != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != h.o.Identity {
			holder := "nobody (the lease was deleted or cleared)"
			if gerr == nil && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity != "" {
				holder = fmt.Sprintf("%q", *cur.Spec.HolderIdentity)
			}
			return fmt.Errorf("%w: node %s: the holder lease %s/%s is now held by %s", ErrHolderLost, h.o.Node, HolderLeaseNamespace, want.Name, holder)
		}
		// Still this process's (an earlier write of its own that timed
		// out, say): renew on top of what is there.
		want = cur.DeepCopy()
		h.stamp(want, now, false)
		out, err = leases.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	h.set(out, now)
	return nil
}

// Release clears the holder of the lease if this process still holds it,
// so that the next process to serve the node (a restart, or another host)
// takes it at once. A lease someone else holds is left alone.
func (h *Holder) Release(ctx context.Context) error {
	h.mu.Lock()
	l := h.lease.DeepCopy()
	h.lease = nil
	h.mu.Unlock()
	if l == nil {
		return nil
	}
	l.Spec.HolderIdentity = nil
	l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil
	// The resourceVersion this process last wrote: if another process has
	// written since, the update conflicts and its lease stays.
	_, err := h.o.Client.CoordinationV1().Leases(HolderLeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %s: clearing the holder lease: %w", h.o.Node, err)
	}
	return nil
}
