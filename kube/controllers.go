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
	"k8s.io/client-go/tools/record"
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
// the provider's own claim write (echoFilteredPods), and its cache holds
// Pods without their managedFields: nothing on the node reads them, and
// they are a large share of each Pod's bytes in every copy and status
// write.
// The apiserver takes a status write's managedFields from the stored Pod,
// never from the request, so none is lost there.
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
}

func newControllers(c controllerConfig) (*controllers, error) {
	pods := NodePods(c.client, c.spec.Name)
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
// not give up while the Pod exists.
func podControllerConfig(c controllerConfig, pods informers.SharedInformerFactory) (node.PodControllerConfig, error) {
	// Never started (see controllers).
	unused := informers.NewSharedInformerFactory(c.client, 0).Core().V1()
	pcCfg := node.PodControllerConfig{
		PodClient:                 undecodedStatusPods{c.client.CoreV1()},
		EventRecorder:             c.recorder,
		Provider:                  c.provider,
		PodInformer:               echoFilteredPods{pods.Core().V1().Pods()},
		SecretInformer:            unused.Secrets(),
		ConfigMapInformer:         unused.ConfigMaps(),
		ServiceInformer:           unused.Services(),
		SkipDownwardAPIResolution: true,
		// A Pod's status write, and the final delete of a Pod the node
		// has let go, are retried for as long as the Pod exists (both
		// handlers return nil once the informer no longer shows it, or
		// shows another UID), backing off per Pod up to the limiter's cap.
		// virtual-kubelet's default gives up after 20 tries, about 4
		// minutes at a 30 s cap. The provider pushes a claim's Running
		// status once, so an apiserver outage longer than that would leave
		// a claimed Pod Pending for good, its VM held; and a deleted Pod
		// would stay Terminating. A kubelet does not give up either.
		SyncPodStatusFromProviderShouldRetryFunc: retryWhileThePodExists,
		DeletePodsFromKubernetesShouldRetryFunc:  retryWhileThePodExists,
	}
	for _, o := range c.overrides {
		if err := o(&pcCfg); err != nil {
			return node.PodControllerConfig{}, err
		}
	}
	return pcCfg, nil
}

// NodePods is the informer factory of this node's Pods (by field selector),
// cached as cachedPod leaves them. bench/nullnode watches through it too,
// so that its floor is measured on the same watch and cache.
func NodePods(client kubernetes.Interface, nodeName string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, informerResync, nodeutil.PodInformerFilter(nodeName),
		informers.WithTransform(cachedPod))
}

// cachedPod is the Pod cache's transform (see controllers). It may change
// the Pod in place: the informer owns each object it decodes.
//
//   - managedFields are dropped: nothing on the node reads them, and they
//     would travel in every copy and every status write (the apiserver
//     keeps them from the stored Pod).
//   - AnnPodUID is set to the Pod's own UID, whatever the apiserver holds,
//     and the Pod's first status write carries it back. Why: when a Pod's
//     delete and its same-name replacement's create reach virtual-kubelet's
//     worker as one sync, it never calls DeletePod for the old Pod. It gets
//     the provider's copy by name and calls UpdatePod only if that copy
//     differs from the new Pod in spec, labels or annotations; UIDs are not
//     compared. A replacement identical to the old Pod would then be
//     neither created nor updated, and stay Pending with no status. The
//     stamp makes them differ, even when the replacement was made from a
//     copy of the old Pod (kubectl get -o yaml, then create) and carried
//     the old generation's stamp.
func cachedPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnPodUID] = string(p.UID)
	}
	return obj, nil
}

func retryWhileThePodExists(context.Context, string, int, time.Time, error) (*time.Duration, error) {
	return nil, nil // nil delay: the queue's per-item backoff decides when
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
