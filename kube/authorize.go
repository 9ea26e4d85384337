package kube

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// Verdict reasons. A Pod deletion is not VM authority: a Node-NotReady
// eviction deletes every Pod on the node while the VMs keep serving users,
// so only the owner's state may release (the delete authorization table (docs/pod-contract.md)).
const (
	reasonBarePod         = "bare-pod"
	ReasonOwnerGone       = "owner-gone"
	reasonOwnerDeleting   = "owner-deleting"
	reasonOwnerRotated    = "owner-uid-rotated"
	ReasonOwnerAlive      = "owner-alive"
	reasonOwnerUnverified = "owner-404-unverified"
	ReasonOwnerGetError   = "owner-get-error"
	reasonNoDynamic       = "no-dynamic-client"
	// reasonOwnerUnnamed: a row records its owner's UID but not its name
	// (an older row format), so the owner cannot be asked.
	reasonOwnerUnnamed = "owner-unnamed"
)

// Authorizer decides release or preserve for a deleted Pod by reading its
// controller owner with a fresh GET through the dynamic client (never a
// cache: a stale cache is exactly how an eviction would destroy live VMs).
type Authorizer struct {
	Dynamic dynamic.Interface // nil: every owned Pod is preserved
	Timeout time.Duration     // per GET; 0 is DefaultOwnerGetTimeout
	// Mapper resolves an owner's kind to its resource through the
	// apiserver's discovery (cached; see NewOwnerMapper). Nil: English
	// plural rules (plural.go), which an irregular plural defeats.
	Mapper meta.RESTMapper

	// Concurrent questions about one owner share one GET: virtual-kubelet
	// may call DeletePod twice at once, the re-authorization loop may ask
	// while a delete does, and the Pods of one owner go together.
	gets singleflight.Group
}

var ownerTracer = otel.Tracer(telemetry.TracerName)

// authorize implements the table of docs/pod-contract.md ("Delete
// authorization") for a deleted Pod's controller owner.
func (a *Authorizer) authorize(ctx context.Context, pod *corev1.Pod) pipeline.Verdict {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return pipeline.Verdict{Release: true, Reason: reasonBarePod}
	}
	return a.ask(ctx, pod.Namespace, owner)
}

// recordedOwner implements pipeline.OwnerAuthority: the same table, for the
// owner recorded with a claim rather than a Pod's ownerReference, which a
// same-name Pod could forge.
func (a *Authorizer) recordedOwner(ctx context.Context, key pipeline.PodKey, c pipeline.ClaimView) pipeline.Verdict {
	if !c.OwnerKnown() {
		return pipeline.Verdict{Reason: pipeline.ReasonOwnerUnknown}
	}
	if c.Owner == "" && c.OwnerUID == "" {
		return pipeline.Verdict{Release: true, Reason: reasonBarePod}
	}
	owner, ok := ownerRefOf(c)
	if !ok {
		return pipeline.Verdict{Reason: reasonOwnerUnnamed}
	}
	ns, _, _ := key.Split()
	return a.ask(ctx, ns, owner)
}

// ask reads the controller owner with a fresh GET and maps the answer.
func (a *Authorizer) ask(ctx context.Context, namespace string, owner *metav1.OwnerReference) pipeline.Verdict {
	if a == nil || a.Dynamic == nil {
		return pipeline.Verdict{Reason: reasonNoDynamic}
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil || owner.Kind == "" || owner.Name == "" {
		return pipeline.Verdict{Reason: ReasonOwnerGetError}
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultOwnerGetTimeout
	}
	ctx, span := ownerTracer.Start(ctx, "owner.get", trace.WithAttributes(
		attribute.String("vksandbox.owner", namespace+"/"+ownerString(owner))))
	defer span.End()
	// The key names the owner's UID too: the verdict compares it.
	key := namespace + "/" + ownerString(owner) + "/" + string(owner.UID)
	v, _, shared := a.gets.Do(key, func() (any, error) {
		// Not the first caller's cancellation: the GET serves every caller,
		// and has its own timeout.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		gvr, ok := a.resource(gv.WithKind(owner.Kind))
		if !ok {
			// Discovery does not know the kind (its CRD is gone, or not
			// served): that says nothing about the owner.
			return pipeline.Verdict{Reason: reasonOwnerUnverified}, nil
		}
		return a.get(ctx, gvr, namespace, owner), nil
	})
	verdict := v.(pipeline.Verdict)
	span.SetAttributes(attribute.Bool("vksandbox.singleflight.shared", shared), attribute.String("vksandbox.verdict.reason", verdict.Reason))
	return verdict
}

// resource is the resource an owner's kind is served as. A kind the cached
// discovery does not know is looked up once more after a refresh (a CRD
// installed since); false when the apiserver does not serve it.
func (a *Authorizer) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	if a.Mapper == nil {
		return gvk.GroupVersion().WithResource(plural(gvk.Kind)), true
	}
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		if r, ok := a.Mapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
			m, err = a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	return m.Resource, true
}

// NewOwnerMapper is the Authorizer's RESTMapper: the apiserver's discovery,
// cached in memory and refreshed when a kind is not found.
func NewOwnerMapper(d discovery.DiscoveryInterface) meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
}

// get is the owner GET and the table's mapping of its answer.
func (a *Authorizer) get(ctx context.Context, gvr schema.GroupVersionResource, namespace string, owner *metav1.OwnerReference) pipeline.Verdict {
	obj, err := a.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	switch {
	case err == nil && obj.GetDeletionTimestamp() != nil:
		return pipeline.Verdict{Release: true, Reason: reasonOwnerDeleting, FromOwner: true}
	case err == nil && obj.GetUID() != owner.UID:
		return pipeline.Verdict{Release: true, Reason: reasonOwnerRotated, FromOwner: true}
	case err == nil:
		return pipeline.Verdict{Reason: ReasonOwnerAlive, FromOwner: true}
	case apierrors.IsNotFound(err) && notFoundNames(err, owner.Name):
		return pipeline.Verdict{Release: true, Reason: ReasonOwnerGone, FromOwner: true}
	case apierrors.IsNotFound(err):
		// A 404 without the object's name may be a missing endpoint (wrong
		// plural, CRD not installed): that says nothing about the owner.
		return pipeline.Verdict{Reason: reasonOwnerUnverified}
	}
	return pipeline.Verdict{Reason: ReasonOwnerGetError}
}

// notFoundNames reports whether a NotFound is the structured answer for
// the named object, not a 404 of an unknown endpoint.
func notFoundNames(err error, name string) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Name == name
}

// ownerString is how a claim records its Pod's controller owner:
// "apiVersion/kind/name", where apiVersion may itself hold a "/". It is
// the inverse of ownerRefOf, and the only place either is built.
func ownerString(o *metav1.OwnerReference) string { return o.APIVersion + "/" + o.Kind + "/" + o.Name }

// ownerRefOf rebuilds the controller ownerReference a claim recorded; false
// when it records no named owner.
func ownerRefOf(c pipeline.ClaimView) (*metav1.OwnerReference, bool) {
	parts := strings.Split(c.Owner, "/")
	if c.OwnerUID == "" || !c.OwnerKnown() || len(parts) < 3 {
		return nil, false
	}
	yes := true
	return &metav1.OwnerReference{
		APIVersion: strings.Join(parts[:len(parts)-2], "/"), Kind: parts[len(parts)-2], Name: parts[len(parts)-1],
		UID: types.UID(c.OwnerUID), Controller: &yes,
	}, true
}
