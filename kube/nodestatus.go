package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// DefaultSandboxdPingInterval is how often the node asks sandboxd how it
// is, as virtual-kubelet's own ping.
const DefaultSandboxdPingInterval = 10 * time.Second

// nodeStatus is the virtual node's node provider (virtual-kubelet's
// NodeProvider). It checks sandboxd and the state file's disk every
// interval, and writes to the apiserver only when a verdict changes: the
// conditions through virtual-kubelet's status update (which also rewrites
// them, with fresh heartbeats, on its own minute), the taint with an update
// of the Node.
//
// Invariant: only the loop (first, then run) calls check and apply, so
// last and the taint state need no lock; mu guards node, which
// virtual-kubelet's callback and Checks read.
type nodeStatus struct {
	probe    sandboxdProbe // nil: sandboxd is not checked (tests of the node alone)
	nodes    corev1client.NodeInterface
	name     string
	stateDir string // "" : no DiskPressure check
	minFree  uint64
	interval time.Duration
	log      *slog.Logger

	notify func(*corev1.Node) // set by NotifyNodeStatus, before the node registers

	mu     sync.Mutex
	node   *corev1.Node // the status virtual-kubelet writes
	health sandboxdHealth
	ready  bool // the node is registered and marked Ready

	last    verdict
	taintOK bool // the Node's taints match last.health.taint
}

// verdict is what one check found.
type verdict struct {
	health sandboxdHealth
	disk   corev1.NodeCondition
}

func (v verdict) same(o verdict) bool {
	return v.health == o.health && v.disk.Status == o.disk.Status && v.disk.Reason == o.disk.Reason
}

// Ping only says the process runs. It deliberately does not fail while
// sandboxd is down: a failed ping stops virtual-kubelet's lease and status
// updates, the control plane then marks the node NotReady, and taint-based
// eviction deletes every Pod on it while their VMs run on. A sandboxd
// outage is the SandboxdReady condition and a NoSchedule taint instead.
func (s *nodeStatus) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus keeps virtual-kubelet's callback; it is called once,
// before the node registers.
func (s *nodeStatus) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) { s.notify = cb }

// first runs the first check, sets the taint to match, and marks the node
// Ready, in that order, so a node is never Ready without its taint.
func (s *nodeStatus) first(ctx context.Context) error {
	v := s.check(ctx)
	s.reconcileTaint(ctx, v.health.taint)
	s.mu.Lock()
	markReady(s.node)
	s.ready = true
	s.mu.Unlock()
	s.apply(v, true)
	return ctx.Err()
}

// run checks every interval until ctx ends.
func (s *nodeStatus) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.tick(ctx)
	}
}

// tick checks once, and writes only what changed: the taint (or a taint
// write that failed before), and the conditions.
func (s *nodeStatus) tick(ctx context.Context) {
	v := s.check(ctx)
	if ctx.Err() != nil {
		return // a check cut short says nothing about sandboxd
	}
	if !s.taintOK || v.health.taint != s.last.health.taint {
		s.reconcileTaint(ctx, v.health.taint)
	}
	if !v.same(s.last) {
		s.apply(v, false)
	}
}

func (s *nodeStatus) check(ctx context.Context) verdict {
	var v verdict
	if s.probe != nil {
		v.health = checkSandboxd(ctx, s.probe)
	} else {
		v.health = sandboxdHealth{status: corev1.ConditionTrue, reason: reasonSandboxdReady, message: "sandboxd is not checked"}
	}
	if s.stateDir != "" {
		v.disk = diskPressure(s.stateDir, s.minFree)
	} else {
		v.disk = corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "StateDirNotChecked"}
	}
	return v
}

// apply records v in the node's conditions, logs what changed, and pushes
// the status to virtual-kubelet.
func (s *nodeStatus) apply(v verdict, first bool) {
	if !first || v.health.status != corev1.ConditionTrue {
		level := slog.LevelInfo
		if v.health.status != corev1.ConditionTrue {
			level = slog.LevelWarn
		}
		s.log.Log(context.Background(), level, "sandboxd health changed", "node", s.name,
			"reason", v.health.reason, "message", v.health.message, "taint", v.health.taint)
	}
	if v.disk.Status == corev1.ConditionTrue && (first || s.last.disk.Status != corev1.ConditionTrue) {
		s.log.Warn("the state file's filesystem is low on space: the node reports DiskPressure", "node", s.name, "message", v.disk.Message)
	}
	s.last = v
	now := metav1.Now()
	s.mu.Lock()
	s.health = v.health
	setCondition(s.node, corev1.NodeCondition{Type: ConditionSandboxdReady, Status: v.health.status,
		Reason: v.health.reason, Message: v.health.message}, now)
	setCondition(s.node, v.disk, now)
	for _, c := range staticConditions() {
		setCondition(s.node, c, now)
	}
	push := s.node.DeepCopy()
	s.mu.Unlock()
	// The callback blocks until virtual-kubelet's control loop takes the
	// update, one at a time: this loop waits for its own write.
	if s.notify != nil {
		s.notify(push)
	}
}

