package pool

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// PortConn is an open ports relay: from the 101 on, a raw byte stream to
// 127.0.0.1:{port} inside the guest. It half-closes: CloseWrite ends what
// the guest reads and leaves what it writes readable, and a Read of io.EOF
// means the guest closed its side.
type PortConn struct {
	net.Conn
	r *bufio.Reader // holds what the guest sent right behind the 101
}

func (c *PortConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// WriteTo lets io.Copy drain the buffered bytes and then the connection
// without an extra copy.
func (c *PortConn) WriteTo(w io.Writer) (int64, error) { return c.r.WriteTo(w) }

// Reader is the relay's buffered reader: a reader of frames (pool/agent)
// reads its lines straight out of it instead of buffering the stream twice.
func (c *PortConn) Reader() *bufio.Reader { return c.r }

// CloseWrite half-closes the relay towards the guest.
func (c *PortConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("sandboxd ports: the connection cannot half-close")
}

var portsTracer = otel.Tracer("github.com/cocoonstack/vk-sandbox/pool")

// DialPort opens the ports relay to guest port in sandbox id: GET
// /v1/sandboxes/{id}/ports/{port} with Upgrade: tcp. token is the
// sandbox's own token, and then the relay counts as activity (it wakes a
// hibernated sandbox); empty falls back to the node token, and with the
// root token the relay is passive (409 while the sandbox is paused).
//
// The upgrade is made on a connection of its own, never a pooled one, and
// is bounded by the attempt deadline; once it answers 101 only the caller
// ends the relay. A refusal comes back as *HTTPError: 502 means nothing
// listens on that port in the guest.
func (c *Client) DialPort(ctx context.Context, id, token string, port int) (*PortConn, error) {
	switch {
	case id == "":
		return nil, errors.New("sandboxd ports: empty sandbox id")
	case port < 1 || port > 65535:
		return nil, fmt.Errorf("sandboxd ports %s: port %d is not a TCP port", id, port)
	}
	if token == "" {
		token = c.token
	}
	x := exchange{verb: VerbPorts, id: id, method: http.MethodGet,
		path: "/v1/sandboxes/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port), token: token, upgrade: "tcp"}
	pc, _, err := c.tracedUpgrade(ctx, x, attribute.Int("sandboxd.port", port))
	return pc, err
}

// DialUpgrade opens another relay of sandbox id: GET path with Upgrade:
// proto, reported as verb, with the sandbox's token (empty: the node
// token), bounded like DialPort. status is the node's answer (0: none),
// so that a caller can tell a node without the relay from a refusal.
func (c *Client) DialUpgrade(ctx context.Context, verb, id, token, path, proto string) (pc *PortConn, status int, err error) {
	if token == "" {
		token = c.token
	}
	return c.tracedUpgrade(ctx, exchange{verb: verb, id: id, method: http.MethodGet, path: path, token: token, upgrade: proto})
}

// AttemptTimeout is the deadline of one attempt (ClientOptions).
func (c *Client) AttemptTimeout() time.Duration { return c.attempt }

// tracedUpgrade is upgrade inside a client span named for the verb, and
// reported to the Observer like every other attempt.
func (c *Client) tracedUpgrade(ctx context.Context, x exchange, attrs ...attribute.KeyValue) (*PortConn, int, error) {
	ctx, span := portsTracer.Start(ctx, "sandboxd."+x.verb, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, attribute.String("sandboxd.id", x.id))...))
	defer span.End()
	start := time.Now()
	pc, status, err := c.upgrade(ctx, x)
	if c.obs != nil {
		c.obs.Request(x.verb, status, time.Since(start))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if err != nil {
		span.SetStatus(codes.Error, err.Error()) // already scrubbed
	}
	return pc, status, err
}

// upgrade writes the request by hand and reads the answer off the same
// connection, so that the caller gets the TCP (or TLS) connection itself,
// with its CloseWrite, rather than net/http's 101 body.
func (c *Client) upgrade(ctx context.Context, x exchange) (*PortConn, int, error) {
	u, err := url.Parse(c.base + x.path)
	if err != nil {
		return nil, 0, fmt.Errorf("sandboxd %s: build request: %s", subject(x.verb, x.id), scrub(err.Error(), maxMessage, c.token, x.token))
	}
	actx, cancel := context.WithTimeout(ctx, c.attempt)
	defer cancel()
	dial, tlsConf := c.relayDialer()
	conn, err := dial(actx, "tcp", hostPort(u))
	if err != nil {
		return nil, 0, c.transportErr(ctx, x, err)
	}
	if u.Scheme == "https" {
		cfg := tlsConf.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		conn = tls.Client(conn, cfg)
	}
	// The attempt's end interrupts a handshake that hangs; it must not
	// outlive the handshake, or it would cut the relay.
	stop := context.AfterFunc(actx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	req := &http.Request{Method: x.method, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"User-Agent": hdrUserAgent, "Upgrade": {x.upgrade}, "Connection": {"Upgrade"},
		}}
	if x.token != "" {
		req.Header["Authorization"] = []string{"Bearer " + x.token}
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := writeAndRead(conn, br, req)
	if !stop() {
		// The deadline fired: whatever was read, the connection now has a
		// deadline in the past and cannot carry a relay.
		_ = conn.Close()
		return nil, 0, c.transportErr(ctx, x, errors.Join(actx.Err(), err))
	}
	if err != nil {
		_ = conn.Close()
		return nil, 0, c.transportErr(ctx, x, err)
	}
	_ = conn.SetDeadline(time.Time{})
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if !strings.EqualFold(resp.Header.Get("Upgrade"), x.upgrade) {
			_ = conn.Close()
			return nil, resp.StatusCode, c.badResponse(x, resp.StatusCode, "101 without Upgrade: "+x.upgrade, nil)
		}
		return &PortConn{Conn: conn, r: br}, resp.StatusCode, nil
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, errBodyLimit))
	_ = conn.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil, resp.StatusCode, c.badResponse(x, resp.StatusCode, "answered without switching protocols", data)
	}
	return nil, resp.StatusCode, c.httpError(x, resp, data)
}

func writeAndRead(conn net.Conn, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	return http.ReadResponse(br, req)
}

// relayDialer is the dialer and TLS settings of the client's transport when
// it is a plain *http.Transport, and defaults otherwise. Like the pooled
// transport, it never goes through a proxy.
func (c *Client) relayDialer() (func(context.Context, string, string) (net.Conn, error), *tls.Config) {
	t := c.pooled
	if t == nil {
		t, _ = c.hc.Transport.(*http.Transport)
	}
	dial := (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if t != nil {
		if t.DialContext != nil {
			dial = t.DialContext
		}
		if t.TLSClientConfig != nil {
			tlsConf = t.TLSClientConfig
		}
	}
	return dial, tlsConf
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
