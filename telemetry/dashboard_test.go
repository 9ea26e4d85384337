package telemetry

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The shipped Grafana dashboard queries only what the product exposes.
// The exposed set is not a list kept by hand: one of every instrument is
// recorded (every outcome and decision kind too) through the real
// Prometheus exporter and scraped, and the dashboard's PromQL is checked
// against that scrape: every vksandbox_* and rest_client_* series name it
// uses exists, every
// "by (...)" label exists (or is made by label_replace), every label
// matcher value is one the product emits, and every exposed metric family
// appears on some panel.
func TestDashboardQueriesOnlyExposedSeries(t *testing.T) {
	raw, err := os.ReadFile("dashboards/vk-sandbox.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboards/vk-sandbox.json is not valid JSON: %v", err)
	}
	if dash.SchemaVersion < 36 || dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard header: schemaVersion %d, uid %q, title %q", dash.SchemaVersion, dash.UID, dash.Title)
	}
	// Datasources are template variables, so the file works as is when
	// imported in the UI, posted to the API or provisioned from disk, and
	// the datasource can be switched on the dashboard.
	for name, plugin := range map[string]string{"prometheus": "prometheus", "jaeger": "jaeger"} {
		if v := dash.variable(name); v == nil || v.Type != "datasource" || v.Query != plugin {
			t.Errorf("want a datasource variable %q of plugin %q, got %+v", name, plugin, v)
		}
	}

	exposed := scrapeEveryInstrument(t)
	used := map[string]bool{}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		if v.Datasource.UID != promDS {
			t.Errorf("variable %q uses datasource %q, want %s", v.Name, v.Datasource.UID, promDS)
		}
		checkExpr(t, "variable "+v.Name, v.Definition, exposed, used)
	}
	ids := map[int]bool{}
	var traceSearch bool
	for _, p := range dash.flatPanels() {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		for _, tg := range p.Targets {
			ds := tg.Datasource.UID
			if ds == "" {
				ds = p.Datasource.UID
			}
			switch ds {
			case jaegerDS:
				if tg.QueryType == "search" && tg.Service == "$service" {
					traceSearch = true
				}
				continue
			case promDS:
			default:
				t.Errorf("panel %q query %s uses datasource %q, want %s or %s", p.Title, tg.RefID, ds, promDS, jaegerDS)
				continue
			}
			if tg.Expr == "" {
				t.Errorf("panel %q query %s has no expr", p.Title, tg.RefID)
			}
			checkExpr(t, p.Title, tg.Expr, exposed, used)
		}
	}
	if !traceSearch {
		t.Error("no Jaeger trace search panel for $service")
	}
	if v := dash.variable("service"); v == nil || v.Query != defaultServiceName {
		t.Errorf("the service variable should default to %q (the resource service.name): %+v", defaultServiceName, v)
	}
	for fam := range exposed.families() {
		if !used[fam] {
			t.Errorf("metric family %s is exposed but on no panel", fam)
		}
	}
}

// The datasource variables, as panels reference them.
const (
	promDS   = "${prometheus}"
	jaegerDS = "${jaeger}"
)

var (
	seriesRe  = regexp.MustCompile(`\b(?:vksandbox|rest_client)_[a-z0-9_]+`)
	byRe      = regexp.MustCompile(`\bby \(([^)]*)\)`)
	matcherRe = regexp.MustCompile(`([a-z_]+)(=~|!~|!=|=)"([^"]*)"`)
	replaceRe = regexp.MustCompile(`label_replace\(.*?, "([a-z_]+)",`)
)

func checkExpr(t *testing.T, panel, expr string, exposed scrapeSet, used map[string]bool) {
	t.Helper()
	names := seriesRe.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("panel %q: %q names no vksandbox or rest_client series", panel, expr)
	}
	labels := map[string]bool{"le": true}
	for _, n := range names {
		s, ok := exposed[n]
		if !ok {
			t.Errorf("panel %q uses %s, which the binary does not expose", panel, n)
			continue
		}
		used[familyOf(n)] = true
		for l := range s {
			labels[l] = true
		}
	}
	for _, m := range replaceRe.FindAllStringSubmatch(expr, -1) {
		labels[m[1]] = true
	}
	for _, m := range byRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); !labels[l] {
				t.Errorf("panel %q groups by %q, which %v do not carry", panel, l, names)
			}
		}
	}
	for _, m := range matcherRe.FindAllStringSubmatch(expr, -1) {
		label, op, val := m[1], m[2], m[3]
		if label == "instance" || !labels[label] {
			continue // instance is added by the scraper; label_replace args are not matchers
		}
		if op == "!~" || op == "!=" {
			continue
		}
		for _, alt := range strings.Split(val, "|") {
			if !exposed.hasValue(names, label, alt) {
				t.Errorf("panel %q matches %s=%q, a value %v never carry", panel, label, alt, names)
			}
		}
	}
}

