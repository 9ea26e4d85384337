package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Config configures a Server. RootToken is required; every other zero value
// is the real sandboxd's behaviour (or, for latencies, a fast emulator one).
type Config struct {
	// RootToken is the api_token: allowed everywhere, and the only token for
	// which GET /v1/sandboxes/{id} includes the sandbox's own token.
	RootToken string
	// TenantTokens maps a tenant token to its tenant name. A tenant may
	// claim, list its own rows, and release or renew its sandboxes with
	// their sandbox tokens; the operator surfaces answer it 403. Several
	// tokens may name one tenant. addTenant and removeTenant change the set
	// at runtime.
	TenantTokens map[string]string
	// NodeToken is kept for callers written before tenants: it is one more
	// tenant token, of the tenant "node" (nodeTenant), with a tenant's
	// rights (it no longer reads one row or the node info).
	NodeToken string
	// TenantMaxClaims caps each tenant's live sandboxes; 0 is unlimited. At
	// the cap a tenant's claim is 429, never a redirect.
	TenantMaxClaims int
	// TenantDBDown makes every request that needs the tenant database
	// answer 503 with Retry-After: a claim, list or operator read with a
	// token that is not root, and a renew of a tenant's sandbox. The root
	// token and sandbox-token releases do not need it.
	TenantDBDown bool
	// TenantDBRetryAfter is the Retry-After of those 503s. Default 1s.
	TenantDBRetryAfter time.Duration

	// Pools is the warm target per pool. Net and size left empty are the
	// server defaults, "none" and "small". A claim for a key not listed here
	// is a 400 (bad axis), unless it is a peer's template (PeerTemplates). A
	// target of 0 is a known pool that is always cold.
	Pools map[pool.Key]int
	// MaxClaims caps live sandboxes; 0 is unlimited. At the cap a claim is a
	// capacity miss (see Capacity).
	MaxClaims int
	// Draining answers every claim 429 and reports draining in /v1/info.
	Draining bool

	// Mesh makes the node one of a mesh whose peers are Redirect. A claim
	// that misses the warm pool, or names a PeerTemplates template, is
	// answered 200 {"redirect": Redirect}; with no_redirect the node clones
	// or cold-boots locally instead. Default false: a single node.
	Mesh bool
	// PeerTemplates are templates a peer owns: unknown locally, redirected
	// on a meshed node, cold-booted locally under no_redirect.
	PeerTemplates []string
	// Capacity is what a node at MaxClaims answers: "429", or "redirect"
	// (200 {"redirect":[...]}; 429 when the claim set no_redirect). The
	// default is "redirect" on a meshed node (a peer has capacity) and
	// "429" otherwise.
	Capacity string
	// Redirect is the peer list of a redirect answer and, on a meshed node,
	// Info.Peers. Default 10.0.0.9:7777.
	Redirect []string

	// OwnerAddrMode picks the node's owner_addr (the same on every claim,
	// and /v1/info's advertise_addr): "ip" (default: AddrPrefix's first
	// address, "10.77.0.1:7777"), "origin" ("https://sandboxd-sim.example:8443"),
	// "hostname" ("sandboxd-sim.example:7777"), "none" (omitted), or
	// "per-claim" (a distinct AddrPrefix address per claim, and no
	// advertise_addr: not real sandboxd, for tests written against it).
	OwnerAddrMode string
	// OwnerAddr, if set, is the owner_addr verbatim in the ip, origin and
	// hostname modes. It is an error with none and per-claim.
	OwnerAddr string
	// AddrPrefix is the private range of the ip and per-claim addresses,
	// default "10.77.". The addresses are only handed out, never dialed.
	AddrPrefix string

	// DefaultTTL is the lease of a claim or renew with ttl_seconds 0.
	// Default 5 minutes.
	DefaultTTL time.Duration
	// MaxTTL caps every lease: a longer ask is granted MaxTTL, not refused.
	// Default 24 hours.
	MaxTTL time.Duration

	// ClaimLatency plus a uniform [0, ClaimJitter) is spent before admission.
	ClaimLatency, ClaimJitter time.Duration
	// ProvisionLatency is spent after admission by every claim; ColdLatency
	// is added when the warm pool is empty (0 means the default, 20ms;
	// negative means none). The row appears in the index when they are
	// over. A caller that goes away before then cancels the claim: no VM
	// is made, as on real sandboxd, where provisioning runs on the
	// request's context (see FinishDetachedClaims).
	ProvisionLatency, ColdLatency time.Duration
	// FinishDetachedClaims finishes every claim received whatever its
	// caller does, as a node behind a proxy that hides the client's
	// disconnect would: a caller that gave up leaves a VM it never heard
	// of, which lives until it is released or its lease ends.
	FinishDetachedClaims bool
	// LoseAnswerRate is the share of claims whose VM is made and indexed
	// but whose answer is never sent: the request hangs until its caller
	// gives up, as when a claim is finalized just before the node notices
	// the disconnect. Such a VM exists although nobody learned of it.
	LoseAnswerRate float64
	// FailRate is the share of claims answered 500 "provisioning failed".
	FailRate float64
	// RefillDelay is how long a claimed warm VM takes to be replaced.
	RefillDelay time.Duration

	// GuestPorts maps a guest port to the host address that the ports
	// relay dials for it, for every sandbox alike (the emulator has no
	// guests): {8080: "127.0.0.1:41234"} makes guest port 8080 a listener
	// a test started. A port neither listed nor covered by GuestLoopback
	// has nothing listening on it: 502.
	GuestPorts map[int]string
	// GuestLoopback makes every guest port P that GuestPorts does not list
	// 127.0.0.1:P on the host.
	GuestLoopback bool
	// ExecMemory is the node's memory for buffered exec output. A running
	// command holds pool.MaxExecOutput of it, and a command that finds
	// too little left is answered 503 with Retry-After: 1. Default 256 MiB
	// (32 commands at once).
	ExecMemory int64

	// NoAgentRelay answers the agent relay 404, as a node (or a proxy in
	// front of it) without GET /v1/sandboxes/{id}/agent does.
	NoAgentRelay bool
	// AgentProto is the proto the emulated silkd reports in info: 1 serves
	// one RPC a connection, 2 (the default) serves them back to back.
	AgentProto int
	// GuestHostShell makes silkd's pty_open run the host's shell ($SHELL,
	// else bash, else sh) in the sandbox's scratch directory, for tests of
	// kubectl exec -it. Off by default: it gives whoever reaches the
	// emulator a shell on the host.
	GuestHostShell bool
	// APIVersion is the sandboxd version reproduced, V1 to V5 (see
	// Features for what each has). Default LatestAPI.
	APIVersion string

	// MetricsNoAuth serves GET /metrics to anyone. By default it is an
	// operator surface: root only.
	MetricsNoAuth bool
	// StatePath, if set, persists live sandboxes (tokens included, mode 0600)
	// across restarts.
	StatePath string
	// Logger gets one line per request; nil discards.
	Logger *slog.Logger
	// TracerProvider, if set, gets one server span per request, a child of
	// the caller's traceparent (see middleware.go). nil starts no span: the
	// emulator then only reads the trace id, for TraceIDs and the log.
	TracerProvider trace.TracerProvider
}

