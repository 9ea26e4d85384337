package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// R1 workload: owner+Pod pairs driven through their lives while the binary
// is killed under them, with a book of what each owner's VM may suffer.

// r1Fate is what happens to a pair once its Pod first runs.
type r1Fate int

const (
	r1Release  r1Fate = iota // delete the owner, then the Pod: the VM must go
	r1Preserve               // delete the Pod only, recreate it: the same VM must come back; then release
	r1Keep                   // left Running until the end
)

func r1FateOf(r *rand.Rand) r1Fate {
	switch x := r.IntN(100); {
	case x < 45:
		return r1Release
	case x < 80:
		return r1Preserve
	default:
		return r1Keep
	}
}

// r1Pair is the book entry of one pod key.
type r1Pair struct {
	name      string
	fate      r1Fate
	owner     *unstructured.Unstructured
	runningID string          // the claim id last seen on the Pod while Running
	ranOn     map[string]bool // every claim id seen on the Pod while Running (under the book's lock)
	ownerGone bool            // set before the owner delete is sent: from then on a release is authorized
	done      bool            // the flow finished (nothing will create this Pod again, except the final cleanup)
}

// r1Book is shared by the workers, the killer and the release recorder.
type r1Book struct {
	ns    string
	mu    sync.Mutex
	pairs map[string]*r1Pair // by pod key

	releases    int
	undelivered int      // releases of a VM its Pod never ran on, while the owner lives
	preserved   int      // preserve flows that got the same VM back
	wrongful    []string // releases of a VM whose owner was alive
}

func (b *r1Book) key(name string) string { return b.ns + "/" + name }

// onRelease judges one successful release at sandboxd. Invariant: only an
// owner deletion authorizes the release of a VM a Pod runs on; the owner is
// marked gone before the delete is sent, so a legitimate release always
// finds the mark. A VM its Pod never ran on (a claim that finished after
// its answer was lost, while the Pod got another VM) was delivered to no
// one, and the node may release it while the owner lives.
func (b *r1Book) onRelease(id, claimRef string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releases++
	p := b.pairs[claimRef]
	switch {
	case p == nil:
		b.wrongful = append(b.wrongful, fmt.Sprintf("sandbox %s (claim_ref %q) released, and no pair of this test owns it", id, claimRef))
	case !p.ownerGone && p.runningID != id && !p.ranOn[id]:
		b.undelivered++
	case !p.ownerGone:
		b.wrongful = append(b.wrongful, fmt.Sprintf("sandbox %s of pod %s released while its owner %s (uid %s) is alive (VM last seen Running: %q)",
			id, claimRef, p.owner.GetName(), p.owner.GetUID(), p.runningID))
	}
}

func (b *r1Book) update(key string, fn func(p *r1Pair)) {
	b.mu.Lock()
	fn(b.pairs[key])
	b.mu.Unlock()
}

// snapshot copies the book (value copies) for a checkpoint.
func (b *r1Book) snapshot() map[string]r1Pair {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]r1Pair, len(b.pairs))
	for k, p := range b.pairs {
		out[k] = *p
	}
	return out
}

// r1Signal is a broadcast: changed() returns a channel that the next
// poke() closes.
type r1Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newR1Signal() *r1Signal { return &r1Signal{ch: make(chan struct{})} }

func (s *r1Signal) poke() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

func (s *r1Signal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// r1Pods is a Pod informer on the test namespace with a broadcast on every
// change, so workers wait on events rather than poll the apiserver.
type r1Pods struct {
	*r1Signal
	lister corelisters.PodLister
}

func newR1Pods(ctx context.Context, cs kubernetes.Interface, ns string) (*r1Pods, error) {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods()
	w := &r1Pods{r1Signal: newR1Signal(), lister: inf.Lister()}
	poke := func(any) { w.poke() }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { w.poke() },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer %v did not sync", typ)
		}
	}
	return w, nil
}

// await waits until cond holds for the cached Pod (nil: absent).
func (w *r1Pods) await(ctx context.Context, ns, name string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	for {
		ch := w.changed()
		p, err := w.lister.Pods(ns).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err != nil {
			p = nil
		}
		if cond(p) {
			return p, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
}

// r1Driver runs the pairs.
type r1Driver struct {
	book    *r1Book
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	pods    *r1Pods
	node    string
	seed    uint64
	timeout time.Duration // per wait for one Pod
}

func (d *r1Driver) createPair(ctx context.Context, i int) (*r1Pair, error) {
	name := fmt.Sprintf("p%04d", i)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": d.book.ns},
	}}
	owner, err := d.dyn.Resource(sandboxGVR).Namespace(d.book.ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s: create owner: %w", d.book.key(name), err)
	}
	p := &r1Pair{name: name, fate: r1FateOf(rand.New(rand.NewPCG(d.seed, uint64(i)))), owner: owner}
	d.book.mu.Lock()
	d.book.pairs[d.book.key(name)] = p
	d.book.mu.Unlock()
	return p, nil
}

