package kubeletapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// SessionLimits bound the sessions of one kind the node runs at once:
// exec (kubectl exec, cp) or port-forward connections. A zero field takes
// its default.
type SessionLimits struct {
	// PerPod caps the sessions of one Pod; PerNode, of the whole node.
	PerPod, PerNode int
	// IdleTimeout ends a session whose streams carried nothing for that
	// long (the kubelet's streaming idle timeout). Exec's only: the
	// streaming server applies it to every kind.
	IdleTimeout time.Duration
}

// DefaultSessionLimits are the defaults of --exec-max-sessions-per-pod,
// --exec-max-sessions and --exec-idle-timeout (the kubelet's 4h). A
// function, so that no caller can change the defaults of another.
func DefaultSessionLimits() SessionLimits {
	return SessionLimits{PerPod: 16, PerNode: 256, IdleTimeout: 4 * time.Hour}
}

// DefaultForwardLimits are the defaults of
// --port-forward-max-sessions-per-pod and --port-forward-max-sessions:
// kubectl port-forward opens one stream per forwarded TCP connection, and
// a browser opens several at once, so the caps are wider than exec's.
func DefaultForwardLimits() SessionLimits { return SessionLimits{PerPod: 64, PerNode: 1024} }

func (l SessionLimits) withDefaults(d SessionLimits) SessionLimits {
	if l.PerPod <= 0 {
		l.PerPod = d.PerPod
	}
	if l.PerNode <= 0 {
		l.PerNode = d.PerNode
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	return l
}

// sessionKind names a kind of session in a refusal: what it is, the
// flags of its two caps, and its label in the refusal hook.
type sessionKind struct{ what, podFlag, nodeFlag, label string }

var (
	execKind    = sessionKind{"exec sessions", "--exec-max-sessions-per-pod", "--exec-max-sessions", KindExec}
	forwardKind = sessionKind{"port-forward connections", "--port-forward-max-sessions-per-pod", "--port-forward-max-sessions", KindPortForward}
)

// The kinds and caps a refusal is reported with (Options.Refused).
const (
	KindExec        = "exec"
	KindPortForward = "port_forward"
	CapPod          = "pod"
	CapNode         = "node"
)

// sessionSet counts the open sessions of one kind by Pod key.
type sessionSet struct {
	mu     sync.Mutex
	kind   sessionKind
	limits SessionLimits // with defaults applied, set once by New
	// refused, when set, hears of each refusal (kind label, cap); it is
	// called under mu, so it must not block (a metric's counter).
	refused func(kind, limit string)
	byPod   map[pipeline.PodKey]int
	total   int
}

// acquire takes a session slot for Pod key, or refuses one past a cap;
// the returned func gives it back (once, however often it is called).
func (s *sessionSet) acquire(key pipeline.PodKey) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, k := s.limits, s.kind
	switch {
	case s.byPod[key] >= l.PerPod:
		s.refuse(CapPod)
		return nil, errdefs.InvalidInputf("pod %s already has %d %s open, the most this node allows for one Pod (%s); end one and try again", key, l.PerPod, k.what, k.podFlag)
	case s.total >= l.PerNode:
		s.refuse(CapNode)
		return nil, errdefs.InvalidInputf("pod %s: this node already has %d %s open, the most it allows (%s); try again when one ends", key, l.PerNode, k.what, k.nodeFlag)
	}
	if s.byPod == nil {
		s.byPod = map[pipeline.PodKey]int{}
	}
	s.byPod[key]++
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byPod[key]--; s.byPod[key] <= 0 {
				delete(s.byPod, key)
			}
		})
	}, nil
}

func (s *sessionSet) refuse(limit string) {
	if s.refused != nil {
		s.refused(s.kind.label, limit)
	}
}

// count is how many sessions the node has open.
func (s *sessionSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// open is how many sessions Pod key has open, and the node in all.
func (s *sessionSet) open(key pipeline.PodKey) (pod, node int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPod[key], s.total
}

// OpenSessions is how many exec sessions and port-forward connections
// the node has open now, for a gauge read at scrape time.
func (a *API) OpenSessions() (exec, forward int) {
	return a.sessions.count(), a.forwards.count()
}

// IdleTimeout is the streaming idle timeout the kubelet API applies.
func (a *API) IdleTimeout() time.Duration {
	return a.sessions.limits.IdleTimeout // set once, by New
}

// claimCheckEvery is how often a session checks that its Pod still holds
// the claim it runs in.
const claimCheckEvery = time.Second

var errClaimGone = errors.New("the Pod's claim on it ended (the Pod was deleted, or its sandbox released), so the session was closed")

// boundToClaim is ctx, ended with errClaimGone once c's Pod no longer
// holds c's sandbox: a session never outlives its Pod's claim.
func (a *API) boundToClaim(ctx context.Context, c sandbox) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		gone := func(context.Context) (bool, error) {
			id, _, ok := a.pods.Credential(c.Key, c.UID)
			pod := a.pods.Pod(c.Key)
			return !ok || id != c.ID || pod == nil || string(pod.UID) != c.UID, nil
		}
		if wait.PollUntilContextCancel(ctx, claimCheckEvery, false, gone) == nil {
			cancel(errClaimGone)
		}
	}()
	return ctx, func() { cancel(nil) }
}
