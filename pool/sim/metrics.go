package sim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Counter names beyond the per-verb request counts. Requests are counted
// when they arrive, whatever the answer (faults included); the _ok counters
// count only real successes, so "exactly N claims made" is claim_ok.
const (
	counterClaimOK         = "claim_ok"
	counterClaimCapacity   = "claim_capacity"
	counterClaimError      = "claim_error"
	counterClaimRedirect   = "claim_redirect"
	counterClaimCancelled  = "claim_cancelled"
	counterClaimAnswerLost = "claim_answer_lost"
	counterClaimHeld       = "claim_held" // a claim that waited on HoldNextClaims
	counterReleaseOK       = "release_ok"
	counterReleaseNotFound = "release_notfound"
	counterRenewOK         = "renew_ok"
	counterAgentKill       = "agent_kill" // a running guest process killed through silkd
	counterListFull        = "list_full"  // a listing answered with no filter applied
)

var counterNames = []string{
	pool.VerbClaim, counterClaimOK, counterClaimCapacity, counterClaimError, counterClaimRedirect,
	counterClaimCancelled, counterClaimAnswerLost, counterClaimHeld,
	pool.VerbRelease, counterReleaseOK, counterReleaseNotFound,
	verbRenew, counterRenewOK,
	pool.VerbList, counterListFull, pool.VerbGet, pool.VerbInfo, pool.VerbStats,
	pool.VerbExec, pool.VerbPorts, pool.VerbAgent, counterAgentKill,
}

// counterSet is a fixed set of atomic counters: the map is built once and
// only read afterwards, so increments take no lock.
type counterSet struct{ m map[string]*atomic.Int64 }

func newCounterSet() *counterSet {
	cs := &counterSet{m: make(map[string]*atomic.Int64, len(counterNames))}
	for _, n := range counterNames {
		cs.m[n] = new(atomic.Int64)
	}
	return cs
}

func (cs *counterSet) inc(name string) {
	if c := cs.m[name]; c != nil {
		c.Add(1)
	}
}

// Counters returns a snapshot of every counter: "claim", "claim_ok",
// "claim_capacity" (every 429 and every redirect of a node at MaxClaims),
// "claim_error", "claim_redirect" (every redirect answer),
// "claim_cancelled" (its caller went away before the VM was made: none
// was), "claim_answer_lost" (made and counted in claim_ok, but never
// answered: see Config.LoseAnswerRate), "claim_held" (claims that waited
// on HoldNextClaims), "release",
// "release_ok", "release_notfound" (unknown id or wrong token), "renew",
// "renew_ok", "list", "list_full" (listings answered with no filter: every
// listing of a server without ?claim_ref=, and every unfiltered one),
// "get", "info", "stats", "exec", "ports", "agent"
// (agent relay upgrades asked for) and "agent_kill" (running guest
// processes killed through silkd).
func (s *Server) Counters() map[string]int64 {
	out := make(map[string]int64, len(s.counters.m))
	for n, c := range s.counters.m {
		out[n] = c.Load()
	}
	return out
}

// handleMetrics writes Prometheus text format by hand: a dozen series do not
// justify a registry, and the output stays byte-stable for tests. It is an
// operator surface, root only, unless MetricsNoAuth opens it to scrapers.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.MetricsNoAuth {
		if herr := s.authorizeRoot(r); herr != nil {
			writeFailure(w, herr)
			return
		}
	}
	var b strings.Builder
	b.WriteString("# HELP sandboxd_sim_requests_total Requests and outcomes by counter name.\n")
	b.WriteString("# TYPE sandboxd_sim_requests_total counter\n")
	counts := s.Counters()
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "sandboxd_sim_requests_total{counter=%q} %d\n", n, counts[n])
	}
	st := s.ix.stats()
	pools := st.pools
	b.WriteString("# HELP sandboxd_sim_claimed Live claimed sandboxes.\n# TYPE sandboxd_sim_claimed gauge\n")
	fmt.Fprintf(&b, "sandboxd_sim_claimed %d\n", st.claimed)
	b.WriteString("# HELP sandboxd_sim_archived Archived sandboxes.\n# TYPE sandboxd_sim_archived gauge\n")
	fmt.Fprintf(&b, "sandboxd_sim_archived %d\n", st.archived)
	b.WriteString("# HELP sandboxd_sim_provisioning Admitted claims whose VM is not made yet.\n# TYPE sandboxd_sim_provisioning gauge\n")
	fmt.Fprintf(&b, "sandboxd_sim_provisioning %d\n", st.pending)
	b.WriteString("# HELP sandboxd_sim_pool_warm Warm VMs ready per pool.\n# TYPE sandboxd_sim_pool_warm gauge\n")
	for _, p := range pools {
		fmt.Fprintf(&b, "sandboxd_sim_pool_warm{%s} %d\n", keyLabels(p.Key), p.Warm)
	}
	b.WriteString("# HELP sandboxd_sim_pool_target Warm target per pool.\n# TYPE sandboxd_sim_pool_target gauge\n")
	for _, p := range pools {
		fmt.Fprintf(&b, "sandboxd_sim_pool_target{%s} %d\n", keyLabels(p.Key), p.Target)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

func keyLabels(k pool.Key) string {
	return fmt.Sprintf("template=%q,net=%q,size=%q", k.Template, k.Net, k.Size)
}

// traceLog keeps the most recent claim trace ids, bounded so that a long
// benchmark run does not grow it without limit.
type traceLog struct {
	mu  sync.Mutex
	ids []string
}

const maxTraceIDs = 10000

func (t *traceLog) add(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ids) >= maxTraceIDs {
		t.ids = slices.Delete(t.ids, 0, maxTraceIDs/2)
	}
	t.ids = append(t.ids, id)
}

func (t *traceLog) snapshot() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ids)
}