// runPod creates the pair's Pod and waits for it to run; it returns the
// claim id on the Running Pod.
func (d *r1Driver) runPod(ctx context.Context, p *r1Pair) (string, error) {
	key := d.book.key(p.name)
	pod, err := d.cs.CoreV1().Pods(d.book.ns).Create(ctx, sandboxPod(d.book.ns, p.name, d.node, ownedBy(p.owner)), metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("pod %s: create: %w", key, err)
	}
	wctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var failed bool
	got, err := d.pods.await(wctx, d.book.ns, p.name, func(q *corev1.Pod) bool {
		failed = q != nil && q.UID == pod.UID && q.Status.Phase == corev1.PodFailed
		return failed || (q != nil && q.UID == pod.UID && isRunning(q))
	})
	switch {
	case err != nil:
		return "", &r1StuckPod{key: key, err: fmt.Errorf("pod %s (uid %s): not Running after %v: %s: %w", key, pod.UID, d.timeout, r1Describe(got), err)}
	case failed:
		return "", fmt.Errorf("pod %s (uid %s) went Failed: %s", key, pod.UID, r1Describe(got))
	}
	id := got.Annotations[kube.AnnClaimID]
	if id == "" {
		return "", fmt.Errorf("pod %s is Running without the %s annotation", key, kube.AnnClaimID)
	}
	d.book.update(key, func(p *r1Pair) {
		p.runningID = id
		if p.ranOn == nil {
			p.ranOn = map[string]bool{}
		}
		p.ranOn[id] = true
	})
	return id, nil
}

// r1StuckPod: a Pod did not reach Running; the run prints what the logs
// say about its key.
type r1StuckPod struct {
	key string
	err error
}

func (e *r1StuckPod) Error() string { return e.err.Error() }
func (e *r1StuckPod) Unwrap() error { return e.err }

func r1Describe(p *corev1.Pod) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprintf("phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
}

// deletePod deletes at once (grace 0) and waits until the Pod is gone.
func (d *r1Driver) deletePod(ctx context.Context, name string) error {
	zero := int64(0)
	err := d.cs.CoreV1().Pods(d.book.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s: delete: %w", d.book.key(name), err)
	}
	wctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if _, err := d.pods.await(wctx, d.book.ns, name, func(q *corev1.Pod) bool { return q == nil }); err != nil {
		return fmt.Errorf("pod %s: still present after a grace-0 delete: %w", d.book.key(name), err)
	}
	return nil
}

// releasePair deletes the owner, then the Pod (there is no garbage
// collector here: the Pod delete is what the cascade would do).
func (d *r1Driver) releasePair(ctx context.Context, p *r1Pair) error {
	key := d.book.key(p.name)
	d.book.update(key, func(p *r1Pair) { p.ownerGone = true })
	err := d.dyn.Resource(sandboxGVR).Namespace(d.book.ns).Delete(ctx, p.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s: delete owner: %w", key, err)
	}
	return d.deletePod(ctx, p.name)
}

// run is the life of pair i.
func (d *r1Driver) run(ctx context.Context, i int) error {
	p, err := d.createPair(ctx, i)
	if err != nil {
		return err
	}
	key := d.book.key(p.name)
	first, err := d.runPod(ctx, p)
	if err != nil {
		return err
	}
	switch p.fate {
	case r1Keep:
		return nil
	case r1Preserve:
		// The owner lives: the delete must preserve, and the replacement
		// must adopt the very same VM.
		if err := d.deletePod(ctx, p.name); err != nil {
			return err
		}
		again, err := d.runPod(ctx, p)
		if err != nil {
			return err
		}
		if again != first {
			return fmt.Errorf("pod %s: the replacement runs claim %s, want the preserved %s", key, again, first)
		}
		d.book.update(key, func(*r1Pair) { d.book.preserved++ })
	}
	if err := d.releasePair(ctx, p); err != nil {
		return err
	}
	d.book.update(key, func(p *r1Pair) { p.done = true })
	return nil
}

// cleanup releases every pair still alive (the r1Keep ones).
func (d *r1Driver) cleanup(ctx context.Context) error {
	var names []string
	for _, p := range d.book.snapshot() {
		if !p.ownerGone {
			names = append(names, p.name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		d.book.mu.Lock()
		p := d.book.pairs[d.book.key(name)]
		d.book.mu.Unlock()
		if err := d.releasePair(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
