package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"

	"github.com/segmentio/asm/base64"
)

// The emulated silkd's codec for the frames that carry bytes: stdout and
// stderr going out, stdin coming in. They are the whole of a stream's
// traffic, and encoding/json (its validity scan, the map it marshals, the
// copy of each base64 string) made the emulator, not the node, the slowest
// part of every exec stream it served. The wire format is silkd's own:
// what goes out is the JSON object encoding/json would write (keys in
// another order, which JSON does not fix), and what comes in is decoded
// exactly as json.Unmarshal would, which decides every frame not in the
// one canonical stdin shape below. Its base64 is segmentio/asm's (AVX2,
// handing what its loops do not take to encoding/base64): the guest's
// side of a stream should not cost the shared machine more than the
// node's side does.

// relayReadBuf is the relay's read buffer: net/http's 4 KiB one, kept by
// the hijacked connection, would cut a 44 KiB stdin frame into eleven
// reads.
const relayReadBuf = 64 << 10

// keptBuf is the most a connection keeps of a frame buffer between
// frames; a larger one (a frame near the cap) is dropped after use.
const keptBuf = 256 << 10

// relayReader is the relay's reader: what the HTTP server already read
// behind the upgrade request, then the connection, through a buffer of
// relayReadBuf.
func relayReader(conn net.Conn, hijacked *bufio.Reader) *bufio.Reader {
	ahead, _ := hijacked.Peek(hijacked.Buffered())
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(slices.Clone(ahead)), conn), relayReadBuf)
}

// readLine reads one frame with its newline, at most maxFrame bytes. A
// line the reader holds whole is returned in place (valid until the next
// read); a longer one is put together in c.line.
func (c *silkConn) readLine() ([]byte, error) {
	part, err := c.br.ReadSlice('\n')
	if err == nil {
		return part, nil
	}
	if c.line = c.line[:0]; cap(c.line) > keptBuf {
		c.line = nil
	}
	for {
		if len(c.line)+len(part) > maxFrame {
			return nil, errFrameCap
		}
		c.line = append(c.line, part...)
		if err == nil {
			return c.line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		part, err = c.br.ReadSlice('\n')
	}
}

// decodeReq decodes one request line. A stdin frame in the shape the
// node's codec writes has its data decoded into c.data (valid until the
// next recv); every other line is json.Unmarshal's.
func (c *silkConn) decodeReq(line []byte) (*silkReq, error) {
	if cap(c.data) > keptBuf {
		c.data = nil
	}
	req := &silkReq{}
	var ok bool
	if c.data, ok = decodeStdin(line, req, c.data); ok {
		return req, nil
	}
	if err := json.Unmarshal(line, req); err != nil {
		return nil, err
	}
	return req, nil
}

var (
	stdinHead = []byte(`{"v":1,"op":"stdin","data":"`)
	stdinTail = []byte("\"}\n")
)

// decodeStdin decodes a line that is exactly {"v":1,"op":"stdin","data":
// "<base64>"} and a newline, with its data decoded into dst's storage
// (grown when too small), into req; ok false leaves req alone. Strict
// base64 (padded, no byte skipped) holds no quote or backslash, so such
// a line means to json.Unmarshal exactly v 1, op stdin and these bytes.
func decodeStdin(line []byte, req *silkReq, dst []byte) (_ []byte, ok bool) {
	src, ok := bytes.CutPrefix(line, stdinHead)
	if !ok {
		return dst, false
	}
	if src, ok = bytes.CutSuffix(src, stdinTail); !ok || len(src)%4 != 0 {
		return dst, false
	}
	n := base64.StdEncoding.DecodedLen(len(src))
	if cap(dst) < n || dst == nil {
		dst = make([]byte, n)
	}
	// Decode skips \r and \n, which json refuses raw in a string: with
	// none skipped, the length is exactly len/4*3 less the padding.
	m, err := base64.StdEncoding.Decode(dst[:n], src)
	if err != nil || m != n-bytes.Count(src[max(0, len(src)-2):], []byte("=")) {
		return dst, false
	}
	req.V, req.Op, req.Data = 1, "stdin", dst[:m]
	return dst, true
}

// sendData writes one stdout or stderr frame carrying p:
// {"type":typ,"data":"<base64>"} and a newline, built in c.wbuf.
func (c *silkConn) sendData(typ string, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := append(c.wbuf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","data":"`...)
	n, m := len(b), base64.StdEncoding.EncodedLen(len(p))
	b = slices.Grow(b, m)[:n+m]
	base64.StdEncoding.Encode(b[n:], p)
	b = append(b, "\"}\n"...)
	_, err := c.conn.Write(b)
	if c.wbuf = b; cap(b) > keptBuf {
		c.wbuf = nil
	}
	return err
}
