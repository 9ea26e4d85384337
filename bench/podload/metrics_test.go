package podload

import "testing"

func TestParseMetricsSumDeltaTop(t *testing.T) {
	body := `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PUT"} 7
apiserver_request_total{code="200",resource="pods",subresource="",verb="LIST"} 2
apiserver_request_total{code="201",resource="pods",verb="POST"} 3
apiserver_longrunning_requests{resource="pods",verb="WATCH"} 4
process_cpu_seconds_total 1.5
`
	s, err := ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 5 {
		t.Fatalf("parsed %d samples, want 5: %+v", len(s), s)
	}
	by := Sum(s, "apiserver_request_total", func(l map[string]string) string { return l["verb"] + " " + Resource(l) })
	want := map[string]float64{"PUT pods/status": 7, "LIST pods": 2, "POST pods": 3}
	for k, v := range want {
		if by[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, by[k], v, by)
		}
	}
	d := Delta(map[string]float64{"PUT pods/status": 5, "LIST pods": 2}, by)
	if d["PUT pods/status"] != 2 || d["POST pods"] != 3 || len(d) != 2 {
		t.Errorf("delta = %v", d)
	}
	if got := Top(d, 1); got != "POST pods=3" {
		t.Errorf("Top = %q", got)
	}
}
