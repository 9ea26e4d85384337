package sim

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net"
	"reflect"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// stdinLine is a stdin frame as the node's codec writes it.
func stdinLine(data []byte) []byte {
	return []byte(`{"v":1,"op":"stdin","data":"` + base64.StdEncoding.EncodeToString(data) + "\"}\n")
}

// FuzzDecodeReq pins the emulator's request decoding to encoding/json:
// on any line, decodeReq and json.Unmarshal both refuse, or both accept
// with equal requests. The connection is reused across lines, as a relay
// reuses it across frames, so a stale buffer would show.
func FuzzDecodeReq(f *testing.F) {
	for _, s := range []string{
		string(stdinLine(nil)), string(stdinLine([]byte("a"))), string(stdinLine([]byte("ab"))),
		string(stdinLine(bytes.Repeat([]byte{0xff}, 300))),
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\r\nZGVm\"}\n",     // base64 would skip CR LF, json refuses them
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\r\nZGVm\r\n\"}\n", // the same, a whole number of quanta long
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\\r\\nZGVm\"}\n",   // escaped CR LF: json unescapes, base64 skips them
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YW\\u004ajZA==\"}\n",   // an escape: json's to decode
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJ\"}\n",              // unpadded
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YQ==YQ==\"}\n",         // padding inside
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YQ=a\"}\n",             // a byte after padding
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"!!!!\"}\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\"} \n", // whitespace after the object
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\"}",    // no newline
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\"}\n\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\"}}\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\",\"pid\":3}\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\",\"data\":\"\"}\n", // a duplicate: the last wins
		"{\"op\":\"stdin\",\"v\":1,\"data\":\"YWJj\"}\n",
		"{\"V\":1,\"OP\":\"stdin\",\"Data\":\"YWJj\"}\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":null}\n",
		"{\"v\":1,\"op\":\"stdin_close\"}\n",
		"{\"v\":1,\"op\":\"exec\",\"argv\":[\"cat\"],\"env\":{\"A\":\"b\"}}\n",
		"{\"v\":1,\"op\":\"stdin\",\"data\":\"YWJj\"\n",
		"",
	} {
		f.Add([]byte(s))
	}
	c := &silkConn{}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := c.decodeReq(line)
		var want silkReq
		wantErr := json.Unmarshal(line, &want)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("%q: the codec says %v, json says %v", line, err, wantErr)
		case err == nil && !reflect.DeepEqual(*got, want):
			t.Fatalf("%q: the codec decoded %+v, json %+v", line, *got, want)
		}
	})
}

// The node's own stdin frames are the ones the fast path is for: each
// must be taken there, not left to encoding/json.
func TestTheNodesStdinFramesTakeTheFastPath(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 32 << 10} {
		data := bytes.Repeat([]byte{0xa5}, n)
		var req silkReq
		if _, ok := decodeStdin(stdinLine(data), &req, nil); !ok {
			t.Fatalf("a stdin frame of %d bytes went to encoding/json", n)
		}
		if req.V != 1 || req.Op != "stdin" || !bytes.Equal(req.Data, data) {
			t.Fatalf("a stdin frame of %d bytes decoded to v %d, op %q, %d bytes", n, req.V, req.Op, len(req.Data))
		}
	}
}

// frameConn records what is written to it.
type frameConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *frameConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// A stdout or stderr frame the emulator writes is one JSON line that
// encoding/json reads back as the type and the bytes given.
func TestDataFramesAreJSONLines(t *testing.T) {
	conn := &frameConn{}
	c := &silkConn{conn: conn}
	payloads := [][]byte{{}, []byte("hi\n"), bytes.Repeat([]byte{0, 0xff, '"', '\\'}, 10000)}
	for _, p := range payloads {
		if err := c.sendData("stderr", p); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(&conn.out)
	sc.Buffer(nil, maxFrame)
	for i := 0; sc.Scan(); i++ {
		var got struct {
			Type string `json:"type"`
			Data []byte `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Type != "stderr" || got.Data == nil || !bytes.Equal(got.Data, payloads[i]) {
			t.Fatalf("frame %d: type %q, %d bytes (nil %v), want %d", i, got.Type, len(got.Data), got.Data == nil, len(payloads[i]))
		}
	}
}

// BenchmarkSilkdRecvStdin is the emulator reading one 32 KiB stdin frame.
func BenchmarkSilkdRecvStdin(b *testing.B) {
	line := stdinLine(bytes.Repeat([]byte("x"), 32<<10))
	src := &testkit.RepeatReader{Line: line}
	c := &silkConn{br: bufio.NewReaderSize(src, 64<<10)}
	b.SetBytes(32 << 10)
	b.ReportAllocs()
	for b.Loop() {
		req, err := c.recv()
		if err != nil || len(req.Data) != 32<<10 {
			b.Fatal(err)
		}
	}
}

// BenchmarkSilkdSendStdout is the emulator writing one 32 KiB stdout
// frame.
func BenchmarkSilkdSendStdout(b *testing.B) {
	c := &silkConn{conn: discardConn{}}
	p := bytes.Repeat([]byte("x"), 32<<10)
	b.SetBytes(32 << 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (output{c, "stdout"}).Write(p); err != nil {
			b.Fatal(err)
		}
	}
}

type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
