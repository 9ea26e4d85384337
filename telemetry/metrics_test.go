package telemetry

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exercise calls every Metrics method once; each call must move a series.
func exercise(ctx context.Context, m *Metrics, depth []int, held int) {
	m.ClaimLatency(ctx, "running", 3*time.Millisecond)
	m.SandboxdRequest(ctx, "claim", 429, 20*time.Millisecond)
	m.SandboxdObserver().Request("release", 200, time.Millisecond)
	m.StoreCommit(4, 512, 2*time.Millisecond)
	m.StoreObserver().Commit(2, 256, time.Millisecond)
	m.StoreObserver().Compact(100, 40*time.Millisecond, nil)
	m.StoreCompaction(time.Millisecond, false)
	m.Decision(ctx, "preserve", "no_authority")
	m.OrphanVerdicts(len(depth), held, 2*len(depth))
	m.OrphanScan(true)
	m.OrphanScan(false)
	m.PodWatchEnded(true)
	m.PodWatchEnded(true)
	m.PodWatchEnded(false)
	m.LoopPass("orphan-scan", 2*time.Millisecond)
	m.InventoryPublish(true)
	m.EventShed("SandboxClaimed")
	m.RegisterWorkers(len(depth), held)
	m.RegisterQueueDepth(func() []int { return depth })
	m.RegisterClaims(func() (int, int, int) { return held, 1, 2 })
	m.RegisterSessions(func() (int, int) { return held, 2 * held })
	m.RegisterExecBuffer(func() int64 { return int64(held) << 10 })
	m.SessionRefused("exec", "pod")
	m.SessionRefused("port_forward", "node")
}

func TestMetricsExposeEverySeriesAndValuesMove(t *testing.T) {
	tel, _ := setupInMemory(t)
	h := tel.Handler(nil)
	exercise(context.Background(), tel.Metrics, []int{5, 0, 7}, 3)
	_, before := get(t, h, "/metrics", "")
	exercise(context.Background(), tel.Metrics, []int{6, 1, 9, 2}, 4)
	_, after := get(t, h, "/metrics", "")

	// series -> expected delta between the two scrapes.
	want := map[string]float64{
		`vksandbox_claim_duration_seconds_count{outcome="running"}`:                1,
		`vksandbox_claim_duration_seconds_bucket{outcome="running",le="0.005"}`:    1,
		`vksandbox_sandboxd_requests_total{code="429",verb="claim"}`:               1,
		`vksandbox_sandboxd_requests_total{code="200",verb="release"}`:             1,
		`vksandbox_sandboxd_request_duration_seconds_count{verb="claim"}`:          1,
		`vksandbox_store_fsync_duration_seconds_count`:                             2,
		`vksandbox_store_commit_batch_size_sum`:                                    6,
		`vksandbox_store_commit_bytes_total`:                                       768,
		`vksandbox_store_compactions_total{result="ok"}`:                           1,
		`vksandbox_store_compactions_total{result="failed"}`:                       1,
		`vksandbox_store_compaction_duration_seconds_count`:                        2,
		`vksandbox_decisions_total{kind="preserve",reason="no_authority"}`:         1,
		`vksandbox_orphan_sandboxes`:                                               1, // 3 -> 4
		`vksandbox_orphan_claims`:                                                  1,
		`vksandbox_foreign_sandboxes`:                                              2, // 6 -> 8
		`vksandbox_pod_watch_ends_total{result="resumed"}`:                         2,
		`vksandbox_pod_watch_ends_total{result="handed_back"}`:                     1,
		`vksandbox_orphan_scans_total{result="ok"}`:                                1,
		`vksandbox_orphan_scans_total{result="failed"}`:                            1,
		`vksandbox_loop_pass_seconds_count{loop="orphan-scan"}`:                    1,
		`vksandbox_loop_pass_seconds_bucket{loop="orphan-scan",le="0.0025"}`:       1,
		`vksandbox_inventory_publishes_total{result="ok"}`:                         1,
		`vksandbox_events_shed_total{reason="SandboxClaimed"}`:                     1,
		`vksandbox_pipeline_shards`:                                                1,
		`vksandbox_pipeline_workers_per_shard`:                                     1,
		`vksandbox_queue_depth{shard="0"}`:                                         1,
		`vksandbox_queue_depth{shard="2"}`:                                         2,
		`vksandbox_claims{state="held"}`:                                           1,
		`vksandbox_claims{state="quarantined"}`:                                    0,
		`vksandbox_claims{state="tentative"}`:                                      0,
		`vksandbox_kubelet_sessions{kind="exec"}`:                                  1,
		`vksandbox_kubelet_sessions{kind="port_forward"}`:                          2,
		`vksandbox_exec_buffer_held_bytes`:                                         1024,
		`vksandbox_kubelet_session_refusals_total{cap="pod",kind="exec"}`:          1,
		`vksandbox_kubelet_session_refusals_total{cap="node",kind="port_forward"}`: 1,
	}
	for series, delta := range want {
		b, ok1 := sample(before, series)
		a, ok2 := sample(after, series)
		if !ok1 || !ok2 {
			t.Errorf("%s missing from /metrics (before %v, after %v)", series, ok1, ok2)
			continue
		}
		if a-b != delta {
			t.Errorf("%s moved %v -> %v, want delta %v", series, b, a, delta)
		}
	}
	if _, ok := sample(after, `vksandbox_queue_depth{shard="3"}`); !ok {
		t.Error("a shard added by re-registration is not reported")
	}
	for _, s := range []string{"go_goroutines", "process_open_fds", "target_info"} {
		if !strings.Contains(after, s) {
			t.Errorf("%s missing; Go/process collectors or resource not registered", s)
		}
	}
}

