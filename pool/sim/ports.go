package sim

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// guestDialTimeout bounds the dial of a guest port; loopback answers at once.
const guestDialTimeout = 2 * time.Second

// handlePorts is the ports relay: after 101 the connection carries raw bytes
// to the guest port (see Config.GuestPorts), in both directions, with
// half-close. The sandbox's own token makes it activity, which wakes a
// hibernated sandbox; the root token makes it passive, and a paused sandbox
// is then 409.
func (s *Server) handlePorts(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "bad port "+r.PathValue("port"))
		return
	}
	row, ok := s.ix.get(id)
	// Before the passive relay (V3) the root token is as wrong as any
	// other that is not the sandbox's own.
	isRoot := s.api.PassiveRootRelay && tokenEqual(tok, s.cfg.RootToken)
	if !ok || !(isRoot || tokenEqual(tok, row.sb.Token)) {
		writeFailure(w, errNotFound(id))
		return
	}
	switch {
	case row.sb.Failed && s.api.FailedVMMs:
		writeError(w, http.StatusConflict, "sandbox "+id+" has failed")
		return
	case !wantsUpgrade(r, "tcp"):
		w.Header().Set("Upgrade", "tcp")
		w.Header().Set("Connection", "Upgrade")
		writeError(w, http.StatusUpgradeRequired, "the ports relay needs Upgrade: tcp and Connection: Upgrade")
		return
	case isRoot && row.sb.Hibernated:
		writeError(w, http.StatusConflict, "sandbox "+id+" is paused; a passive relay does not wake it")
		return
	case row.guest.unreachable:
		writeError(w, http.StatusBadGateway, "guest agent of sandbox "+id+" is unreachable")
		return
	}
	addr, ok := s.guestAddr(port)
	var guest net.Conn
	if ok {
		guest, err = net.DialTimeout("tcp", addr, guestDialTimeout)
	}
	if !ok || err != nil {
		writeError(w, http.StatusBadGateway, "nothing listens on port "+strconv.Itoa(port)+" in sandbox "+id)
		return
	}
	if !isRoot {
		s.ix.wake(id)
	}
	annotate(r, slog.String("id", id), slog.Int("port", port))
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = guest.Close()
		writeError(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	_, err = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n")
	if err == nil {
		err = buf.Flush()
	}
	if err != nil {
		_ = client.Close()
		_ = guest.Close()
		return
	}
	s.relays.run(client, buf.Reader, guest)
}

// relaySet holds the open relays, so that Close can end them: a hijacked
// connection is no longer the HTTP server's to close.
type relaySet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// run copies both ways until both directions ended. A clean end (EOF) is
// passed on as a half-close, so a client that stops sending still reads the
// guest's answer; an error in either direction closes both connections.
func (rs *relaySet) run(client net.Conn, fromClient io.Reader, guest net.Conn) {
	if !rs.add(client, guest) {
		_ = client.Close()
		_ = guest.Close()
		return
	}
	defer rs.wg.Done()
	defer rs.remove(client, guest)
	abort := func() { _ = client.Close(); _ = guest.Close() }
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(guest, fromClient, abort)
	}()
	pipe(client, guest, abort)
	<-done
	abort()
}

// pipe copies src to dst, then half-closes dst; on an error it aborts.
func pipe(dst net.Conn, src io.Reader, abort func()) {
	_, err := io.Copy(dst, src)
	if err == nil {
		err = closeWrite(dst)
	}
	if err != nil {
		abort()
	}
}

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("connection cannot half-close")
}

func (rs *relaySet) add(cs ...net.Conn) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return false
	}
	if rs.conns == nil {
		rs.conns = map[net.Conn]struct{}{}
	}
	for _, c := range cs {
		rs.conns[c] = struct{}{}
	}
	rs.wg.Add(1)
	return true
}

func (rs *relaySet) remove(cs ...net.Conn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, c := range cs {
		delete(rs.conns, c)
	}
}

// close ends every relay and waits for their goroutines.
func (rs *relaySet) close() {
	rs.mu.Lock()
	rs.closed = true
	for c := range rs.conns {
		_ = c.Close()
	}
	rs.mu.Unlock()
	rs.wg.Wait()
}
