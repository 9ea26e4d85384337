package pool

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// Stats is GET /v1/sandboxes/{id}/stats: one sandbox's machine and its
// memory use. sandboxd reports no CPU usage.
type Stats struct {
	ID            string `json:"id"`
	CPUCount      int    `json:"cpu_count"`
	MemTotalBytes int64  `json:"mem_total_bytes"`
	MemUsedBytes  int64  `json:"mem_used_bytes"`
	// MemUsedMeasured is false when there was no VMM process to read (a
	// hibernated sandbox, say): MemUsedBytes is then no measurement, and a
	// zero must not be taken for an idle guest.
	MemUsedMeasured bool      `json:"mem_used_measured"`
	Hibernated      bool      `json:"hibernated"`
	MeasuredAt      time.Time `json:"measured_at"`
}

// Stats reads one sandbox's usage. It is root only: a tenant token gets
// ErrForbidden, and the client then reports Tenant, so a caller can stop
// asking. It makes one attempt: a sample is read again at the next scrape,
// and a stats summary must not wait out retries for one sandbox.
func (c *Client) Stats(ctx context.Context, id string) (Stats, error) {
	if id == "" {
		return Stats{}, errors.New("sandboxd stats: empty sandbox id")
	}
	x := exchange{verb: VerbStats, id: id, method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id) + "/stats",
		token: c.token, limit: bodyLimit}
	status, data, err := c.once(ctx, x)
	c.learnTokenKind(err)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	if err := decodeObject(data, &st); err != nil {
		return Stats{}, c.badResponse(x, status, err.Error(), data)
	}
	if st.ID == "" {
		return Stats{}, c.badResponse(x, status, "stats answer has no id", data)
	}
	return st, nil
}
