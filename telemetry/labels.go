package telemetry

import (
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Label handling for Metrics: every label set a hot path needs is built
// once and reused, because building one (sort, dedup, hash) costs more than
// the measurement itself. See BenchmarkClaimMetrics.

// restKey keys client-go's REST metrics' label sets; code is empty on the
// latency histograms, which carry none.
type restKey struct{ code, verb, host string }

// verbCode keys the sandboxd request counter's {verb, code} label set.
type verbCode struct {
	verb string
	code int
}

// Label sets whose values are fixed at compile time.
var (
	resultOK     = metric.WithAttributes(attribute.String("result", "ok"))
	resultFailed = metric.WithAttributes(attribute.String("result", "failed"))
	watchResumed = metric.WithAttributes(attribute.String("result", "resumed"))
	watchHanded  = metric.WithAttributes(attribute.String("result", "handed_back"))
	stateHeld    = metric.WithAttributes(attribute.String("state", "held"))
	stateQuar    = metric.WithAttributes(attribute.String("state", "quarantined"))
	stateTent    = metric.WithAttributes(attribute.String("state", "tentative"))
	// The kinds of vksandbox_kubelet_sessions: RegisterSessions's two counts.
	sessionExec    = metric.WithAttributes(attribute.String("kind", "exec"))
	sessionForward = metric.WithAttributes(attribute.String("kind", "port_forward"))
)

// attrCache memoises the measurement option of one label combination, so a
// hot-path record does not build, sort and allocate an attribute set each
// time. Label values come from small fixed sets; should a caller leak
// free-form values anyway, the cache stops growing at attrCacheMax and the
// overflow is built per call (the SDK's own cardinality limit still
// applies to the series).
type attrCache[K comparable] struct {
	mu sync.RWMutex
	m  map[K]metric.MeasurementOption
}

const attrCacheMax = 512

// get returns the cached option for k, building it with mk on a miss. mk
// takes k rather than capturing it, so the hit path allocates nothing.
func (c *attrCache[K]) get(k K, mk func(K) attribute.Set) metric.MeasurementOption {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(mk(k))
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[K]metric.MeasurementOption)
	}
	if len(c.m) < attrCacheMax {
		c.m[k] = o
	}
	c.mu.Unlock()
	return o
}

func outcomeSet(o string) attribute.Set { return attribute.NewSet(attribute.String("outcome", o)) }
func verbSet(v string) attribute.Set    { return attribute.NewSet(attribute.String("verb", v)) }
func requestSet(k verbCode) attribute.Set {
	return attribute.NewSet(attribute.String("verb", k.verb), attribute.String("code", strconv.Itoa(k.code)))
}
func reasonSet(r string) attribute.Set { return attribute.NewSet(attribute.String("reason", r)) }
func loopSet(l string) attribute.Set   { return attribute.NewSet(attribute.String("loop", l)) }
func restLatencySet(k restKey) attribute.Set {
	return attribute.NewSet(attribute.String("verb", k.verb), attribute.String("host", k.host))
}
func restResultSet(k restKey) attribute.Set {
	return attribute.NewSet(attribute.String("code", k.code), attribute.String("method", k.verb), attribute.String("host", k.host))
}
func decisionSet(k [2]string) attribute.Set {
	return attribute.NewSet(attribute.String("kind", k[0]), attribute.String("reason", k[1]))
}

func refusalSet(k [2]string) attribute.Set {
	return attribute.NewSet(attribute.String("kind", k[0]), attribute.String("cap", k[1]))
}

func result(ok bool) metric.MeasurementOption {
	if ok {
		return resultOK
	}
	return resultFailed
}
