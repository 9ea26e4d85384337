package kubeletapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

const interactiveRoot = "root-tok-interactive-test"

// claimsEngine serves fixed Pods and claim rows, as the provider does:
// the interactive surfaces only look them up.
type claimsEngine struct {
	mu     sync.Mutex
	pods   map[pipeline.PodKey]*corev1.Pod
	claims map[string]pipeline.ClaimView
	tokens map[string]string // claim id → sandbox token
}

func (e *claimsEngine) Pod(key pipeline.PodKey) *corev1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pods[key]
}

func (e *claimsEngine) Pods() []*corev1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(e.pods))
	for _, p := range e.pods {
		out = append(out, p)
	}
	return out
}

// Credential has pipeline.Engine's rule: a durable claim of that Pod UID.
func (e *claimsEngine) Credential(key pipeline.PodKey, podUID string) (string, string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cv, ok := e.claims[string(key)]
	if !ok || cv.State != pipeline.StateDurable || cv.PodUID != podUID {
		return "", "", false
	}
	return cv.ID, e.tokens[cv.ID], true
}

// recordingSandboxd remembers the exec requests it passes on.
type recordingSandboxd struct {
	Sandboxd
	mu    sync.Mutex
	execs []pool.ExecRequest
}

func (r *recordingSandboxd) Exec(ctx context.Context, id, token string, req pool.ExecRequest) (pool.ExecResult, error) {
	r.mu.Lock()
	r.execs = append(r.execs, req)
	r.mu.Unlock()
	return r.Sandboxd.Exec(ctx, id, token, req)
}

func (r *recordingSandboxd) last() pool.ExecRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.execs[len(r.execs)-1]
}

// interactive is the surfaces over a real emulator, with one Running Pod
// "ns/box" whose durable claim is a real sandbox.
type interactive struct {
	prov  *API
	sim   *sim.Server
	sbx   *recordingSandboxd
	c     *agent.Client
	eng   *claimsEngine
	claim pool.ClaimResponse
	pod   *corev1.Pod
}