// nodeTenant is the tenant name of Config.NodeToken.
const nodeTenant = "node"

// Capacity modes.
const (
	Capacity429      = "429"
	CapacityRedirect = "redirect"
)

// Owner address modes (Config.OwnerAddrMode).
const (
	OwnerAddrIP       = "ip"
	OwnerAddrOrigin   = "origin"
	OwnerAddrHostname = "hostname"
	OwnerAddrNone     = "none"
	ownerAddrPerClaim = "per-claim"
)

// Server defaults of real sandboxd, and the emulator's own.
const (
	DefaultTTL = 5 * time.Minute
	MaxTTL     = 24 * time.Hour

	defaultColdLatency = 20 * time.Millisecond
	defaultExecMemory  = 256 << 20
	defaultRetryAfter  = time.Second
	defaultNet         = "none"
	defaultSize        = "small"
)

var defaultRedirect = []string{"10.0.0.9:7777"}

func (c Config) withDefaults() (Config, error) {
	if c.RootToken == "" {
		return c, errors.New("sim: RootToken is required")
	}
	if c.Capacity == "" {
		c.Capacity = Capacity429
		if c.Mesh {
			c.Capacity = CapacityRedirect
		}
	}
	if err := validCapacity(c.Capacity); err != nil {
		return c, err
	}
	switch {
	case c.FailRate < 0 || c.FailRate > 1:
		return c, fmt.Errorf("sim: FailRate %v outside [0,1]", c.FailRate)
	case c.LoseAnswerRate < 0 || c.LoseAnswerRate > 1:
		return c, fmt.Errorf("sim: LoseAnswerRate %v outside [0,1]", c.LoseAnswerRate)
	case c.MaxClaims < 0:
		return c, fmt.Errorf("sim: MaxClaims %d is negative", c.MaxClaims)
	case c.TenantMaxClaims < 0:
		return c, fmt.Errorf("sim: TenantMaxClaims %d is negative", c.TenantMaxClaims)
	case c.DefaultTTL < 0 || c.MaxTTL < 0:
		return c, fmt.Errorf("sim: DefaultTTL %v and MaxTTL %v must not be negative", c.DefaultTTL, c.MaxTTL)
	}
	if c.APIVersion == "" {
		c.APIVersion = LatestAPI
	}
	api, err := FeaturesOf(c.APIVersion)
	if err != nil {
		return c, err
	}
	if c.TenantDBDown && !api.TenantAPI {
		return c, fmt.Errorf("sim: TenantDBDown: API %s has no tenant database", c.APIVersion)
	}
	if c.ExecMemory < 0 {
		return c, fmt.Errorf("sim: ExecMemory %d is negative", c.ExecMemory)
	}
	if c.ExecMemory == 0 {
		c.ExecMemory = defaultExecMemory
	}
	if err := validGuestPorts(c.GuestPorts); err != nil {
		return c, err
	}
	c.GuestPorts = maps.Clone(c.GuestPorts)
	if c.DefaultTTL == 0 {
		c.DefaultTTL = DefaultTTL
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = MaxTTL
	}
	if c.ColdLatency == 0 {
		c.ColdLatency = defaultColdLatency
	}
	if c.TenantDBRetryAfter <= 0 {
		c.TenantDBRetryAfter = defaultRetryAfter
	}
	if len(c.Redirect) == 0 {
		c.Redirect = defaultRedirect
	}
	if c.AddrPrefix == "" {
		c.AddrPrefix = "10.77."
	}
	if c.OwnerAddrMode == "" {
		c.OwnerAddrMode = OwnerAddrIP
	}
	if c.Pools, err = normalizePools(c.Pools); err != nil {
		return c, err
	}
	if c.TenantTokens, err = tenantTokens(c); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func validCapacity(mode string) error {
	if mode != Capacity429 && mode != CapacityRedirect {
		return fmt.Errorf("sim: capacity mode %q: want %q or %q", mode, Capacity429, CapacityRedirect)
	}
	return nil
}

// normalizePools fills the default axes into every key, so that a claim
// that leaves them out and one that names them meet the same pool.
func normalizePools(in map[pool.Key]int) (map[pool.Key]int, error) {
	out := make(map[pool.Key]int, len(in))
	for k, n := range in {
		if k.Template == "" || n < 0 {
			return nil, fmt.Errorf("sim: pool %+v=%d: want a template and a target >= 0", k, n)
		}
		nk := normalizeKey(k)
		if _, dup := out[nk]; dup {
			return nil, fmt.Errorf("sim: pool %s/%s/%s listed twice", nk.Template, nk.Net, nk.Size)
		}
		out[nk] = n
	}
	return out, nil
}

func normalizeKey(k pool.Key) pool.Key {
	if k.Net == "" {
		k.Net = defaultNet
	}
	if k.Size == "" {
		k.Size = defaultSize
	}
	return k
}

// tenantTokens is a private copy of TenantTokens with NodeToken folded in,
// so that addTenant never writes to the caller's map.
func tenantTokens(c Config) (map[string]string, error) {
	out := maps.Clone(c.TenantTokens)
	if out == nil {
		out = map[string]string{}
	}
	if c.NodeToken != "" {
		if name, ok := out[c.NodeToken]; ok && name != nodeTenant {
			return nil, fmt.Errorf("sim: NodeToken is also the token of tenant %q", name)
		}
		out[c.NodeToken] = nodeTenant
	}
	for tok, name := range out {
		if err := validTenant(tok, name, c.RootToken); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func validTenant(token, name, root string) error {
	switch {
	case token == "" || name == "":
		return fmt.Errorf("sim: tenant %q: want a name and a non-empty token", name)
	case token == root:
		return fmt.Errorf("sim: tenant %q: its token is the root token", name)
	}
	return nil
}
