package pool_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// exec through silkd: both streams, the exit code, and stdin larger than
// one frame passed through byte for byte.
func TestAgentExecStreamsStdinAndExitCode(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	ag := agent.New(h.node, 0).Agent(a.ID, a.Token)
	defer ag.Close()
	var out, errb bytes.Buffer
	code, err := ag.Exec(ctx(t), agent.Exec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &out, Stderr: &errb})
	if h.err(err) != nil || code != 3 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("exec: code %d, %v, stdout %q, stderr %q", code, err, out.String(), errb.String())
	}
	in := make([]byte, 3<<20+17) // many 32 KiB stdin frames, and a short one
	_, _ = rand.Read(in)
	out.Reset()
	code, err = ag.Exec(ctx(t), agent.Exec{Argv: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if h.err(err) != nil || code != 0 || sha256.Sum256(out.Bytes()) != sha256.Sum256(in) {
		t.Fatalf("cat: code %d, %v, %d bytes back of %d", code, err, out.Len(), len(in))
	}
	_, err = ag.Exec(ctx(t), agent.Exec{Argv: []string{"vim"}})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Kind != agent.BadRequest {
		t.Errorf("unknown command: %v, want a bad_request", err)
	}
}

// Output reaches the caller while the command still runs.
func TestAgentExecStreamsOutputAsWritten(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	ag := agent.New(h.node, 0).Agent(a.ID, a.Token)
	defer ag.Close()
	pr, pw := io.Pipe()
	in, inw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code, _ := ag.Exec(ctx(t), agent.Exec{Argv: []string{"sh", "-c", "echo first; cat; echo last"}, Stdin: in, Stdout: pw})
		_ = pw.Close()
		done <- code
	}()
	line := make([]byte, 6)
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	select {
	case <-done:
		t.Fatal("the command ended before its input did")
	default:
	}
	go func() { _, _ = inw.Write([]byte("typed\n")); _ = inw.Close() }()
	rest, _ := io.ReadAll(pr) // pw closes when Exec ends
	if code := <-done; code != 0 || string(rest) != "typed\nlast\n" {
		t.Errorf("exit code %d, then %q", code, rest)
	}
}

// A caller that goes away kills its command in the guest, through a
// second connection: silkd would let a silent child run on.
func TestAgentExecKillsWhenTheCallerLeaves(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	ag := agent.New(h.node, 0).Agent(a.ID, a.Token)
	defer ag.Close()
	c, cancel := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := ag.Exec(c, agent.Exec{Argv: []string{"sleep", "600"}})
		errc <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "sleep running in the guest", func() bool { return running(h.sim, a.ID, "sleep") == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("exec: %v, want context.Canceled", err)
	}
	testkit.WaitFor(t, 10*time.Second, "sleep killed", func() bool { return running(h.sim, a.ID, "sleep") == 0 })
	if n := h.count("agent_kill"); n != 1 {
		t.Errorf("%d kills, want 1", n)
	}
}

// Short RPCs share one connection on proto 2 and take one each on proto 1
// (plus the info that told).
func TestAgentReusesConnectionsOnlyOnProto2(t *testing.T) {
	for _, c := range []struct{ proto, upgrades int64 }{{2, 1}, {1, 4}} {
		h := newHarness(t, sim.Config{AgentProto: int(c.proto)})
		a := h.claim("ns/a", 60)
		ag := agent.New(h.node, 0).Agent(a.ID, a.Token)
		for range 3 {
			if _, err := ag.Ps(ctx(t)); h.err(err) != nil {
				t.Fatalf("proto %d: ps: %v", c.proto, err)
			}
		}
		ag.Close()
		if n := h.count("agent"); n != c.upgrades {
			t.Errorf("proto %d: %d upgrades for three ps, want %d", c.proto, n, c.upgrades)
		}
	}
}

