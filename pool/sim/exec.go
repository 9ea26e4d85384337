package sim

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// execRetryAfter is the Retry-After of a 503 for want of exec memory.
const execRetryAfter = time.Second

// handleExec runs one command to completion (see shell.go for the commands)
// with the sandbox's own token. A hibernated sandbox wakes; a failed one is
// 409, an unreachable guest 502, a command past its timeout 504 and output
// past pool.MaxExecOutput 413.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	row, ok := s.ownSandbox(w, r)
	if !ok {
		return
	}
	id := row.sb.ID
	var req pool.ExecRequest
	if herr := decodeBody(r, &req, false); herr != nil {
		writeFailure(w, herr)
		return
	}
	if herr := checkExec(req); herr != nil {
		writeFailure(w, herr)
		return
	}
	switch {
	case row.sb.Failed && s.api.FailedVMMs:
		writeError(w, http.StatusConflict, "sandbox "+id+" has failed")
		return
	case row.guest.unreachable:
		writeError(w, http.StatusBadGateway, "guest agent of sandbox "+id+" is unreachable")
		return
	}
	if s.api.ExecBudget {
		if !s.execMem.take(pool.MaxExecOutput) {
			setRetryAfter(w, execRetryAfter)
			writeError(w, http.StatusServiceUnavailable, "buffered exec memory exhausted")
			return
		}
		defer s.execMem.give(pool.MaxExecOutput)
	}
	s.ix.wake(id)
	annotate(r, slog.String("id", id))

	ctx := r.Context()
	if req.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	sh := &shell{ctx: ctx, cwd: req.Cwd, env: req.Env, limit: pool.MaxExecOutput}
	code, err := sh.run(req.Argv)
	switch {
	case errors.Is(err, errOutputCap):
		writeError(w, http.StatusRequestEntityTooLarge, "stdout and stderr exceed "+strconv.Itoa(pool.MaxExecOutput)+" bytes")
		return
	case r.Context().Err() != nil:
		return // the caller left; nobody reads an answer
	case err != nil:
		writeError(w, http.StatusGatewayTimeout, "command outlived its timeout of "+strconv.FormatInt(req.TimeoutSeconds, 10)+"s")
		return
	}
	writeJSON(w, http.StatusOK, pool.ExecResult{
		ExitCode: code,
		Stdout:   strings.ToValidUTF8(sh.stdout.String(), "\uFFFD"),
		Stderr:   strings.ToValidUTF8(sh.stderr.String(), "\uFFFD"),
	})
}

func checkExec(req pool.ExecRequest) *httpError {
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return &httpError{status: http.StatusBadRequest, msg: "argv is empty"}
	case !known(req.Argv):
		return &httpError{status: http.StatusBadRequest, msg: "command not found: " + req.Argv[0]}
	case req.Cwd != "" && (!path.IsAbs(req.Cwd) || path.Clean(req.Cwd) != req.Cwd):
		return &httpError{status: http.StatusBadRequest, msg: "cwd " + req.Cwd + ": want a clean absolute path"}
	case req.TimeoutSeconds < 0:
		return &httpError{status: http.StatusBadRequest, msg: "timeout_seconds must be >= 0"}
	}
	return nil
}

// ownSandbox is the sandbox a guest verb (exec, the agent relay) names,
// asked with that sandbox's own token. It answers 401 without a bearer
// token and 404 for an unknown id or any other token, which sandboxd does
// not tell apart; false means the answer is written.
func (s *Server) ownSandbox(w http.ResponseWriter, r *http.Request) (row, bool) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return row{}, false
	}
	id := r.PathValue("id")
	rw, ok := s.ix.get(id)
	if !ok || !tokenEqual(tok, rw.sb.Token) {
		writeFailure(w, errNotFound(id))
		return row{}, false
	}
	return rw, true
}
