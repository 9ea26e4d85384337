package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// exchange is one request as the client means it, before any attempt.
type exchange struct {
	verb, id     string
	method, path string
	query        url.Values
	token        string // bearer for this request; scrubbed from every error
	body         []byte
	limit        int64 // max 2xx body bytes
	// upgrade is the protocol an upgraded exchange asks for (the ports
	// relay's "tcp", the agent relay's "silkd", and Detect's probes of
	// them); "" for none.
	upgrade string
}

// once makes a single attempt and reports it to the Observer. It returns the
// body of a 2xx; every other status becomes an *HTTPError.
//
// The attempt has its own deadline, so a hung or trickling sandboxd cannot
// hold a caller (and the key lock it may hold) for longer. An attempt that
// runs out is a transport error: retryable, and for a claim ambiguous.
func (c *Client) once(ctx context.Context, x exchange) (int, []byte, error) {
	start := time.Now()
	limit := c.attempt
	if x.verb == VerbClaim {
		limit = c.claimAttempt
	}
	actx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	status, data, err := c.roundTrip(actx, x)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = &transportError{verb: x.verb, id: x.id, err: err,
			msg: fmt.Sprintf("no complete answer within %s (the attempt's deadline)", limit)}
	}
	if c.obs != nil {
		c.obs.Request(x.verb, status, time.Since(start))
	}
	return status, data, err
}

// Header values shared by every request. They are never written to:
// net/http only reads a request's header values, and the propagator
// replaces them (Set makes a new slice; Add to a full slice copies it).
var (
	hdrJSON      = []string{"application/json"}
	hdrUserAgent = []string{"vk-sandbox"}
)

func (c *Client) roundTrip(ctx context.Context, x exchange) (int, []byte, error) {
	resp, err := c.send(ctx, x)
	if err != nil {
		return 0, nil, err
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

// send builds x's request and sends it; the caller closes the body.
func (c *Client) send(ctx context.Context, x exchange) (*http.Response, error) {
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
	req, err := http.NewRequestWithContext(ctx, x.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("sandboxd %s: build request: %s", subject(x.verb, x.id), scrub(err.Error(), maxMessage, c.token, x.token))
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
	if x.upgrade != "" {
		req.Header["Upgrade"] = []string{x.upgrade}
		req.Header["Connection"] = []string{"Upgrade"}
	}
	// The span and its traceparent, after the header map exists: every
	// attempt is one client span, whatever the transport.
	span := c.trace.start(ctx, x.verb, req)
	resp, err := c.hc.Do(req)
	if err != nil {
		terr := c.transportErr(ctx, x, err)
		failed(span, err, terr.Error())
		return nil, terr
	}
	resp.Body = answered(span, resp)
	return resp, nil
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
