// Command nullnode is the least a client-go node can do for a Pod: watch
// the Pods bound to its node name and write each one Running once. No
// claim, no state file, no Events, no virtual-kubelet controller.
// bench/burst runs it as the null-node mode, so that vk-sandbox's CPU per
// Pod can be read against the cost of the Kubernetes API work alone, in
// the same run.
//
// It speaks to the apiserver as vk-sandbox does by default: protobuf, no
// compression, client limits 1000 / 2000, and vk-sandbox's own Pod
// informer (kube.NodePods: field selector, no managedFields). Its status
// write decodes the answer (the typed client; vk-sandbox skips that).
//
// Usage: nullnode -kubeconfig FILE -node NAME [-workers 10]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
	"github.com/cocoonstack/vk-sandbox/kube"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	node := flag.String("node", "", "node name: the Pods bound to it are written Running")
	workers := flag.Int("workers", 10, "concurrent status writes")
	contentType := flag.String("content-type", podload.DefaultContentType, "encoding spoken to the apiserver")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *node, *workers, *contentType); err != nil {
		fmt.Fprintln(os.Stderr, "nullnode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, node string, workers int, contentType string) error {
	if node == "" {
		return fmt.Errorf("-node is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	rc.DisableCompression = true
	cs, err := podload.Clientset(rc, contentType)
	if err != nil {
		return err
	}
	f := kube.NodePods(cs, node) // vk-sandbox's own watch and cache
	pods := f.Core().V1().Pods()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase != corev1.PodRunning {
				q.Add(cache.MetaObjectToName(p).String())
			}
		},
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	fmt.Println("ready") // bench/burst starts the burst on this line
	var seq atomic.Int64 // distinct Pod IPs
	for range workers {
		go func() {
			for write(ctx, cs, pods.Lister(), q, &seq) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// write takes one key from q and writes that Pod Running, requeueing it
// on an error; false once q is shut down.
func write(ctx context.Context, cs kubernetes.Interface, pods corelisters.PodLister, q workqueue.TypedRateLimitingInterface[string], seq *atomic.Int64) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	p, err := pods.Pods(ns).Get(name)
	if err != nil || p.Status.Phase == corev1.PodRunning {
		q.Forget(key)
		return true
	}
	p = p.DeepCopy()
	p.Status = podload.FakeRunning(p, int(seq.Add(1)-1))
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "nullnode: status of %s: %v\n", key, err)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}
