package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// A frame of exactly silkd's cap (newline included) is read; one byte more
// is a broken stream, refused: the cap is on the whole frame, however the
// bytes arrive in chunks.
func TestAgentConnRefusesFramesPastTheCap(t *testing.T) {
	const prefix, suffix = `{"type":"stdout","message":"`, "\"}\n"
	for _, c := range []struct {
		size int
		ok   bool
	}{{MaxFrame, true}, {MaxFrame + 1, false}} {
		line := prefix + strings.Repeat("x", c.size-len(prefix)-len(suffix)) + suffix
		client, server := net.Pipe()
		go func() {
			_, _ = server.Write([]byte(line))
			_ = server.Close()
		}()
		a := newConn(client, bufio.NewReader(client), newByteBudget(0))
		f, err := a.recv(t.Context())
		_ = client.Close() // unblocks the writer of a refused frame
		switch {
		case c.ok && (err != nil || f.Type != "stdout" || len(f.Message) != c.size-len(prefix)-len(suffix)):
			t.Errorf("frame of %d bytes: type %q, %d bytes of message, %v; want it read", c.size, f.Type, len(f.Message), err)
		case !c.ok && !errors.Is(err, errFrameTooLarge):
			t.Errorf("frame of %d bytes: %v, want errFrameTooLarge", c.size, err)
		}
	}
}

// BenchmarkAgentConnRecvStdout is the node's cost of one 32 KiB stdout
// frame (JSON, base64 data) read off the agent relay: the bound of exec's
// output throughput on a node (bench/HISTORY.md, "Interactive").
func BenchmarkAgentConnRecvStdout(b *testing.B) {
	line, err := json.Marshal(frame{Type: "stdout", Data: make([]byte, StdinChunk)})
	if err != nil {
		b.Fatal(err)
	}
	line = append(line, '\n')
	r := &testkit.RepeatReader{Line: line}
	a := &relayConn{br: bufio.NewReader(r)}
	b.SetBytes(StdinChunk)
	for b.Loop() {
		if f, err := a.recv(b.Context()); err != nil || len(f.Data) != StdinChunk {
			b.Fatalf("frame of %d bytes, %v", len(f.Data), err)
		}
	}
}

// A frame's bytes are taken from the node's budget before they are held
// and given back on Release: with room for one frame at the cap, a second
// connection's frame waits (bounded by its context) instead of being
// read past the budget.
func TestAgentFramesWaitForTheNodesBudget(t *testing.T) {
	budget := newByteBudget(minBufferBudget)
	line := []byte(`{"type":"stdout","message":"` + strings.Repeat("x", MaxFrame-32) + "\"}\n")
	conns := make([]*relayConn, 2)
	for i := range conns {
		client, server := net.Pipe()
		t.Cleanup(func() { client.Close(); server.Close() })
		go func() { _, _ = server.Write(line) }()
		conns[i] = newConn(client, bufio.NewReader(client), budget)
	}
	if _, err := conns[0].recv(t.Context()); err != nil {
		t.Fatal(err)
	}
	if held := budget.held.Load(); held <= MaxFrame || held > maxFrameHold {
		t.Errorf("a frame at the cap holds %d bytes of the budget, want (%d, %d]", held, MaxFrame, maxFrameHold)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := conns[1].recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second frame past the budget: %v, want it to wait until its context ended", err)
	}
	if held := budget.held.Load(); held > minBufferBudget {
		t.Errorf("the node holds %d bytes, past its budget of %d", held, minBufferBudget)
	}
	conns[0].release()
	conns[1].release()
	if held := budget.held.Load(); held != 0 {
		t.Errorf("after Release the node still holds %d bytes", held)
	}
}
