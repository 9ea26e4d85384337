package kube

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// Verdict reasons. A Pod deletion is not VM authority: a Node-NotReady
// eviction deletes every Pod on the node while the VMs keep serving users,
// so only the owner's state may release (DESIGN §5).
const (
	ReasonBarePod        = "bare-pod"
	ReasonOwnerGone      = "owner-gone"
	ReasonOwnerDeleting  = "owner-deleting"
	ReasonOwnerRotated   = "owner-uid-rotated"
	ReasonOwnerAlive     = "owner-alive"
	ReasonOwnerUnverfied = "owner-404-unverified"
	ReasonOwnerGetError  = "owner-get-error"
	ReasonNoDynamic      = "no-dynamic-client"
)

// Authorizer decides release or preserve for a deleted Pod by reading its
// controller owner with a fresh GET through the dynamic client (never a
// cache: a stale cache is exactly how an eviction would destroy live VMs).
type Authorizer struct {
	Dynamic dynamic.Interface // nil: every owned Pod is preserved
	Timeout time.Duration     // per GET; default 5s
}

// Authorize implements the 7-row table of DESIGN §5.
func (a *Authorizer) Authorize(ctx context.Context, pod *corev1.Pod) pipeline.Verdict {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return pipeline.Verdict{Release: true, Reason: ReasonBarePod}
	}
	if a == nil || a.Dynamic == nil {
		return pipeline.Verdict{Reason: ReasonNoDynamic}
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil || owner.Kind == "" || owner.Name == "" {
		return pipeline.Verdict{Reason: ReasonOwnerGetError}
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gvr := gv.WithResource(Plural(owner.Kind))
	obj, err := a.Dynamic.Resource(gvr).Namespace(pod.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	switch {
	case err == nil && obj.GetDeletionTimestamp() != nil:
		return pipeline.Verdict{Release: true, Reason: ReasonOwnerDeleting}
	case err == nil && obj.GetUID() != owner.UID:
		return pipeline.Verdict{Release: true, Reason: ReasonOwnerRotated}
	case err == nil:
		return pipeline.Verdict{Reason: ReasonOwnerAlive}
	case apierrors.IsNotFound(err) && notFoundNames(err, owner.Name):
		return pipeline.Verdict{Release: true, Reason: ReasonOwnerGone}
	case apierrors.IsNotFound(err):
		// A 404 without the object's name may be a missing endpoint (wrong
		// plural, CRD not installed): that says nothing about the owner.
		return pipeline.Verdict{Reason: ReasonOwnerUnverfied}
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
