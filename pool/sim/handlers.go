package sim

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

const claimBodyLimit = 64 << 10

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	if s.roleOf(bearer(r)) == roleNone {
		writeError(w, http.StatusUnauthorized, "bad token")
		return
	}
	req, msg := decodeClaim(r)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	key := pool.Key{Template: req.Template, Net: req.Net, Size: req.Size}
	if !s.ix.known(key) {
		writeError(w, http.StatusBadRequest, "unknown pool "+key.Template+"/"+key.Net+"/"+key.Size)
		return
	}
	annotate(r, slog.String("claim_ref", req.ClaimRef))

	// Before admission the caller may still walk away and nothing is lost.
	if !sleepCtx(r.Context(), s.latency()) {
		return
	}
	max := int(s.maxClaims.Load())
	if s.ix.full(max) {
		s.capacityMiss(w, req)
		return
	}
	if rand.Float64() < math.Float64frombits(s.failRate.Load()) {
		s.counters.inc(counterClaimError)
		writeError(w, http.StatusInternalServerError, "provisioning failed")
		return
	}
	admitted, warm := s.ix.admit(key, max)
	if !admitted { // lost a race for the last slot since full()
		s.capacityMiss(w, req)
		return
	}
	// Admitted: from here the VM is made whatever the caller does, as on a
	// real node. A cold boot is not abandoned because the client went away.
	if !warm && s.cfg.ColdLatency > 0 {
		time.Sleep(s.cfg.ColdLatency)
	}
	ttl := defaultTTL
	if req.TTLSeconds > 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	deadline := time.Now().Add(ttl).UTC().Truncate(time.Millisecond)
	row, err := s.ix.insert(key, deadline, req.ClaimRef)
	if err != nil {
		s.counters.inc(counterClaimError)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.counters.inc(counterClaimOK)
	annotate(r, slog.String("id", row.sb.ID), slog.Bool("warm", warm))
	writeJSON(w, http.StatusOK, pool.ClaimResponse{
		ID: row.sb.ID, Token: row.sb.Token, Deadline: row.sb.Deadline, OwnerAddr: row.ownerAddr,
	})
}

// decodeClaim validates the body; a non-empty message is the 400's text.
func decodeClaim(r *http.Request) (pool.ClaimRequest, string) {
	var req pool.ClaimRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, claimBodyLimit+1))
	switch {
	case err != nil:
		return req, "read body: " + err.Error()
	case len(body) > claimBodyLimit:
		return req, "body too large"
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, "bad body: " + err.Error()
	}
	switch {
	case req.Template == "":
		return req, "template is required"
	case req.TTLSeconds < 0:
		return req, "ttl_seconds must be >= 0"
	case req.TTLSeconds > maxTTLSeconds:
		return req, "ttl_seconds too large"
	}
	return req, ""
}

func (s *Server) latency() time.Duration {
	d := time.Duration(s.claimLatency.Load())
	if j := s.cfg.ClaimJitter; j > 0 {
		d += rand.N(j)
	}
	return d
}

func (s *Server) capacityMiss(w http.ResponseWriter, req pool.ClaimRequest) {
	s.counters.inc(counterClaimCapacity)
	if *s.capacity.Load() == CapacityRedirect && !req.NoRedirect {
		writeJSON(w, http.StatusOK, pool.ClaimResponse{Redirect: s.cfg.Redirect})
		return
	}
	writeError(w, http.StatusTooManyRequests, "node at max_claims")
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	id := r.PathValue("id")
	isRoot := s.roleOf(tok) == roleRoot
	switch s.ix.release(id, func(sandboxToken string) bool { return isRoot || tokenEqual(tok, sandboxToken) }) {
	case notFound:
		s.counters.inc(counterReleaseNotFound)
		writeError(w, http.StatusNotFound, "unknown sandbox "+id)
	case forbidden:
		writeError(w, http.StatusUnauthorized, "token does not own sandbox "+id)
	default:
		s.counters.inc(counterReleaseOK)
		annotate(r, slog.String("id", id))
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	if s.roleOf(bearer(r)) == roleNone {
		writeError(w, http.StatusUnauthorized, "bad token")
		return
	}
	writeJSON(w, http.StatusOK, pool.SandboxList{Sandboxes: s.ix.list(r.URL.Query().Get("claim_ref"))})
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	who := s.roleOf(bearer(r))
	if who == roleNone {
		writeError(w, http.StatusUnauthorized, "bad token")
		return
	}
	id := r.PathValue("id")
	row, ok := s.ix.get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown sandbox "+id)
		return
	}
	if who == roleRoot {
		// The address lets a claim whose response was lost be adopted as is.
		row.sb.OwnerAddr = row.ownerAddr
	} else {
		row.sb.Token = "" // the credential is for the api_token only (DESIGN §7)
	}
	writeJSON(w, http.StatusOK, row.sb)
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	if s.roleOf(bearer(r)) == roleNone {
		writeError(w, http.StatusUnauthorized, "bad token")
		return
	}
	pools, claimed := s.ix.info()
	writeJSON(w, http.StatusOK, pool.Info{Pools: pools, Claimed: claimed, Counters: s.Counters()})
}

// sleepCtx sleeps d or until ctx ends; false means ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
