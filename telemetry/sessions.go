package telemetry

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
)

// sessionInstruments meter the kubelet API's interactive sessions: how many
// are open against their caps (--exec-max-sessions,
// --port-forward-max-sessions), how many were refused at a cap, and how
// many bytes of guest frames the agent relay holds against its budget
// (--exec-buffer-budget-mib). A guest that stops reading or floods frames
// shows here before the sessions it wedges are refused.
type sessionInstruments struct {
	open     metric.Int64ObservableGauge
	held     metric.Int64ObservableGauge
	refusals metric.Int64Counter

	openFn atomic.Pointer[func() (exec, forward int)]
	heldFn atomic.Pointer[func() int64]

	refusalAttrs attrCache[[2]string] // {kind, cap}
}

// init creates the instruments in s, and returns those read by the scrape
// callback.
func (s *sessionInstruments) init(meter metric.Meter) ([]metric.Observable, error) {
	errs := make([]error, 3)
	s.open, errs[0] = meter.Int64ObservableGauge("vksandbox_kubelet_sessions", metric.WithUnit("{session}"),
		metric.WithDescription("Interactive sessions open on the node's kubelet API, by kind (exec: kubectl exec and cp; port_forward: one per forwarded connection)."))
	s.held, errs[1] = meter.Int64ObservableGauge("vksandbox_exec_buffer_held_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of guest frames the agent relay holds now, out of --exec-buffer-budget-mib; a session past the budget waits."))
	s.refusals, errs[2] = meter.Int64Counter("vksandbox_kubelet_session_refusals_total", metric.WithUnit("{session}"),
		metric.WithDescription("Interactive sessions refused because a cap was reached, by kind and cap (pod: the per-Pod cap; node: the node's)."))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []metric.Observable{s.open, s.held}, nil
}

func (s *sessionInstruments) observe(o metric.Observer) {
	if f := s.openFn.Load(); f != nil {
		exec, forward := (*f)()
		o.ObserveInt64(s.open, int64(exec), sessionExec)
		o.ObserveInt64(s.open, int64(forward), sessionForward)
	}
	if f := s.heldFn.Load(); f != nil {
		o.ObserveInt64(s.held, (*f)())
	}
}

// RegisterSessions sets the function read at scrape time for
// vksandbox_kubelet_sessions{kind}. Same rules as RegisterQueueDepth.
func (m *Metrics) RegisterSessions(f func() (exec, forward int)) {
	if m == nil || f == nil {
		return
	}
	m.sessions.openFn.Store(&f)
}

// RegisterExecBuffer sets the function read at scrape time for
// vksandbox_exec_buffer_held_bytes. Same rules as RegisterQueueDepth.
func (m *Metrics) RegisterExecBuffer(f func() int64) {
	if m == nil || f == nil {
		return
	}
	m.sessions.heldFn.Store(&f)
}

// SessionRefused counts one session refused at a cap. The vocabulary is
// the kubelet API's (kind "exec" or "port_forward", limit "pod" or
// "node"): a value outside a small fixed set is a cardinality leak.
func (m *Metrics) SessionRefused(kind, limit string) {
	if m == nil {
		return
	}
	m.sessions.refusals.Add(context.Background(), 1, m.sessions.refusalAttrs.get([2]string{kind, limit}, refusalSet))
}