// A node without the relay is ErrNoRelay, and is not asked again
// for that sandbox at once; refusals of the request itself keep their
// status.
func TestAgentRelayRefusals(t *testing.T) {
	h := newHarness(t, sim.Config{NoAgentRelay: true})
	a := h.claim("ns/a", 60)
	relay := agent.New(h.node, 0)
	for range 2 {
		if _, err := relay.Dial(ctx(t), a.ID, a.Token); !errors.Is(err, agent.ErrNoRelay) {
			t.Fatalf("no relay: %v", err)
		}
	}
	if n := h.count("agent"); n != 1 {
		t.Errorf("%d upgrades asked, want 1 (the refusal is remembered)", n)
	}
	h2 := newHarness(t, sim.Config{})
	b := h2.claim("ns/b", 60)
	h2.sim.Fail(b.ID)
	relay2 := agent.New(h2.node, 0)
	if _, err := relay2.Dial(ctx(t), b.ID, b.Token); pool.StatusCode(err) != 409 || errors.Is(err, agent.ErrNoRelay) {
		t.Errorf("failed sandbox: %v, want a 409", err)
	}
	if _, err := relay2.Dial(ctx(t), b.ID, strings.Repeat("0", 32)); !errors.Is(err, agent.ErrNoRelay) || pool.StatusCode(err) != 404 {
		t.Errorf("wrong token: %v, want a 404", err)
	}
}

func running(s *sim.Server, id, cmd string) int {
	n := 0
	for _, p := range s.GuestProcs(id) {
		if p.State == "running" && len(p.Argv) > 0 && p.Argv[0] == cmd {
			n++
		}
	}
	return n
}

// A pty starts at the size asked for, and a resize reaches the guest's
// terminal (pty_resize on a connection of its own).
func TestAgentPTYForwardsResizes(t *testing.T) {
	h := newHarness(t, sim.Config{GuestHostShell: true})
	a := h.claim("ns/a", 60)
	ag := agent.New(h.node, 0).Agent(a.ID, a.Token)
	defer ag.Close()
	in, typing := io.Pipe()
	var screen testkit.Buffer
	resize := make(chan agent.TermSize)
	done := make(chan error, 1)
	go func() {
		_, err := ag.PTY(ctx(t), agent.PTY{Cols: 100, Rows: 30, Stdin: in, Stdout: &screen, Resize: resize})
		done <- err
	}()
	// The size is asked again until it shows: a resize travels on its own
	// connection, so a probe typed at once may still see the old one.
	sizeShows := func(want string) {
		t.Helper()
		var asked time.Time
		testkit.WaitFor(t, 10*time.Second, "stty size printing "+want, func() bool {
			if strings.Contains(screen.String(), want) {
				return true
			}
			if time.Since(asked) > 200*time.Millisecond {
				asked = time.Now()
				go func() { _, _ = io.WriteString(typing, "stty size\n") }()
			}
			return false
		})
	}
	sizeShows("30 100")
	resize <- agent.TermSize{Cols: 120, Rows: 40}
	sizeShows("40 120")
	go func() { _, _ = io.WriteString(typing, "exit\n") }()
	if err := <-done; h.err(err) != nil {
		t.Errorf("pty: %v", err)
	}
	_ = typing.Close() // ends the input reader, and any probe still typing
}

// A quiet command runs for as long as its caller stays: the deadline that
// bounds the wait for started is not left on the session's connection, so
// a command that prints nothing for longer than one sandboxd attempt is
// not cut off.
func TestAgentExecQuietCommandOutlivesTheAttemptDeadline(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/quiet", 60)
	c := h.client(a.Token, func(o *pool.ClientOptions) { o.AttemptTimeout = time.Second })
	ag := agent.New(c, 0).Agent(a.ID, a.Token)
	defer ag.Close()
	var out bytes.Buffer
	code, err := ag.Exec(ctx(t), agent.Exec{Argv: []string{"sh", "-c", "sleep 3; echo late"}, Stdout: &out})
	if err != nil || code != 0 || out.String() != "late\n" {
		t.Fatalf("a command quiet for 3s with 1s attempts: code %d, %v, stdout %q", code, err, out.String())
	}
}
