// Package sim is a sandboxd emulator: the node daemon's wire protocol over
// real HTTP, for the demo, the tests and the benchmarks. cmd/sandboxd-sim is
// a thin binary around it; tests mount Server.Handler on httptest.NewServer.
//
// Every default is the real sandboxd's behaviour, so that a test meets it
// unless it opts out through a Config field; the fields that are not real
// (per-claim owner addresses, AbandonBeforeAdmission, MetricsNoAuth, the
// "429-retry-after" fault) say so.
//
// # Tokens
//
// Three kinds of bearer token are told apart:
//
//	                           root (api_token)   tenant             sandbox's own
//	POST /v1/claim             yes                yes                401
//	POST .../{id}/release      any sandbox        404                that sandbox
//	POST .../{id}/renew        any sandbox        404                that sandbox
//	GET  /v1/sandboxes         every row          its own rows       401
//	GET  /v1/sandboxes/{id}    row + token        403                401
//	GET  .../{id}/stats        yes                403                401
//	POST .../{id}/exec         404                404                that sandbox
//	GET  .../{id}/ports/{p}    any (passive)      404                that sandbox
//	GET  /v1/info              yes                403                401
//	GET  /metrics              yes                403                401
//	GET  /healthz              no token needed
//
// A tenant is authenticated but not authorized on the operator surfaces,
// hence 403 rather than 401. Release and renew answer a wrong token exactly
// like an unknown id, 404, so that neither can be told from the other. A
// row records the tenant that claimed it ("" for root); a tenant removed
// with RemoveTenant leaves its rows, and their renew is a 403.
//
// While the tenant database is down (TenantDBDown) every token but root
// needs it to be told apart, so claim, list and the operator surfaces
// answer such a token 503 with Retry-After; so does the renew of a tenant's
// sandbox. Retry-After is sent with 503 only, never with 429.
//
// # Claims
//
// A claim spends ClaimLatency plus jitter, then is admitted against the
// tenant's cap (429), MaxClaims (429, or a redirect: see Capacity) and the
// warm pool. An admitted claim takes a warm VM if the pool has one (the pool
// refills after RefillDelay) or boots cold; it spends ProvisionLatency, plus
// ColdLatency when cold, and only then does its row appear in the index. A
// claim is not abandoned when its caller goes away, at any stage: like real
// sandboxd, a VM whose response was lost exists until it is released or its
// lease ends. AbandonBeforeAdmission is the opt-out.
//
// ttl_seconds 0 is DefaultTTL (5 minutes); every lease is capped at MaxTTL
// (24 hours), not refused, and the answer's deadline is the grant. Renew
// resets the lease the same way. The reaper removes sandboxes past their
// deadline, checking every 50ms; archived ones stay.
//
// A duplicate claim_ref is not a conflict: callers look a claim up by
// claim_ref before retrying precisely because sandboxd would hand out a
// second VM. Metadata labels are checked against pool.ValidateMetadata,
// echoed in the rows and filterable with ?metadata=k=v.
//
// # Interactive surfaces
//
// POST /v1/sandboxes/{id}/exec runs one command to completion and answers
// its exit code, stdout and stderr; the emulator runs a fixed set of
// commands itself (echo, true, false, env, pwd, sleep, head -c, sh -c: see
// shell.go). GET /v1/sandboxes/{id}/ports/{port} with Upgrade: tcp answers
// 101 and relays raw bytes, with half-close, to the host address that
// Config.GuestPorts (or GuestLoopback) names for the guest port. Both wake
// a hibernated sandbox when the sandbox's own token asks; a relay with the
// root token is passive and is refused 409 while the sandbox is paused.
// GET .../stats reports the machine and its memory use, unmeasured while it
// is hibernated. Hibernate, Fail, SetGuestUnreachable and SetMemUsed drive
// the answers: 409 for a failed sandbox, 502 for an unreachable guest, 502
// for a port nothing listens on, 503 when ExecMemory is used up, 504 past
// timeout_seconds and 413 past pool.MaxExecOutput of output.
//
// # Owner address and mesh
//
// owner_addr is the node's sandboxd address, the same on every claim and
// reported as advertise_addr in /v1/info; OwnerAddrMode picks its form or
// leaves it out. No row carries it. On a meshed node (Mesh) a warm miss or
// a peer's template is answered 200 {"redirect": peers} unless the claim
// set no_redirect, and then the node boots the VM itself.
//
// # Test knobs
//
// The Set* methods, AddTenant, RemoveTenant, Archive, Expire, SetDeadline,
// Hibernate, Fail and InjectFault change behaviour at runtime and are safe
// for concurrent use. Counters counts requests per verb (also at GET
// /metrics and in /v1/info), so that a test can assert "exactly N claims,
// M releases".
package sim
