package kube

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// SessionLimits bound the exec sessions (kubectl exec, cp) the node runs
// at once. A zero field takes its default.
type SessionLimits struct {
	// PerPod caps the sessions of one Pod; PerNode, of the whole node.
	PerPod, PerNode int
	// IdleTimeout ends a session whose streams carried nothing for that
	// long (the kubelet's streaming idle timeout).
	IdleTimeout time.Duration
}

// DefaultSessionLimits are the defaults of --exec-max-sessions-per-pod,
// --exec-max-sessions and --exec-idle-timeout (the kubelet's 4h).
var DefaultSessionLimits = SessionLimits{PerPod: 16, PerNode: 256, IdleTimeout: 4 * time.Hour}

func (l SessionLimits) withDefaults() SessionLimits {
	if l.PerPod <= 0 {
		l.PerPod = DefaultSessionLimits.PerPod
	}
	if l.PerNode <= 0 {
		l.PerNode = DefaultSessionLimits.PerNode
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultSessionLimits.IdleTimeout
	}
	return l
}

// sessionSet counts the open sessions by Pod key.
type sessionSet struct {
	mu     sync.Mutex
	limits SessionLimits
	byPod  map[pipeline.PodKey]int
	total  int
}

// acquire takes a session slot for Pod key, or refuses one past a cap;
// the returned func gives it back.
func (s *sessionSet) acquire(key pipeline.PodKey) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limits.withDefaults()
	switch {
	case s.byPod[key] >= l.PerPod:
		return nil, errdefs.InvalidInputf("pod %s already has %d exec sessions open, the most this node allows for one Pod (--exec-max-sessions-per-pod); end one and try again", key, l.PerPod)
	case s.total >= l.PerNode:
		return nil, errdefs.InvalidInputf("this node already has %d exec sessions open, the most it allows (--exec-max-sessions); try again when one ends", l.PerNode)
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

// IdleTimeout is the streaming idle timeout the kubelet API applies.
func (p *Provider) IdleTimeout() time.Duration {
	return p.sessions.limits.IdleTimeout // set once, by NewProvider
}

// claimCheckEvery is how often a session checks that its Pod still holds
// the claim it runs in.
const claimCheckEvery = time.Second

var errClaimGone = errors.New("the Pod's claim on it ended (the Pod was deleted, or its sandbox released), so the session was closed")

// boundToClaim is ctx, ended with errClaimGone once c's Pod no longer
// holds c's sandbox: a session never outlives its Pod's claim.
func (p *Provider) boundToClaim(ctx context.Context, c sandbox) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		gone := func(context.Context) (bool, error) {
			id, _, ok := p.engine.Credential(c.Key, c.UID)
			pod := p.cache.get(c.Key)
			return !ok || id != c.ID || pod == nil || string(pod.UID) != c.UID, nil
		}
		if wait.PollUntilContextCancel(ctx, claimCheckEvery, false, gone) == nil {
			cancel(errClaimGone)
		}
	}()
	return ctx, func() { cancel(nil) }
}
