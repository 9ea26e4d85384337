package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// API versions of sandboxd that the emulator reproduces (Config.APIVersion),
// oldest first. Each has everything the one before it has, but for the V1
// quirks that later versions dropped.
const (
	V1 = "V1"
	V2 = "V2"
	V3 = "V3"
	V4 = "V4"
	V5 = "V5"
)

// LatestAPI is the default version: the newest.
const LatestAPI = V5

// Features is what one API version has. The handlers consult the Server's
// copy; this table is the one place that says which version has what.
//
// An older server does not refuse what it does not know: it ignores a
// claim's metadata and a listing filter it lacks, and answers a verb it
// lacks as a plain router does, 404 "404 page not found" as text (405 for a
// known path with another method), never with a JSON error.
type Features struct {
	// ClaimRefFilter: GET /v1/sandboxes honours ?claim_ref=. Without it
	// the filter is ignored and the listing has every row the token sees.
	ClaimRefFilter bool
	// TokenRead: GET /v1/sandboxes/{id} carries the sandbox's token for
	// the root token.
	TokenRead bool
	// ClaimedAt: rows carry claimed_at. Without it (V1) a row says nothing
	// of a VM's age but its deadline.
	ClaimedAt bool
	// The verbs POST .../renew, POST .../exec and GET .../ports/{port}
	// (V2+).
	Renew, Exec, Ports bool
	// The verbs GET .../stats (root) and GET .../agent, the silkd relay:
	// both answer on every version emulated, V1 included.
	Stats, Agent bool
	// Metadata: a claim's metadata is validated, kept and echoed on rows,
	// and ?metadata=k=v filters the listing (400 for a bad pair). Without
	// it both are ignored, even when malformed.
	Metadata bool
	// RowSizes: rows carry cpu_count and mem_total_bytes.
	RowSizes bool
	// FailedVMMs: rows carry failed, and exec and the ports relay answer a
	// failed sandbox 409.
	FailedVMMs bool
	// AdvertiseAddr: /v1/info reports the node's owner_addr.
	AdvertiseAddr bool
	// PassiveRootRelay: the ports relay takes the root token, passively.
	// Without it only the sandbox's own token opens a relay.
	PassiveRootRelay bool
	// ExecBudget: exec answers 503 with Retry-After when the node's
	// buffered-exec memory is used up.
	ExecBudget bool
	// TenantAPI: the tenant database (meta_store), which answers 503 while
	// down; renew 403 for a removed tenant's sandbox; tenant on rows.
	TenantAPI bool
	// EngineInKey: pool keys, on rows and in /v1/info, carry
	// "engine":"ch" (V1 only).
	EngineInKey bool
	// NanosecondDeadlines: deadlines are written with nanosecond
	// fractions rather than milliseconds (V1 only).
	NanosecondDeadlines bool
}

// apiVersions is the version table, built cumulatively.
var apiVersions = func() map[string]Features {
	v1 := Features{Stats: true, Agent: true, EngineInKey: true, NanosecondDeadlines: true}
	v2 := Features{ClaimRefFilter: true, TokenRead: true, ClaimedAt: true, Renew: true, Exec: true, Ports: true, Stats: true, Agent: true}
	v3 := v2
	v3.Metadata, v3.RowSizes, v3.FailedVMMs, v3.AdvertiseAddr, v3.PassiveRootRelay, v3.ExecBudget = true, true, true, true, true, true
	v4 := v3
	v4.TenantAPI = true
	v5 := v4 // volumes, which the emulator does not have
	return map[string]Features{V1: v1, V2: v2, V3: v3, V4: v4, V5: v5}
}()

// APIVersions lists the versions the emulator reproduces, oldest first.
func APIVersions() []string {
	return slices.Sorted(maps.Keys(apiVersions)) // "V1" < ... < "V5"
}

// FeaturesOf is the version table's row for version ("" is LatestAPI).
func FeaturesOf(version string) (Features, error) {
	if version == "" {
		version = LatestAPI
	}
	f, ok := apiVersions[version]
	if !ok {
		return Features{}, fmt.Errorf("sim: API version %q: want one of %s", version, strings.Join(APIVersions(), ", "))
	}
	return f, nil
}