// scrapeEveryInstrument records one of each instrument (every outcome and
// decision kind) and returns the vksandbox_* series of one scrape.
func scrapeEveryInstrument(t *testing.T) scrapeSet {
	t.Helper()
	tel, _ := setupInMemory(t)
	m := tel.Metrics
	ctx := context.Background()
	// The vocabularies are the producer's (pipeline); telemetry records
	// whatever it is handed.
	for _, o := range pipeline.Outcomes() {
		m.ClaimLatency(ctx, o, time.Millisecond)
	}
	m.SandboxdRequest(ctx, "claim", 200, time.Millisecond)
	m.SandboxdRequest(ctx, "claim", 500, time.Millisecond)
	m.SandboxdRequest(ctx, "release", 0, time.Millisecond)
	m.StoreCommit(3, 512, 100*time.Microsecond)
	m.StoreCompaction(time.Second, true)
	m.StoreCompaction(time.Millisecond, false)
	for _, k := range pipeline.DecisionKinds() {
		m.Decision(ctx, k, "r")
	}
	for _, l := range []string{pipeline.LoopLeaseWatch, pipeline.LoopReauthorize, pipeline.LoopOrphanScan, pipeline.LoopVerify} {
		m.LoopPass(l, time.Millisecond)
	}
	m.OrphanVerdicts(1, 2, 3)
	m.PodWatchEnded(true)
	m.PodWatchEnded(false)
	m.OrphanScan(true)
	m.InventoryPublish(false)
	m.EventShed("SandboxClaimed")
	m.RegisterWorkers(8, 32)
	m.RegisterQueueDepth(func() []int { return []int{1, 0} })
	m.RegisterClaims(func() (int, int, int) { return 3, 1, 0 })
	m.RegisterSessions(func() (int, int) { return 2, 5 })
	m.RegisterExecBuffer(func() int64 { return 4096 })
	for _, kind := range []string{"exec", "port_forward"} {
		for _, limit := range []string{"pod", "node"} {
			m.SessionRefused(kind, limit)
		}
	}
	q := m.VKQueue("syncPodsFromKubernetes")
	q.Add(false)
	q.Add(true)
	q.Done(time.Millisecond)
	m.RegisterVKQueues(func() []QueueStat {
		return []QueueStat{{Name: "syncPodsFromKubernetes", Items: 1, Oldest: time.Second}}
	})
	m.MeterKubeClients()
	u := url.URL{Scheme: "https", Host: "apiserver:6443", Path: "/api/v1/pods"}
	restLatency{}.Observe(ctx, "GET", u, time.Millisecond)
	restLatency{rateLimiter: true}.Observe(ctx, "GET", u, time.Millisecond)
	restResult{}.Increment(ctx, "200", "GET", u.Host)

	code, body := get(t, tel.Handler(nil), "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	out := scrapeSet{}
	add := func(series string, m *dto.Metric, extra ...string) {
		if out[series] == nil {
			out[series] = map[string]map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			if out[series][l.GetName()] == nil {
				out[series][l.GetName()] = map[string]bool{}
			}
			out[series][l.GetName()][l.GetValue()] = true
		}
		for _, l := range extra {
			out[series][l] = map[string]bool{}
		}
	}
	for name, fam := range fams {
		if !seriesRe.MatchString(name) {
			continue
		}
		for _, m := range fam.GetMetric() {
			if fam.GetType() == dto.MetricType_HISTOGRAM {
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
				continue
			}
			add(name, m)
		}
	}
	if len(out) == 0 {
		t.Fatalf("scrape has no vksandbox_ or rest_client_ series:\n%s", body)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("exposed: %s", strings.Join(names, " "))
	return out
}

// scrapeSet: series name → label → values seen.
type scrapeSet map[string]map[string]map[string]bool

func (s scrapeSet) hasValue(names []string, label, val string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return s[n][label][val] })
}

func (s scrapeSet) families() map[string]bool {
	out := map[string]bool{}
	for n := range s {
		out[familyOf(n)] = true
	}
	return out
}

// familyOf strips the histogram sample suffixes.
func familyOf(n string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(n, suf); ok {
			return f
		}
	}
	return n
}

// dashboard is the part of the Grafana JSON model this test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"` // a string, or an object for query variables
			Definition string `json:"definition"`
			Datasource dsRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Datasource dsRef   `json:"datasource"`
	Panels     []panel `json:"panels"` // collapsed rows nest their panels
	Targets    []struct {
		RefID      string `json:"refId"`
		Datasource dsRef  `json:"datasource"`
		Expr       string `json:"expr"`
		QueryType  string `json:"queryType"`
		Service    string `json:"service"`
	} `json:"targets"`
}

type dsRef struct {
	UID string `json:"uid"`
}

func (d dashboard) flatPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// variableInfo is a template variable's type and, when it is a string,
// its query.
type variableInfo struct{ Type, Query string }

func (d dashboard) variable(name string) *variableInfo {
	for _, v := range d.Templating.List {
		if v.Name == name {
			q, _ := v.Query.(string)
			return &variableInfo{Type: v.Type, Query: q}
		}
	}
	return nil
}
