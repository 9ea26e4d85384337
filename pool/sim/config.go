package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Config configures a Server. RootToken is required; everything else has a
// usable zero value.
type Config struct {
	// RootToken is the api_token: allowed everywhere, and the only token for
	// which GET /v1/sandboxes/{id} includes the sandbox's own token.
	RootToken string
	// NodeToken is an optional second token: claim, list, get (without
	// token) and info. It cannot release; the sandbox token does that.
	NodeToken string
	// Pools is the warm target per pool. A claim for a key not listed here
	// is a 400 (bad template axis). A target of 0 is a known pool that is
	// always cold.
	Pools map[pool.Key]int
	// MaxClaims caps live sandboxes; 0 is unlimited. At the cap a claim is a
	// capacity miss (see Capacity).
	MaxClaims int
	// ClaimLatency plus a uniform [0, ClaimJitter) is spent before admission.
	ClaimLatency, ClaimJitter time.Duration
	// ColdLatency is added when the warm pool is empty. 0 means the default
	// (20ms); negative means none.
	ColdLatency time.Duration
	// FailRate is the share of claims answered 500 "provisioning failed".
	FailRate float64
	// Capacity is what a capacity miss looks like: "429" (default) or
	// "redirect" (200 {"redirect":[...]}, unless the claim set no_redirect).
	Capacity string
	// Redirect is the peer list of a redirect answer. Default 10.0.0.9:7777.
	Redirect []string
	// RefillDelay is how long a claimed warm VM takes to be replaced.
	RefillDelay time.Duration
	// StatePath, if set, persists live sandboxes (tokens included, mode 0600)
	// across restarts.
	StatePath string
	// AddrPrefix is the owner_addr range, default "10.77." giving
	// "10.77.x.y:7777". The addresses are only handed out, never dialed.
	AddrPrefix string
	// Logger gets one line per request; nil discards.
	Logger *slog.Logger
}

// Capacity modes.
const (
	Capacity429      = "429"
	CapacityRedirect = "redirect"
)

const (
	defaultTTL         = time.Hour
	maxTTLSeconds      = 10 * 365 * 24 * 3600
	defaultColdLatency = 20 * time.Millisecond
	ownerPort          = "7777"
)

var defaultRedirect = []string{"10.0.0.9:7777"}

func (c Config) withDefaults() (Config, error) {
	if c.RootToken == "" {
		return c, errors.New("sim: RootToken is required")
	}
	if c.Capacity == "" {
		c.Capacity = Capacity429
	}
	if err := validCapacity(c.Capacity); err != nil {
		return c, err
	}
	if c.FailRate < 0 || c.FailRate > 1 {
		return c, fmt.Errorf("sim: FailRate %v outside [0,1]", c.FailRate)
	}
	if c.MaxClaims < 0 {
		return c, fmt.Errorf("sim: MaxClaims %d is negative", c.MaxClaims)
	}
	if c.ColdLatency == 0 {
		c.ColdLatency = defaultColdLatency
	}
	if len(c.Redirect) == 0 {
		c.Redirect = defaultRedirect
	}
	if c.AddrPrefix == "" {
		c.AddrPrefix = "10.77."
	}
	for k, n := range c.Pools {
		if k.Template == "" || n < 0 {
			return c, fmt.Errorf("sim: pool %+v=%d: want a template and a target >= 0", k, n)
		}
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

// ParsePools reads "template[/net/size]=warm,..." (the --pools flag), e.g.
// "default=64,py/bridge/small=8". Net and size may be left out or empty.
func ParsePools(s string) (map[pool.Key]int, error) {
	out := map[pool.Key]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		axes, warm, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("pool %q: want template[/net/size]=warm", item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(warm))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("pool %q: warm target must be an integer >= 0", item)
		}
		parts := strings.Split(strings.TrimSpace(axes), "/")
		if len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("pool %q: want template[/net/size]", item)
		}
		parts = append(parts, "", "")
		k := pool.Key{Template: parts[0], Net: parts[1], Size: parts[2]}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("pool %q: listed twice", item)
		}
		out[k] = n
	}
	return out, nil
}

// Fault makes the next Count requests of Verb misbehave.
type Fault struct {
	// Verb is "claim", "release", "list", "get", "info", or "" for any.
	Verb string
	// Mode is one of:
	//   "500", "503" (with Retry-After), "429", "409": that status;
	//   "garbage": 200 with a body that is not JSON;
	//   "missing-id": 200 {} (a claim with neither id nor redirect);
	//   "reset": headers and part of a body, then the connection closes;
	//   "slow": sleep Delay, then answer normally;
	//   "lose-response": perform the request, then close the connection
	//   mid-response, so a claimed VM exists that the caller never learns of.
	Mode string
	// Count is how many requests it applies to; 0 is until ClearFaults.
	Count int
	// RetryAfter is sent as Retry-After (whole seconds, rounded up) with
	// 503 and 429.
	RetryAfter time.Duration
	// Delay is the sleep of "slow".
	Delay time.Duration
}

var faultModes = map[string]bool{
	"500": true, "503": true, "429": true, "409": true, "garbage": true,
	"missing-id": true, "reset": true, "slow": true, "lose-response": true,
}