func newInteractive(t *testing.T, cfg sim.Config, token string, opts ...func(*Options)) *interactive {
	t.Helper()
	cfg.RootToken = interactiveRoot
	cfg.NodeToken = "node-tok-interactive-test"
	cfg.Pools = map[pool.Key]int{{Template: "default"}: 4}
	emu := simtest.Start(t, cfg)
	s := emu.Sim
	c := emu.Client(t, pool.ClientOptions{Token: token})
	cr, err := c.Claim(t.Context(), pool.ClaimRequest{Template: "default", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	relay := agent.New(c, 0)
	it := &interactive{sim: s, c: relay, sbx: &recordingSandboxd{Sandboxd: relay}, eng: &claimsEngine{pods: map[pipeline.PodKey]*corev1.Pod{}, claims: map[string]pipeline.ClaimView{}, tokens: map[string]string{}}, claim: cr}
	o := Options{Pods: it.eng, Log: slog.New(slog.DiscardHandler), Sandboxd: it.sbx}
	for _, opt := range opts {
		opt(&o)
	}
	it.prov = New(o)
	it.pod = it.addPod("box", cr, corev1.PodRunning)
	return it
}

// another claims one more sandbox for a second Pod.
func (it *interactive) another(t *testing.T) pool.ClaimResponse {
	t.Helper()
	cr, err := it.c.Claim(t.Context(), pool.ClaimRequest{Template: "default", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

func (it *interactive) addPod(name string, cr pool.ClaimResponse, phase corev1.PodPhase) *corev1.Pod {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent"}, {Name: "sidecar"}}},
		Status:     corev1.PodStatus{Phase: phase, StartTime: &now},
	}
	it.eng.mu.Lock()
	it.eng.pods[pipeline.JoinKey("ns", name)] = pod
	it.eng.claims["ns/"+name] = pipeline.ClaimView{State: pipeline.StateDurable, ID: cr.ID, PodUID: string(pod.UID)}
	it.eng.tokens[cr.ID] = cr.Token
	it.eng.mu.Unlock()
	return pod
}

// attachIO is what virtual-kubelet hands RunInContainer.
type attachIO struct {
	stdin          io.Reader
	stdout, stderr *closeBuffer
	tty            bool
}

type closeBuffer struct{ bytes.Buffer }

func (*closeBuffer) Close() error { return nil }

// orNil keeps a stream that was not asked for an untyped nil, as
// virtual-kubelet hands it over.
func orNil(b *closeBuffer) io.WriteCloser {
	if b == nil {
		return nil
	}
	return b
}

func newAttach() *attachIO { return &attachIO{stdout: &closeBuffer{}, stderr: &closeBuffer{}} }

func (a *attachIO) Stdin() io.Reader            { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser      { return orNil(a.stdout) }
func (a *attachIO) Stderr() io.WriteCloser      { return orNil(a.stderr) }
func (a *attachIO) TTY() bool                   { return a.tty }
func (a *attachIO) Resize() <-chan api.TermSize { return nil }
func (it *interactive) exec(ctx context.Context, a api.AttachIO, cmd ...string) error {
	return it.prov.RunInContainer(ctx, "ns", "box", "agent", cmd, a)
}

// The command's output reaches both streams, and its exit code comes back
// in the shape the kubelet streaming server turns into kubectl's exit code.
func TestRunInContainerPassesOutputAndExitCode(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	a := newAttach()
	err := it.exec(t.Context(), a, "sh", "-c", "echo out; echo err >&2; exit 3")
	var exitErr clientexec.ExitError
	if !errors.As(err, &exitErr) || !exitErr.Exited() || exitErr.ExitStatus() != 3 {
		t.Fatalf("exec: %v, want an exit error with status 3", err)
	}
	if _, direct := err.(clientexec.ExitError); !direct {
		t.Error("the exit error is wrapped: the streaming server type-asserts it without unwrapping")
	}
	if a.stdout.String() != "out\n" || a.stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", a.stdout.String(), a.stderr.String())
	}
	a = newAttach()
	if err := it.exec(t.Context(), a, "echo", "ok"); err != nil || a.stdout.String() != "ok\n" {
		t.Errorf("exit 0: %v, stdout %q", err, a.stdout.String())
	}
	// A stream kubectl did not ask for is nil.
	if err := it.exec(t.Context(), &attachIO{}, "echo", "dropped"); err != nil {
		t.Errorf("no streams: %v", err)
	}
}

// The request's deadline becomes the command's timeout, rounded up to whole
// seconds; without one the command has none beyond the request.
func TestRunInContainerTimeoutFollowsTheRequest(t *testing.T) {
	it := newInteractive(t, sim.Config{NoAgentRelay: true}, interactiveRoot)
	if err := it.exec(t.Context(), newAttach(), "true"); err != nil || it.sbx.last().TimeoutSeconds != 0 {
		t.Fatalf("no deadline: %v, timeout_seconds %d", err, it.sbx.last().TimeoutSeconds)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second+300*time.Millisecond)
	defer cancel()
	if err := it.exec(ctx, newAttach(), "true"); err != nil || it.sbx.last().TimeoutSeconds != 91 {
		t.Fatalf("deadline: %v, timeout_seconds %d, want 91", err, it.sbx.last().TimeoutSeconds)
	}
	// sandboxd stops the command at the rounded-up timeout; the request
	// itself ends first, at its deadline.
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := it.exec(ctx, newAttach(), "sleep", "30")
	if !errors.Is(err, context.DeadlineExceeded) || it.sbx.last().TimeoutSeconds != 1 {
		t.Fatalf("sleep past the deadline: %v, timeout_seconds %d, want 1", err, it.sbx.last().TimeoutSeconds)
	}
	err = explain(&pool.HTTPError{Verb: pool.VerbExec, ID: "sb_1", Status: 504}, pool.VerbExec, "sb_1", 0, 7)
	if err == nil || err.Error() != "the command outlived its timeout of 7s in sandbox sb_1 and was stopped" {
		t.Errorf("504: %v", err)
	}
}

// On a node whose sandboxd refuses the agent relay, -i and -t are refused
// with what still works, and never fall back to the buffered exec;
// kubectl attach is refused everywhere, saying what to use instead.
func TestRunInContainerWithoutTheAgentRelay(t *testing.T) {
	it := newInteractive(t, sim.Config{NoAgentRelay: true}, interactiveRoot)
	for what, a := range map[string]*attachIO{
		"stdin": {stdin: strings.NewReader(""), stdout: &closeBuffer{}},
		"tty":   {tty: true, stdout: &closeBuffer{}},
	} {
		err := it.exec(t.Context(), a, "sh")
		if !errors.Is(err, errNoRelayInteractive) || !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "without -i and -t") {
			t.Errorf("%s: %v", what, err)
		}
	}
	if err := it.prov.AttachToContainer(t.Context(), "ns", "box", "agent", newAttach()); !errors.Is(err, errAttach) || !strings.Contains(err.Error(), "kubectl exec -it") {
		t.Errorf("attach: %v", err)
	}
	if n := it.sim.Counters()["exec"]; n != 0 {
		t.Errorf("%d buffered execs reached sandboxd", n)
	}
	a := newAttach()
	if err := it.exec(t.Context(), a, "echo", "buffered"); err != nil || a.stdout.String() != "buffered\n" {
		t.Errorf("without -i and -t: %v, stdout %q", err, a.stdout.String())
	}
}

// Each sandboxd refusal becomes a sentence a person can act on, and none
// names the sandbox's token.
func TestRunInContainerExplainsRefusals(t *testing.T) {
	it := newInteractive(t, sim.Config{NoAgentRelay: true}, interactiveRoot)
	id := it.claim.ID
	check := func(what, want string, cmd ...string) {
		t.Helper()
		err := it.exec(t.Context(), newAttach(), cmd...)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), it.claim.Token) {
			t.Errorf("%s: %v, want it to say %q", what, err, want)
		}
	}
	check("413", "printed more than 8 MiB", "head", "-c", "9000000", "/dev/zero")
	check("400", "command not found: vim", "vim")
	it.sim.InjectFault(sim.Fault{Verb: "exec", Mode: "503", Count: 1})
	check("503", "try again in a second", "true")
	it.sim.SetGuestUnreachable(id, true)
	check("502", "cannot reach the guest of sandbox "+id, "true")
	it.sim.SetGuestUnreachable(id, false)
	it.sim.Fail(id)
	check("409", "sandbox "+id+" has failed", "true")
	it.sim.Expire(id)
	check("404", "no longer knows sandbox "+id, "true")
}

// Only a Running Pod whose own generation holds a durable claim is served.
func TestInteractiveTargetIsTheRunningPodsOwnClaim(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	if err := it.exec(t.Context(), newAttach(), "true"); err != nil {
		t.Fatal(err)
	}
	if err := it.prov.RunInContainer(t.Context(), "ns", "nosuch", "agent", []string{"true"}, newAttach()); !errdefs.IsNotFound(err) {
		t.Errorf("unknown pod: %v", err)
	}
	pending := it.addPod("pending", it.claim, corev1.PodPending)
	if err := it.prov.RunInContainer(t.Context(), "ns", pending.Name, "agent", []string{"true"}, newAttach()); !errdefs.IsInvalidInput(err) {
		t.Errorf("pending pod: %v", err)
	}
	for what, mutate := range map[string]func(*pipeline.ClaimView){
		"quarantined":     func(cv *pipeline.ClaimView) { cv.State = pipeline.StateQuarantined },
		"tentative":       func(cv *pipeline.ClaimView) { cv.State = pipeline.StateTentative },
		"another pod uid": func(cv *pipeline.ClaimView) { cv.PodUID = "uid-older" },
	} {
		it.eng.mu.Lock()
		cv := it.eng.claims["ns/box"]
		orig := cv
		mutate(&cv)
		it.eng.claims["ns/box"] = cv
		it.eng.mu.Unlock()
		if err := it.exec(t.Context(), newAttach(), "true"); !errdefs.IsInvalidInput(err) {
			t.Errorf("%s: %v", what, err)
		}
		it.eng.mu.Lock()
		it.eng.claims["ns/box"] = orig
		it.eng.mu.Unlock()
	}
	if n := it.sim.Counters()["agent"]; n != 1 {
		t.Errorf("%d execs reached sandboxd's agent relay, want only the first", n)
	}
}

func TestContainerLogsSayWhereTheOutputIs(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	_, err := it.prov.GetContainerLogs(t.Context(), "ns", "box", "agent", api.ContainerLogOpts{})
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "sandboxd does not capture") || !strings.Contains(err.Error(), "kubectl exec -n ns box --") {
		t.Errorf("logs: %v", err)
	}
}