// setCondition upserts c, keeping its LastTransitionTime while the status
// holds.
func setCondition(n *corev1.Node, c corev1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	for i := range n.Status.Conditions {
		old := &n.Status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// reconcileTaint makes the Node carry TaintSandboxdUnavailable=value, or no
// such taint when value is "", leaving every other taint as it is. Node
// taints are a list replaced whole on update, so it reads the Node and
// updates it with a resourceVersion precondition, retrying on conflict.
func (s *nodeStatus) reconcileTaint(ctx context.Context, value string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.nodes.Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := withSandboxdTaint(n.Spec.Taints, value)
		if slices.EqualFunc(want, n.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
			return nil
		}
		n.Spec.Taints = want
		_, err = s.nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	s.taintOK = err == nil
	switch {
	case err == nil:
	case ctx.Err() != nil:
	case apierrors.IsForbidden(err):
		s.log.Error("cannot set the node's sandboxd taint: the ClusterRole must allow update on nodes", "node", s.name, "error", err)
	default:
		s.log.Warn("setting the node's sandboxd taint failed; retried at the next check", "node", s.name,
			"taint", fmt.Sprintf("%s=%s", TaintSandboxdUnavailable, value), "error", err)
	}
}

// withSandboxdTaint is taints with TaintSandboxdUnavailable set to value
// (NoSchedule), or removed when value is "".
func withSandboxdTaint(taints []corev1.Taint, value string) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints)+1)
	for _, t := range taints {
		if t.Key != TaintSandboxdUnavailable {
			out = append(out, t)
		}
	}
	if value != "" {
		out = append(out, corev1.Taint{Key: TaintSandboxdUnavailable, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// Check is one line of /readyz: a name and, when failing, why.
type Check struct {
	Name string
	Err  error
	// Info marks a line that is reported but never fails readiness.
	Info bool
}

// checks are the node's readiness lines: registered and Ready (a
// readiness check), and sandboxd usable (answering, token accepted),
// which is reported only. Readiness means this process serves its node: a
// host whose sandboxd is down is told to the scheduler by the
// SandboxdReady condition and the taint, and must not hold up a
// DaemonSet's rollout on every other host.
func (s *nodeStatus) checks() []Check {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := Check{Name: "virtual node"}
	if !s.ready {
		node.Err = errors.New("not registered yet")
	}
	sbx := Check{Name: "sandboxd", Info: true}
	switch {
	case s.health.reason == "":
		sbx.Err = errors.New("not checked yet")
	case !s.health.usable():
		sbx.Err = fmt.Errorf("%s: %s", s.health.taint, s.health.message)
	}
	return []Check{node, sbx}
}

// NodeHealthOptions configure the node's checks of sandboxd and of the
// state file's disk. Zero values take the defaults.
type NodeHealthOptions struct {
	// Sandboxd is asked /healthz and /v1/info every PingInterval. nil
	// (a node without sandboxd, in tests) reports it ready, unchecked.
	Sandboxd sandboxdProbe
	// PingInterval defaults to DefaultSandboxdPingInterval.
	PingInterval time.Duration
	// StateDir is the state file's directory, whose filesystem's free space
	// is the DiskPressure condition. "" reports no pressure, unchecked.
	StateDir string
	// MinFree is the free space below which DiskPressure is True; default
	// defaultStateDirMinFree.
	MinFree uint64
	// Log defaults to slog.Default().
	Log *slog.Logger
}

func newNodeStatus(nodes corev1client.NodeInterface, spec *corev1.Node, o NodeHealthOptions) *nodeStatus {
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultSandboxdPingInterval
	}
	if o.MinFree == 0 {
		o.MinFree = defaultStateDirMinFree
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &nodeStatus{probe: o.Sandboxd, nodes: nodes, name: spec.Name, stateDir: o.StateDir, minFree: o.MinFree,
		interval: o.PingInterval, log: o.Log, node: spec.DeepCopy()}
}
