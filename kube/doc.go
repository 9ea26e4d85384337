// Package kube is the Kubernetes face of vk-sandbox: the virtual-kubelet
// node and PodLifecycleHandler, node identity, Pod status rendering, delete
// authorization, Kubernetes Events, and kubelet TLS.
//
// Reads (GetPod, GetPods, GetPodStatus) are served from memory. CreatePod
// validates the sandbox annotations and hands an intent to the pipeline;
// the pipeline's outcome comes back through the Reporter methods, which
// render status and push it to virtual-kubelet (an async provider).
// DeletePod asks the owner, with a fresh GET, whether the VM may go.
//
// The kubelet API's interactive surfaces (exec, port-forward, logs, stats)
// are package kube/kubeletapi; the provider hands them its Pods and
// claims (kubeletapi.go) and node.go wires their handlers.
//
// What only compensates for behaviours of virtual-kubelet lives in
// kube/vkcompat, which this package wires (controllers.go, node.go,
// provider.go). docs/virtual-kubelet.md lists every workaround, here and
// there, with its tests: the checklist for a virtual-kubelet upgrade.
package kube
