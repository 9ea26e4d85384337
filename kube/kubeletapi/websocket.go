package kubeletapi

// kubectl exec, attach and port-forward over WebSocket, served by the node.
//
// kubectl speaks WebSocket first. To a node that does not declare
// WebSocketFeature the apiserver translates it: exec's V5 channels become
// SPDY streams, and port-forward's SPDY-in-WebSocket tunnel is unwrapped,
// which costs the apiserver about three times the CPU of proxying the
// bytes. A node that declares it gets the WebSocket request proxied as it
// is, and must serve it: exec and attach here, with the V5 channel
// protocol, and port-forward by unwrapping the tunnel in front of the SPDY
// port-forward it already serves.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"

	gwebsocket "github.com/gorilla/websocket"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/portforward"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// WebSocketFeature is the feature a Node declares (status.declaredFeatures)
// to have the apiserver proxy WebSocket exec, attach and port-forward to it
// untranslated (kube-apiserver's ExtendWebSocketsToKubelet gate, on by
// default from 1.36).
const WebSocketFeature = "ExtendWebSocketsToKubelet"

// The V5 channels, by number.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanStatus
	chanResize
)

// WebSocketExec serves exec and attach requests that ask for the V5
// WebSocket channel protocol (v5.channel.k8s.io) and hands every other
// request to next (SPDY, and the older WebSocket protocols, which
// virtual-kubelet serves).
func (a *API) WebSocketExec(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		verb, ns, pod, container, ok := streamPath(req.URL.Path)
		if !ok || !wsstream.IsWebSocketRequestWithStreamCloseProtocol(req) {
			next.ServeHTTP(w, req)
			return
		}
		a.serveV5(w, req, verb, ns, pod, container)
	})
}

// TunneledPortForward unwraps port-forward's SPDY-in-WebSocket tunnel
// (SPDY/3.1+portforward.k8s.io) and hands the SPDY connection inside to
// spdy, the port-forward handler; other requests go to spdy as they are.
func TunneledPortForward(spdy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		protocols := tunneledProtocols(req)
		if !wsstream.IsWebSocketRequestWithTunnelingProtocol(req) || len(protocols) == 0 {
			spdy.ServeHTTP(w, req)
			return
		}
		// spdy sees the SPDY upgrade the tunnel carries: its own protocol
		// versions, no WebSocket headers.
		inner := req.Clone(req.Context())
		for _, h := range []string{"Sec-Websocket-Protocol", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions"} {
			inner.Header.Del(h)
		}
		inner.Method = http.MethodPost
		inner.Body = http.NoBody
		inner.Header.Set(httpstream.HeaderUpgrade, streamspdy.HeaderSpdy31)
		inner.Header[httpstream.HeaderProtocolVersion] = protocols
		spdy.ServeHTTP(&tunnelWriter{w: w, req: req, header: http.Header{}}, inner)
	})
}

// tunneledProtocols are the SPDY protocols a tunneling request offers.
func tunneledProtocols(req *http.Request) []string {
	var out []string
	for _, p := range gwebsocket.Subprotocols(req) {
		if strings.HasPrefix(p, tunnelPrefix) && strings.HasSuffix(p, ".k8s.io") {
			out = append(out, strings.TrimPrefix(p, tunnelPrefix))
		}
	}
	return out
}

const tunnelPrefix = "SPDY/3.1+"

// tunnelWriter is the response the SPDY port-forward writes: its 101 is
// not sent, the WebSocket handshake is (naming the SPDY protocol it chose),
// and its hijacked connection is the WebSocket's binary messages. Any
// other answer (a refusal) is written as it is.
type tunnelWriter struct {
	w       http.ResponseWriter
	req     *http.Request
	header  http.Header
	upgrade bool
	wrote   bool
}

func (t *tunnelWriter) Header() http.Header { return t.header }

func (t *tunnelWriter) WriteHeader(code int) {
	if t.wrote || t.upgrade {
		return
	}
	if code == http.StatusSwitchingProtocols {
		t.upgrade = true
		return
	}
	t.wrote = true
	maps.Copy(t.w.Header(), t.header)
	t.w.WriteHeader(code)
}

func (t *tunnelWriter) Write(b []byte) (int, error) {
	if t.upgrade {
		return 0, http.ErrHijacked
	}
	t.WriteHeader(http.StatusOK)
	return t.w.Write(b)
}

