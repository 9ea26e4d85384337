// Package pool is everything about the warm pool on this node that is not
// Kubernetes: the sandboxd wire types and client (this package), the durable
// claim store (pool/store) and the sandboxd emulator's server (pool/sim).
//
// The store lives here because what it holds is the pool's: which warm VM
// each Pod key claimed, and the credential that releases it. It knows
// nothing of Kubernetes, and only the pipeline writes it.
//
// The client speaks the subset of the sandboxd protocol whose versions and
// detection docs/compatibility.md describes (docs/architecture.md follows
// each call through the claim and delete paths). Every
// call is bounded by its context, errors are typed (ErrCapacity, *HTTPError,
// converged releases), and no token ever appears in an error string.
package pool
