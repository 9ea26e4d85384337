package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Serve runs a loopback TCP service (a stand-in for a port inside a VM)
// that hands each connection to serve, and returns its address. The
// test's cleanup closes the listener and waits until every serve returned.
func Serve(t testing.TB, serve func(*net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c.(*net.TCPConn))
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// Echo answers everything it reads and half-closes once its input ends, so
// a client sees all of its bytes back and then EOF only if half-close works
// end to end.
func Echo(c *net.TCPConn) {
	if _, err := io.Copy(c, c); err == nil {
		_ = c.CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	}
}

// EchoService is a loopback service that Echoes every connection.
func EchoService(t testing.TB) string {
	t.Helper()
	return Serve(t, Echo)
}
