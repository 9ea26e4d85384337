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

// bodyLimit caps every request body; a larger one is a bad body.
const bodyLimit = 1 << 20

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	who, herr := s.authenticate(r)
	if herr != nil {
		writeFailure(w, herr)
		return
	}
	req, herr := decodeClaim(r, s.api.Metadata)
	if herr != nil {
		writeFailure(w, herr)
		return
	}
	key := normalizeKey(pool.Key{Template: req.Template, Net: req.Net, Size: req.Size})
	// A peer's template is only a template on a meshed node; elsewhere it
	// is as unknown as any other.
	peerOwned := !s.ix.known(key) && s.peers[key.Template] && s.mesh.Load()
	if !s.ix.known(key) && !peerOwned {
		writeError(w, http.StatusBadRequest, "unknown pool "+key.Template+"/"+key.Net+"/"+key.Size)
		return
	}
	annotate(r, slog.String("claim_ref", req.ClaimRef))
	ttl := s.grant(req.TTLSeconds)

	// The claim runs on the request's context, as on real sandboxd: a
	// caller that goes away before the VM is made cancels it, and nothing
	// is left. A node behind a proxy that hides the disconnect finishes it.
	caller := r.Context()
	if s.cfg.FinishDetachedClaims {
		caller = context.Background()
	}
	if !s.spend(caller, s.latency()) || !s.awaitHold(caller) {
		s.counters.inc(counterClaimCancelled)
		return
	}
	if s.draining.Load() {
		s.counters.inc(counterClaimCapacity)
		writeError(w, http.StatusTooManyRequests, "node draining")
		return
	}
	redirect := s.mesh.Load() && !req.NoRedirect
	if peerOwned && redirect {
		s.redirect(w, r, "peer-template")
		return
	}
	lim := limits{
		maxClaims: int(s.maxClaims.Load()), tenantMax: s.cfg.TenantMaxClaims,
		redirectOnMiss: redirect,
	}
	if s.refuse(w, r, req, s.ix.admit(key, who.tenant, lim, false)) {
		return
	}
	if rand.Float64() < math.Float64frombits(s.failRate.Load()) {
		s.counters.inc(counterClaimError)
		writeError(w, http.StatusInternalServerError, "provisioning failed")
		return
	}
	adm := s.ix.admit(key, who.tenant, lim, true)
	if s.refuse(w, r, req, adm) { // lost a race for the last slot or warm VM
		return
	}
	// Admitted: the row appears only once the VM is made. A caller gone
	// meanwhile has the half-made VM destroyed: the warm VM it took is
	// spent, the slot given back.
	provision := s.cfg.ProvisionLatency
	if adm == admitCold && s.cfg.ColdLatency > 0 {
		provision += s.cfg.ColdLatency
	}
	if !s.spend(caller, provision) {
		s.ix.cancel(who.tenant)
		s.counters.inc(counterClaimCancelled)
		return
	}
	row, err := s.ix.insert(claimed{
		key: key, tenant: who.tenant, claimRef: req.ClaimRef, metadata: req.Metadata,
		deadline: s.deadline(time.Now().Add(ttl)),
	})
	if err != nil {
		s.counters.inc(counterClaimError)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.counters.inc(counterClaimOK)
	annotate(r, slog.String("id", row.sb.ID), slog.Bool("warm", adm == admitWarm))
	if rand.Float64() < math.Float64frombits(s.loseAnswer.Load()) {
		// Finalized, but the answer never leaves: the caller waits until it
		// gives up, and the VM exists without its caller having seen it.
		s.counters.inc(counterClaimAnswerLost)
		annotate(r, slog.Bool("answer_lost", true))
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	owner := s.ownerAddr
	if row.ownerAddr != "" {
		owner = row.ownerAddr
	}
	writeJSON(w, http.StatusOK, pool.ClaimResponse{
		ID: row.sb.ID, Token: row.sb.Token, Deadline: row.sb.Deadline, OwnerAddr: owner,
	})
}

// decodeClaim reads and validates the body. Without metadata (an API
// version before it) the labels are ignored, however malformed, and not
// kept.
func decodeClaim(r *http.Request, metadata bool) (pool.ClaimRequest, *httpError) {
	var req pool.ClaimRequest
	if err := decodeBody(r, &req, false); err != nil {
		return req, err
	}
	switch {
	case req.Template == "":
		return req, &httpError{status: http.StatusBadRequest, msg: "template is required"}
	case req.TTLSeconds < 0:
		return req, &httpError{status: http.StatusBadRequest, msg: "ttl_seconds must be >= 0"}
	}
	if !metadata {
		req.Metadata = nil
	}
	if err := pool.ValidateMetadata(req.Metadata); err != nil {
		return req, &httpError{status: http.StatusBadRequest, msg: err.Error()}
	}
	return req, nil
}

// decodeBody reads a JSON body of at most bodyLimit bytes into v. An empty
// body is allowed only where the call has defaults for every field.
func decodeBody(r *http.Request, v any, emptyOK bool) *httpError {
	body, err := io.ReadAll(io.LimitReader(r.Body, bodyLimit+1))
	switch {
	case err != nil || len(body) > bodyLimit:
		return errBadBody()
	case len(body) == 0 && emptyOK:
		return nil
	}
	if json.Unmarshal(body, v) != nil {
		return errBadBody()
	}
	return nil
}

// grant is the lease for a ttl_seconds ask (>= 0): 0 is DefaultTTL, and
// every lease is capped at MaxTTL rather than refused. The comparison is in
// whole seconds first, so that a huge ask cannot overflow a Duration.
func (s *Server) grant(secs int64) time.Duration {
	maxTTL := s.cfg.MaxTTL
	if secs == 0 {
		return min(s.cfg.DefaultTTL, maxTTL)
	}
	if secs > int64(maxTTL/time.Second) {
		return maxTTL
	}
	return min(time.Duration(secs)*time.Second, maxTTL)
}

// deadline is t as this API version writes a lease's end: V1 with
// nanosecond fractions, later versions in milliseconds.
func (s *Server) deadline(t time.Time) time.Time {
	if s.api.NanosecondDeadlines {
		return t.UTC()
	}
	return t.UTC().Truncate(time.Millisecond)
}

// spend waits d on behalf of a claim and reports whether its caller is
// still there. Close ends the wait at once with true: a claim still
// provisioning finishes rather than hold up the node's shutdown.
func (s *Server) spend(caller context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stop:
		case <-caller.Done():
		}
	}
	return caller.Err() == nil
}

