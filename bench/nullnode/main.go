// Command nullnode is a minimal node: the least a client-go node can do
// for a Pod. bench/burst (null-node mode) and bench/fleet (-null-nodes)
// run it in place of vk-sandbox, in its own process, so that vk-sandbox's
// time and CPU per Pod are read against the Kubernetes API work alone, in
// the same run.
//
// It opens one informer on the Pods bound to its node name (field selector
// spec.nodeName, protobuf, no compression, no resync; a watch the
// apiserver ends before its first event is re-opened at once, as
// vk-sandbox's is) and starts -workers status writers (16). Per Pod, and nothing else:
//
//   - the watch event is decoded into the informer's cache, with its
//     managedFields dropped, as vk-sandbox's cache does;
//   - if the Pod is not Running, the event handler hands the cached Pod to
//     a free writer (the informer's listener buffers the Pods waiting);
//   - the writer sends one PUT of pods/status with a status close to the
//     provider's (podload.FakeRunning) and does not decode the answer, as
//     vk-sandbox does not.
//
// No claim, no state file, no Event, no workqueue, no lister, and no GET
// unless a write conflicts (with -sandboxd, a claim and a state file: see
// claimer). A write that fails is retried with a backoff
// until it succeeds, the Pod is gone, or the node stops; a conflict
// refetches the Pod first. Updates, its own write's echo among them, are
// not handled.
//
// Usage: nullnode -kubeconfig FILE -node NAME [-workers 16]
// [-sandboxd URL -token TOKEN -state FILE]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
)

type options struct {
	kubeconfig, node, contentType string
	workers                       int
	sandboxd, token, state        string // the claim, when sandboxd is set
	resumeShortWatches            bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the apiserver")
	flag.StringVar(&o.node, "node", "", "node name: the Pods bound to it are written Running")
	flag.IntVar(&o.workers, "workers", 16, "status writers")
	flag.StringVar(&o.contentType, "content-type", podload.DefaultContentType, "encoding spoken to the apiserver")
	flag.StringVar(&o.sandboxd, "sandboxd", "", "sandboxd URL: claim each Pod's VM there and record it in -state before writing Running (the minimal node that claims)")
	flag.StringVar(&o.token, "token", "", "sandboxd node token (with -sandboxd)")
	flag.StringVar(&o.state, "state", "", "state file of the claims (with -sandboxd)")
	flag.BoolVar(&o.resumeShortWatches, "resume-short-watches", true, "re-open a Pod watch the apiserver ends before its first event, from the same resourceVersion, as vk-sandbox does (false: client-go's reflector backs off and relists)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "nullnode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.node == "" {
		return fmt.Errorf("-node is required")
	}
	if o.workers < 1 {
		return fmt.Errorf("-workers %d: want at least 1", o.workers)
	}
	var cl *claimer
	if o.sandboxd != "" {
		var err error
		if cl, err = newClaimer(o.sandboxd, o.token, o.state, o.node, o.workers); err != nil {
			return err
		}
		defer cl.close()
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	rc.DisableCompression = true
	cs, err := podload.Clientset(rc, o.contentType)
	if err != nil {
		return err
	}
	var ends watchEnds
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(dropManagedFields))
	inf := f.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		return podInformer(cs, o.node, o.resumeShortWatches, &ends)
	})
	defer func() {
		fmt.Fprintf(os.Stderr, "nullnode: Pod watches the apiserver ended: %d resumed, %d handed back to the reflector\n", ends.resumed.Load(), ends.handedBack.Load())
	}()
	pending := make(chan *corev1.Pod) // unbuffered: the informer's listener holds the backlog
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase != corev1.PodRunning {
				select {
				case pending <- p:
				case <-ctx.Done():
				}
			}
		},
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	fmt.Println("ready") // bench/burst starts the burst on this line
	w := &writer{cs: cs, cl: cl}
	for range o.workers {
		go func() {
			for {
				select {
				case p := <-pending:
					w.writeRunning(ctx, p)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	<-ctx.Done()
	f.Shutdown()
	return nil
}

// podInformer is the informer of node's Pods (field selector
// spec.nodeName). With resume, its watches are vk-sandbox's
// (vkcompat.ResumeShortWatches): a watch the apiserver ends before
// delivering anything is opened again at once instead of costing the
// reflector's backoff and a relist, which in a burst would stall this
// node for a second and more and make the floor slower than a node has
// to be.
func podInformer(cs kubernetes.Interface, node string, resume bool, ends *watchEnds) cache.SharedIndexInformer {
	lw := vkcompat.NodePods(cs, node)
	if resume {
		lw = vkcompat.ResumeShortWatches(lw, ends)
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// watchEnds counts the Pod watches the apiserver ended
// (vkcompat.WatchObserver), printed when the node stops.
type watchEnds struct{ resumed, handedBack atomic.Int64 }

func (e *watchEnds) PodWatchEnded(resumed bool) {
	if resumed {
		e.resumed.Add(1)
	} else {
		e.handedBack.Add(1)
	}
}

// dropManagedFields is the informer's transform: nothing here reads them.
// The informer owns each object it decodes, so it may change it in place.
func dropManagedFields(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

type writer struct {
	cs  kubernetes.Interface
	cl  *claimer     // nil: no claim
	seq atomic.Int64 // distinct Pod IPs
}

// writeRunning writes cached's status Running, retrying until it is
// written, the Pod is gone or ctx ends. cached belongs to the informer's
// cache and is never changed: the status goes on a shallow copy.
func (w *writer) writeRunning(ctx context.Context, cached *corev1.Pod) {
	if w.cl != nil {
		if err := w.cl.claim(ctx, cached); err != nil {
			fmt.Fprintf(os.Stderr, "nullnode: %s/%s: %v\n", cached.Namespace, cached.Name, err)
			return
		}
	}
	p := *cached
	p.Status = podload.FakeRunning(cached, int(w.seq.Add(1)-1))
	op := func() error {
		err := w.putStatus(ctx, &p)
		switch {
		case err == nil:
			return nil
		case apierrors.IsNotFound(err):
			return backoff.Permanent(err)
		case apierrors.IsConflict(err):
			fresh, gerr := w.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				return backoff.Permanent(gerr)
			}
			if gerr == nil {
				if fresh.UID != cached.UID || fresh.Status.Phase == corev1.PodRunning {
					return nil // a new Pod of that name (its own Add comes), or already written
				}
				p.ObjectMeta = fresh.ObjectMeta
				p.ManagedFields = nil
			}
		}
		return err
	}
	notify := func(err error, _ time.Duration) {
		fmt.Fprintf(os.Stderr, "nullnode: status of %s/%s: %v (retrying)\n", p.Namespace, p.Name, err)
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0)), ctx), notify); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "nullnode: status of %s/%s: %v\n", p.Namespace, p.Name, err)
	}
}

// putStatus sends p's status and reads, but does not decode, the answer;
// an error is decoded (IsNotFound and IsConflict work on it).
func (w *writer) putStatus(ctx context.Context, p *corev1.Pod) error {
	return w.cs.CoreV1().RESTClient().Put().
		Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("status").
		Body(p).Do(ctx).Error()
}
