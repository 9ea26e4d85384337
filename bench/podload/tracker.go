package podload

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// Rec is what one run learns about one Pod. Zero times were not seen.
type Rec struct {
	Namespace   string
	Name        string
	CreateStart time.Time   // client: Create call issued
	CreateAck   time.Time   // client: Create call returned
	Created     metav1.Time // server: creationTimestamp (1 s resolution)
	Seen        time.Time   // client: first watch event for the Pod received
	Claimed     time.Time   // emulator: claimed_at (1 ms resolution; provider runs, filled by the caller)
	StatusAck   time.Time   // client: UpdateStatus to Running returned (bare only)
	Running     time.Time   // client: watch event with phase Running and a podIP received
}

// Tracker records, per Pod (namespace/name), when it was first seen
// Running with a podIP, and counts Running Pods per namespace. Done closes
// when want Pods are Running. Safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	pods    map[string]*Rec
	running int
	byNS    map[string]int
	want    int
	// claimAnn counts Pods whose Running object carries the claim-id
	// annotation (UpdateStatus also wrote metadata).
	claimAnn int
	done     chan struct{}
	acked    atomic.Int64 // creates acknowledged
	errs     atomic.Int64 // failed create, status or watch calls
	rewatch  atomic.Int64 // watch streams the apiserver ended and the harness reopened
	lastErr  atomic.Pointer[string]
}

// NewTracker follows want Pods.
func NewTracker(want int) *Tracker {
	return &Tracker{pods: make(map[string]*Rec, want), byNS: map[string]int{}, want: want, done: make(chan struct{})}
}

func (t *Tracker) rec(ns, name string) *Rec {
	k := ns + "/" + name
	r := t.pods[k]
	if r == nil {
		r = &Rec{Namespace: ns, Name: name}
		t.pods[k] = r
	}
	return r
}

func (t *Tracker) set(p *corev1.Pod, f func(*Rec)) {
	t.mu.Lock()
	f(t.rec(p.Namespace, p.Name))
	t.mu.Unlock()
}

// CreateStarted records that the Create call for p was issued at at.
func (t *Tracker) CreateStarted(p *corev1.Pod, at time.Time) {
	t.set(p, func(r *Rec) { r.CreateStart = at })
}

// CreateAcked records that the Create call for p returned at at.
func (t *Tracker) CreateAcked(p *corev1.Pod, at time.Time) {
	t.set(p, func(r *Rec) { r.CreateAck = at })
	t.acked.Add(1)
}

// StatusAcked records that the status write for p returned at at.
func (t *Tracker) StatusAcked(p *corev1.Pod, at time.Time) {
	t.set(p, func(r *Rec) { r.StatusAck = at })
}

// Fail counts a failed call and keeps the last error.
func (t *Tracker) Fail(err error) {
	t.errs.Add(1)
	s := err.Error()
	t.lastErr.Store(&s)
}

// Observe takes one watch event's object, received at at.
func (t *Tracker) Observe(p *corev1.Pod, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rec(p.Namespace, p.Name)
	r.Created = p.CreationTimestamp
	if r.Seen.IsZero() {
		r.Seen = at
	}
	if r.Running.IsZero() && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
		r.Running = at
		t.running++
		t.byNS[p.Namespace]++
		if _, ok := p.Annotations[kube.AnnClaimID]; ok {
			t.claimAnn++
		}
		if t.running == t.want {
			close(t.done)
		}
	}
}

// Done closes once want Pods have been seen Running.
func (t *Tracker) Done() <-chan struct{} { return t.done }

// Running is the number of Pods seen Running so far.
func (t *Tracker) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// RunningByNamespace is Running per namespace.
func (t *Tracker) RunningByNamespace() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.byNS))
	for k, v := range t.byNS {
		out[k] = v
	}
	return out
}

// Acked is the number of creates acknowledged so far.
func (t *Tracker) Acked() int64 { return t.acked.Load() }

// ClaimAnnotated is the number of Running Pods that carried the claim-id
// annotation.
func (t *Tracker) ClaimAnnotated() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claimAnn
}

// Errors is the count of failed calls and the last error ("" if none).
func (t *Tracker) Errors() (int64, string) {
	s := ""
	if p := t.lastErr.Load(); p != nil {
		s = *p
	}
	return t.errs.Load(), s
}

// Snapshot copies every record.
func (t *Tracker) Snapshot() []Rec {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Rec, 0, len(t.pods))
	for _, r := range t.pods {
		out = append(out, *r)
	}
	return out
}

// Rewatches is how many times the harness's own watch stream ended and was
// reopened: the apiserver ends a watcher that falls behind, so a run with
// many of them was also measuring a starved harness.
func (t *Tracker) Rewatches() int64 { return t.rewatch.Load() }
