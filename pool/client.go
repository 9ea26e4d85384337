package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
)

// Verbs name the calls in Observer reports, errors and span names.
const (
	VerbClaim   = "claim"
	VerbRelease = "release"
	VerbList    = "list"
	VerbGet     = "get"
	VerbInfo    = "info"
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
	// sized for a single host, wrapped in otelhttp so every attempt is an
	// OTel client span and carries a W3C traceparent.
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
}

// Client speaks the sandboxd protocol of DESIGN §7. It is safe for
// concurrent use. Every call is bounded by its context; no call reads more
// than a fixed body limit; no token ever appears in an error it returns.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	token string
	auth  []string // Authorization value for token; shared, read-only
	hc    *http.Client
	obs   Observer
	retry RetryPolicy
	// pooled is the default transport under otelhttp (nil when the caller
	// gave one): otelhttp.Transport has no CloseIdleConnections to forward.
	pooled *http.Transport
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
		rt = instrument(pooled)
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
		obs:    o.Observer,
		retry:  o.Retry.withDefaults(),
		pooled: pooled,
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

// instrument wraps t in otelhttp so every attempt is an OTel client span
// and carries a W3C traceparent.
func instrument(t *http.Transport) http.RoundTripper {
	// The propagator is explicit rather than the global one: DESIGN §11
	// requires W3C traceparent towards sandboxd whatever OTEL_PROPAGATORS says.
	return otelhttp.NewTransport(inMemoryBody{t},
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if v, ok := r.Context().Value(verbKey{}).(string); ok {
				return "sandboxd." + v
			}
			return "sandboxd " + r.Method
		}),
	)
}

// inMemoryBody sits between otelhttp and the *http.Transport. otelhttp
// wraps the request body to count its bytes, which hides from net/http that
// the body is in memory; net/http then flushes the headers on their own and
// writes the body in a second syscall, so every claim costs two writes here
// and two wake-ups at the server. Our bodies are small and in memory anyway:
// reading one back into a bytes.Reader (through otelhttp's wrapper, so its
// byte count stays right) restores a single write per request.
type inMemoryBody struct{ next http.RoundTripper }

func (t inMemoryBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > bodyLimit {
		return t.next.RoundTrip(r)
	}
	data := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, data)
	_ = r.Body.Close() // a RoundTripper closes the body it was given
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	// A shallow copy: a RoundTripper must not modify the caller's request.
	r2 := *r
	r2.Body = io.NopCloser(bytes.NewReader(data))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return t.next.RoundTrip(&r2)
}

// CloseIdleConnections releases pooled connections (tests, shutdown).
func (c *Client) CloseIdleConnections() {
	c.hc.CloseIdleConnections()
	if c.pooled != nil {
		c.pooled.CloseIdleConnections()
	}
}

// Claim asks for one sandbox. It makes exactly one attempt: a claim is not
// idempotent, and a retry after a lost response would leak a second VM. The
// caller looks the claim up by claim_ref before trying again.
//
// When the error is ErrBadResponse and the returned ClaimResponse has an ID,
// the VM exists but the answer was incomplete (no token).
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (ClaimResponse, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return ClaimResponse{}, fmt.Errorf("sandboxd claim: encode request: %w", err)
	}
	x := exchange{verb: VerbClaim, method: http.MethodPost, path: "/v1/claim", token: c.token, body: body, limit: bodyLimit}
	status, data, err := c.once(ctx, x)
	if err != nil {
		return ClaimResponse{}, err
	}
	var resp ClaimResponse
	if err := decodeObject(data, &resp); err != nil {
		return ClaimResponse{}, c.badResponse(x, status, err.Error(), data)
	}
	switch {
	case resp.ID == "" && len(resp.Redirect) > 0:
		peers := make([]string, 0, len(resp.Redirect))
		for _, p := range resp.Redirect {
			peers = append(peers, scrub(p, maxExcerpt, c.token))
		}
		return ClaimResponse{}, &CapacityError{Verb: VerbClaim, Redirect: peers}
	case resp.ID == "":
		return ClaimResponse{}, c.badResponse(x, status, "claim answer has neither id nor redirect", data)
	case resp.Token == "":
		x.id = resp.ID
		return resp, c.badResponse(x, status, "claim answer has no token", nil)
	}
	return resp, nil
}

