package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/kube/kubeletapi"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// Node identity (the Pod contract (docs/pod-contract.md)).
const (
	LabelRuntime = "sandbox.cocoonstack.io/runtime"
	TaintKey     = "virtual-kubelet.io/provider"
)

// DefaultNodeOptions are the values NodeOptions' zero fields take, and the
// defaults of vk-sandbox's matching flags: the one place they are set. A
// function, so that no caller can change the defaults of another.
func DefaultNodeOptions() NodeOptions {
	return NodeOptions{ListenAddr: ":10260", CPU: "4000", Memory: "8Ti", Pods: 2000, Workers: 64, RetryMax: 30 * time.Second}
}

// DefaultOwnerGetTimeout bounds each owner GET when Authorizer.Timeout is 0.
const DefaultOwnerGetTimeout = 5 * time.Second

// NodeOptions configures the virtual node. Zero values take the defaults
// documented on each field.
type NodeOptions struct {
	Name       string            // required
	IP         string            // InternalIP address, optional
	ListenAddr string            // kubelet API; its port is the kubeletEndpoint
	Labels     map[string]string // added to type=virtual-kubelet and the runtime label
	CPU        string
	Memory     string
	Pods       int
	TLS        *tls.Config // kubelet serving TLS (KubeletTLS)
	Version    string

	Client        kubernetes.Interface // required
	EventRecorder record.EventRecorder // required
	// Workers is virtual-kubelet's worker count for its sync and status
	// queues. CreatePod returns without waiting for sandboxd, so these
	// workers only do API calls; default 64.
	Workers int
	// Metrics receives virtual-kubelet's queue metrics; nil records none.
	Metrics *telemetry.Metrics
	// RetryMax caps the per-Pod backoff of virtual-kubelet's queues (a
	// failed status write or final delete is retried from 5 ms, doubling
	// up to this); default 30s.
	RetryMax time.Duration
	// DefaultRateLimiters keeps virtual-kubelet's 10 qps / burst 100 token
	// bucket on its queues, unmetered. Only for measuring what replacing it
	// buys.
	DefaultRateLimiters bool
	// NoAuth serves the kubelet API without TokenReview/SubjectAccessReview.
	// Never for production: the API then answers anonymous clients.
	NoAuth bool
	// ClientCA is a PEM bundle of the CAs whose client certificates the
	// kubelet API accepts (the cluster CA that signed the apiserver's
	// kubelet client certificate), as a kubelet's --client-ca-file. A
	// verified certificate's CN is the user and its O the groups, and every
	// request is still authorized with a SubjectAccessReview. Without it
	// only bearer tokens (TokenReview) authenticate, and the apiserver's
	// proxied exec, port-forward, logs and stats are refused 401.
	ClientCA []byte
	// Health configures the checks behind the SandboxdReady and
	// DiskPressure conditions and the sandboxd taint.
	Health NodeHealthOptions
}

// Node is the virtual-kubelet node plus its kubelet API server.
//
// The kubelet API is served here rather than by virtual-kubelet, whose
// server sets no idle timeout and no connection limit: see
// telemetry.ServerLimits for what a client can hold.
type Node struct {
	ctl    *controllers
	api    *http.Server
	addr   string
	tls    *tls.Config
	limits telemetry.ServerLimits
}

// run serves the kubelet API and runs the node until ctx ends. It returns
// nil once ctx ends, else the error that stopped a controller.
func (n *Node) run(ctx context.Context) error {
	if n.tls != nil {
		ln, err := telemetry.Listen(n.addr, n.tls, n.limits)
		if err != nil {
			return fmt.Errorf("kubelet API listener on %s: %w", n.addr, err)
		}
		go func() { _ = n.api.Serve(ln) }()
		defer n.api.Close()
	}
	err := n.ctl.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Ready is closed once the node is registered and marked Ready.
func (n *Node) Ready() <-chan struct{} { return n.ctl.ready }

// Checks are the node's readiness checks, for /readyz: the node registered,
// and sandboxd answering with the token accepted.
func (n *Node) Checks() []Check { return n.ctl.status.checks() }

// newNode builds the virtual-kubelet node around the provider.
func newNode(o NodeOptions, p *Provider) (*Node, error) {
	if o.Name == "" || o.Client == nil || o.EventRecorder == nil {
		return nil, fmt.Errorf("node: a name, a client and an event recorder are required")
	}
	if o.ListenAddr == "" {
		o.ListenAddr = DefaultNodeOptions().ListenAddr
	}
	_, portStr, err := net.SplitHostPort(o.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("node: --listen-addr %q: %w", o.ListenAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("node: --listen-addr %q: bad port", o.ListenAddr)
	}
	capacity, err := nodeCapacity(o)
	if err != nil {
		return nil, err
	}
	workers := o.Workers
	if workers <= 0 {
		workers = DefaultNodeOptions().Workers
	}
	if len(o.ClientCA) > 0 && o.NoAuth {
		return nil, fmt.Errorf("node: a client CA authenticates kubelet API clients, which --unsafe-kubelet-no-auth turns off: give one or the other")
	}
	spec := newNodeSpec(o.Name)
	identity(spec, o, int32(port), capacity)
	var overrides []func(*node.PodControllerConfig) error
	if !o.DefaultRateLimiters {
		retryMax := o.RetryMax
		if retryMax <= 0 {
			retryMax = DefaultNodeOptions().RetryMax
		}
		overrides = append(overrides, vkcompat.ReplaceRateLimiters(o.Metrics, retryMax))
	}
	ctl, err := newControllers(controllerConfig{client: o.Client, spec: spec, provider: p, recorder: o.EventRecorder, workers: workers, overrides: overrides, health: o.Health, metrics: o.Metrics})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	attachKubeletAPI(mux, p, ctl.informers.Core().V1().Pods().Lister())
	var handler http.Handler = mux
	if !o.NoAuth {
		var opts []nodeutil.WebhookAuthOption
		if len(o.ClientCA) > 0 {
			tlsCfg, opt, err := clientCertAuth(o.TLS, o.ClientCA)
			if err != nil {
				return nil, err
			}
			o.TLS, opts = tlsCfg, append(opts, opt)
		}
		auth, err := nodeutil.WebhookAuth(o.Client, o.Name, opts...)
		if err != nil {
			return nil, fmt.Errorf("kubelet API auth: %w", err)
		}
		handler = nodeutil.WithAuth(auth, mux)
	}
	limits := telemetry.DefaultServerLimits()
	return &Node{ctl: ctl, api: telemetry.NewServer(handler, limits), addr: o.ListenAddr, tls: o.TLS, limits: limits}, nil
}

// newNodeSpec is the Node as virtual-kubelet's nodeutil starts it: Pending,
// with the kubelet's conditions unset until the node is Ready.
func newNodeSpec(name string) *corev1.Node {
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": name}
	n.Status.Phase = corev1.NodePending
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t})
	}
	return n
}

