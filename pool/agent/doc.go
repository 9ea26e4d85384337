// Package agent is the sandboxd client's relay to the guest daemon
// (silkd) of one sandbox: exec, pty and attach sessions streamed over the
// agent relay's upgraded connection, the short RPCs (kill, pty_resize,
// ps) on a control connection, and the node's byte budget that bounds
// what guests may make the node hold.
//
// It imports pool one way, and pool knows nothing of it: the relay is
// dialled through the claim client's DialUpgrade, so that the HTTP
// plumbing (dialer and TLS, the token and its scrubbing from errors, the
// client span and the Observer) stays in one place. Client embeds
// *pool.Client, so the one value serves both the claim calls and the
// relay.
//
// Frames are JSON lines; the hot ones (stdout, stderr, stdin) go through
// the hand-written codec in codec.go rather than encoding/json.
package agent
