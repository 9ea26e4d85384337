// Package kubeletapi is the kubelet API's interactive surfaces of a
// sandbox node: kubectl exec (exec.go, tty.go), the refusal of kubectl
// attach, kubectl port-forward (portforward.go), the caps on the sessions
// they open (sessions.go), kubectl logs (logs.go) and the stats summary and
// resource metrics (stats.go).
//
// Every surface goes to sandboxd with the claim's own sandbox token, which
// comes from the claim row and never leaves this process: no error, log
// line or span names it. The package knows the node's Pods and claims only
// through Pods, and sandboxd only through Sandboxd, both declared here
// where they are consumed; package kube implements Pods and wires the
// handlers into the node's kubelet API server, as virtual-kubelet's
// node/api is wired by its node.
package kubeletapi

import (
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// Pods is what the interactive surfaces need from the provider: the Pods
// this node serves and the claim each one holds.
//
// The surfaces are reached only through the apiserver's authorized proxy
// to the kubelet API (the node authenticates and authorizes every
// request), so the caller may act on the Pod; Pods decides which sandbox
// that Pod may reach.
type Pods interface {
	// Pod is Pod key as the node serves it (its newest generation, with
	// the status the node reported), or nil when the node does not serve
	// it. The result is shared: callers must not modify it.
	Pod(key pipeline.PodKey) *corev1.Pod
	// Pods lists every Pod the node serves, in no order; shared as Pod's.
	Pods() []*corev1.Pod
	// Credential is the sandbox, and its own token, that the claim of Pod
	// key holds for generation podUID. ok is true only for a durable claim
	// of exactly that generation: a tentative or quarantined claim, or one
	// held for an older or newer generation of the name, is not the Pod's.
	// It must answer from memory: a session asks it every second while it
	// runs (boundToClaim).
	Credential(key pipeline.PodKey, podUID string) (id, token string, ok bool)
}

// Options are what an API is built from.
type Options struct {
	// Pods is the provider's view of the node's Pods and claims. Required.
	Pods Pods
	// Sandboxd, when set, serves exec, port-forward and stats; without it
	// they answer that sandboxd is not wired.
	Sandboxd Sandboxd
	// NodeName names the node in the stats summary.
	NodeName string
	Log      *slog.Logger  // nil: slog.Default()
	Sessions SessionLimits // zero fields take DefaultSessionLimits'
	Forwards SessionLimits // zero fields take DefaultForwardLimits'
	// Refused, when set, is told of each session refused at a cap: kind
	// KindExec or KindPortForward, limit CapPod or CapNode. It must not
	// block.
	Refused func(kind, limit string)
}

// API serves the interactive kubelet surfaces. Its methods have the
// signatures of virtual-kubelet's api.PodHandlerConfig fields, and are
// safe for concurrent use.
type API struct {
	pods     Pods
	sandboxd Sandboxd
	nodeName string
	log      *slog.Logger
	// started is the node's start time in the stats summary.
	started time.Time
	// tenantStats logs once that stats need the root token.
	tenantStats sync.Once
	// sessions counts the open exec sessions, forwards the open
	// port-forward connections (sessions.go).
	sessions, forwards sessionSet
}

// New builds the interactive surfaces over o.Pods.
func New(o Options) *API {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	a := &API{pods: o.Pods, sandboxd: o.Sandboxd, nodeName: o.NodeName, log: o.Log, started: time.Now()}
	a.sessions.kind, a.sessions.limits = execKind, o.Sessions.withDefaults(DefaultSessionLimits())
	a.forwards.kind, a.forwards.limits = forwardKind, o.Forwards.withDefaults(DefaultForwardLimits())
	a.sessions.refused, a.forwards.refused = o.Refused, o.Refused
	return a
}
