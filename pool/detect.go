package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// verbDetect names Detect's probes in Observer reports and errors, so that
// their deliberate 404s are not counted against the verbs they probe.
const verbDetect = "detect"

// TokenKind is what the client's node token proved to be.
type TokenKind int

const (
	// TokenRoot is the node's api_token (or a node that checks none).
	TokenRoot TokenKind = iota + 1
	// TokenTenant is a tenant's token: the operator surfaces answer it 403.
	TokenTenant
)

func (k TokenKind) String() string {
	switch k {
	case TokenRoot:
		return "root"
	case TokenTenant:
		return "tenant"
	}
	return "unknown"
}

// Features is what a sandboxd node offers this client, as Detect found it.
// A feature is true when the server has it and the client's token may use
// it: a tenant token never has TokenRead or Stats, which are root only.
type Features struct {
	Token TokenKind
	// Metadata: claim metadata is kept and ?metadata= filters the listing.
	// An older server drops both silently.
	Metadata bool
	// ClaimRefFilter: the listing honours ?claim_ref=. An older server
	// ignores it and lists every row the token may see.
	ClaimRefFilter bool
	// TokenRead: the by-id read carries the sandbox's token, so a claim
	// whose answer was lost can be recovered and released by id.
	TokenRead bool
	// The verbs renew, exec, the ports relay, stats and the agent relay.
	Renew, Exec, Ports, Stats, Agent bool
}

// featureNames are the features' names, in a fixed order: the feature
// label of vksandbox_sandboxd_feature.
var featureNames = []string{"metadata", "claim_ref_filter", "token_read", "renew", "exec", "ports", "stats", "agent"}

// Names maps every name of featureNames to whether the node has it.
func (f Features) Names() map[string]bool {
	return map[string]bool{
		"metadata": f.Metadata, "claim_ref_filter": f.ClaimRefFilter, "token_read": f.TokenRead,
		"renew": f.Renew, "exec": f.Exec, "ports": f.Ports, "stats": f.Stats, "agent": f.Agent,
	}
}

// String lists the token kind and every feature: "token=root metadata=true ...".
func (f Features) String() string {
	var b strings.Builder
	b.WriteString("token=" + f.Token.String())
	on := f.Names()
	for _, n := range featureNames {
		fmt.Fprintf(&b, " %s=%t", n, on[n])
	}
	return b.String()
}

// LogValue implements slog.LogValuer.
func (f Features) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("token", f.Token.String())}
	on := f.Names()
	for _, n := range featureNames {
		attrs = append(attrs, slog.Bool(n, on[n]))
	}
	return slog.GroupValue(attrs...)
}

// probeID is a well-formed sandbox id ("sb_" and 16 hex digits) that no
// claim is given but by a 1 in 2^64 chance: the verb probes name it, so
// that a handler that exists answers 404 for an unknown sandbox.
const probeID = "sb_0000000000000000"

// Detect learns what the node supports, without claiming, releasing or
// changing anything. Each probe is conclusive on its own:
//
//   - the token kind: GET /v1/info answers root and 403 to a tenant (which
//     Tenant then reports, as after any root-only call);
//   - a verb (renew, exec, ports, stats, agent): the verb is asked of
//     probeID, with an empty body or the upgrade header it wants. A server
//     with the verb answers from its handler, a JSON {"error": ...} (404
//     for the unknown id, 403 for a tenant's stats, 426, 400); one without
//     it answers from its router, 404 "404 page not found" as text, or
//     405. Stats counts only for the root token;
//   - metadata: GET /v1/sandboxes?metadata== (an empty key) is a 400 where
//     the filter exists, and is ignored (200) where it does not;
//   - claim_ref_filter: GET /v1/sandboxes?claim_ref=<random> lists nothing
//     where the filter exists, and every row where it is ignored. On a
//     node with no row the token sees, that proves nothing, and the
//     filter is taken to be there exactly when renew or metadata is (the
//     filter and renew came in one version, metadata after them) and no
//     pool key carries "engine" (only the version before them wrote it);
//   - token_read: renew's version added it; it is root only.
//
// A probe that cannot be answered (transport, 5xx after the retries, 401)
// makes Detect fail: a half-known node is no better than an unknown one.
func (c *Client) Detect(ctx context.Context) (Features, error) {
	f, err := c.detect(ctx)
	if err == nil {
		c.features.Store(&f)
	}
	return f, err
}

// Features returns what the last successful Detect found; false before any.
func (c *Client) Features() (Features, bool) {
	if f := c.features.Load(); f != nil {
		return *f, true
	}
	return Features{}, false
}

