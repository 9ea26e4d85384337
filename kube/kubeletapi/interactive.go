package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// Sandboxd is what the interactive surfaces need from the sandboxd client
// (*pool.Client). Exec, Agent and DialPort take the claim's own sandbox
// token; Stats needs the root token. No error it returns may name a token.
type Sandboxd interface {
	// Exec runs a command to completion (sandboxd's buffered exec) and
	// returns its output and exit code; a refusal is a *pool.HTTPError.
	Exec(ctx context.Context, id, token string, r pool.ExecRequest) (pool.ExecResult, error)
	// DialPort opens a connection to a guest port through sandboxd's
	// ports relay; closing it ends the relay.
	DialPort(ctx context.Context, id, token string, port int) (*pool.PortConn, error)
	// Stats is what sandboxd measured of the sandbox; pool.ErrForbidden
	// when the client's token is not the root token.
	Stats(ctx context.Context, id string) (pool.Stats, error)
	// Agent is a session with the sandbox's guest agent (silkd) behind
	// sandboxd's agent relay; agent.ErrNoRelay when sandboxd refuses
	// the relay. The caller closes it.
	Agent(id, token string) *agent.Agent
	// Tenant reports that sandboxd has answered 403 to a root-token read:
	// the node token is a tenant's, and stats are not read any more.
	Tenant() bool
	// Features is what the node's sandboxd was found to have; false while
	// unknown (then a verb is simply tried).
	Features() (pool.Features, bool)
}

// lacks reports whether the node's sandboxd is known to lack what has
// says, and names the verb for the error kubectl shows.
func (a *API) lacks(has func(pool.Features) bool) bool {
	f, ok := a.sandboxd.Features()
	return ok && !has(f)
}

// errVerbMissing is what kubectl shows on a sandboxd without the verb a
// surface needs (before V2 it has no exec or ports verb; the agent relay
// and stats answer from V1), instead of the 404 its router answers.
func errVerbMissing(surface, verb string) error {
	return errdefs.InvalidInputf("%s is not available on this node: its sandboxd has no %s verb; upgrade sandboxd on the host", surface, verb)
}

var _ Sandboxd = (*agent.Client)(nil)

// These surfaces are reached only through the apiserver's authorized proxy
// to the kubelet API (package kube's node authenticates and authorizes
// every request),
// so the caller may act on the Pod; the sandbox token the request then
// uses comes from the claim row and never leaves this process: no error,
// log line or span below names it.

// target is the claim behind an interactive request on Pod namespace/name:
// the Pod is this node's, Running, and its generation holds a durable claim.
// A quarantined or tentative claim, or one held for an older or newer
// generation of the name, is not the Pod's yet.
func (a *API) target(namespace, name string) (sandbox, error) {
	key := pipeline.JoinKey(namespace, name)
	pod := a.pods.Pod(key)
	if pod == nil {
		return sandbox{}, errdefs.NotFoundf("pod %s is not known to this node", key)
	}
	if a.sandboxd == nil {
		return sandbox{}, errors.New("this node has no sandboxd client for interactive requests")
	}
	id, token, ok := a.pods.Credential(key, string(pod.UID))
	if pod.Status.Phase != corev1.PodRunning || !ok {
		why := pod.Status.Reason
		if why == "" {
			why = string(pod.Status.Phase)
		}
		return sandbox{}, errdefs.InvalidInputf("pod %s has no sandbox yet (%s): wait until it is Running", key, why)
	}
	return sandbox{ID: id, Token: token, Key: key, UID: string(pod.UID)}, nil
}

// sandbox is what an interactive request needs: the VM and its own token,
// which sandboxd checks for exec and the ports relay, and the Pod (key and
// UID) whose claim it is.
type sandbox struct {
	ID, Token string
	Key       pipeline.PodKey
	UID       string
}

// explain turns a sandboxd refusal into what a person at kubectl needs to
// read. The pool's error, already free of tokens, is logged by the caller;
// the answer names the sandbox and the surface, never a credential.
func explain(err error, surface, id string, port int, timeoutSecs int64) error {
	msg := ""
	switch pool.StatusCode(err) {
	case http.StatusBadRequest:
		msg = "sandboxd refused the request: " + sandboxdMessage(err)
	case http.StatusUnauthorized, http.StatusNotFound:
		msg = fmt.Sprintf("sandboxd no longer knows sandbox %s under this Pod's claim (released, or its lease ended)", id)
	case http.StatusConflict:
		msg = fmt.Sprintf("sandbox %s has failed, so sandboxd will not %s; delete the Pod to get a fresh VM", id, surfaceVerb(surface))
	case http.StatusRequestEntityTooLarge:
		msg = fmt.Sprintf("the command printed more than %d MiB (stdout and stderr together), which sandboxd does not buffer; write the output to a file in the sandbox and read it in parts", pool.MaxExecOutput>>20)
	case http.StatusBadGateway:
		if surface == pool.VerbPorts {
			msg = fmt.Sprintf("nothing listens on port %d in sandbox %s", port, id)
		} else {
			msg = fmt.Sprintf("sandboxd cannot reach the guest of sandbox %s", id)
		}
	case http.StatusServiceUnavailable:
		msg = "sandboxd has no memory left for buffered command output right now; try again in a second"
	case http.StatusGatewayTimeout:
		msg = fmt.Sprintf("the command outlived its timeout of %ds in sandbox %s and was stopped", timeoutSecs, id)
	case 0:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		msg = "sandboxd did not answer: " + err.Error()
	default:
		msg = err.Error()
	}
	return errors.New(msg)
}

// refusalLevel logs a refusal of the caller's own making (a 4xx: a typo,
// a released sandbox) at debug, and one of sandboxd's or the guest's at
// warn, where an operator looks.
func refusalLevel(err error) slog.Level {
	if c := pool.StatusCode(err); c >= 400 && c < 500 {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

func surfaceVerb(surface string) string {
	if surface == pool.VerbPorts {
		return "relay a port of it"
	}
	return "run commands in it"
}

// sandboxdMessage is sandboxd's own {"error"} text (already scrubbed).
func sandboxdMessage(err error) string {
	var he *pool.HTTPError
	if errors.As(err, &he) && strings.TrimSpace(he.Message) != "" {
		return he.Message
	}
	return err.Error()
}