func (t *tunnelWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if !t.upgrade {
		return nil, nil, errors.New("port-forward tunnel: hijacked without an upgrade")
	}
	u := gwebsocket.Upgrader{
		// The apiserver proxies the request; it checked the caller.
		CheckOrigin:  func(*http.Request) bool { return true },
		Subprotocols: []string{tunnelPrefix + t.header.Get(httpstream.HeaderProtocolVersion)},
	}
	ws, err := u.Upgrade(t.w, t.req, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("port-forward tunnel: %w", err)
	}
	conn := portforward.NewTunnelingConnection("port-forward-tunnel", ws)
	return conn, bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)), nil
}

// streamPath splits /exec/{namespace}/{pod}/{container} and
// /attach/{namespace}/{pod}/{container}.
func streamPath(path string) (verb, ns, pod, container string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) != 4 || (parts[0] != "exec" && parts[0] != "attach") || parts[1] == "" || parts[2] == "" {
		return "", "", "", "", false
	}
	return parts[0], parts[1], parts[2], parts[3], true
}

// wsIO is one V5 session's streams as virtual-kubelet's AttachIO: a stream
// not asked for is nil, as on virtual-kubelet's SPDY path.
type wsIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	tty            bool
	resize         chan api.TermSize
}

func (s *wsIO) Stdin() io.Reader            { return s.stdin }
func (s *wsIO) Stdout() io.WriteCloser      { return s.stdout }
func (s *wsIO) Stderr() io.WriteCloser      { return s.stderr }
func (s *wsIO) TTY() bool                   { return s.tty }
func (s *wsIO) Resize() <-chan api.TermSize { return s.resize }

// serveV5 runs one exec or attach over the V5 channel protocol: the
// channels kubectl asked for, the terminal's resizes (JSON on channel 4),
// stdin's end (the close signal), and the outcome as a Status on channel
// 3, the same Status virtual-kubelet writes on the SPDY path.
func (a *API) serveV5(w http.ResponseWriter, req *http.Request, verb, ns, pod, container string) {
	q := req.URL.Query()
	// The kubelet's query names, as the apiserver writes them.
	stdin, stdout, stderr, tty := q.Get("input") == "1", q.Get("output") == "1", q.Get("error") == "1", q.Get("tty") == "1"
	switch {
	case tty && stderr:
		http.Error(w, "cannot exec with tty and stderr", http.StatusBadRequest)
		return
	case !stdin && !stdout && !stderr:
		http.Error(w, "you must specify at least one of stdin, stdout, stderr", http.StatusBadRequest)
		return
	}
	s, err := openV5(w, req, a.IdleTimeout())
	if err != nil {
		a.log.Warn("websocket exec: upgrade failed", "pod", ns+"/"+pod, "error", err)
		return
	}
	defer s.close()
	// An empty message on the lowest channel the client reads tells it
	// the session is up.
	first := byte(chanStatus)
	if stdout {
		first = chanStdout
	} else if stderr {
		first = chanStderr
	}
	if err := s.send(first, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	sio := &wsIO{tty: tty}
	var in *io.PipeWriter
	if stdin {
		sio.stdin, in = io.Pipe()
	}
	if stdout {
		sio.stdout = s.channel(chanStdout)
	}
	if stderr {
		sio.stderr = s.channel(chanStderr)
	}
	if tty {
		sio.resize = make(chan api.TermSize)
	}
	// The client's leaving ends the session, as a SPDY connection's close
	// does on virtual-kubelet's path.
	go s.receive(ctx, cancel, in, sio.resize)
	if verb == "exec" {
		err = a.RunInContainer(ctx, ns, pod, container, q["command"], sio)
	} else {
		err = a.AttachToContainer(ctx, ns, pod, container, sio)
	}
	// A client that left, or a session idle too long, gets no answer: the
	// connection ends, as a SPDY connection does.
	if !s.clientGone() {
		writeStatus(s.channel(chanStatus), err)
	}
}

// writeStatus writes the session's outcome on the status channel: success,
// the command's exit code, or the error that ended it.
func writeStatus(w io.Writer, err error) {
	b, merr := json.Marshal(outcome(err))
	if merr != nil {
		return
	}
	_, _ = w.Write(b)
}

// outcome is the Status virtual-kubelet's SPDY path writes for err. The
// exit error is type-asserted, not unwrapped, as there.
func outcome(err error) metav1.Status {
	if err == nil {
		return metav1.Status{Status: metav1.StatusSuccess}
	}
	exit, ok := err.(utilexec.ExitError)
	if !ok || !exit.Exited() {
		return apierrors.NewInternalError(fmt.Errorf("error executing command in container: %w", err)).ErrStatus
	}
	return metav1.Status{
		Status: metav1.StatusFailure,
		Reason: remotecommandconsts.NonZeroExitCodeReason,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: remotecommandconsts.ExitCodeCauseType, Message: fmt.Sprintf("%d", exit.ExitStatus())},
		}},
		Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exit),
	}
}
