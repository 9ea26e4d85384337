package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"time"
)

// guestFile is the large file exec's cat reads, written into the guest
// through exec's stdin first.
const guestFile = "/bench.bin"

// ping is the small message of the round trips: 16 bytes.
var ping = []byte("ping-0123456789\n")

// timed runs f and returns its duration in seconds.
func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return time.Since(start).Seconds(), err
}

// execTrue is one `kubectl exec POD -- true`: a new session through the
// apiserver, the kubelet API, sandboxd's agent relay and silkd, to the
// exit code.
func (c *client) execTrue(ctx context.Context) error {
	return c.exec(ctx, nil, io.Discard, "true")
}

// connectEcho is port-forward's counterpart: a new local connection (a new
// forwarded stream, and a new relay to the guest port), ping sent and its
// echo read back.
func connectEcho(local string) error {
	conn, err := net.Dial("tcp", local)
	if err != nil {
		return err
	}
	defer conn.Close()
	return pingPong(conn, conn)
}

// pingPong writes ping and reads its echo.
func pingPong(w io.Writer, r io.Reader) error {
	if _, err := w.Write(ping); err != nil {
		return err
	}
	got := make([]byte, len(ping))
	if _, err := io.ReadFull(r, got); err != nil {
		return err
	}
	if !bytes.Equal(got, ping) {
		return fmt.Errorf("echo %q, want %q", got, ping)
	}
	return nil
}

// session is an open `kubectl exec -i POD -- cat`: what is written to in
// comes back on out. close ends stdin (silkd's stdin_close) and waits for
// the exit.
type session struct {
	in   *io.PipeWriter
	out  *io.PipeReader
	done chan error
}

func (c *client) openCat(ctx context.Context) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{in: inW, out: outR, done: make(chan error, 1)}
	go func() {
		err := c.exec(ctx, inR, outW, "cat")
		outW.CloseWithError(cmpErr(err, io.EOF))
		s.done <- err
	}()
	return s
}

func (s *session) close() error {
	_ = s.in.Close()
	return <-s.done
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// checked is a writer that counts and hashes what it is given, to prove a
// stream arrived whole.
type checked struct {
	n int64
	h hash.Hash
}

func newChecked() *checked { return &checked{h: sha256.New()} }

func (c *checked) Write(p []byte) (int, error) { c.n += int64(len(p)); return c.h.Write(p) }

func (c *checked) verify(payload []byte, sum [32]byte) error {
	if c.n != int64(len(payload)) || [32]byte(c.h.Sum(nil)) != sum {
		return fmt.Errorf("received %d bytes of %d, checksum intact %v", c.n, len(payload), [32]byte(c.h.Sum(nil)) == sum)
	}
	return nil
}

// upload writes payload to guestFile through exec's stdin.
func (c *client) upload(ctx context.Context, payload []byte) error {
	return c.exec(ctx, bytes.NewReader(payload), io.Discard, "sh", "-c", "cat > "+guestFile)
}

// catFile is `kubectl exec POD -- cat FILE`: guest to client only.
func (c *client) catFile(ctx context.Context, payload []byte, sum [32]byte) error {
	got := newChecked()
	if err := c.exec(ctx, nil, got, "cat", guestFile); err != nil {
		return err
	}
	return got.verify(payload, sum)
}

// catEcho is `kubectl exec -i POD -- cat < payload`: the payload in and
// back out, both ways at once, as through the echo service.
func (c *client) catEcho(ctx context.Context, payload []byte, sum [32]byte) error {
	got := newChecked()
	if err := c.exec(ctx, bytes.NewReader(payload), got, "cat"); err != nil {
		return err
	}
	return got.verify(payload, sum)
}

// forwardEcho sends payload through a new forwarded connection to the echo
// service, half-closes, and reads the echo to EOF.
func forwardEcho(local string, payload []byte, sum [32]byte) error {
	conn, err := net.Dial("tcp", local)
	if err != nil {
		return err
	}
	defer conn.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(payload)
		werr <- errors.Join(err, conn.(*net.TCPConn).CloseWrite())
	}()
	got := newChecked()
	if _, err := io.Copy(got, conn); err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	return got.verify(payload, sum)
}
