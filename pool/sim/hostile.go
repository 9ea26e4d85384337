package sim

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
)

// Hostile guests: a sandbox's silkd can be made to misbehave, as a
// compromised or broken guest would, so that tests can show what the node
// bounds. Every mode keeps the connection open for as long as the client
// does: only the client (the node) ends it.
const (
	// HostileSilent answers exec with started and then says nothing,
	// ever, even once the process is killed; the control connection
	// (info, kill) still answers.
	HostileSilent = "silent"
	// HostileSilentNoInfo is HostileSilent whose control connection
	// never answers info either: the kill the node sends for a left
	// session cannot get through.
	HostileSilentNoInfo = "silent-no-info"
	// HostileEndlessOutput answers exec with started and then stdout
	// frames of 32 KiB for as long as the client reads them.
	HostileEndlessOutput = "endless-output"
	// HostileFramesAtCap answers exec with started and then stdout frames
	// of exactly the 8 MiB frame cap, for as long as the client reads.
	HostileFramesAtCap = "frames-at-cap"
	// HostileBadBase64 answers exec with started and then a stdout frame
	// whose data is not base64, and then nothing.
	HostileBadBase64 = "bad-base64"
	// HostileFramesAfterExit answers exec with started and exit 0, and
	// then keeps sending stdout frames.
	HostileFramesAfterExit = "frames-after-exit"
	// HostileNeverClose takes every connection and then never reads,
	// writes or closes it: not even exec's started, nor info, comes back.
	HostileNeverClose = "never-close"
)

var hostileModes = map[string]bool{
	HostileSilent: true, HostileSilentNoInfo: true, HostileEndlessOutput: true, HostileFramesAtCap: true,
	HostileBadBase64: true, HostileFramesAfterExit: true, HostileNeverClose: true,
}

// SetHostileGuest makes sandbox id's silkd behave as mode says on every
// connection from now on; "" makes it behave again. An unknown mode
// panics: a typo in a test must not silently test a well-behaved guest.
func (s *Server) SetHostileGuest(id, mode string) error {
	if mode != "" && !hostileModes[mode] {
		panic(fmt.Sprintf("sim: unknown hostile guest mode %q", mode))
	}
	g, err := s.guests.get(id)
	if err != nil {
		return err
	}
	g.hostile.Store(&mode)
	return nil
}

// hostility is the guest's hostile mode, "" when it behaves.
type hostility struct{ p atomic.Pointer[string] }

func (h *hostility) Store(m *string) { h.p.Store(m) }

func (h *hostility) mode() string {
	if m := h.p.Load(); m != nil {
		return *m
	}
	return ""
}

// ignore reads and drops what the client sends until it closes the
// connection: the guest holds it open and says nothing.
func ignore(c *silkConn) { _, _ = io.Copy(io.Discard, c.br) }

// hostileExec answers an exec request as mode says. The process is in the
// table (so kill finds it and answers done) and ends only when killed,
// but its connection does not hear of that. It returns once the client
// has closed the connection, which is then over.
func (g *silkGuest) hostileExec(c *silkConn, req *silkReq, mode string) bool {
	p := g.start(req.Argv, false, func(ctx context.Context, _ *proc) int {
		<-ctx.Done()
		return -1
	})
	// Input is read and dropped until the client closes, so that its
	// writes never block on the guest; what follows only writes.
	gone := make(chan struct{})
	go func() { defer close(gone); ignore(c) }()
	if c.send(map[string]any{"type": "started", "pid": p.pid}) == nil {
		switch mode {
		case HostileEndlessOutput:
			flood(c, frame(`{"type":"stdout","data":"`+base64.StdEncoding.EncodeToString(make([]byte, 32<<10))+`"}`, 0))
		case HostileFramesAtCap:
			flood(c, frame(`{"type":"stdout","data":"`+base64.StdEncoding.EncodeToString(make([]byte, maxFrame/2))+`","pad":"`, maxFrame))
		case HostileBadBase64:
			_ = c.sendRaw(frame(`{"type":"stdout","data":"*** not base64 ***"}`, 0))
		case HostileFramesAfterExit:
			if c.send(map[string]any{"type": "exit", "code": 0}) == nil {
				flood(c, frame(`{"type":"stdout","data":"YWZ0ZXIgZXhpdAo="}`, 0))
			}
		}
	}
	<-gone // silent from here on, until the client closes
	return false
}

// flood sends b again and again until the client stops reading.
func flood(c *silkConn, b []byte) {
	for c.sendRaw(b) == nil {
	}
}

// frame is the JSON text head and its newline; with size > 0, head is an
// unterminated string padded with x's and closed so that the frame is
// exactly size bytes, newline included.
func frame(head string, size int) []byte {
	if size == 0 {
		return []byte(head + "\n")
	}
	const tail = "\"}\n"
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}