// attachKubeletAPI serves the kubelet API routes (exec, port-forward,
// logs, stats, the Pod lists) from the provider, as virtual-kubelet's
// nodeutil.AttachProviderRoutes does.
func attachKubeletAPI(mux *http.ServeMux, p *Provider, pods corev1listers.PodLister) {
	mux.Handle("/", p.api.WebSocketExec(api.PodHandler(api.PodHandlerConfig{
		RunInContainer:        p.api.RunInContainer,
		AttachToContainer:     p.api.AttachToContainer,
		GetContainerLogs:      p.api.GetContainerLogs,
		GetPods:               p.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) { return pods.List(labels.Everything()) },
		GetStatsSummary:       p.api.GetStatsSummary,
		GetMetricsResource:    p.api.GetMetricsResource,
		PortForward:           p.api.PortForward,
		StreamIdleTimeout:     p.api.IdleTimeout(),
	}, true)))
	// virtual-kubelet swaps port-forward's two timeouts (vkcompat.PortForward):
	// its route is served here instead, with the idle timeout as the idle
	// timeout and the kubelet's creation timeout.
	mux.Handle(vkcompat.PortForwardRoute, kubeletapi.TunneledPortForward(vkcompat.PortForward(p.api.PortForward, p.api.IdleTimeout(), vkcompat.KubeletStreamCreationTimeout)))
}

func nodeCapacity(o NodeOptions) (corev1.ResourceList, error) {
	def := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	cpu, err := resource.ParseQuantity(def(o.CPU, DefaultNodeOptions().CPU))
	if err != nil {
		return nil, fmt.Errorf("node: --node-cpu %q: %w", o.CPU, err)
	}
	mem, err := resource.ParseQuantity(def(o.Memory, DefaultNodeOptions().Memory))
	if err != nil {
		return nil, fmt.Errorf("node: --node-memory %q: %w", o.Memory, err)
	}
	pods := o.Pods
	if pods <= 0 {
		pods = DefaultNodeOptions().Pods
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}, nil
}

func identity(n *corev1.Node, o NodeOptions, port int32, capacity corev1.ResourceList) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range o.Labels {
		n.Labels[k] = v
	}
	// Routing depends on these two: --node-labels cannot override them.
	n.Labels["type"] = "virtual-kubelet"
	n.Labels[LabelRuntime] = RuntimeSandboxd
	n.Spec.Taints = []corev1.Taint{{Key: TaintKey, Value: RuntimeSandboxd, Effect: corev1.TaintEffectNoSchedule}}
	n.Status.Addresses = nil
	if o.IP != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: o.IP})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: o.Name})
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	n.Status.Capacity = capacity
	n.Status.Allocatable = capacity.DeepCopy()
	n.Status.NodeInfo.KubeletVersion = "vk-sandbox/" + o.Version
	// The binary's own platform: the node runs where it runs.
	n.Status.NodeInfo.OperatingSystem = runtime.GOOS
	n.Status.NodeInfo.Architecture = runtime.GOARCH
	// The kubelet API serves WebSocket exec, attach and port-forward
	// itself (kubeletapi.API.WebSocketExec, kubeletapi.TunneledPortForward): the apiserver
	// then proxies them instead of translating them to SPDY.
	n.Status.DeclaredFeatures = []string{kubeletapi.WebSocketFeature}
}
