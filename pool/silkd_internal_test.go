package pool

import (
	"bufio"
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
