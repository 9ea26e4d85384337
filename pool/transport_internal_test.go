package pool

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func claimServer(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"id":"sb_1","token":"sandbox-tok"}`)
	}))
	return ts
}

// countingConn counts the Write calls made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request must go out in one write: a body net/http cannot see is in
// memory (a tracing wrapper's, say) makes it flush the headers alone, then
// the body, two wake-ups at the server per claim.
func TestClaimRequestGoesOutInOneWrite(t *testing.T) {
	ts := claimServer(t)
	ts.Start()
	defer ts.Close()
	var writes atomic.Int64
	tr := pooledTransport(defaultMaxIdleConns)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}
	defer tr.CloseIdleConnections()
	c, err := NewClient(ClientOptions{BaseURL: ts.URL, Token: "node-tok", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	for range n {
		if _, err := c.Claim(context.Background(), ClaimRequest{Template: "default", TTLSeconds: 60, ClaimRef: "ns/p"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := writes.Load(); got != n {
		t.Errorf("%d claims took %d writes, want one each", n, got)
	}
}

// CloseIdleConnections must reach the pooled transport, whatever sits on
// the way to it.
func TestCloseIdleConnectionsClosesThePooledConnection(t *testing.T) {
	ts := claimServer(t)
	closed := make(chan struct{}, 1)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	ts.Start()
	defer ts.Close()
	c, err := NewClient(ClientOptions{BaseURL: ts.URL, Token: "node-tok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(context.Background(), ClaimRequest{Template: "default"}); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the idle connection close")
	}
}

// The idle pool must hold one connection per call that can be in flight,
// or a burst redials; the daemon sizes it from its worker counts.
func TestIdlePoolFollowsMaxIdleConns(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{0, defaultMaxIdleConns}, {320, 320}} {
		c, err := NewClient(ClientOptions{BaseURL: "http://127.0.0.1:1", MaxIdleConns: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.pooled.MaxIdleConnsPerHost; got != tc.want || c.pooled.MaxIdleConns != tc.want {
			t.Errorf("MaxIdleConns %d: idle pool %d per host, %d in all; want %d", tc.set, got, c.pooled.MaxIdleConns, tc.want)
		}
	}
}
