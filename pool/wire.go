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
	// Metadata are caller labels, fixed at claim time, echoed in the index
	// and filterable (ListOptions.Metadata). See ValidateMetadata for the
	// server's bounds.
	Metadata map[string]string `json:"metadata,omitempty"`
	// NoRedirect asks a meshed node to clone or cold-boot locally instead of
	// answering a warm miss with a redirect to a peer.
	NoRedirect bool `json:"no_redirect,omitempty"`
}

// ClaimResponse is a successful claim. Token is the sandbox's own bearer
// token: the release credential. It must never be logged or put on a Pod.
//
// OwnerAddr is the owning node's sandboxd address, the same for every claim
// on a node, not a per-VM address. It may be "host:port", a full origin
// ("https://sbx.example:8443"), a hostname, or absent: see ParseOwnerAddr.
// Deadline is the lease the node granted, and it is authoritative.
type ClaimResponse struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Deadline  time.Time `json:"deadline"`
	OwnerAddr string    `json:"owner_addr,omitempty"`
	// Redirect is set (and ID empty) on a capacity miss answered with 200.
	Redirect []string `json:"redirect,omitempty"`
}

// Sandbox is one row of the sandboxd index (GET /v1/sandboxes, and
// GET /v1/sandboxes/{id}). A row never carries owner_addr. Token is only
// present in the single-row GET, and only for a caller holding the node's
// api_token (root).
type Sandbox struct {
	ID            string            `json:"id"`
	Key           Key               `json:"key"`
	Tenant        string            `json:"tenant,omitempty"`
	Deadline      time.Time         `json:"deadline"`
	ClaimedAt     *time.Time        `json:"claimed_at,omitempty"`
	Hibernated    bool              `json:"hibernated"`
	Archived      bool              `json:"archived,omitempty"`
	ClaimRef      string            `json:"claim_ref,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	OnExpire      string            `json:"on_expire,omitempty"`
	CPUCount      int               `json:"cpu_count,omitempty"`
	MemTotalBytes int64             `json:"mem_total_bytes,omitempty"`
	Restarts      int               `json:"restarts,omitempty"`
	RestartedAt   *time.Time        `json:"restarted_at,omitempty"`
	Failed        bool              `json:"failed,omitempty"`
	Token         string            `json:"token,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes. A 2xx answer without the
// sandboxes array is a bad answer, never an empty node: the client rejects
// it (see Client.List).
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// ListOptions filter GET /v1/sandboxes. Older servers ignore the filters,
// so Client.List applies them to the answer as well.
type ListOptions struct {
	ClaimRef string            // exact claim_ref
	Metadata map[string]string // every pair must match
}

// RenewRequest is the body of POST /v1/sandboxes/{id}/renew: the lease is
// reset to TTLSeconds from now (0: the server default), capped by the node.
type RenewRequest struct {
	TTLSeconds int64 `json:"ttl_seconds"`
}

// RenewResponse is the granted lease: authoritative, whatever was asked.
type RenewResponse struct {
	Deadline time.Time `json:"deadline"`
}

// PoolInfo is one warm pool in GET /v1/info.
type PoolInfo struct {
	Key       Key  `json:"key"`
	Warm      int  `json:"warm"`
	Refilling int  `json:"refilling"`
	Target    int  `json:"target"`
	Golden    bool `json:"golden,omitempty"`
}

// Info is the body of GET /v1/info (root only: a tenant token gets 403).
// AdvertiseAddr is the node's owner_addr, omitted when the node advertises
// no host. Counters is an emulator extension (per verb request counts);
// real sandboxd leaves it empty.
type Info struct {
	Pools            []PoolInfo       `json:"pools"`
	Claimed          int              `json:"claimed"`
	Hibernated       int              `json:"hibernated"`
	Archived         int              `json:"archived,omitempty"`
	Failed           int              `json:"failed,omitempty"`
	Draining         bool             `json:"draining,omitempty"`
	AtCapacity       bool             `json:"at_capacity,omitempty"`
	AtCapacityReason string           `json:"at_capacity_reason,omitempty"`
	AdvertiseAddr    string           `json:"advertise_addr,omitempty"`
	Peers            []string         `json:"peers,omitempty"`
	Counters         map[string]int64 `json:"counters,omitempty"`
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
