package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	//lint:ignore SA1019 client-go v0.37.2's portforward dialers still return this package's Dialer, a type distinct from k8s.io/streaming's
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
)

// The two ways kubectl talks to the apiserver: WebSocket is its default
// (exec since 1.30, port-forward as SPDY tunnelled in WebSocket since
// 1.31); SPDY is its fallback. Either way the apiserver speaks SPDY to the
// kubelet API.
const (
	viaWebSocket = "websocket"
	viaSPDY      = "spdy"
)

// client reaches ns/box through the apiserver's pods/exec and
// pods/portforward, as kubectl does, over one transport.
type client struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	ns  string
	via string
}

// exec runs cmd in the Pod, stdin (if not nil) piped in, stdout to out;
// it returns once the command exited, with an error for a non-zero exit.
func (c *client) exec(ctx context.Context, stdin io.Reader, out io.Writer, cmd ...string) error {
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name(podName).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "agent", Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	var (
		ex  remotecommand.Executor
		err error
	)
	if c.via == viaWebSocket {
		ex, err = remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	}
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: out, Stderr: &stderr}); err != nil {
		return fmt.Errorf("exec %q over %s: %w (stderr %q)", cmd, c.via, err, stderr.String())
	}
	return nil
}

func (c *client) dialer() (httpstream.Dialer, error) {
	u := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name(podName).SubResource("portforward").URL()
	if c.via == viaWebSocket {
		return portforward.NewSPDYOverWebsocketDialer(u, c.cfg)
	}
	rt, upgrader, err := spdy.RoundTripperFor(c.cfg)
	if err != nil {
		return nil, err
	}
	return spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u), nil
}

// portForward is kubectl port-forward 0:guestPort: it returns the local
// address whose connections reach the guest's echo service, and a stop.
func (c *client) portForward(ctx context.Context) (string, func(), error) {
	d, err := c.dialer()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesWithContext(ctx, d, []string{"127.0.0.1"},
		[]string{fmt.Sprintf("0:%d", guestPort)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	stop := func() { cancel(); <-done }
	select {
	case <-ready:
	case err := <-done:
		cancel()
		return "", nil, fmt.Errorf("port-forward over %s ended before it was ready: %w", c.via, err)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		stop()
		return "", nil, fmt.Errorf("port-forward ports %v: %w", ports, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), stop, nil
}
