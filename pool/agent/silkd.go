package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The guest daemon's protocol (silkd), spoken through the agent relay:
// each frame is one JSON object and a newline. Requests carry "v":1 and
// "op"; answers carry "type". Byte payloads are standard base64, and an
// empty one is "" (a nil []byte would encode as null, so senders pass an
// empty slice).
const (
	// MaxFrame is silkd's cap on one frame, either way.
	MaxFrame = 8 << 20
	// StdinChunk is how much input one stdin frame carries at most.
	StdinChunk = 32 << 10
	agentV     = 1
)

// Error kinds of silkd's error frame.
const (
	BadRequest     = "bad_request"
	NotFound       = "not_found"
	Unimplemented  = "unimplemented"
	Internal       = "internal"
	exitKilledCode = -1
)

// Error is silkd's error frame: the RPC was refused or failed in the
// guest.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return "silkd " + e.Kind + ": " + e.Message }

// frame is one answer frame. Which fields are set depends on Type:
// started{pid}, stdout{data}, stderr{data}, exit{code}, done{},
// error{kind,message}, info{version,proto,...} and procs{procs}. The
// json tags are the codec's reference (codec.go decodes as json.Unmarshal
// would); Data read by Recv lives in the connection's buffer until the
// next Recv or Release.
type frame struct {
	Type    string          `json:"type"`
	Pid     int             `json:"pid,omitempty"`
	Code    *int            `json:"code,omitempty"`
	Data    []byte          `json:"data,omitempty"`
	Kind    string          `json:"kind,omitempty"`
	Message string          `json:"message,omitempty"`
	Version string          `json:"version,omitempty"`
	Proto   int             `json:"proto,omitempty"`
	Procs   json.RawMessage `json:"procs,omitempty"`
}

