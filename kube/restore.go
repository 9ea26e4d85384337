package kube

import (
	"github.com/cocoonstack/vk-sandbox/pipeline"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// annRestored marks a stub rebuilt from the state file. It lives only in
// this process's memory and is never pushed to the apiserver.
const annRestored = "sandbox.cocoonstack.io/restored-from-state"

// restore puts a stub Pod in memory for every claim row loaded at startup.
//
// Why: virtual-kubelet deletes Pods it no longer sees in the apiserver only
// through GetPods/GetPod. A Pod deleted while this process was down is
// absent from its informer, so without the stub its DeletePod would never
// come, and the VM would be held until its lease ends. The stub carries the
// Pod UID and the recorded controller owner, so the delete is authorized
// exactly as it would have been (an owner alive still preserves).
// A Pod that does still exist replaces its stub on its first sync.
func (p *Provider) restore(rangeRows func(func(key pipeline.PodKey, c pipeline.ClaimView) bool)) int {
	n := 0
	rangeRows(func(key pipeline.PodKey, c pipeline.ClaimView) bool {
		ns, name, ok := key.Split()
		if !ok {
			return true
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(c.PodUID),
			Annotations: map[string]string{annRestored: "true", AnnClaimID: c.ID},
		}}
		if owner, ok := ownerRefOf(c); ok {
			pod.OwnerReferences = []metav1.OwnerReference{*owner}
		} else if c.OwnerUID != "" {
			// An owner UID without its name (a row from an older format):
			// the owner cannot be asked, so a delete will preserve.
			yes := true
			pod.OwnerReferences = []metav1.OwnerReference{{UID: types.UID(c.OwnerUID), Controller: &yes}}
		}
		p.cache.put(key, pod)
		n++
		return true
	})
	return n
}

func isRestored(p *corev1.Pod) bool { return p.Annotations[annRestored] == "true" }
