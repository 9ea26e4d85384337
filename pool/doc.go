// Package pool is everything about the warm pool on this node that is not
// Kubernetes: the sandboxd wire types and client (this package), the durable
// claim store (pool/store) and the sandboxd emulator's server (pool/sim).
//
// The client speaks the subset of the sandboxd protocol described in docs/architecture.md. Every
// call is bounded by its context, errors are typed (ErrCapacity, *HTTPError,
// converged releases), and no token ever appears in an error string.
package pool
