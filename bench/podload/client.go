package podload

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// Clientset is the load client: base's server and credentials, generous
// rate limits (so a run measures the apiserver, not the client), and
// contentType for requests and answers. Protobuf is what the kubelet and
// vk-sandbox speak by default; the bare run must use the same encoding as
// the nodes, or it measures a different apiserver cost.
func Clientset(base *rest.Config, contentType string) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(base)
	rc.QPS, rc.Burst = 1000, 2000
	kube.UseContentType(rc, contentType)
	return kubernetes.NewForConfig(rc)
}

// ContentTypeFlagUsage is the usage of a harness's -content-type flag.
const ContentTypeFlagUsage = "encoding of the harness's own creates and bare status writes (" + runtime.ContentTypeProtobuf + " or " + runtime.ContentTypeJSON + "); pass the same to vk-sandbox with -vk-args \"--kube-api-content-type ...\" to compare"

// DefaultContentType is the harnesses' default -content-type.
const DefaultContentType = runtime.ContentTypeProtobuf
