package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// informerResync is how often the Pod informer replays its cache to the
// pod controller (a local replay: no API request).
const informerResync = 10 * time.Minute

// controllers are virtual-kubelet's pod and node controllers, wired as
// nodeutil.NewNode wires them except for one thing: no Secret, ConfigMap
// or Service informer is ever started. nodeutil starts cluster-wide ones
// for env resolution, which would make every node list, watch and cache
// every Secret in the cluster, and need RBAC to read them. vk-sandbox
// turns env resolution off (SkipDownwardAPIResolution), so the pod
// controller gets informers from a factory that is never started: their
// listers stay empty and nothing reaches the apiserver
// (TestShippedClusterRoleIsEnough runs with a ClusterRole that grants none
// of the three).
//
// The Pod informer the pod controller watches through drops the echo of
// the provider's own claim write (vkcompat.EchoFilteredPods), and its cache
// holds Pods stamped with their generation and without their managedFields
// (vkcompat.PodCacheTransform).
//
// The API traffic that remains: the Pod informer (this node's Pods only,
// by field selector), the Node (registered, then its status patched), the
// node Lease, and the Pod status updates, deletes and Events.
type controllers struct {
	pods      *node.PodController
	node      *node.NodeController
	informers informers.SharedInformerFactory // this node's Pods only
	status    *nodeStatus
	spec      *corev1.Node
	workers   int
	ready     chan struct{}
}

type controllerConfig struct {
	client    kubernetes.Interface
	spec      *corev1.Node
	provider  node.PodLifecycleHandler
	recorder  record.EventRecorder
	workers   int
	overrides []func(*node.PodControllerConfig) error
	health    NodeHealthOptions
	metrics   *telemetry.Metrics // the Pod watch's ends; nil counts none
}

func newControllers(c controllerConfig) (*controllers, error) {
	pods := nodePods(c.client, c.spec.Name, c.metrics)
	pcCfg, err := podControllerConfig(c, pods)
	if err != nil {
		return nil, err
	}
	pc, err := node.NewPodController(pcCfg)
	if err != nil {
		return nil, fmt.Errorf("pod controller: %w", err)
	}
	status := newNodeStatus(c.client.CoreV1().Nodes(), c.spec, c.health)
	nc, err := node.NewNodeController(status, c.spec, c.client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(nodeutil.NodeLeaseV1Client(c.client), node.DefaultLeaseDuration))
	if err != nil {
		return nil, fmt.Errorf("node controller: %w", err)
	}
	return &controllers{pods: pc, node: nc, informers: pods, status: status, spec: c.spec, workers: c.workers, ready: make(chan struct{})}, nil
}

// podControllerConfig is the pod controller's configuration: this node's
// Pod informer behind the echo filter, informers that never start for
// what env resolution would need, and status and delete queues that do
// not give up while the Pod exists. What compensates for virtual-kubelet
// comes from vkcompat.
func podControllerConfig(c controllerConfig, pods informers.SharedInformerFactory) (node.PodControllerConfig, error) {
	// Never started (see controllers).
	unused := informers.NewSharedInformerFactory(c.client, 0).Core().V1()
	pcCfg := node.PodControllerConfig{
		PodClient:                 vkcompat.NewUndecodedStatusPods(c.client.CoreV1()),
		EventRecorder:             c.recorder,
		Provider:                  c.provider,
		PodInformer:               vkcompat.EchoFilteredPods(pods.Core().V1().Pods(), writtenBack),
		SecretInformer:            unused.Secrets(),
		ConfigMapInformer:         unused.ConfigMaps(),
		ServiceInformer:           unused.Services(),
		SkipDownwardAPIResolution: true,
		// A Pod's status write, and the final delete of a Pod the node
		// has let go, are retried for as long as the Pod exists.
		SyncPodStatusFromProviderShouldRetryFunc: vkcompat.RetryWhileThePodExists,
		DeletePodsFromKubernetesShouldRetryFunc:  vkcompat.RetryWhileThePodExists,
	}
	for _, o := range c.overrides {
		if err := o(&pcCfg); err != nil {
			return node.PodControllerConfig{}, err
		}
	}
	return pcCfg, nil
}

// nodePods is the informer factory of this node's Pods (by field selector),
// cached as vkcompat.PodCacheTransform leaves them, stamped under AnnPodUID.
// Its Pod informer is client-go's, but for its watches, which
// vkcompat.ResumeShortWatches resumes when the apiserver ends them at once,
// counting each end the apiserver made in watches.
func nodePods(client kubernetes.Interface, nodeName string, watches vkcompat.WatchObserver) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(client, informerResync,
		informers.WithTransform(vkcompat.PodCacheTransform(AnnPodUID)))
	f.InformerFor(&corev1.Pod{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformerWithOptions(
			vkcompat.ResumeShortWatches(vkcompat.NodePods(client, nodeName), watches),
			&corev1.Pod{},
			cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	})
	return f
}

// run starts the Pod informer and the pod controller, then, once the pod
// controller has synced, registers the node and marks it Ready. It returns
// when ctx ends or either controller stops, after both have stopped.
func (c *controllers) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.informers.Start(ctx.Done())
	go c.pods.Run(ctx, c.workers) //nolint:errcheck // its error is read from Err once Done
	defer func() { cancel(); <-c.pods.Done() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.pods.Ready():
	case <-c.pods.Done():
		return c.pods.Err()
	}

	go c.node.Run(ctx) //nolint:errcheck // its error is read from Err once Done
	defer func() { cancel(); <-c.node.Done() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.node.Ready():
	case <-c.node.Done():
		return c.node.Err()
	}
	if err := c.status.first(ctx); err != nil {
		return fmt.Errorf("mark the node Ready: %w", err)
	}
	close(c.ready)
	go c.status.run(ctx)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.node.Done():
		return c.node.Err()
	case <-c.pods.Done():
		return c.pods.Err()
	}
}

// markReady sets the node Running with its Ready condition true, as a
// kubelet does once it serves.
func markReady(n *corev1.Node) *corev1.Node {
	n.Status.Phase = corev1.NodeRunning
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "vk-sandbox is ready", LastHeartbeatTime: now, LastTransitionTime: now}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i] = ready
			return n
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, ready)
	return n
}
