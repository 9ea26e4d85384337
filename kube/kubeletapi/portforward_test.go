package kubeletapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// spdyLike is kubectl's data stream as virtual-kubelet hands it over, over
// a loopback TCP pair: Close is a half-close (a SPDY FIN), Reset drops the
// stream, and IsFinished is true once either side has finished it. peer is
// kubectl's end.
type spdyLike struct {
	*net.TCPConn
	peer     *net.TCPConn
	finished atomic.Bool
}

func newSPDYLike(t *testing.T) *spdyLike {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s := &spdyLike{TCPConn: ours.(*net.TCPConn), peer: peer.(*net.TCPConn)}
	t.Cleanup(func() { s.TCPConn.Close(); s.peer.Close() })
	return s
}

func (s *spdyLike) Close() error     { s.finished.Store(true); return s.CloseWrite() }
func (s *spdyLike) Reset() error     { s.finished.Store(true); return s.TCPConn.Close() }
func (s *spdyLike) IsFinished() bool { return s.finished.Load() }

// peerReset is kubectl dropping the stream: it reads as EOF here, and the
// stream is finished.
func (s *spdyLike) peerReset() { s.finished.Store(true); _ = s.peer.Close() }

// forward runs PortForward and returns its result on a channel.
func (it *interactive) forward(port int32, s *spdyLike) <-chan error {
	done := make(chan error, 1)
	go func() { done <- it.prov.PortForward(context.Background(), "ns", "box", port, s) }()
	return done
}

func waitDone(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second): // a hang, not a timing goal
		t.Fatalf("%s: PortForward did not return", what)
		return nil
	}
}

// kubectl's stream ending half-closes the guest's side, and the guest's own
// half-close ends kubectl's: the whole payload comes back, and the relay is
// over once both directions are.
func TestPortForwardRelaysBothWaysWithHalfClose(t *testing.T) {
	it := newInteractive(t, sim.Config{GuestPorts: map[int]string{8080: testkit.EchoService(t)}}, interactiveRoot)
	s := newSPDYLike(t)
	done := it.forward(8080, s)
	payload := make([]byte, 16<<20)
	_, _ = rand.Read(payload)
	go func() {
		_, _ = s.peer.Write(payload)
		_ = s.peer.CloseWrite()
	}()
	got, err := io.ReadAll(s.peer)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(payload) {
		t.Fatalf("echo: %d of %d bytes, err %v", len(got), len(payload), err)
	}
	if err := waitDone(t, done, "both directions ended"); err != nil {
		t.Errorf("PortForward: %v", err)
	}
}

// A guest that speaks first and closes: kubectl reads all of it and then
// EOF, and the relay ends once kubectl is done too.
func TestPortForwardGuestClosesFirst(t *testing.T) {
	banner := testkit.Serve(t, func(c *net.TCPConn) { _, _ = io.WriteString(c, "SSH-2.0-guest\r\n") })
	it := newInteractive(t, sim.Config{GuestPorts: map[int]string{22: banner}}, interactiveRoot)
	s := newSPDYLike(t)
	done := it.forward(22, s)
	got, err := io.ReadAll(s.peer)
	if err != nil || string(got) != "SSH-2.0-guest\r\n" {
		t.Fatalf("banner %q, %v", got, err)
	}
	_ = s.peer.CloseWrite()
	if err := waitDone(t, done, "guest closed, kubectl half-closed"); err != nil {
		t.Errorf("PortForward: %v", err)
	}
}

// kubectl dropping the stream ends the relay at once, even with a guest
// that would hold its side open for ever.
func TestPortForwardKubectlResetEndsTheRelay(t *testing.T) {
	release := make(chan struct{})
	var heard atomic.Int64
	holder := testkit.Serve(t, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		heard.Store(n)
		<-release // never closes on its own
	})
	t.Cleanup(func() { close(release) })
	it := newInteractive(t, sim.Config{GuestPorts: map[int]string{9000: holder}}, interactiveRoot)
	s := newSPDYLike(t)
	done := it.forward(9000, s)
	if _, err := s.peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	s.peerReset()
	if err := waitDone(t, done, "kubectl reset the stream"); err != nil {
		t.Errorf("PortForward after a reset: %v (a break on kubectl's side is not reported)", err)
	}
}

// A port nothing listens on is a plain sentence on kubectl's error stream.
func TestPortForwardNothingListens(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	s := newSPDYLike(t)
	err := waitDone(t, it.forward(7000, s), "refused")
	want := "nothing listens on port 7000 in sandbox " + it.claim.ID
	if err == nil || err.Error() != want || strings.Contains(err.Error(), it.claim.Token) {
		t.Errorf("PortForward: %v, want %q", err, want)
	}
	if err := waitDone(t, it.forwardTo("nosuch", 7000, s), "unknown pod"); err == nil {
		t.Error("a port-forward to an unknown Pod was relayed")
	}
}

func (it *interactive) forwardTo(name string, port int32, s *spdyLike) <-chan error {
	done := make(chan error, 1)
	go func() { done <- it.prov.PortForward(context.Background(), "ns", name, port, s) }()
	return done
}
