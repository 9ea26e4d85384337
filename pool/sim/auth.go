package sim

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
)

type role int

const (
	roleTenant role = iota + 1
	roleRoot
)

// caller is an authenticated request: root, or a tenant by name.
type caller struct {
	role   role
	tenant string // "" for root
}

func bearer(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

func tokenEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// authenticate tells root from tenants. The root token is checked first and
// without the tenant database, so that it keeps working while that is down;
// any other token then needs the database, and gets 503 without it.
func (s *Server) authenticate(r *http.Request) (caller, *httpError) {
	tok := bearer(r)
	switch {
	case tokenEqual(tok, s.cfg.RootToken):
		return caller{role: roleRoot}, nil
	case tok == "":
		return caller{}, &httpError{status: http.StatusUnauthorized, msg: "missing bearer token"}
	case s.tenantDBDown.Load():
		return caller{}, s.errTenantDB()
	}
	name, ok := s.tenants.lookup(tok)
	if !ok {
		return caller{}, &httpError{status: http.StatusUnauthorized, msg: "bad token"}
	}
	return caller{role: roleTenant, tenant: name}, nil
}

// authorizeRoot admits the root token to an operator surface. A tenant is
// authenticated but not authorized there: 403, not 401.
func (s *Server) authorizeRoot(r *http.Request) *httpError {
	c, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if c.role != roleRoot {
		return &httpError{status: http.StatusForbidden, msg: "operator endpoint: the api_token is required"}
	}
	return nil
}

func (s *Server) errTenantDB() *httpError {
	return &httpError{status: http.StatusServiceUnavailable, msg: "tenant database unavailable", retryAfter: s.cfg.TenantDBRetryAfter}
}

// tenantSet is the tenant database: token to tenant name. A map lookup is
// not constant-time, which only an emulator can afford.
type tenantSet struct {
	mu      sync.RWMutex
	byToken map[string]string
	tokens  map[string]int // tokens per tenant name
}

func newTenantSet(byToken map[string]string) *tenantSet {
	ts := &tenantSet{byToken: byToken, tokens: map[string]int{}}
	for _, name := range byToken {
		ts.tokens[name]++
	}
	return ts
}

func (ts *tenantSet) lookup(tok string) (string, bool) {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	name, ok := ts.byToken[tok]
	return name, ok
}

// exists reports whether a tenant still has a token: a claim made by a
// tenant that has none left belongs to a removed tenant.
func (ts *tenantSet) exists(name string) bool {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.tokens[name] > 0
}

func (ts *tenantSet) add(tok, name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old, ok := ts.byToken[tok]; ok {
		ts.tokens[old]--
		if ts.tokens[old] == 0 {
			delete(ts.tokens, old)
		}
	}
	ts.byToken[tok] = name
	ts.tokens[name]++
}

func (ts *tenantSet) remove(name string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tokens[name] == 0 {
		return false
	}
	for tok, n := range ts.byToken {
		if n == name {
			delete(ts.byToken, tok)
		}
	}
	delete(ts.tokens, name)
	return true
}
