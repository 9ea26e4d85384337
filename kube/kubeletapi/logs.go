package kubeletapi

import (
	"context"
	"io"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// GetContainerLogs says where a sandbox's output is instead: sandboxd does
// not capture what the guest prints, so there is nothing to stream. The
// answer is an InvalidInput (400), which the apiserver hands to kubectl
// word for word.
func (a *API) GetContainerLogs(_ context.Context, namespace, name, _ string, _ api.ContainerLogOpts) (io.ReadCloser, error) {
	key := pipeline.JoinKey(namespace, name)
	pod := a.pods.Pod(key)
	if pod == nil {
		return nil, errdefs.NotFoundf("pod %s is not known to this node", key)
	}
	where := "at its Pod IP"
	if ip := pod.Status.PodIP; ip != "" {
		where = "at " + ip
	}
	return nil, errdefs.InvalidInputf("no logs for pod %s: sandboxd does not capture a sandbox's output. "+
		"Reach the VM %s, where its services write their own logs, or run a command in it: kubectl exec -n %s %s -- CMD ARGS",
		key, where, namespace, name)
}
