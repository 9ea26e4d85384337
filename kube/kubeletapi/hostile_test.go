package kubeletapi

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// sessionEndBound is how long a session may take to end once its client
// has gone, whatever the guest does: the wait for started (one sandboxd
// attempt), the kill (agent.ControlTimeout) and the last reads
// (agent.DrainTimeout), with room for a loaded machine. It detects a
// session that never ends; it is not a timing goal.
const sessionEndBound = pool.DefaultAttemptTimeout + agent.ControlTimeout + agent.DrainTimeout + 20*time.Second

// countingWriter is a kubectl stream that reads everything and counts it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }
func (*countingWriter) Close() error                  { return nil }

// hostileAttach is kubectl exec -i on a hostile guest: stdin that stays
// open until the session's handler returned (as the streaming server
// closes it then), and output that is counted, not kept.
type hostileAttach struct {
	stdin *io.PipeReader
	out   countingWriter
}

func (a *hostileAttach) Stdin() io.Reader          { return a.stdin }
func (a *hostileAttach) Stdout() io.WriteCloser    { return &a.out }
func (a *hostileAttach) Stderr() io.WriteCloser    { return &a.out }
func (*hostileAttach) TTY() bool                   { return false }
func (*hostileAttach) Resize() <-chan api.TermSize { return nil }

