package sim

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// sandboxAuth is the credential check of release and renew: the sandbox's
// own token, or the root token for any sandbox. A wrong token is answered
// like an unknown id, so that a token cannot be used to probe for ids.
func (s *Server) sandboxAuth(tok string) func(sandboxToken string) bool {
	isRoot := tokenEqual(tok, s.cfg.RootToken)
	return func(sandboxToken string) bool { return isRoot || tokenEqual(tok, sandboxToken) }
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	id := r.PathValue("id")
	if !s.ix.release(id, s.sandboxAuth(tok)) {
		s.counters.inc(counterReleaseNotFound)
		writeFailure(w, errNotFound(id))
		return
	}
	s.counters.inc(counterReleaseOK)
	annotate(r, slog.String("id", id))
	w.WriteHeader(http.StatusNoContent)
}

// handleRenew resets the lease to ttl_seconds from now (0: DefaultTTL),
// capped at MaxTTL, and answers the grant.
func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	var req pool.RenewRequest
	if herr := decodeBody(r, &req, true); herr != nil {
		writeFailure(w, herr)
		return
	}
	if req.TTLSeconds < 0 {
		writeError(w, http.StatusBadRequest, "ttl_seconds must be >= 0")
		return
	}
	id := r.PathValue("id")
	deadline := s.deadline(time.Now().Add(s.grant(req.TTLSeconds)))
	if herr := s.ix.renew(id, s.sandboxAuth(tok), s.renewGate, deadline); herr != nil {
		writeFailure(w, herr)
		return
	}
	s.counters.inc(counterRenewOK)
	annotate(r, slog.String("id", id))
	writeJSON(w, http.StatusOK, pool.RenewResponse{Deadline: deadline})
}

// renewGate refuses the renew of a sandbox that cannot be extended. It runs
// under the index lock and takes only the tenant set's own lock.
func (s *Server) renewGate(sb pool.Sandbox) *httpError {
	switch {
	case sb.Archived:
		return &httpError{status: http.StatusConflict, msg: "sandbox " + sb.ID + " is archived"}
	case sb.Tenant == "" || !s.api.TenantAPI: // before V4, no tenant is ever "removed"
		return nil
	case s.tenantDBDown.Load():
		return s.errTenantDB()
	case !s.tenants.exists(sb.Tenant):
		return &httpError{status: http.StatusForbidden, msg: "tenant " + sb.Tenant + " was removed"}
	}
	return nil
}
