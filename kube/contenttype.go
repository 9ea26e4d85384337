package kube

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// UseContentType makes rc send contentType and ask for it back. Protobuf,
// as the kubelet speaks it, costs both sides less CPU per Pod than JSON;
// JSON stays acceptable, for answers the apiserver cannot give in protobuf.
// A dynamic client built from rc sets its own (custom resources are JSON).
func UseContentType(rc *rest.Config, contentType string) {
	rc.ContentType, rc.AcceptContentTypes = contentType, contentType
	if contentType != runtime.ContentTypeJSON {
		rc.AcceptContentTypes += "," + runtime.ContentTypeJSON
	}
}
