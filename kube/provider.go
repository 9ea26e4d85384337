package kube

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync/atomic"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/kube/kubeletapi"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// claimEngine is what the provider needs from the pipeline.
type claimEngine interface {
	Create(ctx context.Context, it pipeline.Intent) error
	Delete(ctx context.Context, ref pipeline.PodRef, authorize func(context.Context) pipeline.Verdict) (pipeline.DeleteResult, error)
	Lookup(key pipeline.PodKey) (pipeline.ClaimView, bool)
	Credential(key pipeline.PodKey, podUID string) (id, token string, ok bool)
	Deleted(uid string) bool
}

// Provider is the virtual-kubelet provider (PodLifecycleHandler and
// PodNotifier). It also implements pipeline.Reporter: newProvider builds it
// and the pipeline that reports to it in one step.
type Provider struct {
	// podClient, when set, lets DeletePod remove a decided Pod object at once
	// (grace 0, UID precondition), as a kubelet does once its containers
	// stopped; otherwise virtual-kubelet waits out the grace period.
	podClient corev1client.PodsGetter
	// api serves the kubelet API's interactive surfaces (exec,
	// port-forward, logs, stats) over this provider's Pods and claims
	// (kubeletapi.go); node.go wires its handlers.
	api *kubeletapi.API

	engine claimEngine
	auth   *Authorizer
	events record.EventRecorder
	log    *slog.Logger
	cache  *podCache // the Pods this node serves, by key
	notify atomic.Pointer[func(*corev1.Pod)]
	// fallbackIP is the Pod IP of a claim whose owner_addr host is not an
	// IP (see podIP); unset until SetPodIPFallback.
	fallbackIP atomic.Pointer[netip.Addr]
}

// SetPodIPFallback sets the Pod IP used when a claim's owner_addr is absent
// or names a host rather than an IP. Safe to call while Pods are served.
func (p *Provider) SetPodIPFallback(ip netip.Addr) {
	if ip.IsValid() {
		p.fallbackIP.Store(&ip)
	}
}

// OpenSessions is how many exec sessions and port-forward connections the
// node's kubelet API has open now (vksandbox_kubelet_sessions).
func (p *Provider) OpenSessions() (exec, forward int) { return p.api.OpenSessions() }

func (p *Provider) podIPFallback() netip.Addr {
	if ip := p.fallbackIP.Load(); ip != nil {
		return *ip
	}
	return netip.Addr{}
}

// ProviderOptions is what a Provider is built from.
type ProviderOptions struct {
	Authorizer *Authorizer
	Events     record.EventRecorder // nil: no Kubernetes Events
	Log        *slog.Logger
	PodClient  corev1client.PodsGetter // see Provider.podClient
	// Sandboxd, NodeName, Sessions and Forwards configure the interactive
	// surfaces (see kubeletapi.Options).
	Sandboxd kubeletapi.Sandboxd
	NodeName string
	Sessions kubeletapi.SessionLimits
	Forwards kubeletapi.SessionLimits
	// SessionRefused, when set, hears of each session refused at a cap
	// (kubeletapi.Options.Refused).
	SessionRefused func(kind, limit string)
}

// newProvider builds a provider and, through build, the claim pipeline it
// feeds, given the provider as the pipeline's Reporter. NewDaemon is the
// one caller outside tests: a provider is never assembled apart from its
// node.
func newProvider(o ProviderOptions, build func(pipeline.Reporter) (claimEngine, error)) (*Provider, error) {
	if build == nil {
		return nil, errors.New("kube: a provider needs a claim pipeline")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Events == nil {
		o.Events = &record.FakeRecorder{}
	}
	p := &Provider{auth: o.Authorizer, events: o.Events, log: o.Log, cache: newPodCache(), podClient: o.PodClient}
	p.api = kubeletapi.New(kubeletapi.Options{Pods: claimedPods{p}, Sandboxd: o.Sandboxd, NodeName: o.NodeName,
		Log: o.Log, Sessions: o.Sessions, Forwards: o.Forwards, Refused: o.SessionRefused})
	eng, err := build(p)
	if err != nil {
		return nil, err
	}
	p.engine = eng
	return p, nil
}

func podKey(pod *corev1.Pod) pipeline.PodKey { return pipeline.JoinKey(pod.Namespace, pod.Name) }

func refOf(pod *corev1.Pod) pipeline.PodRef {
	ref := pipeline.PodRef{Key: podKey(pod), UID: string(pod.UID)}
	if o := metav1.GetControllerOf(pod); o != nil {
		ref.OwnerUID = string(o.UID)
		ref.Owner = ownerString(o)
	}
	return ref
}

// CreatePod validates the annotations and records the claim intent. It
// returns before sandboxd is asked: the outcome is pushed through
// NotifyPods. Only invalid annotations fail the create; a capacity miss or
// a sandboxd error leaves the Pod Pending with a reason (never Failed).
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod)
	p.log.DebugContext(ctx, "CreatePod", "pod", key, "uid", pod.UID)
	spec, err := ParseClaimSpec(key, pod.Annotations)
	if err != nil {
		p.events.Event(pod, corev1.EventTypeWarning, eventInvalid, err.Error())
		p.log.WarnContext(ctx, "sandbox pod rejected", "pod", key, "error", err)
		return err
	}
	// virtual-kubelet hands the provider a copy of its own and never
	// touches it again, so the cache's entry shares it (see revise). It is
	// already stamped with its generation by the informer
	// (vkcompat.PodCacheTransform).
	np := revise(pod)
	np.Status = pendingStatus(pod, "SandboxClaiming", "claiming a warm sandbox")
	p.cache.put(key, np)
	ref := refOf(pod)
	// Create never blocks: a full shard leaves the Pod Pending
	// (SandboxQueueFull) and offers its intent again later (see
	// pipeline.Engine.Create). It fails only once shutdown has begun. That
	// error is logged, not returned: returning it would make a
	// restartPolicy Never Pod terminally Failed, and shutdown is no cause.
	// A Pod not queued at shutdown stays Pending; the next process claims
	// it.
	if err := p.engine.Create(context.WithoutCancel(ctx), pipeline.Intent{Ref: ref, Spec: spec}); err != nil {
		p.log.WarnContext(ctx, "claim not queued; the Pod stays Pending for the next process", "pod", key, "error", err)
	}
	return nil
}

