package vkcompat

// Port-forward's timeouts, passed the right way round (docs/virtual-kubelet.md, 13).
//
// Behaviour: virtual-kubelet's api.PodHandler passes its
// StreamCreationTimeout to WithPortForwardStreamIdleTimeout and its
// StreamIdleTimeout to WithPortForwardCreationTimeout (exec and attach get
// them right), and HandlePortForward turns a zero into 30 s. A node that
// set only the idle timeout closed a port-forward after 30 s without
// traffic, not after the kubelet's 4 h.
// Pinned by TestPortForwardIdleTimeoutIsTheIdleTimeout (here), which fails
// as soon as either the swap or this compensation goes.

import (
	"net/http"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// KubeletStreamCreationTimeout is the kubelet's streaming creation timeout
// (a stream pair not complete within it is dropped); its idle timeout is
// --streaming-connection-idle-timeout, 4 h by default.
const KubeletStreamCreationTimeout = 30 * time.Second

// PortForwardRoute is the path prefix PortForward serves.
const PortForwardRoute = "/portForward/"

// PortForward serves virtual-kubelet's /portForward/{namespace}/{pod} with
// idle as the connection's idle timeout and creation as the stream
// creation timeout. Mount it at PortForwardRoute beside api.PodHandler.
func PortForward(h api.PortForwardHandlerFunc, idle, creation time.Duration) http.Handler {
	// Invariant: api.PodHandler hands StreamCreationTimeout to port-forward
	// as its idle timeout and StreamIdleTimeout as its creation timeout, so
	// each is given in the other's field here. This handler serves only the
	// port-forward route: exec and attach, which read the fields as named,
	// stay on the node's main handler.
	return api.PodHandler(api.PodHandlerConfig{
		PortForward:           h,
		StreamCreationTimeout: idle,
		StreamIdleTimeout:     creation,
	}, false)
}