// openSockets counts this process's open sockets: kubectl's side, the
// node's relay connections and the emulator's all live here.
func openSockets(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// hostileCase is one misbehaving guest, and whether its session ends on
// its own (the guest broke the protocol, or never started) or only once
// kubectl goes away.
var hostileCases = []struct {
	mode  string
	leave bool // kubectl leaves once the session is live
}{
	{sim.HostileSilent, true},
	{sim.HostileSilentNoInfo, true},
	{sim.HostileEndlessOutput, true},
	{sim.HostileFramesAtCap, true},
	{sim.HostileBadBase64, false},
	{sim.HostileFramesAfterExit, false},
	{sim.HostileNeverClose, false},
}

// A hostile guest cannot keep a session: whatever its silkd does (silent
// after started, info never answered, endless output, frames at the cap,
// invalid base64, frames after exit, a connection it never closes), once
// kubectl has gone the session ends, its slot is free, its goroutines
// have returned, its sockets are closed and the node holds none of its
// frames, within sessionEndBound. Meanwhile another Pod's exec and
// port-forward, and a claim, work as usual.
func TestAHostileGuestCannotHoldASessionSlotGoroutineOrSocket(t *testing.T) {
	echo := testkit.EchoService(t)
	it := newInteractive(t, sim.Config{GuestPorts: map[int]string{8080: echo}}, interactiveRoot,
		func(o *Options) { o.Sessions = SessionLimits{PerPod: 1} })
	other := it.addPod("other", it.another(t), corev1.PodRunning)
	type session struct {
		pod    pipeline.PodKey
		id     string
		attach *hostileAttach
		stdinW *io.PipeWriter
		cancel context.CancelFunc
		done   chan error
	}
	// Each hostile guest is a Pod of its own, claimed before the baseline.
	sessions := make([]*session, len(hostileCases))
	for i, hc := range hostileCases {
		name := "hostile-" + hc.mode
		cr := it.another(t)
		it.addPod(name, cr, corev1.PodRunning)
		if err := it.sim.SetHostileGuest(cr.ID, hc.mode); err != nil {
			t.Fatal(err)
		}
		sessions[i] = &session{pod: pipeline.JoinKey("ns", name), id: cr.ID}
	}
	it.c.CloseIdleConnections()
	// A guest's processes stand for processes inside its VM, not the
	// node's: one the node could not kill (its guest never answered) or
	// had no cause to (its guest said it exited) runs on in the emulator.
	goroutines := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/cocoonstack/vk-sandbox/pool/sim.(*silkGuest).hostileExec.func1")}
	sockets := openSockets(t)

	for i, s := range sessions {
		pr, pw := io.Pipe()
		s.attach, s.stdinW, s.done = &hostileAttach{stdin: pr}, pw, make(chan error, 1)
		var ctx context.Context
		ctx, s.cancel = context.WithCancel(t.Context())
		name := strings.TrimPrefix(string(s.pod), "ns/")
		go func() {
			err := it.prov.RunInContainer(ctx, "ns", name, "agent", []string{"cat"}, s.attach)
			_ = pw.Close() // the streaming server closes the streams once the handler returns
			s.done <- err
		}()
		if hostileCases[i].leave {
			testkit.WaitFor(t, sessionEndBound, name+" live", func() bool { return len(it.sim.GuestProcs(s.id)) == 1 })
		}
	}

	// Meanwhile, another Pod is served as usual: exec, port-forward and a
	// claim.
	a := newAttach()
	if err := it.prov.RunInContainer(t.Context(), "ns", other.Name, "agent", []string{"echo", "fine"}, a); err != nil || a.stdout.String() != "fine\n" {
		t.Errorf("exec on another Pod beside hostile guests: %v, stdout %q", err, a.stdout.String())
	}
	sp := newSPDYLike(t)
	fwd := make(chan error, 1)
	go func() { fwd <- it.prov.PortForward(context.Background(), "ns", other.Name, 8080, sp) }()
	payload := make([]byte, 64<<10)
	_, _ = rand.Read(payload)
	testkit.EchoRoundTrip(t, sp.peer, payload)
	if err := waitDone(t, fwd, "port-forward beside hostile guests"); err != nil {
		t.Errorf("port-forward on another Pod beside hostile guests: %v", err)
	}
	if _, err := it.c.Claim(t.Context(), pool.ClaimRequest{Template: "default", TTLSeconds: 600}); err != nil {
		t.Errorf("claim beside hostile guests: %v", err)
	}
	sp.TCPConn.Close()
	sp.peer.Close()

	// kubectl leaves every session still live.
	for i, s := range sessions {
		s.cancel()
		select {
		case err := <-s.done:
			if err == nil && hostileCases[i].mode != sim.HostileFramesAfterExit {
				t.Errorf("%s: the session ended without an error", hostileCases[i].mode)
			}
		case <-time.After(sessionEndBound):
			t.Fatalf("%s: the session outlived kubectl by more than %s", hostileCases[i].mode, sessionEndBound)
		}
	}
	for _, s := range sessions {
		if pod, _ := it.prov.sessions.open(s.pod); pod != 0 {
			t.Errorf("%s still holds %d exec slots", s.pod, pod)
		}
	}
	if _, node := it.prov.sessions.open(""); node != 0 {
		t.Errorf("the node still counts %d exec sessions", node)
	}
	if held := it.c.BufferHeld(); held != 0 {
		t.Errorf("the node still holds %d bytes of guest frames", held)
	}
	testkit.WaitFor(t, sessionEndBound, "every session's sockets closed", func() bool {
		it.c.CloseIdleConnections()
		return openSockets(t) <= sockets
	})
	testkit.WaitFor(t, sessionEndBound, "every session's goroutines returned", func() bool {
		it.c.CloseIdleConnections()
		return goleak.Find(goroutines...) == nil
	})

	// The slot came back: once the guest behaves, a session fits in the
	// Pod's cap of one.
	for i, s := range sessions {
		if err := it.sim.SetHostileGuest(s.id, ""); err != nil {
			t.Fatal(err)
		}
		a := newAttach()
		name := strings.TrimPrefix(string(s.pod), "ns/")
		if err := it.prov.RunInContainer(t.Context(), "ns", name, "agent", []string{"true"}, a); err != nil {
			t.Errorf("%s: a session after the hostile one: %v", hostileCases[i].mode, err)
		}
	}
}

// The (cap+1)th port-forward connection to a Pod is refused with an
// error naming the Pod and the flag; the slot comes back once a
// connection ends, and another Pod is not held to this one's cap.
func TestPortForwardCapRefusesOneMoreAndFreesTheSlot(t *testing.T) {
	release := make(chan struct{})
	holder := testkit.Serve(t, func(c *net.TCPConn) { <-release })
	t.Cleanup(func() { close(release) })
	it := newInteractive(t, sim.Config{GuestPorts: map[int]string{9000: holder}}, interactiveRoot,
		func(o *Options) { o.Forwards = SessionLimits{PerPod: 2, PerNode: 3} })
	open := []*spdyLike{newSPDYLike(t), newSPDYLike(t)}
	var dones []<-chan error
	for _, s := range open {
		dones = append(dones, it.forward(9000, s))
	}
	testkit.WaitFor(t, 20*time.Second, "two relays open", func() bool { pod, _ := it.prov.forwards.open("ns/box"); return pod == 2 })
	err := waitDone(t, it.forward(9000, newSPDYLike(t)), "one past the cap")
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "pod ns/box") || !strings.Contains(err.Error(), "--port-forward-max-sessions-per-pod") {
		t.Errorf("the third port-forward connection: %v, want a refusal naming the Pod and --port-forward-max-sessions-per-pod", err)
	}
	// Another Pod fits under the node's cap of three, and then the node
	// is full: a refusal naming the node's flag.
	it.addPod("second", it.another(t), corev1.PodRunning)
	second := newSPDYLike(t)
	secondDone := it.forwardTo("second", 9000, second)
	testkit.WaitFor(t, 20*time.Second, "the second Pod's relay open", func() bool { _, node := it.prov.forwards.open(""); return node == 3 })
	err = waitDone(t, it.forwardTo("second", 9000, newSPDYLike(t)), "one past the node's cap")
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "pod ns/second") || !strings.Contains(err.Error(), "--port-forward-max-sessions") {
		t.Errorf("a fourth connection on the node: %v, want a refusal naming the Pod and --port-forward-max-sessions", err)
	}
	open[0].peerReset()
	if err := waitDone(t, dones[0], "kubectl reset a connection"); err != nil {
		t.Errorf("PortForward after a reset: %v", err)
	}
	again := newSPDYLike(t)
	againDone := it.forward(9000, again)
	testkit.WaitFor(t, 20*time.Second, "the freed slot taken again", func() bool { pod, _ := it.prov.forwards.open("ns/box"); return pod == 2 })
	for _, s := range []*spdyLike{open[1], second, again} {
		s.peerReset()
	}
	for _, d := range []<-chan error{dones[1], secondDone, againDone} {
		_ = waitDone(t, d, "reset")
	}
	if pod, node := it.prov.forwards.open("ns/box"); pod != 0 || node != 0 {
		t.Errorf("after every connection ended: %d on the Pod, %d on the node", pod, node)
	}
}
