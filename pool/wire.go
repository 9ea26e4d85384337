package pool

import (
	"fmt"
	"log/slog"
	"time"
)

// Key is a warm-pool axis triple. Empty fields mean the sandboxd default.
type Key struct {
	Template string `json:"template"`
	Net      string `json:"net,omitempty"`
	Size     string `json:"size,omitempty"`
}

// ClaimRequest is the body of POST /v1/claim.
type ClaimRequest struct {
	Template   string `json:"template"`
	Net        string `json:"net,omitempty"`
	Size       string `json:"size,omitempty"`
	TTLSeconds int64  `json:"ttl_seconds"`
	ClaimRef   string `json:"claim_ref,omitempty"`
	NoRedirect bool   `json:"no_redirect,omitempty"`
}

// ClaimResponse is a successful claim. Token is the sandbox's own bearer
// token: the release credential. It must never be logged or put on a Pod.
type ClaimResponse struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Deadline  time.Time `json:"deadline"`
	OwnerAddr string    `json:"owner_addr"`
	// Redirect is set (and ID empty) on a capacity miss answered with 200.
	Redirect []string `json:"redirect,omitempty"`
}

// Sandbox is one row of the sandboxd index (GET /v1/sandboxes, and
// GET /v1/sandboxes/{id}). Token is only present for a root caller of the
// single-row GET.
type Sandbox struct {
	ID         string     `json:"id"`
	Key        Key        `json:"key"`
	Deadline   time.Time  `json:"deadline"`
	ClaimedAt  *time.Time `json:"claimed_at,omitempty"`
	Hibernated bool       `json:"hibernated"`
	ClaimRef   string     `json:"claim_ref,omitempty"`
	Token      string     `json:"token,omitempty"`
	// OwnerAddr is optional in the index shape. When a root GET of one row
	// carries it, a claim whose response was lost can be adopted as is;
	// otherwise it is released and claimed afresh.
	OwnerAddr string `json:"owner_addr,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// PoolInfo is one warm pool in GET /v1/info.
type PoolInfo struct {
	Key       Key `json:"key"`
	Warm      int `json:"warm"`
	Refilling int `json:"refilling"`
	Target    int `json:"target"`
}

// Info is the body of GET /v1/info. Counters is an emulator extension (per
// verb request counts); real sandboxd leaves it empty.
type Info struct {
	Pools      []PoolInfo       `json:"pools"`
	Claimed    int              `json:"claimed"`
	Hibernated int              `json:"hibernated"`
	Counters   map[string]int64 `json:"counters,omitempty"`
}

// ErrorBody is every sandboxd error: {"error": "..."}.
type ErrorBody struct {
	Error string `json:"error"`
}

// String and LogValue keep the release credential out of fmt and slog
// output: printing a response or a row must never print its Token.
func (r ClaimResponse) String() string {
	if r.ID == "" {
		return fmt.Sprintf("claim{redirect:%v}", r.Redirect)
	}
	return fmt.Sprintf("claim{id:%s owner_addr:%s deadline:%s token:%s}", r.ID, r.OwnerAddr, r.Deadline.Format(time.RFC3339), redactedIfSet(r.Token))
}

// LogValue implements slog.LogValuer.
func (r ClaimResponse) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", r.ID),
		slog.String("owner_addr", r.OwnerAddr),
		slog.Time("deadline", r.Deadline),
		slog.Any("redirect", r.Redirect),
	)
}

func (s Sandbox) String() string {
	return fmt.Sprintf("sandbox{id:%s key:%s/%s/%s claim_ref:%s deadline:%s token:%s}", s.ID, s.Key.Template, s.Key.Net, s.Key.Size, s.ClaimRef, s.Deadline.Format(time.RFC3339), redactedIfSet(s.Token))
}

// LogValue implements slog.LogValuer.
func (s Sandbox) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", s.ID),
		slog.String("template", s.Key.Template),
		slog.String("claim_ref", s.ClaimRef),
		slog.Time("deadline", s.Deadline),
	)
}

func redactedIfSet(tok string) string {
	if tok == "" {
		return "-"
	}
	return redacted
}