// Proc is one row of silkd's process table (the ps answer).
type Proc struct {
	Pid       int      `json:"pid"`
	Argv      []string `json:"argv"`
	Detached  bool     `json:"detached"`
	State     string   `json:"state"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	StartedAt int64    `json:"started_at_epoch_secs"`
}

// Request frames, one shape per op.
type (
	agentOp struct {
		V  int    `json:"v"`
		Op string `json:"op"`
	}
	agentExecOp struct {
		agentOp
		Argv   []string          `json:"argv"`
		Cwd    string            `json:"cwd,omitempty"`
		Env    map[string]string `json:"env,omitempty"`
		Detach bool              `json:"detach"`
	}
	agentPTYOp struct {
		agentOp
		Cols int               `json:"cols"`
		Rows int               `json:"rows"`
		Cwd  string            `json:"cwd,omitempty"`
		Env  map[string]string `json:"env,omitempty"`
	}
	agentPidOp struct {
		agentOp
		Pid  int `json:"pid"`
		Cols int `json:"cols,omitempty"`
		Rows int `json:"rows,omitempty"`
	}
)

func op(name string) agentOp { return agentOp{V: agentV, Op: name} }

// relayConn is one connection to silkd through the agent relay, and the
// one place frames are read and written. Send is safe for concurrent use;
// Recv is for one reader at a time. What a frame holds is charged to the
// node's budget (agentbudget.go) from Recv until Release.
type relayConn struct {
	conn   net.Conn
	br     *bufio.Reader
	budget *byteBudget // nil: not counted
	buf    []byte      // the frame being read; at most MaxFrame+1 long
	data   []byte      // the frame's decoded data (codec.go); at most 3/4 of buf
	held   int64       // bytes of budget the current frame holds
	wmu    sync.Mutex
	wbuf   []byte
}

func newConn(conn net.Conn, br *bufio.Reader, budget *byteBudget) *relayConn {
	return &relayConn{conn: conn, br: br, budget: budget}
}

// Close ends the connection (and with it a foreground exec's input, or a
// pty's shell), and gives back what its last frame held.
func (a *relayConn) Close() error {
	a.release()
	return a.conn.Close()
}

// bound makes ctx ending interrupt any Send or Recv blocked on the guest,
// and ctx's deadline, if it has one, a deadline of the connection: a
// guest that stops answering cannot outlast either. stop reports whether
// ctx had not ended; until then the deadline stays on the connection.
func (a *relayConn) bound(ctx context.Context) (stop func() bool) {
	dl, _ := ctx.Deadline() // zero: no deadline
	_ = a.conn.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { _ = a.conn.SetDeadline(time.Unix(1, 0)) })
}

// drain reads and drops what the guest still sends on a session that is
// ending, until the RPC's terminal frame, for at most DrainTimeout.
func (a *relayConn) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	_ = a.conn.SetDeadline(time.Now().Add(DrainTimeout))
	for {
		f, err := a.recv(ctx)
		a.release()
		if err != nil {
			return
		}
		if end, _ := f.terminal(); end {
			return
		}
	}
}

// sendStdin writes one stdin frame carrying p, encoded by hand into the
// connection's write buffer (codec.go): the one request frame sent per
// chunk of a session's input.
func (a *relayConn) sendStdin(p []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.wbuf = appendStdin(a.wbuf[:0], p)
	if len(a.wbuf) > MaxFrame {
		return fmt.Errorf("silkd: request frame of %d bytes exceeds %d", len(a.wbuf), MaxFrame)
	}
	_, err := a.conn.Write(a.wbuf)
	return err
}

// send writes one request frame.
func (a *relayConn) send(v any) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b)+1 > MaxFrame {
		return fmt.Errorf("silkd: request frame of %d bytes exceeds %d", len(b)+1, MaxFrame)
	}
	a.wbuf = append(append(a.wbuf[:0], b...), '\n')
	_, err = a.conn.Write(a.wbuf)
	return err
}

// errFrameTooLarge is a frame past MaxFrame: silkd never sends one,
// so the stream is broken.
var errFrameTooLarge = fmt.Errorf("silkd: frame exceeds %d bytes", MaxFrame)

// recv reads one answer frame, which holds its bytes of the node's budget
// until Release (or the next recv, or Close): the caller releases it once
// the frame's data is written on. Reading stops at MaxFrame: a
// longer line is an error, never a larger buffer. While the budget is used
// up, recv waits for it until ctx ends.
func (a *relayConn) recv(ctx context.Context) (frame, error) {
	a.release()
	a.buf = a.buf[:0]
	for {
		line, err := a.br.ReadSlice('\n')
		if len(a.buf)+len(line) > MaxFrame {
			return frame{}, errFrameTooLarge
		}
		if err := a.grow(ctx, len(line)); err != nil {
			return frame{}, err
		}
		a.buf = append(a.buf, line...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(a.buf) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	// The decoded payload is at most 3/4 of its base64: it is charged
	// before the codec grows a.data for it.
	if err := a.hold(ctx, int64(len(a.buf))*3/4); err != nil {
		return frame{}, err
	}
	var f frame
	var err error
	if a.data, err = decodeFrame(a.buf, &f, a.data); err != nil {
		return frame{}, errBadFrame(err)
	}
	if f.Type == "" {
		return frame{}, errors.New("silkd: frame without a type")
	}
	return f, nil
}

// grow makes room for n more bytes of frame, charging the budget for the
// buffer's growth before it is allocated: the charge is the buffer's
// capacity beyond what a connection keeps for free.
func (a *relayConn) grow(ctx context.Context, n int) error {
	need := len(a.buf) + n
	if need <= cap(a.buf) {
		return nil
	}
	newCap := min(max(2*cap(a.buf), need), MaxFrame)
	if err := a.hold(ctx, int64(max(newCap, frameBufRetained)-max(cap(a.buf), frameBufRetained))); err != nil {
		return err
	}
	a.buf = append(make([]byte, 0, newCap), a.buf...)
	return nil
}

func (a *relayConn) hold(ctx context.Context, n int64) error {
	if err := a.budget.acquire(ctx, n); err != nil {
		return fmt.Errorf("silkd: waiting for the node's buffer budget: %w", err)
	}
	a.held += n
	return nil
}

// release gives back what the last frame held; the caller has written
// its data on, or dropped it. A buffer larger than a connection keeps for
// free goes with it.
func (a *relayConn) release() {
	a.budget.release(a.held)
	a.held = 0
	if cap(a.buf) > frameBufRetained {
		a.buf = nil
	}
	if cap(a.data) > frameBufRetained {
		a.data = nil
	}
}

// terminal reports whether f ends its RPC, and the error it carries.
func (f frame) terminal() (bool, error) {
	switch f.Type {
	case "exit", "done", "procs", "info":
		return true, nil
	case "error":
		return true, &Error{Kind: f.Kind, Message: f.Message}
	}
	return false, nil
}

// exitCode is an exit frame's code; a missing one reads as killed.
func (f frame) exitCode() int {
	if f.Code == nil {
		return exitKilledCode
	}
	return *f.Code
}
