// Package sim is a sandboxd emulator: the node daemon's wire protocol over
// real HTTP, for the demo, the tests and the benchmarks. cmd/sandboxd-sim is
// a thin binary around it; tests mount Server.Handler on httptest.NewServer.
//
// Every default is the real sandboxd's behaviour, so that a test meets it
// unless it opts out through a Config field; the fields that are not real
// (per-claim owner addresses, MetricsNoAuth, the "429-retry-after" fault)
// say so.
//
// # API versions
//
// Nodes run whatever sandboxd version their host has, so the emulator
// reproduces each of V1 to V5 (Config.APIVersion, default V5, the newest);
// Features is the table of what each has, and the handlers consult it.
// An older version does not refuse what it does not know, it ignores it:
// V1 and V2 drop a claim's metadata (not kept, not echoed) and the
// ?metadata= filter, and V1 ignores ?claim_ref= (the listing has every row
// the token may see). A verb a version lacks (renew, exec and ports before
// V2) is not routed: the plain router answers 404 "404 page not found" as
// text, or 405 for a known path with another method; root stats and the
// agent relay answer on every version. Before V2 the by-id read has no
// token and rows carry no claimed_at; V1 writes "engine":"ch" in every
// pool key and deadlines with nanosecond fractions. V3 adds advertise_addr in
// /v1/info, cpu_count, mem_total_bytes and failed on rows, the passive root
// relay and exec's 503; V4 the tenant database (TenantDBDown) and renew's
// 403 for a removed tenant, and tenant on rows. Every version lets a tenant
// list its own claims and the root token release any sandbox.
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
// with removeTenant leaves its rows, and their renew is a 403.
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
// ColdLatency when cold, and only then does its row appear in the index.
//
// A claim runs on its request's context, as on real sandboxd: a caller
// that goes away before the VM is made (during the latencies, or while
// HoldNextClaim holds it) cancels it, the half-made VM is destroyed and
// nothing enters the index (counted as claim_cancelled). Two knobs make a
// VM that its caller never heard of, which then exists until it is
// released or its lease ends:
//   - FinishDetachedClaims finishes every claim whatever its caller does,
//     as a node behind a proxy that hides the disconnect would;
//   - LoseAnswerRate is the share of claims that are finalized and indexed
//     but never answered, as a claim finalized just before the node
//     noticed the disconnect: the request hangs until its caller gives up
//     (counted as claim_answer_lost).
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
// The Set* and set* methods, addTenant, removeTenant, archive, Expire,
// SetDeadline, Hibernate, Fail and InjectFault change behaviour at runtime
// and are safe for concurrent use. Counters counts requests per verb (also at GET
// /metrics and in /v1/info), so that a test can assert "exactly N claims,
// M releases".
package sim
