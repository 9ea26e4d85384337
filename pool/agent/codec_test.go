package agent

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// FuzzDecodeFrame pins the codec's contract: on any line, the codec and
// json.Unmarshal (into the same Frame, []byte data) agree: both refuse,
// or both accept with equal frames. The seeds (testdata/fuzz) run as an
// ordinary test.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"stdout","data":"aGVsbG8="}` + "\n",
		`{"type":"stderr","data":""}`,
		`{"type":"stdout","data":null}`,
		`{"type":"exit","code":0}`,
		`{"type":"exit","code":-1}`,
		`{"type":"exit","code":null}`,
		`{"type":"exit"}`,
		`{"type":"done"}`,
		`{"type":"started","pid":42}`,
		`{"type":"error","kind":"bad_request","message":"no such op"}`,
		`{"type":"info","version":"0.4.1","proto":2,"features":["pty","attach"],"limits":{"frame":8388608,"x":[1,2.5e-3,{"y":null}]}}`,
		`{"type":"procs","procs":[{"pid":1,"argv":["sh"],"detached":false,"state":"running","started_at_epoch_secs":1}]}`,
		`{"type":"stdout","data":"aGVsbG8","pid":1}`,    // unpadded
		`{"type":"stdout","data":"aGVsbA=="}`,           // padded twice
		`{"type":"stdout","data":"aGVsbA=a"}`,           // padding inside
		`{"type":"stdout","data":"aGVs\r\nbG8="}`,       // escaped newline: json unescapes, base64 skips it
		"{\"type\":\"stdout\",\"data\":\"aGVs\rbG8=\"}", // raw CR: json refuses
		`{"type":"stdout","data":"aGVs\u0062G8="}`,      // escaped base64
		`{"type":"stdout","data":"aGVsbG8=\"}`,
		`{"type":"std\u006fut","data":"aGVsbG8="}`,
		`{"TYPE":"stdout","Data":"aGVsbG8="}`,
		`{"type":"stdout","type":"stderr"}`, // a duplicate: the last wins
		`{"type":"exit","code":1,"code":null}`,
		`{"type":"exit","code":1.0}`,
		`{"type":"exit","code":1e2}`,
		`{"type":"exit","code":99999999999999999999}`,
		`{"type":"exit","code":"1"}`,
		`{"type":"exit","code":01}`,
		`{"type":"exit","code":-}`,
		`{"type":"x","u":"\q"}`,
		`{"type":"x","u":"\u12"}`,
		`{"type":"x","u":"\u12G4"}`,
		`{"type":"x","u":"caf\u00e9 \"q\" \\ \/ \b\f\n\r\t"}`,
		"{\"type\":\"x\",\"u\":\"\xff\xfe\"}",
		"{\"type\":\"x\",\"u\":\"\x01\"}",
		"{\"type\":\"caf\xc3\xa9\"}",
		`{"type":"x","n":-0.5E+10,"m":0,"t":true,"f":false,"z":null}`,
		`{"type":"x","n":1.}`,
		`{"type":"x","n":.5}`,
		`{"type":"x","n":1e}`,
		`{"type":"x","t":tru}`,
		`{"type":"x",}`,
		`{"type":"x"} x`,
		`{"type":"x"}}`,
		`{"type":"x" "pid":1}`,
		`{"type":"x","o":{"a":[[],{}],"b":{"c":"d"}}}`,
		`{"type":"x","o":{"a":}}`,
		`{"type":"x","o":[1,]}`,
		`{"type":"x","o":{1:2}}`,
		`{"type":null,"pid":null,"proto":null}`,
		`{"type":1}`,
		`{"type":"stdout","data":1}`,
		`{"type":"stdout","data":"!!!!"}`,
		`{}`,
		`null`,
		`[]`,
		`"x"`,
		` {"type" : "stdout" , "data" : "AA==" } ` + "\r\n",
		`{"type":"x","deep":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"type":"x","pid":9223372036854775807,"proto":-9223372036854775808}`,
		`{"type":"x","ſtate":1,"Kind":"K"}`,
		`{"type":"x","kind":"a\u0000b"}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var want frame
		werr := json.Unmarshal(line, &want)
		var got frame
		_, gerr := decodeFrame(line, &got, nil)
		switch {
		case werr != nil && gerr == nil:
			t.Fatalf("%q: json refuses (%v), the codec accepts %+v", line, werr, got)
		case werr == nil && gerr != nil:
			t.Fatalf("%q: json accepts %+v, the codec refuses: %v", line, want, gerr)
		case werr == nil && !sameFrame(got, want):
			t.Fatalf("%q: the codec decodes %+v, json %+v", line, got, want)
		}
	})
}

func sameFrame(a, b frame) bool {
	if (a.Code == nil) != (b.Code == nil) || a.Code != nil && *a.Code != *b.Code {
		return false
	}
	return a.Type == b.Type && a.Pid == b.Pid && bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil) &&
		a.Kind == b.Kind && a.Message == b.Message && a.Version == b.Version && a.Proto == b.Proto &&
		bytes.Equal(a.Procs, b.Procs)
}

// The data of consecutive frames is decoded into the one buffer the
// connection keeps: no allocation per frame once it is large enough.
func TestDecodeFrameReusesTheDataBuffer(t *testing.T) {
	line, _ := json.Marshal(frame{Type: "stdout", Data: bytes.Repeat([]byte("x"), 3000)})
	var f frame
	buf, err := decodeFrame(line, &f, nil)
	if err != nil || len(f.Data) != 3000 {
		t.Fatalf("first frame: %d bytes, %v", len(f.Data), err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if buf, err = decodeFrame(line, &f, buf); err != nil || len(f.Data) != 3000 || &f.Data[0] != &buf[0] {
			t.Fatalf("frame: %d bytes, %v, or not in the kept buffer", len(f.Data), err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per stdout frame, want none", allocs)
	}
}

// appendStdin writes the bytes json.Marshal writes for the stdin
// request, for any data (empty is "", never null), and they read back.
func TestAppendStdinIsJSONsEncoding(t *testing.T) {
	type dataOp struct {
		agentOp
		Data []byte `json:"data"`
	}
	for _, data := range [][]byte{{}, {0}, []byte("ab"), []byte("abc"), bytes.Repeat([]byte{0xff, 0, '"', '\\'}, 8191)} {
		want, err := json.Marshal(dataOp{agentOp: op("stdin"), Data: data})
		if err != nil {
			t.Fatal(err)
		}
		got := appendStdin([]byte("junk"), data)[4:]
		if string(got) != string(want)+"\n" {
			t.Fatalf("%d bytes: appendStdin %.80q, json %.80q", len(data), got, want)
		}
		var back dataOp
		if err := json.Unmarshal(got, &back); err != nil || back.V != agentV || back.Op != "stdin" || !bytes.Equal(back.Data, data) {
			t.Fatalf("%d bytes: read back %+v, %v", len(data), back.agentOp, err)
		}
	}
}

// BenchmarkAgentConnSendStdin is the node's cost of one 32 KiB stdin
// frame written to the relay.
func BenchmarkAgentConnSendStdin(b *testing.B) {
	a := &relayConn{conn: discardConn{}}
	chunk := make([]byte, StdinChunk)
	b.SetBytes(StdinChunk)
	for b.Loop() {
		if err := a.sendStdin(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