// awaitHold waits out HoldNextClaims, if this claim is one of those held,
// and reports whether its caller is still there.
func (s *Server) awaitHold(caller context.Context) bool {
	hold := s.claimHold.Load()
	if hold == nil {
		return caller.Err() == nil
	}
	left := hold.left.Add(-1)
	if left <= 0 {
		s.claimHold.CompareAndSwap(hold, nil) // the last one it takes
	}
	if left < 0 {
		return caller.Err() == nil // raced past the last one
	}
	s.counters.inc(counterClaimHeld)
	select {
	case <-hold.ch:
	case <-s.stop:
	case <-caller.Done():
	}
	return caller.Err() == nil
}

func (s *Server) latency() time.Duration {
	d := time.Duration(s.claimLatency.Load())
	if j := s.cfg.ClaimJitter; j > 0 {
		d += rand.N(j)
	}
	return d
}

// refuse answers a claim admission turned down and reports whether it did.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, req pool.ClaimRequest, adm admission) bool {
	switch adm {
	case tenantFull:
		s.counters.inc(counterClaimCapacity)
		writeError(w, http.StatusTooManyRequests, "tenant at its cap")
	case nodeFull:
		s.counters.inc(counterClaimCapacity)
		if *s.capacity.Load() == CapacityRedirect && !req.NoRedirect {
			s.redirect(w, r, "max-claims")
		} else {
			writeError(w, http.StatusTooManyRequests, "node at max_claims")
		}
	case warmMiss:
		s.redirect(w, r, "warm-miss")
	default:
		return false
	}
	return true
}

// redirect sends the claim to the peers: 200 with no id. Like every 429,
// it carries no Retry-After.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, why string) {
	s.counters.inc(counterClaimRedirect)
	annotate(r, slog.String("redirect", why))
	writeJSON(w, http.StatusOK, pool.ClaimResponse{Redirect: s.cfg.Redirect})
}