// Release gives a sandbox back. token is the sandbox's own token; empty
// falls back to the node token (which only a root-configured node may use).
// 2xx and 404 both mean the sandbox is gone: converged, nil. Transport
// errors and 5xx are retried.
func (c *Client) Release(ctx context.Context, id, token string) error {
	if id == "" {
		return errors.New("sandboxd release: empty sandbox id")
	}
	if token == "" {
		token = c.token
	}
	x := exchange{verb: VerbRelease, id: id, method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/release", token: token, limit: bodyLimit}
	return c.withRetry(ctx, VerbRelease, func() error {
		_, _, err := c.once(ctx, x)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
}

// List returns the sandboxd index, filtered by claimRef when it is not
// empty. A successful List never returns nil, so that "listing failed" (an
// error) and "nothing listed" (an empty slice) cannot be confused.
func (c *Client) List(ctx context.Context, claimRef string) ([]Sandbox, error) {
	x := exchange{verb: VerbList, method: http.MethodGet, path: "/v1/sandboxes", token: c.token, limit: listBodyLimit}
	if claimRef != "" {
		x.query = url.Values{"claim_ref": {claimRef}}
	}
	out, err := fetch[SandboxList](ctx, c, x, nil)
	if err != nil {
		return nil, err
	}
	if out.Sandboxes == nil {
		out.Sandboxes = []Sandbox{}
	}
	return out.Sandboxes, nil
}

// Get returns one row. Token is filled only when the client holds the root
// token (DESIGN §7). A 404 matches ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (Sandbox, error) {
	if id == "" {
		return Sandbox{}, errors.New("sandboxd get: empty sandbox id")
	}
	x := exchange{verb: VerbGet, id: id, method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id), token: c.token, limit: bodyLimit}
	return fetch(ctx, c, x, func(s *Sandbox) string {
		if s.ID == "" {
			return "row has no id"
		}
		return ""
	})
}

// Info returns the warm pools and claim counts.
func (c *Client) Info(ctx context.Context) (Info, error) {
	x := exchange{verb: VerbInfo, method: http.MethodGet, path: "/v1/info", token: c.token, limit: bodyLimit}
	return fetch[Info](ctx, c, x, nil)
}

// fetch is a retried, idempotent GET that decodes a JSON object into T.
// check, if set, names what a decoded T lacks ("" = acceptable).
func fetch[T any](ctx context.Context, c *Client, x exchange, check func(*T) string) (T, error) {
	var out T
	err := c.withRetry(ctx, x.verb, func() error {
		status, data, err := c.once(ctx, x)
		if err != nil {
			return err
		}
		var v T
		if err := decodeObject(data, &v); err != nil {
			return c.badResponse(x, status, err.Error(), data)
		}
		if check != nil {
			if why := check(&v); why != "" {
				return c.badResponse(x, status, why, data)
			}
		}
		out = v
		return nil
	})
	return out, err
}

// exchange is one request as the client means it, before any attempt.
type exchange struct {
	verb, id     string
	method, path string
	query        url.Values
	token        string // bearer for this request; scrubbed from every error
	body         []byte
	limit        int64 // max 2xx body bytes
}

// once makes a single attempt and reports it to the Observer. It returns the
// body of a 2xx; every other status becomes an *HTTPError.
func (c *Client) once(ctx context.Context, x exchange) (int, []byte, error) {
	start := time.Now()
	status, data, err := c.roundTrip(ctx, x)
	if c.obs != nil {
		c.obs.Request(x.verb, status, time.Since(start))
	}
	return status, data, err
}

// Header values shared by every request. They are never written to:
// net/http and otelhttp only read a request's header values or replace them
// (Set makes a new slice; Add to a full slice copies it).
var (
	hdrJSON      = []string{"application/json"}
	hdrUserAgent = []string{"vk-sandbox"}
)

func (c *Client) roundTrip(ctx context.Context, x exchange) (int, []byte, error) {
	// x.path is already escaped (ids go through url.PathEscape), and the
	// parse keeps it as RawPath: a "/" or "%" inside an id cannot change
	// the route.
	target := c.base + x.path
	if len(x.query) > 0 {
		target += "?" + x.query.Encode()
	}
	var body io.Reader
	if x.body != nil {
		body = bytes.NewReader(x.body)
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, verbKey{}, x.verb), x.method, target, body)
	if err != nil {
		return 0, nil, fmt.Errorf("sandboxd %s: build request: %s", subject(x.verb, x.id), scrub(err.Error(), maxMessage, c.token, x.token))
	}
	req.Header = make(http.Header, 6) // room for traceparent and baggage
	req.Header["Accept"] = hdrJSON
	req.Header["User-Agent"] = hdrUserAgent
	if x.body != nil {
		req.Header["Content-Type"] = hdrJSON
	}
	switch {
	case x.token == "":
	case x.token == c.token:
		req.Header["Authorization"] = c.auth
	default:
		req.Header["Authorization"] = []string{"Bearer " + x.token}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, c.transportErr(ctx, x, err)
	}
	defer drainClose(resp.Body)

	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	limit := x.limit
	if !ok {
		limit = errBodyLimit
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		// The status line arrived but the body broke off: as far as the
		// caller knows nothing was answered, so it is a transport error.
		return 0, nil, c.transportErr(ctx, x, err)
	}
	tooBig := int64(len(data)) > limit
	if tooBig {
		data = data[:limit]
	}
	if ok {
		if tooBig {
			return resp.StatusCode, nil, c.badResponse(x, resp.StatusCode, fmt.Sprintf("body exceeds %d bytes", limit), nil)
		}
		return resp.StatusCode, data, nil
	}
	return resp.StatusCode, nil, c.httpError(x, resp, data)
}

