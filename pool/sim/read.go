package sim

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// handleList answers root every row and a tenant only the rows it claimed,
// filtered by ?claim_ref= and every ?metadata=k=v where the API version
// has them (an older one ignores them). No row carries a token.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	who, herr := s.authenticate(r)
	if herr != nil {
		writeFailure(w, herr)
		return
	}
	opts, herr := s.parseListOptions(r.URL.Query())
	if herr != nil {
		writeFailure(w, herr)
		return
	}
	if opts.ClaimRef == "" && len(opts.Metadata) == 0 {
		s.counters.inc(counterListFull) // what a server without the filter costs
	}
	rows := s.ix.list(func(sb *pool.Sandbox) bool {
		return (who.role == roleRoot || sb.Tenant == who.tenant) && opts.Matches(*sb)
	})
	writeJSON(w, http.StatusOK, s.presentList(rows))
}

// parseListOptions reads the filters the API version knows. A metadata
// pair splits at its first '=', which a key cannot contain; one without
// '=', with an empty key or with a key already given is a 400.
func (s *Server) parseListOptions(q url.Values) (pool.ListOptions, *httpError) {
	var opts pool.ListOptions
	if s.api.ClaimRefFilter {
		opts.ClaimRef = q.Get("claim_ref")
	}
	if !s.api.Metadata {
		return opts, nil
	}
	for _, pair := range q["metadata"] {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return opts, &httpError{status: http.StatusBadRequest, msg: "metadata filter " + pair + ": want key=value"}
		}
		if _, dup := opts.Metadata[k]; dup {
			return opts, &httpError{status: http.StatusBadRequest, msg: "metadata filter: key " + k + " repeated"}
		}
		if opts.Metadata == nil {
			opts.Metadata = map[string]string{}
		}
		opts.Metadata[k] = v
	}
	return opts, nil
}

// handleGet is root's view of one row, with the sandbox's token since V2:
// the way a claim whose response was lost is recovered. It never has
// owner_addr.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if row, ok := s.rootRow(w, r); ok {
		writeJSON(w, http.StatusOK, s.presentRow(row.sb, true))
	}
}

// rootRow is the row named by the path for a root caller; otherwise it has
// answered (403 for a tenant, 404 for an unknown id) and reports false.
func (s *Server) rootRow(w http.ResponseWriter, r *http.Request) (row, bool) {
	if herr := s.authorizeRoot(r); herr != nil {
		writeFailure(w, herr)
		return row{}, false
	}
	id := r.PathValue("id")
	found, ok := s.ix.get(id)
	if !ok {
		writeFailure(w, errNotFound(id))
	}
	return found, ok
}

// handleStats is root's reading of one sandbox (see row.stats): a tenant
// is 403, and the read is passive, so it never wakes a hibernated sandbox.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	if row, ok := s.rootRow(w, r); ok {
		writeJSON(w, http.StatusOK, row.stats(time.Now()))
	}
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	if herr := s.authorizeRoot(r); herr != nil {
		writeFailure(w, herr)
		return
	}
	st := s.ix.stats()
	info := pool.Info{
		Pools: st.pools, Claimed: st.claimed, Archived: st.archived,
		Draining: s.draining.Load(), AdvertiseAddr: s.ownerAddr, Counters: s.Counters(),
	}
	if max := int(s.maxClaims.Load()); max > 0 && st.claimedPlusPending >= max {
		info.AtCapacity, info.AtCapacityReason = true, "max_claims"
	}
	if s.mesh.Load() || *s.capacity.Load() == CapacityRedirect {
		info.Peers = s.cfg.Redirect
	}
	writeJSON(w, http.StatusOK, s.presentInfo(info))
}

// handleHealthz needs no token: it says the process serves HTTP, nothing
// about the node.
func handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}