func (c *Client) detect(ctx context.Context) (Features, error) {
	var f Features
	var info probeInfo
	err := ErrForbidden // a token known to be a tenant's does not ask a root-only surface again
	if !c.Tenant() {
		info, err = fetch[probeInfo](ctx, c, exchange{verb: verbDetect, method: http.MethodGet, path: "/v1/info", token: c.token, limit: bodyLimit}, nil)
		c.learnTokenKind(err)
	}
	switch {
	case err == nil:
		f.Token = TokenRoot
	case errors.Is(err, ErrForbidden):
		f.Token = TokenTenant
	default:
		return f, fmt.Errorf("sandboxd detect: token kind: %w", err)
	}
	engine := info.engine()

	sb := "/v1/sandboxes/" + probeID
	for _, p := range []struct {
		name    string
		into    *bool
		method  string
		path    string
		body    []byte
		upgrade string
	}{
		{"renew", &f.Renew, http.MethodPost, sb + "/renew", []byte(`{}`), ""},
		{"exec", &f.Exec, http.MethodPost, sb + "/exec", []byte(`{}`), ""},
		{"ports", &f.Ports, http.MethodGet, sb + "/ports/1", nil, "tcp"},
		{"stats", &f.Stats, http.MethodGet, sb + "/stats", nil, ""},
		{"agent", &f.Agent, http.MethodGet, sb + "/agent", nil, "silkd"},
	} {
		x := exchange{verb: verbDetect, id: p.name, method: p.method, path: p.path, token: c.token, body: p.body, upgrade: p.upgrade}
		if *p.into, err = c.routed(ctx, x); err != nil {
			return f, fmt.Errorf("sandboxd detect: %s: %w", p.name, err)
		}
	}
	f.Stats = f.Stats && f.Token == TokenRoot
	f.TokenRead = f.Renew && f.Token == TokenRoot

	list := func(name string, q url.Values) (probeList, error) {
		x := exchange{verb: verbDetect, id: name, method: http.MethodGet, path: "/v1/sandboxes", token: c.token, limit: listBodyLimit, query: q}
		return fetch(ctx, c, x, func(l *probeList) string {
			if l.Sandboxes == nil {
				return "listing has no sandboxes array"
			}
			return ""
		})
	}
	_, err = list("metadata", url.Values{"metadata": {"="}})
	switch {
	case err == nil:
	case StatusCode(err) == http.StatusBadRequest:
		f.Metadata = true
	default:
		return f, fmt.Errorf("sandboxd detect: metadata: %w", err)
	}

	rows, err := list("claim_ref_filter", url.Values{"claim_ref": {"vk-sandbox.detect/" + randomHex()}})
	if err != nil {
		return f, fmt.Errorf("sandboxd detect: claim_ref_filter: %w", err)
	}
	if len(rows.Sandboxes) > 0 {
		f.ClaimRefFilter = false // the filter was ignored: no row has that ref
	} else {
		f.ClaimRefFilter = (f.Renew || f.Metadata) && !engine
	}
	return f, nil
}

// routed makes one verb probe and reports whether a handler answered it
// (true) or the router did, having no route for it (false).
func (c *Client) routed(ctx context.Context, x exchange) (bool, error) {
	var found bool
	err := c.withRetry(ctx, x.verb, func() error {
		actx, cancel := context.WithTimeout(ctx, c.attempt)
		defer cancel()
		start := time.Now()
		resp, err := c.send(actx, x)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		if c.obs != nil {
			c.obs.Request(x.verb, status, time.Since(start))
		}
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols { // only if probeID exists
			_ = resp.Body.Close() // the relay itself: closed, never drained
			found = true
			return nil
		}
		defer drainClose(resp.Body)
		data, err := io.ReadAll(io.LimitReader(resp.Body, errBodyLimit))
		if err != nil {
			return c.transportErr(ctx, x, err)
		}
		var eb ErrorBody
		handler := json.Unmarshal(data, &eb) == nil && eb.Error != ""
		switch {
		case handler || resp.StatusCode < 300:
			found = true
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
			found = false
		case resp.StatusCode >= 500:
			return c.httpError(x, resp, data) // retried
		default:
			return c.badResponse(x, resp.StatusCode, "neither a handler's JSON error nor a router's 404 or 405", data)
		}
		return nil
	})
	return found, err
}

// probeInfo and probeList decode only what Detect reads: whether any pool
// key carries "engine", and whether the listing has rows.
type probeInfo struct {
	Pools []struct {
		Key struct {
			Engine string `json:"engine"`
		} `json:"key"`
	} `json:"pools"`
}

func (i probeInfo) engine() bool {
	for _, p := range i.Pools {
		if p.Key.Engine != "" {
			return true
		}
	}
	return false
}

type probeList struct {
	Sandboxes []json.RawMessage `json:"sandboxes"`
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
