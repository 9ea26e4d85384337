// Package sim is a sandboxd emulator: the wire protocol of DESIGN §7 over
// real HTTP, for the demo, the tests and the benchmarks. cmd/sandboxd-sim is
// a thin binary around it; tests mount Server.Handler on httptest.NewServer.
//
// # Tokens
//
// Three kinds of bearer token are told apart:
//
//	                         root (api_token)   node          sandbox's own
//	POST /v1/claim           yes                yes           no (401)
//	POST .../{id}/release    any sandbox        no (401)      that sandbox
//	GET  /v1/sandboxes       yes                yes           no (401)
//	GET  /v1/sandboxes/{id}  row + token        row, no token no (401)
//	GET  /v1/info            yes                yes           no (401)
//	GET  /metrics            no auth (Prometheus scrape)
//
// A node-token GET of one row answers the row without its token rather than
// 403: the lease watch may read a row, but the credential of a lost claim is
// only recoverable with the root token (DESIGN §7: "with a non-root token
// that is impossible").
//
// A release of an unknown id answers 404 before the token is checked,
// because the sandbox, and with it the token to compare against, is gone:
// a release retried after its lease ended must converge, not fail with 401.
//
// # Claims
//
// A claim sleeps ClaimLatency plus jitter (abandoned if the caller goes away:
// nothing is claimed), then is admitted against MaxClaims. Admission takes a
// warm VM if the pool has one (the pool refills after RefillDelay) or boots
// cold after ColdLatency more. Once admitted the claim completes even if the
// caller has gone: like real sandboxd, a VM whose response was lost exists
// until it is released or its lease ends. The reaper removes sandboxes past
// their deadline, checking every 50ms.
//
// A duplicate claim_ref is not a conflict: the spec has callers look a claim
// up by claim_ref before retrying precisely because sandboxd would hand out
// a second VM. 409 is therefore only produced by InjectFault.
//
// # Test knobs
//
// SetFailRate, SetMaxClaims, SetCapacity, SetClaimLatency and InjectFault
// change behaviour at runtime and are safe for concurrent use. Counters
// counts requests per verb (also at GET /metrics and in /v1/info), so that a
// test can assert "exactly N claims, M releases".
package sim