// UpdatePod records the newest object only: sandbox Pods are immutable at
// the runtime level. An update for another generation than the one held
// is either the replacement of that generation or a stale one, decided by
// newerGeneration.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod)
	p.log.DebugContext(ctx, "UpdatePod", "pod", key, "uid", pod.UID)
	cur := p.cache.get(key)
	if cur == nil || isRestored(cur) {
		return p.CreatePod(ctx, pod)
	}
	if cur.UID != pod.UID {
		if p.newerGeneration(pod, cur) {
			return p.CreatePod(ctx, pod)
		}
		p.log.InfoContext(ctx, "ignored an update of an older Pod generation", "pod", key, "uid", pod.UID, "current_uid", cur.UID)
		return nil
	}
	p.cache.mutate(key, string(pod.UID), func(old *corev1.Pod) *corev1.Pod {
		np := revise(pod)
		np.Status = old.Status
		// The annotations this provider writes back survive an update
		// that does not carry them yet.
		for _, a := range writtenBack {
			if v, ok := old.Annotations[a]; ok {
				if np.Annotations == nil {
					np.Annotations = map[string]string{}
				}
				np.Annotations[a] = v
			}
		}
		return np
	})
	return nil
}

// newerGeneration reports whether pod, another generation of the key than
// cur, replaces it. virtual-kubelet hands a replacement over as an update
// when the old Pod's delete and the new Pod's create reach its worker as
// one sync of the key (vkcompat.NewerGeneration orders the two). A
// generation the engine saw deleted is stale.
func (p *Provider) newerGeneration(pod, cur *corev1.Pod) bool {
	return !p.engine.Deleted(string(pod.UID)) && vkcompat.NewerGeneration(pod, cur)
}

// DeletePod decides, from the owner, whether the VM goes with the Pod. A
// release failure returns an error and keeps both the claim and the Pod
// entry, so virtual-kubelet retries the delete with the credential intact.
// DeletePod may be called several times for one Pod.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	ref := refOf(pod)
	p.log.DebugContext(ctx, "DeletePod", "pod", ref.Key, "uid", ref.UID)
	res, err := p.engine.Delete(ctx, ref, func(ctx context.Context) pipeline.Verdict {
		return p.auth.authorize(ctx, pod)
	})
	if err != nil {
		p.events.Event(pod, corev1.EventTypeWarning, EventReleaseFailed, err.Error())
		p.log.ErrorContext(ctx, "release failed; the delete will be retried", "pod", ref.Key, "error", err)
		return err
	}
	if res.Held && !res.Shared {
		if res.Verdict.Release {
			p.events.Eventf(pod, corev1.EventTypeNormal, eventReleased, "VM released (%s)", res.Verdict.Reason)
		} else {
			p.events.Eventf(pod, corev1.EventTypeNormal, eventPreserved, "VM preserved for a replacement Pod (%s)", res.Verdict.Reason)
		}
	}
	if p.cache.remove(ref.Key, ref.UID) && pod.DeletionTimestamp != nil && p.podClient != nil {
		p.finishDelete(ctx, pod)
	}
	return nil
}

// GetPod is served from memory. It returns every Pod that holds a claim:
// virtual-kubelet deletes through it.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	key := pipeline.JoinKey(namespace, name)
	if pod := p.cache.get(key); pod != nil {
		return pod, nil
	}
	return nil, errdefs.NotFoundf("pod %s is not known to this node", key)
}

// GetPodStatus is served from memory.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return pod.Status.DeepCopy(), nil
}

// GetPods is served from memory.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) { return p.cache.list(), nil }

// NotifyPods registers virtual-kubelet's status callback. It does not block.
func (p *Provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) { p.notify.Store(&cb) }

// push hands virtual-kubelet pod's new status: its metadata and status
// alone. virtual-kubelet compares what it is given with the last one
// (go-cmp), copies it, and writes it as the Pod's status, and on a status
// write the apiserver keeps the stored spec whatever the request carries,
// so a spec would be compared, copied, encoded and decoded for nothing.
// The metadata is shared with the cache entry, which is never mutated.
func (p *Provider) push(pod *corev1.Pod) {
	if cb := p.notify.Load(); cb != nil && pod != nil {
		(*cb)(&corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Status: pod.Status})
	}
}

// finishDelete ends a gracefully deleted Pod once its VM is released or
// preserved: nothing runs on this node for it any more. The UID
// precondition makes sure a same-name replacement is never touched.
// (docs/virtual-kubelet.md, 16; e2e TestAGracefulDeleteEndsOnceItsVMIsReleased.)
func (p *Provider) finishDelete(ctx context.Context, pod *corev1.Pod) {
	zero := int64(0)
	uid := pod.UID
	err := p.podClient.Pods(pod.Namespace).Delete(context.WithoutCancel(ctx), pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		p.log.WarnContext(ctx, "could not finish the Pod delete; virtual-kubelet will after its grace period", "pod", podKey(pod), "error", err)
	}
}
