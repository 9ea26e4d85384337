package pool

import (
	"context"
	"net/http"
)

// Healthz asks sandboxd's GET /healthz, which needs no token and says only
// that the process serves HTTP. Transport errors and 5xx are retried like
// the other idempotent calls; any non-2xx answer is an *HTTPError. It tells
// "sandboxd is down" apart from "the token is refused", which only a call
// that carries the token (Info) can show.
func (c *Client) Healthz(ctx context.Context) error {
	x := exchange{verb: verbHealthz, method: http.MethodGet, path: "/healthz", limit: errBodyLimit}
	return c.withRetry(ctx, verbHealthz, func() error {
		_, _, err := c.once(ctx, x)
		return err
	})
}
