package testkit

import (
	"crypto/sha256"
	"io"
	"net"
	"sync"
	"testing"
	"time"
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

// HalfCloser is a connection that can end its sending side alone.
type HalfCloser interface {
	io.ReadWriter
	CloseWrite() error
}

// EchoRoundTrip sends payload, half-closes, reads the echo to EOF and
// checks it byte for byte (by SHA-256). It returns the throughput in MiB/s
// of the payload carried each way.
func EchoRoundTrip(t testing.TB, c HalfCloser, payload []byte) float64 {
	t.Helper()
	want := sha256.Sum256(payload)
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	elapsed := time.Since(start)
	if err != nil || n != int64(len(payload)) || [32]byte(h.Sum(nil)) != want {
		t.Fatalf("echo of %d bytes: got %d, checksum intact %v, err %v", len(payload), n, [32]byte(h.Sum(nil)) == want, err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("send: %v", err)
	}
	return float64(len(payload)) / (1 << 20) / elapsed.Seconds()
}
