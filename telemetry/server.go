package telemetry

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// ServerLimits bound what clients can hold on one of this process's HTTP
// servers (the kubelet API, /metrics), so that slow or idle clients cannot
// exhaust its file descriptors:
//   - a client gets ReadHeader to send its request headers (slow-loris);
//   - a kept-alive connection is closed after Idle without a request;
//   - at most MaxConns connections are open at once; further ones wait in
//     the kernel's accept backlog instead of taking a descriptor each.
//
// There is deliberately no whole-request read or write timeout: the
// kubelet API's exec and port-forward streams run for as long as the user
// keeps them open.
type ServerLimits struct {
	ReadHeader time.Duration
	Idle       time.Duration
	MaxConns   int
}

// DefaultServerLimits are the limits that fit a node agent: its only
// clients are the apiserver and a scraper. A func, so that no caller can
// change another's defaults.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{ReadHeader: 10 * time.Second, Idle: 90 * time.Second, MaxConns: 1024}
}

// NewServer is an http.Server for h within l.
func NewServer(h http.Handler, l ServerLimits) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, IdleTimeout: l.Idle, MaxHeaderBytes: 64 << 10}
}

// Listen opens addr for a server within l; with cfg set it serves TLS.
func Listen(addr string, cfg *tls.Config, l ServerLimits) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if l.MaxConns > 0 {
		ln = netutil.LimitListener(ln, l.MaxConns)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}