func (c *Client) httpError(x exchange, resp *http.Response, data []byte) error {
	he := &HTTPError{
		Verb: x.verb, ID: x.id, Status: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
	var eb struct {
		Error    string   `json:"error"`
		Redirect []string `json:"redirect"`
	}
	if json.Unmarshal(data, &eb) == nil && (eb.Error != "" || len(eb.Redirect) > 0) {
		he.Message = scrub(eb.Error, maxMessage, c.token, x.token)
		for _, p := range eb.Redirect {
			he.Redirect = append(he.Redirect, scrub(p, maxExcerpt, c.token, x.token))
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		he.Message = scrub(string(bytes.TrimSpace(data)), maxExcerpt, c.token, x.token)
	}
	return he
}

func (c *Client) transportErr(ctx context.Context, x exchange, err error) error {
	return &transportError{
		verb: x.verb, id: x.id, err: err,
		// net/http may quote response bytes ("malformed HTTP response ..."),
		// so the transport's own text is scrubbed like a body.
		msg:        scrub(err.Error(), maxMessage, c.token, x.token),
		callerDone: ctx.Err() != nil,
	}
}

// decodeObject insists on a JSON object: "null" or "[]" from a broken proxy
// must not decode into an empty, plausible-looking answer.
func decodeObject(data []byte, v any) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("body is not a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return nil
}

func (c *Client) badResponse(x exchange, status int, reason string, body []byte) error {
	return &badResponseError{
		verb: x.verb, id: x.id, status: status,
		reason:  scrub(reason, maxMessage, c.token, x.token),
		excerpt: scrub(string(body), maxExcerpt, c.token, x.token),
	}
}

// Drain a little of an unread body so the connection can be reused, but not
// an unbounded amount: past drainLimit, closing the connection is cheaper.
func drainClose(rc io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, rc, drainLimit)
	_ = rc.Close()
}

type verbKey struct{}
