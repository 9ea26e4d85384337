package kubeletapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
)

// closeSignal is the V5 protocol's channel 255 (every message is one
// channel byte and that channel's data): its one data byte names the
// channel the client closed.
const closeSignal = 255

// v5BufferSize is each direction's WebSocket buffer: one silkd data frame
// (32 KiB) and its channel byte pass in one write.
const v5BufferSize = 32<<10 + 64

// errClientGone ends stdin when the client's side of the WebSocket ends.
var errClientGone = errors.New("the client closed the exec connection")

// v5Session is one exec or attach over the V5 channel protocol. Messages
// are written whole, one at a time (wmu); one goroutine reads (receive).
// The connection ends once it has been idle, neither read nor written,
// for idle, as virtual-kubelet's SPDY connections do.
type v5Session struct {
	ws   *gwebsocket.Conn
	idle time.Duration

	wmu sync.Mutex
	hdr [1]byte // the channel byte of the message being written, under wmu

	gone chan struct{} // closed once the client's side has ended (receive)
}

// openV5 answers the WebSocket handshake with the V5 protocol.
func openV5(w http.ResponseWriter, req *http.Request, idle time.Duration) (*v5Session, error) {
	u := gwebsocket.Upgrader{
		// The apiserver proxies the request; the node authenticated and
		// authorized it before this handler.
		CheckOrigin:     func(*http.Request) bool { return true },
		Subprotocols:    []string{remotecommandconsts.StreamProtocolV5Name},
		ReadBufferSize:  v5BufferSize,
		WriteBufferSize: v5BufferSize,
	}
	ws, err := u.Upgrade(w, req, nil)
	if err != nil {
		return nil, err
	}
	s := &v5Session{ws: ws, idle: idle, gone: make(chan struct{})}
	s.readActivity()
	return s, nil
}

// readActivity pushes the idle deadline of reads out; writes push both
// (send), so a session that only prints stays open.
func (s *v5Session) readActivity() {
	if s.idle > 0 {
		_ = s.ws.SetReadDeadline(time.Now().Add(s.idle))
	}
}

// send writes one message on channel ch.
func (s *v5Session) send(ch byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.idle > 0 {
		t := time.Now().Add(s.idle)
		_ = s.ws.SetWriteDeadline(t)
		// The net.Conn's deadlines may be set from any goroutine.
		_ = s.ws.UnderlyingConn().SetReadDeadline(t)
	}
	w, err := s.ws.NextWriter(gwebsocket.BinaryMessage)
	if err != nil {
		return err
	}
	s.hdr[0] = ch
	if _, err := w.Write(s.hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(p); err != nil {
		return err
	}
	return w.Close()
}

// channel is an output channel as a stream.
func (s *v5Session) channel(ch byte) io.WriteCloser { return v5Writer{s, ch} }

type v5Writer struct {
	s  *v5Session
	ch byte
}

func (w v5Writer) Write(p []byte) (int, error) {
	if err := w.s.send(w.ch, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close is a no-op: the V5 protocol closes output channels with the
// connection.
func (v5Writer) Close() error { return nil }

// receive reads the client's messages until the connection ends, then
// ends the session (cancel) and stdin: stdin's data into the pipe, whose
// end is the close signal; terminal sizes into resize. Messages on other
// channels are dropped.
func (s *v5Session) receive(ctx context.Context, cancel context.CancelFunc, stdin *io.PipeWriter, resize chan<- api.TermSize) {
	defer close(s.gone)
	defer cancel()
	if stdin != nil {
		defer stdin.CloseWithError(errClientGone) // a no-op after Close
	}
	buf := make([]byte, v5BufferSize)
	var ch [1]byte
	for {
		_, r, err := s.ws.NextReader()
		if err != nil {
			return
		}
		s.readActivity()
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			continue // an empty message
		}
		switch ch[0] {
		case chanStdin:
			if stdin != nil {
				// A stdin nobody reads any more is drained, not an error.
				if _, err := io.CopyBuffer(stdin, r, buf); err != nil {
					stdin = nil
				}
			}
		case chanResize:
			var size struct{ Width, Height uint16 }
			if resize == nil || json.NewDecoder(r).Decode(&size) != nil {
				continue
			}
			select {
			case resize <- api.TermSize{Width: size.Width, Height: size.Height}:
			case <-ctx.Done():
				return
			}
		case closeSignal:
			if _, err := io.ReadFull(r, ch[:]); err == nil && ch[0] == chanStdin && stdin != nil {
				_ = stdin.Close()
				stdin = nil
			}
		}
	}
}

// clientGone reports whether the client's side has ended: it left, or the
// session was idle too long.
func (s *v5Session) clientGone() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// close ends the session with a normal close.
func (s *v5Session) close() {
	s.wmu.Lock()
	_ = s.ws.WriteControl(gwebsocket.CloseMessage, gwebsocket.FormatCloseMessage(gwebsocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	s.wmu.Unlock()
	_ = s.ws.Close()
}
