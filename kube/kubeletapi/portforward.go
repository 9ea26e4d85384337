package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// PortForward is kubectl port-forward: one forwarded connection, relayed to
// the guest port through sandboxd's ports relay with the claim's own token,
// so the relay counts as activity and wakes a hibernated sandbox.
//
// virtual-kubelet calls it per connection with a context that never ends,
// so the relay itself decides when it is over: when both directions have
// ended, or at once when either breaks. A direction that ends cleanly is
// passed on as a half-close (kubectl's stream ending becomes CloseWrite
// towards the guest, the guest's EOF closes the stream towards kubectl),
// so a client that stops sending still reads the whole answer.
func (a *API) PortForward(ctx context.Context, namespace, name string, port int32, stream io.ReadWriteCloser) error {
	if a.lacks(func(f pool.Features) bool { return f.Ports }) {
		return errVerbMissing("kubectl port-forward", "ports relay")
	}
	c, err := a.target(namespace, name)
	if err != nil {
		return err
	}
	// A connection holds a slot until the relay has closed both sides.
	release, err := a.forwards.acquire(c.Key)
	if err != nil {
		return err
	}
	defer release()
	conn, err := a.sandboxd.DialPort(ctx, c.ID, c.Token, int(port))
	if err != nil {
		a.log.Log(ctx, refusalLevel(err), "port-forward refused", "pod", pipeline.JoinKey(namespace, name), "sandbox", c.ID, "port", port, "error", err)
		return explain(err, pool.VerbPorts, c.ID, int(port), 0)
	}
	if err := relay(stream, conn); err != nil {
		a.log.DebugContext(ctx, "port-forward ended", "pod", pipeline.JoinKey(namespace, name), "sandbox", c.ID, "port", port, "error", err)
		return fmt.Errorf("port %d in sandbox %s: %w", port, c.ID, err)
	}
	return nil
}

// relayBuf is large so that a bulk transfer becomes few, large frames on
// kubectl's stream.
const relayBuf = 256 << 10

var relayBufs = sync.Pool{New: func() any { b := make([]byte, relayBuf); return &b }}

// errGuestBroke is a relay the guest side broke (not a clean EOF); kubectl
// hears of it on the stream's error channel. A break on kubectl's side is
// not reported: nobody is left to read it.
var errGuestBroke = errors.New("the connection to the guest broke")

// relay copies both ways between kubectl's stream and the guest. The
// stream's Close is a half-close (SPDY FIN); a Reset, where the stream has
// one, drops it at once. The first side to break ends the relay, and only
// a break on the guest's side is reported: the reads and writes that fail
// afterwards because relay closed both sides say nothing new.
func relay(stream io.ReadWriteCloser, conn *pool.PortConn) error {
	var (
		once       sync.Once
		guestBroke bool
		localFin   atomic.Bool // this side's FIN went out on the stream
	)
	abort := func(guestSide bool) {
		once.Do(func() {
			guestBroke = guestSide
			_ = conn.Close()
			if r, ok := stream.(interface{ Reset() error }); ok {
				_ = r.Reset()
			} else {
				_ = stream.Close()
			}
		})
	}
	up := make(chan struct{})
	go func() { // kubectl → guest
		defer close(up)
		rerr, werr := copyBoth(conn, stream)
		if rerr == nil && werr == nil && resetByPeer(stream, &localFin) {
			rerr = errStreamReset // kubectl dropped the stream: end it all
		}
		if rerr == nil && werr == nil {
			werr = conn.CloseWrite()
		}
		switch {
		case werr != nil:
			abort(true)
		case rerr != nil:
			abort(false)
		}
	}()
	rerr, werr := copyBoth(stream, conn) // guest → kubectl
	if rerr == nil && werr == nil {
		localFin.Store(true)
		werr = stream.Close()
	}
	switch {
	case rerr != nil:
		abort(true)
	case werr != nil:
		abort(false)
	}
	<-up // every abort has run: guestBroke is settled
	_ = conn.Close()
	if guestBroke {
		return errGuestBroke
	}
	return nil
}

var errStreamReset = errors.New("kubectl reset the stream")

// resetByPeer tells a stream kubectl reset from one it half-closed: both
// read as EOF, but a SPDY stream is finished after a reset (or once this
// side has sent its own FIN, which localFin rules out). A reset ends the
// relay at once, so that a guest that would keep its side open cannot hold
// it; a half-close is passed on.
func resetByPeer(stream io.Reader, localFin *atomic.Bool) bool {
	f, ok := stream.(interface{ IsFinished() bool })
	return ok && !localFin.Load() && f.IsFinished()
}

// copyBoth copies src to dst until EOF and tells a failed read (the source
// broke) from a failed write (the destination broke).
func copyBoth(dst io.Writer, src io.Reader) (readErr, writeErr error) {
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return nil, werr
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}
