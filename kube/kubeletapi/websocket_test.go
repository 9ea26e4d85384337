package kubeletapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// wsServer serves the node's WebSocket exec in front of a handler that
// answers 418, so a request that falls through is seen.
func wsServer(t *testing.T, it *interactive) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(it.prov.WebSocketExec(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})))
	t.Cleanup(srv.Close)
	return srv
}

// wsExec runs cmd through kubectl's WebSocket executor (V5).
func wsExec(t *testing.T, srv *httptest.Server, verb string, opts remotecommand.StreamOptions, cmd ...string) error {
	t.Helper()
	return wsExecCtx(t.Context(), t, srv, verb, opts, cmd...)
}

func wsExecCtx(ctx context.Context, t *testing.T, srv *httptest.Server, verb string, opts remotecommand.StreamOptions, cmd ...string) error {
	t.Helper()
	q := url.Values{"command": cmd}
	for name, on := range map[string]bool{"input": opts.Stdin != nil, "output": opts.Stdout != nil, "error": opts.Stderr != nil, "tty": opts.Tty} {
		if on {
			q.Set(name, "1")
		}
	}
	ex, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET", srv.URL+"/"+verb+"/ns/box/agent?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return ex.StreamWithContext(ctx, opts)
}

// kubectl's WebSocket exec reaches the guest: stdout and stderr apart,
// stdin to its end (the V5 close signal), and the exit code back.
func TestWebSocketExecCarriesTheStreamsAndTheExitCode(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	srv := wsServer(t, it)

	var out, errb bytes.Buffer
	err := wsExec(t, srv, "exec", remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}, "sh", "-c", "echo out; echo err >&2; exit 3")
	var exit clientexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Fatalf("exec: %v, want exit status 3", err)
	}
	if out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}

	in := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB, many frames
	out.Reset()
	// A cat that never sees stdin's end would wait for ever.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := wsExecCtx(ctx, t, srv, "exec", remotecommand.StreamOptions{Stdin: strings.NewReader(in), Stdout: &out}, "cat"); err != nil {
		t.Fatalf("cat: %v", err)
	}
	if out.String() != in {
		t.Fatalf("cat returned %d bytes, want the %d sent", out.Len(), len(in))
	}
}

// An error that is not the command's exit reaches kubectl as the session's
// error, and attach is refused as on the SPDY path.
func TestWebSocketExecReportsFailuresAsStatus(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	srv := wsServer(t, it)
	var out bytes.Buffer
	err := wsExec(t, srv, "exec", remotecommand.StreamOptions{Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), "no command given") {
		t.Fatalf("exec without a command: %v, want the refusal", err)
	}
	err = wsExec(t, srv, "attach", remotecommand.StreamOptions{Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), errAttach.Error()) {
		t.Fatalf("attach: %v, want %v", err, errAttach)
	}
}

// Requests that are not V5 WebSocket exec or attach pass through.
func TestWebSocketExecLeavesOtherRequestsToTheNext(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	srv := wsServer(t, it)
	for _, path := range []string{"/exec/ns/box/agent?command=true&output=1", "/portForward/ns/box", "/exec/ns/box"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Errorf("%s (v4): status %d, want it passed to the next handler", path, resp.StatusCode)
		}
	}
}

// A client that leaves ends its session: the command is stopped, as when
// a SPDY connection closes, even one that reads no stdin and prints
// nothing.
func TestWebSocketExecEndsWhenTheClientLeaves(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	srv := wsServer(t, it)
	ctx, leave := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- wsExecCtx(ctx, t, srv, "exec", remotecommand.StreamOptions{Stdout: io.Discard}, "sleep", "600")
	}()
	testkit.WaitFor(t, 10*time.Second, "sleep running", func() bool { return len(it.sim.GuestProcs(it.claim.ID)) == 1 })
	leave()
	<-done
	testkit.WaitFor(t, 10*time.Second, "sleep stopped", func() bool { return it.sim.GuestProcs(it.claim.ID)[0].State == "exited" })
}
