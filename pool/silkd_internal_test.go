package pool

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
)

// A frame of exactly silkd's cap (newline included) is read; one byte more
// is a broken stream, refused: the cap is on the whole frame, however the
// bytes arrive in chunks.
func TestAgentConnRefusesFramesPastTheCap(t *testing.T) {
	const prefix, suffix = `{"type":"stdout","message":"`, "\"}\n"
	for _, c := range []struct {
		size int
		ok   bool
	}{{MaxAgentFrame, true}, {MaxAgentFrame + 1, false}} {
		line := prefix + strings.Repeat("x", c.size-len(prefix)-len(suffix)) + suffix
		client, server := net.Pipe()
		go func() {
			_, _ = server.Write([]byte(line))
			_ = server.Close()
		}()
		a := newAgentConn(&PortConn{Conn: client, r: bufio.NewReader(client)})
		f, err := a.Recv()
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
	line, err := json.Marshal(AgentFrame{Type: "stdout", Data: make([]byte, StdinChunk)})
	if err != nil {
		b.Fatal(err)
	}
	line = append(line, '\n')
	r := &repeatReader{line: line}
	a := &AgentConn{br: bufio.NewReader(r)}
	b.SetBytes(StdinChunk)
	for b.Loop() {
		if f, err := a.Recv(); err != nil || len(f.Data) != StdinChunk {
			b.Fatalf("frame of %d bytes, %v", len(f.Data), err)
		}
	}
}

// repeatReader reads line again and again.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.line[r.off:])
	r.off = (r.off + n) % len(r.line)
	return n, nil
}
