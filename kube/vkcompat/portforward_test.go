package vkcompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// dialPortForward opens a port-forward connection to PortForward(idle,
// creation) as kubectl does, and opens no stream on it: the connection
// then carries nothing (kubectl's ping is every 5 s, beyond both short
// timeouts here). Its channel closes when the server closes the connection.
func dialPortForward(t *testing.T, idle, creation time.Duration) <-chan bool {
	t.Helper()
	refuse := func(context.Context, string, string, int32, io.ReadWriteCloser) error {
		return errors.New("no stream is opened in this test")
	}
	mux := http.NewServeMux()
	mux.Handle(PortForwardRoute, PortForward(refuse, idle, creation))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL + PortForwardRoute + "ns/box")
	conn, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	closed := make(chan bool)
	go func() { <-conn.CloseChan(); close(closed) }()
	return closed
}

// A port-forward connection is closed after its idle timeout, not after
// the stream creation timeout: of two idle connections opened together,
// the one whose idle timeout is short is closed, and the one whose
// creation timeout is just as short but whose idle timeout is long is
// still open by then. Without the compensation virtual-kubelet's swap
// makes it the other way round; once virtual-kubelet fixes the swap, this
// fails until PortForward passes the fields as named.
func TestPortForwardIdleTimeoutIsTheIdleTimeout(t *testing.T) {
	const short, long = 300 * time.Millisecond, time.Hour
	idleLong := dialPortForward(t, long, short)
	idleShort := dialPortForward(t, short, long)
	testkit.WaitFor(t, 20*time.Second, "the connection with the short idle timeout closed", func() bool {
		select {
		case <-idleShort:
			return true
		default:
			return false
		}
	})
	select {
	case <-idleLong:
		t.Fatalf("a port-forward connection idle for longer than its creation timeout (%s) was closed: the idle timeout is the creation timeout", short)
	default:
	}
}
