package kube

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// The annotations of the Pod contract (docs/pod-contract.md).
const (
	AnnRuntime  = "sandbox.cocoonstack.io/runtime"
	AnnTemplate = "sandbox.cocoonstack.io/template"
	annNet      = "sandbox.cocoonstack.io/net"
	annSize     = "sandbox.cocoonstack.io/size"
	AnnTTL      = "sandbox.cocoonstack.io/ttl-seconds"
	AnnClaimID  = "sandbox.cocoonstack.io/claim-id" // out: written back; the token never is
	// AnnDeadline is written back with the claim: the lease end the node
	// granted (RFC 3339, UTC), moved by every renewal.
	AnnDeadline = "sandbox.cocoonstack.io/deadline"
	// AnnPodUID is the UID of the Pod generation this node serves under
	// the Pod's name, written back with the Pod's first status. It is what
	// tells virtual-kubelet, which compares Pods without their UIDs, that a
	// same-name replacement is not the Pod it already handed over (see
	// vkcompat.PodCacheTransform).
	AnnPodUID = "sandbox.cocoonstack.io/pod-uid"

	RuntimeSandboxd = "sandboxd"
)

// writtenBack are the annotations this provider writes on its own Pods, in
// the same status write that pushes the claim (or its renewal).
var writtenBack = []string{AnnClaimID, AnnDeadline, AnnPodUID}

// annotationError is a Pod that cannot become a claim as written. It is an
// errdefs.InvalidInput (it has the InvalidInput method), so virtual-kubelet fails the create, and no claim is
// ever made for it.
type annotationError struct {
	Pod        pipeline.PodKey
	Annotation string
	Value      string
	Reason     string
}

// InvalidInput marks the error for virtual-kubelet's errdefs.
func (e *annotationError) InvalidInput() bool { return true }

func (e *annotationError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("pod %s: annotation %s: %s", e.Pod, e.Annotation, e.Reason)
	}
	return fmt.Sprintf("pod %s: annotation %s=%q: %s", e.Pod, e.Annotation, e.Value, e.Reason)
}

// ParseClaimSpec reads the sandbox annotations of one Pod.
//   - runtime: absent or "sandboxd"; anything else fails.
//   - template: required.
//   - ttl-seconds: absent means as long as the Pod lives (the owning
//     Sandbox's delete, and only that, ends the VM): the lease is renewed
//     ahead of each grant (pipeline.TTLWhilePodLives); "0" means the
//     sandboxd default; a positive value is a cap the Pod's author chose; a
//     negative or non-integer value fails.
func ParseClaimSpec(key pipeline.PodKey, ann map[string]string) (pipeline.ClaimSpec, error) {
	fail := func(a, v, why string) (pipeline.ClaimSpec, error) {
		return pipeline.ClaimSpec{}, &annotationError{Pod: key, Annotation: a, Value: v, Reason: why}
	}
	if rt, ok := ann[AnnRuntime]; ok && rt != RuntimeSandboxd {
		return fail(AnnRuntime, rt, "this node serves only runtime "+RuntimeSandboxd)
	}
	tmpl := strings.TrimSpace(ann[AnnTemplate])
	if tmpl == "" {
		return fail(AnnTemplate, "", "required: name the warm-pool template to claim from")
	}
	spec := pipeline.ClaimSpec{
		Template:   tmpl,
		Net:        strings.TrimSpace(ann[annNet]),
		Size:       strings.TrimSpace(ann[annSize]),
		TTLSeconds: pipeline.TTLWhilePodLives,
	}
	if v, ok := ann[AnnTTL]; ok {
		ttl, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil:
			return fail(AnnTTL, v, "not an integer number of seconds")
		case ttl < 0:
			return fail(AnnTTL, v, "must not be negative (0 means the sandboxd default)")
		}
		spec.TTLSeconds = ttl
	}
	return spec, nil
}
