package kubeletapi

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// -i passes stdin through silkd, output streams back, and the buffered
// exec is never used.
func TestRunInContainerPassesStdin(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	a := newAttach()
	a.stdin = strings.NewReader("line one\nline two\n")
	if err := it.exec(t.Context(), a, "cat"); err != nil || a.stdout.String() != "line one\nline two\n" {
		t.Fatalf("cat: %v, stdout %q", err, a.stdout.String())
	}
	if n := it.sim.Counters()["exec"]; n != 0 {
		t.Errorf("%d buffered execs", n)
	}
}

// ttyAttach is -t: a terminal whose first size comes on Resize.
type ttyAttach struct {
	attachIO
	sizes chan api.TermSize
}

func (a *ttyAttach) Resize() <-chan api.TermSize { return a.sizes }

// -t types the command into the guest's shell so that it replaces the
// shell, each argument quoted: spaces, quotes and $ arrive as given, and
// the terminal has the client's size.
func TestRunInContainerTTYRunsTheCommandQuoted(t *testing.T) {
	it := newInteractive(t, sim.Config{GuestHostShell: true}, interactiveRoot)
	a := &ttyAttach{attachIO: attachIO{tty: true, stdout: &closeBuffer{}}, sizes: make(chan api.TermSize, 1)}
	a.sizes <- api.TermSize{Width: 101, Height: 31}
	err := it.exec(t.Context(), a, "sh", "-c", `printf '<%s|%s|%s>' "$1" "$2" "$(stty size)"; exit 4`, "x", "a b", `it's $HOME`)
	var ce interface{ ExitStatus() int }
	if !errors.As(err, &ce) || ce.ExitStatus() != 4 {
		t.Errorf("exec -t: %v, want exit status 4", err)
	}
	if want := `<a b|it's $HOME|31 101>`; !strings.Contains(a.stdout.String(), want) {
		t.Errorf("terminal output %q, want %q", a.stdout.String(), want)
	}
}

func TestTTYCommandLineQuotes(t *testing.T) {
	if got, want := ttyCommandLine([]string{"printf", "%s", "it's", "$X `y`"}), `exec 'printf' '%s' 'it'\''s' '$X `+"`y`"+`'`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !bareShell([]string{"/bin/bash"}) || bareShell([]string{"bash", "-c", "x"}) {
		t.Error("bare shell detection")
	}
}

// The caps refuse one session more, per Pod and per node, naming the
// flag, and report the refusal by kind and cap; OpenSessions counts the
// open one; a session ending frees its slot.
func TestRunInContainerSessionCaps(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	it := newInteractive(t, sim.Config{}, interactiveRoot, func(o *Options) {
		o.Sessions = SessionLimits{PerPod: 1, PerNode: 5}
		o.Refused = func(kind, limit string) { mu.Lock(); refused = append(refused, kind+"/"+limit); mu.Unlock() }
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- it.exec(ctx, newAttach(), "sleep", "600") }()
	testkit.WaitFor(t, 10*time.Second, "a session open", func() bool { return len(it.sim.GuestProcs(it.claim.ID)) == 1 })
	if exec, forward := it.prov.OpenSessions(); exec != 1 || forward != 0 {
		t.Errorf("OpenSessions = %d exec, %d port-forward; want 1, 0", exec, forward)
	}
	err := it.exec(t.Context(), newAttach(), "true")
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "--exec-max-sessions-per-pod") {
		t.Errorf("second session: %v", err)
	}
	mu.Lock()
	if want := []string{KindExec + "/" + CapPod}; !slices.Equal(refused, want) {
		t.Errorf("refusals reported %v, want %v", refused, want)
	}
	mu.Unlock()
	cancel()
	<-done
	if exec, _ := it.prov.OpenSessions(); exec != 0 {
		t.Errorf("OpenSessions after the session ended = %d exec, want 0", exec)
	}
	if err := it.exec(t.Context(), newAttach(), "true"); err != nil {
		t.Errorf("after the first ended: %v", err)
	}
}

// A session ends, and its command is killed in the guest, once its Pod
// no longer holds the claim.
func TestRunInContainerEndsWithTheClaim(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	done := make(chan error, 1)
	pr, _ := io.Pipe() // stdin that never ends
	go func() { done <- it.exec(t.Context(), &attachIO{stdin: pr, stdout: &closeBuffer{}}, "cat") }()
	testkit.WaitFor(t, 10*time.Second, "cat running", func() bool { return len(it.sim.GuestProcs(it.claim.ID)) == 1 })
	it.eng.mu.Lock()
	delete(it.eng.claims, "ns/box")
	it.eng.mu.Unlock()
	select {
	case err := <-done:
		if !errors.Is(err, errClaimGone) {
			t.Errorf("exec: %v, want errClaimGone", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session outlived its claim")
	}
	testkit.WaitFor(t, 10*time.Second, "cat killed", func() bool { return it.sim.GuestProcs(it.claim.ID)[0].State == "exited" })
}
