package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Claim asks for one sandbox. It makes exactly one attempt: a claim is not
// idempotent, and a retry after a lost response would leak a second VM. The
// caller looks the claim up by claim_ref before trying again.
//
// A 200 that carries only a redirect list is a capacity miss for this node
// (ErrCapacity), whether or not the request set NoRedirect. When the error
// is ErrBadResponse and the returned ClaimResponse has an ID, the VM exists
// but the answer was incomplete (no token).
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (ClaimResponse, error) {
	if err := ValidateMetadata(r.Metadata); err != nil {
		return ClaimResponse{}, fmt.Errorf("sandboxd claim: %w", err)
	}
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
		return ClaimResponse{}, &capacityError{Verb: VerbClaim, Redirect: peers}
	case resp.ID == "":
		return ClaimResponse{}, c.badResponse(x, status, "claim answer has neither id nor redirect", data)
	case resp.Token == "":
		x.id = resp.ID
		return resp, c.badResponse(x, status, "claim answer has no token", nil)
	}
	return resp, nil
}

// Release gives a sandbox back. token is the sandbox's own token; empty
// falls back to the node token (which only a root token may use for
// another's sandbox). Transport errors and 5xx are retried.
//
// A 404 is returned, matching ErrNotFound, and never folded into success:
// sandboxd answers 404 both for an unknown id and for a wrong token, and
// only a root Get can tell the two apart.
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
		return err
	})
}

// Renew resets a sandbox's lease to ttlSeconds from now (0: the server
// default) and returns the granted deadline, which is authoritative: the
// node caps it (24 h). token is the sandbox's own token; empty falls back
// to the node token. A 404 (unknown id or wrong token) matches ErrNotFound.
func (c *Client) Renew(ctx context.Context, id, token string, ttlSeconds int64) (RenewResponse, error) {
	if id == "" {
		return RenewResponse{}, errors.New("sandboxd renew: empty sandbox id")
	}
	if token == "" {
		token = c.token
	}
	body, err := json.Marshal(RenewRequest{TTLSeconds: max(ttlSeconds, 0)})
	if err != nil {
		return RenewResponse{}, fmt.Errorf("sandboxd renew: encode request: %w", err)
	}
	// Renewing twice is harmless (the second grant wins), so it is retried
	// like the other idempotent calls.
	x := exchange{verb: verbRenew, id: id, method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/renew", token: token, body: body, limit: bodyLimit}
	return fetch(ctx, c, x, func(r *RenewResponse) string {
		if r.Deadline.IsZero() {
			return "renew answer has no deadline"
		}
		return ""
	})
}

// List returns the sandboxd index, filtered by o. The filters go to the
// server and are applied to its answer as well, because servers that
// predate them ignore them. A 2xx answer without a sandboxes array is a bad
// answer (ErrBadResponse), never an empty node; a successful List never
// returns nil, so "listing failed" and "nothing listed" cannot be confused.
func (c *Client) List(ctx context.Context, o ListOptions) ([]Sandbox, error) {
	x := exchange{verb: VerbList, method: http.MethodGet, path: "/v1/sandboxes", token: c.token, limit: listBodyLimit, query: o.query()}
	out, err := fetch(ctx, c, x, func(l *SandboxList) string {
		if l.Sandboxes == nil {
			return "listing has no sandboxes array"
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	rows := out.Sandboxes[:0]
	for _, s := range out.Sandboxes {
		if o.Matches(s) {
			rows = append(rows, s)
		}
	}
	return rows, nil
}

// Get returns one row. Token is filled only when the client holds the root
// token. A 404 matches ErrNotFound; a tenant token gets ErrForbidden, and
// the client then reports Tenant.
func (c *Client) Get(ctx context.Context, id string) (Sandbox, error) {
	if id == "" {
		return Sandbox{}, errors.New("sandboxd get: empty sandbox id")
	}
	x := exchange{verb: VerbGet, id: id, method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id), token: c.token, limit: bodyLimit}
	s, err := fetch(ctx, c, x, func(s *Sandbox) string {
		if s.ID == "" {
			return "row has no id"
		}
		return ""
	})
	c.learnTokenKind(err)
	return s, err
}

// Info returns the warm pools, claim counts and the node's advertise_addr.
// It is root only: a tenant token gets ErrForbidden, and the client then
// reports Tenant.
func (c *Client) Info(ctx context.Context) (Info, error) {
	x := exchange{verb: VerbInfo, method: http.MethodGet, path: "/v1/info", token: c.token, limit: bodyLimit}
	info, err := fetch[Info](ctx, c, x, nil)
	c.learnTokenKind(err)
	return info, err
}

// Tenant reports whether the node token has proved to be a tenant token: a
// root-only call (Get, Info) was answered 403. A tenant token claims,
// lists its own claims, releases and renews, but cannot recover a lost
// claim's credential, confirm a release by id, or read the pool view, so
// callers stop asking for those instead of meeting 403 in a loop. Until a
// root-only call has been answered, it reports false.
func (c *Client) Tenant() bool { return c.tenant.Load() }

// learnTokenKind records what a root-only call's answer says of the token.
func (c *Client) learnTokenKind(err error) {
	switch {
	case err == nil:
		c.tenant.Store(false)
	case errors.Is(err, ErrForbidden):
		c.tenant.Store(true)
	}
}

// fetch is a retried, idempotent call that decodes a JSON object into T.
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