// A refused interactive exec reads the input already sent (up to its end)
// and gives up on input that never ends once the limit passes.
func TestDrainStdinReadsSentInputAndIsBounded(t *testing.T) {
	r := strings.NewReader("ls\n")
	drainStdin(context.Background(), r, time.Hour)
	if r.Len() != 0 {
		t.Fatalf("%d bytes of sent input left unread", r.Len())
	}
	pr, pw := io.Pipe() // a terminal: open, nothing typed
	defer pw.Close()
	drainStdin(context.Background(), pr, time.Millisecond) // returns: the limit bounds it
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	drainStdin(ctx, pr, time.Hour) // returns: the request ended
}

// On a sandboxd without the buffered exec and ports verbs (V1, which has
// the agent relay), kubectl exec runs through the relay and port-forward
// says what is missing instead of passing its router's 404 on. Without the
// relay too (a V1 build or proxy without it), exec says what is missing,
// and neither surface asked sandboxd.
func TestSurfacesNameTheVerbAnOldSandboxdLacks(t *testing.T) {
	it := newInteractive(t, sim.Config{APIVersion: sim.V1}, interactiveRoot)
	if _, err := it.c.Detect(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := newAttach()
	if err := it.exec(t.Context(), a, "echo", "hi"); err != nil || a.stdout.String() != "hi\n" {
		t.Fatalf("exec on V1: %v, stdout %q: want it run through the agent relay", err, a.stdout.String())
	}
	err := it.prov.PortForward(t.Context(), "ns", "box", 80, nopStream{})
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "no ports relay verb") {
		t.Fatalf("port-forward on V1: %v, want an InvalidInput naming the missing verb", err)
	}
	if got := it.sim.Counters(); got["exec"] != 0 || got["ports"] != 0 || got["agent"] == 0 {
		t.Errorf("counters %v: want the agent relay asked, exec and ports not", got)
	}

	bare := newInteractive(t, sim.Config{APIVersion: sim.V1, NoAgentRelay: true}, interactiveRoot)
	if _, err := bare.c.Detect(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := bare.sim.Counters()["agent"] // the detection's probe
	err = bare.exec(t.Context(), newAttach(), "echo", "hi")
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "no exec or agent relay verb") {
		t.Fatalf("exec on V1 without the relay: %v, want an InvalidInput naming the missing verb", err)
	}
	if got := bare.sim.Counters(); got["exec"] != 0 || got["agent"] != before {
		t.Errorf("exec without the verbs still asked sandboxd: %v", got)
	}
}

type nopStream struct{}

func (nopStream) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopStream) Write(b []byte) (int, error) { return len(b), nil }
func (nopStream) Close() error                { return nil }
