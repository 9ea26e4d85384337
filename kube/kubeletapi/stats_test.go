package kubeletapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The summary has every Running Pod: a measured VM's memory as the working
// set of the Pod and its first container, no memory for a VM sandboxd could
// not measure (never a zero), and no CPU anywhere, for want of a reading.
func TestStatsSummaryReportsMeasuredMemoryAndNoCPU(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot, func(o *Options) { o.NodeName = "vk-node" })
	it.sim.SetMemUsed(it.claim.ID, 100<<20)
	sleepy := it.another(t)
	it.addPod("sleepy", sleepy, corev1.PodRunning)
	it.sim.Hibernate(sleepy.ID)
	it.addPod("waiting", it.another(t), corev1.PodPending)

	sum, err := it.prov.GetStatsSummary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Node.NodeName != "vk-node" || len(sum.Pods) != 2 {
		t.Fatalf("summary: node %q, %d pods, want vk-node and the 2 Running ones", sum.Node.NodeName, len(sum.Pods))
	}
	box, sl := sum.Pods[0], sum.Pods[1]
	if box.PodRef.Name != "box" || box.PodRef.Namespace != "ns" || box.PodRef.UID != "uid-box" || sl.PodRef.Name != "sleepy" {
		t.Fatalf("pod refs %+v, %+v", box.PodRef, sl.PodRef)
	}
	if box.Memory == nil || *box.Memory.WorkingSetBytes != 100<<20 || *box.Memory.UsageBytes != 100<<20 || box.Memory.AvailableBytes == nil {
		t.Errorf("box memory %+v", box.Memory)
	}
	if len(box.Containers) != 2 || box.Containers[0].Name != "agent" || box.Containers[0].Memory == nil ||
		*box.Containers[0].Memory.WorkingSetBytes != 100<<20 || box.Containers[1].Memory != nil {
		t.Errorf("box containers %+v: the VM's memory belongs to the first container only", box.Containers)
	}
	if sl.Memory != nil || sl.Containers[0].Memory != nil {
		t.Errorf("hibernated VM reported memory %+v: it was not measured", sl.Memory)
	}
	for _, p := range sum.Pods {
		if p.CPU != nil || p.Containers[0].CPU != nil {
			t.Errorf("%s: CPU %+v reported without a reading", p.PodRef.Name, p.CPU)
		}
		if p.StartTime.IsZero() {
			t.Errorf("%s: no start time", p.PodRef.Name)
		}
	}
	again, _ := it.prov.GetStatsSummary(t.Context())
	if !again.Node.StartTime.Equal(&sum.Node.StartTime) {
		t.Errorf("node start time moved: %v then %v", sum.Node.StartTime, again.Node.StartTime)
	}
	if n := it.sim.Counters()["stats"]; n != 4 {
		t.Errorf("%d stats reads, want one per Running Pod per summary (4)", n)
	}
}

// With a tenant token sandboxd answers 403: Pods are reported without
// usage, and once the client has learnt it no summary asks again.
func TestStatsWithATenantTokenStopAsking(t *testing.T) {
	it := newInteractive(t, sim.Config{}, "node-tok-interactive-test")
	it.addPod("two", it.another(t), corev1.PodRunning)
	sum, err := it.prov.GetStatsSummary(t.Context())
	if err != nil || len(sum.Pods) != 2 || sum.Pods[0].Memory != nil || sum.Pods[1].Memory != nil {
		t.Fatalf("tenant summary: %v, %+v", err, sum)
	}
	first := it.sim.Counters()["stats"]
	if first < 1 || first > 2 || !it.sbx.Tenant() {
		t.Fatalf("%d stats reads, Tenant %v: want the 403 that taught the client", first, it.sbx.Tenant())
	}
	for range 3 {
		if _, err := it.prov.GetStatsSummary(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := it.prov.GetMetricsResource(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := it.sim.Counters()["stats"]; n != first {
		t.Errorf("%d stats reads after the 403, want %d: a tenant token is not asked again", n, first)
	}
}

// /metrics/resource carries the same memory in the kubelet's series, and
// no CPU series at all.
func TestMetricsResourceHasMemoryAndNoCPU(t *testing.T) {
	it := newInteractive(t, sim.Config{}, interactiveRoot)
	it.sim.SetMemUsed(it.claim.ID, 42<<20)
	fams, err := it.prov.GetMetricsResource(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for _, f := range fams {
		byName[f.GetName()] = len(f.Metric)
		switch f.GetName() {
		case "container_memory_working_set_bytes", "pod_memory_working_set_bytes":
			if len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 42<<20 || f.Metric[0].GetTimestampMs() == 0 {
				t.Errorf("%s: %v", f.GetName(), f.Metric)
			}
		case "scrape_error":
			if f.Metric[0].GetGauge().GetValue() != 0 {
				t.Errorf("scrape_error %v", f.Metric[0].GetGauge().GetValue())
			}
		}
	}
	if byName["container_start_time_seconds"] != 2 || byName["container_memory_working_set_bytes"] != 1 {
		t.Errorf("series %v: start time for both containers, memory for the first", byName)
	}
	for name := range byName {
		if name == "container_cpu_usage_seconds_total" || name == "pod_cpu_usage_seconds_total" {
			t.Errorf("%s is reported without a CPU reading", name)
		}
	}
	it.sim.InjectFault(sim.Fault{Verb: "stats", Mode: "500", Count: 1})
	fams, _ = it.prov.GetMetricsResource(t.Context())
	for _, f := range fams {
		if f.GetName() == "scrape_error" && f.Metric[0].GetGauge().GetValue() != 1 {
			t.Error("a failed stats read is not a scrape error")
		}
		if f.GetName() == "pod_memory_working_set_bytes" && len(f.Metric) != 0 {
			t.Error("a failed stats read still reported memory")
		}
	}
}
