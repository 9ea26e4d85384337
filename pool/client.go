package pool

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Verbs name the calls in Observer reports, errors and span names.
const (
	VerbClaim   = "claim"
	VerbRelease = "release"
	VerbList    = "list"
	VerbGet     = "get"
	VerbInfo    = "info"
	verbRenew   = "renew"
	verbHealthz = "healthz"
	// The interactive surfaces: a buffered command, the ports relay's
	// upgrade, one sandbox's resource usage, and the agent relay's upgrade
	// (pool/agent dials it through DialUpgrade).
	VerbExec  = "exec"
	VerbPorts = "ports"
	VerbStats = "stats"
	VerbAgent = "agent"
)

// Observer sees every HTTP attempt (so a retried call reports once per
// attempt). status is 0 when the exchange failed in transport. Request must
// not block: it runs on the caller's goroutine.
type Observer interface {
	Request(verb string, status int, d time.Duration)
}

// ClientOptions configures a Client. Only BaseURL is required.
type ClientOptions struct {
	// BaseURL is the sandboxd endpoint, e.g. http://127.0.0.1:7777. A path
	// prefix is kept.
	BaseURL string
	// Token is the node token, sent as Authorization: Bearer on every call
	// except a Release that names its own sandbox token.
	Token string
	// Transport is used as is. The default is one pooled *http.Transport
	// sized for a single host. Whatever the transport, every attempt is an
	// OTel client span (of the global tracer provider as it is when the
	// Client is built) and carries a W3C traceparent.
	Transport http.RoundTripper
	// Observer, if set, is told about every attempt.
	Observer Observer
	// Retry bounds the retries of the idempotent calls; zero fields take
	// defaults (see RetryPolicy).
	Retry RetryPolicy
	// MaxIdleConns is how many idle connections the default transport
	// keeps to sandboxd: at least the number of calls that can be in flight
	// at once, or a burst churns through ephemeral ports. 0 or less means 256.
	MaxIdleConns int
	// AttemptTimeout bounds one attempt of every call but a claim: headers
	// and body, however slowly sandboxd answers. 0 or less means 10s.
	AttemptTimeout time.Duration
	// ClaimTimeout bounds one claim attempt. A cold boot legitimately takes
	// seconds, so it is longer. A claim that times out is ambiguous (the
	// node may still finish it). 0 or less means 60s.
	ClaimTimeout time.Duration
}

// Defaults of the per-attempt deadlines.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultClaimTimeout   = 60 * time.Second
)

// Client speaks the sandboxd protocol (docs/architecture.md lists the calls
// it makes). It is safe for concurrent use. Every call is bounded by its context; no call reads more
// than a fixed body limit; no token ever appears in an error it returns.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	token string
	auth  []string // Authorization value for token; shared, read-only
	hc    *http.Client
	obs   Observer
	retry RetryPolicy
	// attempt and claimAttempt bound one attempt (see ClientOptions).
	attempt, claimAttempt time.Duration
	// pooled is the default transport (nil when the caller gave one).
	pooled   *http.Transport
	trace    clientTracer
	tenant   atomic.Bool              // see Tenant
	features atomic.Pointer[Features] // see Features
}

// Body limits. A list on a dense node (2,000+ rows of ~250 bytes) is the
// only large answer; everything else is a few hundred bytes.
const (
	bodyLimit     = 1 << 20
	listBodyLimit = 16 << 20
	errBodyLimit  = 64 << 10
	drainLimit    = 64 << 10
)

const defaultMaxIdleConns = 256

// NewClient validates o and builds a Client.
func NewClient(o ClientOptions) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("sandboxd client: base url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sandboxd client: base url %q: want http(s)://host[:port]", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("sandboxd client: base url %q: no query or fragment allowed", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	// A token read from a file with its trailing newline is the usual
	// mistake; net/http would refuse the header on every call, later.
	if strings.ContainsAny(o.Token, "\r\n") {
		return nil, errors.New("sandboxd client: token contains a line break (trim the token file)")
	}
	rt := o.Transport
	var pooled *http.Transport
	if rt == nil {
		idle := o.MaxIdleConns
		if idle <= 0 {
			idle = defaultMaxIdleConns
		}
		pooled = pooledTransport(idle)
		rt = pooled
	}
	c := &Client{
		base:  u.String(),
		token: o.Token,
		hc: &http.Client{
			Transport: rt,
			// sandboxd does not redirect; following one would resend the
			// bearer token to wherever the Location points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		obs:          o.Observer,
		retry:        o.Retry.withDefaults(),
		pooled:       pooled,
		trace:        newClientTracer(u),
		attempt:      orDefault(o.AttemptTimeout, DefaultAttemptTimeout),
		claimAttempt: orDefault(o.ClaimTimeout, DefaultClaimTimeout),
	}
	if c.token != "" {
		c.auth = []string{"Bearer " + c.token}
	}
	return c, nil
}

// pooledTransport is sized for one host: a claim burst of hundreds of
// concurrent calls must reuse connections, not churn through ephemeral ports.
// No proxy: sandboxd is node-local, and HTTP_PROXY must not capture it.
func pooledTransport(idle int) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          idle,
		MaxIdleConnsPerHost:   idle,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Answers are a few hundred bytes of JSON on a node-local link:
		// asking for gzip would only add a header each way.
		DisableCompression: true,
	}
}

// CloseIdleConnections releases pooled connections (tests, shutdown).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