// A histogram bucket observed under a sampled span must carry that span's
// trace id as an OpenMetrics exemplar: that is the hop from a slow-claim
// panel to the trace that explains it.
func TestHistogramExemplarCarriesSampledTraceID(t *testing.T) {
	tel, _ := setupInMemory(t)
	ctx, span := tel.Tracer().Start(context.Background(), "claim")
	tel.Metrics.ClaimLatency(ctx, "adopted", 40*time.Millisecond)
	span.End()

	_, body := get(t, tel.Handler(nil), "/metrics", "application/openmetrics-text")
	re := regexp.MustCompile(`(?m)^vksandbox_claim_duration_seconds_bucket\{outcome="adopted",le="0.05"\} 1 # \{(.*)\} 0.04`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no exemplar on the 0.05 bucket in OpenMetrics output:\n%s", grepLines(body, "claim_duration"))
	}
	tid := span.SpanContext().TraceID().String()
	if !strings.Contains(m[1], `trace_id="`+tid+`"`) {
		t.Fatalf("exemplar labels %s lack trace_id %s", m[1], tid)
	}

	_, classic := get(t, tel.Handler(nil), "/metrics", "")
	if strings.Contains(classic, "trace_id") {
		t.Fatal("classic text format unexpectedly carries exemplars")
	}
}

func TestNilAndNopMetricsAreSafe(t *testing.T) {
	var nilMetrics *Metrics
	for _, m := range []*Metrics{nilMetrics, NewNopMetrics()} {
		exercise(context.Background(), m, []int{1}, 1)
	}
	// The zero adapters hold a nil *Metrics and must not panic either.
	SandboxdObserver{}.Request("claim", 200, time.Millisecond)
	StoreObserver{}.Commit(1, 1, time.Millisecond)
}

// Past the label-set cache's cap a combination is built per call; it must
// still be counted, under its own labels.
func TestDecisionsPastLabelCacheCapStillCount(t *testing.T) {
	tel, _ := setupInMemory(t)
	for i := range attrCacheMax + 10 {
		tel.Metrics.Decision(context.Background(), "release", "r"+strconv.Itoa(i))
	}
	tel.Metrics.Decision(context.Background(), "release", "r"+strconv.Itoa(attrCacheMax+5))
	_, body := get(t, tel.Handler(nil), "/metrics", "")
	if v, _ := sample(body, `vksandbox_decisions_total{kind="release",reason="r`+strconv.Itoa(attrCacheMax+5)+`"}`); v != 2 {
		t.Fatalf("uncached combination counted %v, want 2", v)
	}
	if v, _ := sample(body, `vksandbox_decisions_total{kind="release",reason="r0"}`); v != 1 {
		t.Fatalf("cached combination counted %v, want 1", v)
	}
}

// vksandbox_build_info says which build runs: always 1, labelled with the
// version, commit and Go version.
func TestBuildInfoIsExported(t *testing.T) {
	tel, _ := setupInMemory(t)
	tel.Metrics.RegisterBuildInfo("v1.2.3", "0123abc", "go1.26.8")
	_, body := get(t, tel.Handler(nil), "/metrics", "")
	want := `vksandbox_build_info{commit="0123abc",go_version="go1.26.8",version="v1.2.3"} 1`
	if got := grepLines(body, "vksandbox_build_info{"); !strings.Contains(got, want) {
		t.Fatalf("scrape has %q, want %q", got, want)
	}
}

// vksandbox_sandboxd_feature is 1 or 0 per detected feature.
func TestSandboxdFeaturesAreOneOrZero(t *testing.T) {
	tel, _ := setupInMemory(t)
	tel.Metrics.SandboxdFeatures(map[string]bool{"renew": true, "metadata": false})
	_, body := get(t, tel.Handler(nil), "/metrics", "")
	for _, want := range []string{`vksandbox_sandboxd_feature{feature="renew"} 1`, `vksandbox_sandboxd_feature{feature="metadata"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in:\n%s", want, grepLines(body, "vksandbox_sandboxd_feature"))
		}
	}
}
