package telemetry_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/telemetry"
)

func serve(t *testing.T, limits telemetry.ServerLimits) string {
	t.Helper()
	ln, err := telemetry.Listen("127.0.0.1:0", nil, limits)
	if err != nil {
		t.Fatal(err)
	}
	srv := telemetry.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), limits)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func dialAndSend(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reads until the server closes c, or the deadline passes.
func closedByServer(c net.Conn, within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// A client that never finishes its headers (slow-loris), and one that goes
// idle after a request, are both cut off by the server.
func TestServerCutsSlowAndIdleClients(t *testing.T) {
	addr := serve(t, telemetry.ServerLimits{ReadHeader: 200 * time.Millisecond, Idle: 200 * time.Millisecond})
	slow := dialAndSend(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n")
	idle := dialAndSend(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if !closedByServer(slow, 30*time.Second) {
		t.Fatal("a client that never finished its headers was not cut off")
	}
	if !closedByServer(idle, 30*time.Second) {
		t.Fatal("an idle kept-alive connection was not closed")
	}
}

// Past MaxConns, a connection waits in the accept backlog and is served
// once a slot frees: no descriptor per waiting client.
func TestServerServesAtMostMaxConnsAtOnce(t *testing.T) {
	addr := serve(t, telemetry.ServerLimits{ReadHeader: time.Minute, Idle: time.Minute, MaxConns: 1})
	held := dialAndSend(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // kept alive: holds the one slot
	waiting := dialAndSend(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	_ = waiting.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := waiting.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a second connection was served while MaxConns=1 was held")
	}
	_ = held.Close()
	_ = waiting.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(waiting); err != nil || len(got) == 0 {
		t.Fatalf("the waiting client was not served once the slot freed: %q, %v", got, err)
	}
}
