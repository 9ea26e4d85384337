package sim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// handleAgent is the agent relay: with the sandbox's own token and
// Upgrade: silkd, the connection becomes one to the guest's silkd (see
// silkd.go). 426 without the upgrade header, 404 for a wrong token or an
// unknown sandbox, 409 for a failed one, 502 when the guest is
// unreachable. An open relay is activity: a hibernated sandbox wakes.
// Config.NoAgentRelay answers 404 as a node without the route would.
func (s *Server) handleAgent(w http.ResponseWriter, r *http.Request) {
	if s.cfg.NoAgentRelay {
		http.NotFound(w, r)
		return
	}
	row, ok := s.ownSandbox(w, r)
	if !ok {
		return
	}
	id := row.sb.ID
	switch {
	case !wantsUpgrade(r, "silkd"):
		w.Header().Set("Upgrade", "silkd")
		w.Header().Set("Connection", "Upgrade")
		writeError(w, http.StatusUpgradeRequired, "the agent relay needs Upgrade: silkd and Connection: Upgrade")
		return
	case row.sb.Failed:
		writeError(w, http.StatusConflict, "sandbox "+id+" has failed")
		return
	case row.guest.unreachable:
		writeError(w, http.StatusBadGateway, "guest agent of sandbox "+id+" is unreachable")
		return
	}
	g, err := s.guests.get(id)
	if err != nil {
		writeError(w, http.StatusBadGateway, "guest of sandbox "+id+": "+err.Error())
		return
	}
	s.ix.wake(id)
	annotate(r, slog.String("id", id))
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	_, err = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: silkd\r\nConnection: Upgrade\r\n\r\n")
	if err == nil {
		err = buf.Flush()
	}
	if err != nil || !s.relays.add(client) {
		_ = client.Close()
		return
	}
	defer s.relays.wg.Done()
	defer s.relays.remove(client)
	defer client.Close()
	g.serve(&silkConn{conn: client, br: relayReader(client, buf.Reader), proto: int(s.agentProto.Load())})
}

// wantsUpgrade reports whether r asks to upgrade to proto.
func wantsUpgrade(r *http.Request, proto string) bool {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), proto) {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// setAgentProto sets the proto silkd reports in info: 1 serves one RPC a
// connection, 2 serves them back to back.
func (s *Server) setAgentProto(p int) { s.agentProto.Store(int64(max(p, 1))) }

// silkReq is any request frame; which fields matter depends on Op.
type silkReq struct {
	V      int               `json:"v"`
	Op     string            `json:"op"`
	Argv   []string          `json:"argv"`
	Cwd    string            `json:"cwd"`
	Env    map[string]string `json:"env"`
	Detach bool              `json:"detach"`
	Pid    int               `json:"pid"`
	Cols   int               `json:"cols"`
	Rows   int               `json:"rows"`
	Data   []byte            `json:"data"`
}

// silkConn is one silkd connection: frames in, frames out. send is safe
// for concurrent use (a process's stdout and stderr both write).
type silkConn struct {
	conn  net.Conn
	br    *bufio.Reader
	proto int // 1: one RPC, then the connection ends; 2: RPCs back to back
	wmu   sync.Mutex
	wbuf  []byte // the data frame being written (silkd_codec.go), under wmu
	// next is a request that arrived while a streaming RPC ran: it ended
	// that RPC's input and is served next.
	next *silkReq
	// line is a frame longer than br's buffer, put together; data is the
	// last stdin frame's bytes (silkd_codec.go).
	line, data []byte
}

// maxFrame is silkd's frame cap, either way.
const maxFrame = 8 << 20

var errFrameCap = errors.New("frame exceeds 8 MiB")

func (c *silkConn) recv() (*silkReq, error) {
	if n := c.next; n != nil {
		c.next = nil
		return n, nil
	}
	line, err := c.readLine()
	if err != nil {
		return nil, err
	}
	return c.decodeReq(line)
}

func (c *silkConn) send(v map[string]any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.conn.Write(append(b, '\n'))
	return err
}

// sendRaw writes b as it is (hostile.go sends frames no encoder would).
func (c *silkConn) sendRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(b)
	return err
}

func (c *silkConn) fail(kind, msg string) error {
	return c.send(map[string]any{"type": "error", "kind": kind, "message": msg})
}

// output is a frame writer for one stream of a process: Write sends a
// stdout or stderr frame. A failed write is how silkd notices that the
// client went away.
type output struct {
	c   *silkConn
	typ string
}

func (o output) Write(p []byte) (int, error) {
	for off := 0; off < len(p); {
		n := min(len(p)-off, maxFrame/2)
		if err := o.c.sendData(o.typ, p[off:off+n]); err != nil {
			return off, err
		}
		off += n
	}
	return len(p), nil
}

// initGuests readies the emulated silkd of every sandbox.
func (s *Server) initGuests() {
	s.guests.shell = s.cfg.GuestHostShell
	s.guests.killed = func() { s.counters.inc(counterAgentKill) }
	s.setAgentProto(cmp.Or(s.cfg.AgentProto, 2))
}

// GuestProcs is sandbox id's silkd process table (test use): every
// process started through the agent relay in the last 5 minutes.
func (s *Server) GuestProcs(id string) []agent.Proc {
	if g := s.guests.lookup(id); g != nil {
		return g.table()
	}
	return nil
}
