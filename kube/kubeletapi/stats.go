package kubeletapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// statsConcurrency bounds the stats reads in flight for one summary: a
// dense node must not open a connection per Pod at once.
const statsConcurrency = 16

// usage is one Running sandbox Pod and what sandboxd measured of it (nil:
// nothing, because the token is a tenant's, the read failed, or the Pod
// has no durable claim of its own).
type usage struct {
	pod   *corev1.Pod
	stats *pool.Stats
}

// collect reads every Running Pod's sandbox stats, at most
// statsConcurrency at once. It needs the root token: once sandboxd has
// answered 403, the client reports Tenant and no more reads are made, in
// this round or any later one. failed reports whether a read failed for
// another reason.
func (a *API) collect(ctx context.Context) (out []usage, failed bool) {
	for _, pod := range a.pods.Pods() {
		if pod.Status.Phase == corev1.PodRunning {
			out = append(out, usage{pod: pod})
		}
	}
	slices.SortFunc(out, func(x, y usage) int { return strings.Compare(string(podKey(x.pod)), string(podKey(y.pod))) })
	if a.sandboxd == nil || a.sandboxd.Tenant() {
		return out, false
	}
	// Each read writes only its own index; out is not grown from here on.
	failures := make([]bool, len(out))
	var g errgroup.Group
	g.SetLimit(statsConcurrency)
	for i := range out {
		pod := out[i].pod
		id, _, ok := a.pods.Credential(podKey(pod), string(pod.UID))
		if !ok {
			continue
		}
		g.Go(func() error {
			if a.sandboxd.Tenant() || a.lacks(func(f pool.Features) bool { return f.Stats }) {
				return nil // no usage: the token or the node cannot read it
			}
			st, err := a.sandboxd.Stats(ctx, id)
			switch {
			case errors.Is(err, pool.ErrForbidden):
				a.tenantStats.Do(func() {
					a.log.WarnContext(ctx, "sandbox stats need sandboxd's root token; with this token Pods are reported without usage")
				})
			case err != nil:
				failures[i] = true
				a.log.DebugContext(ctx, "sandbox stats unavailable", "pod", podKey(pod), "sandbox", id, "error", err)
			default:
				out[i].stats = &st
			}
			return nil
		})
	}
	_ = g.Wait()
	return out, slices.Contains(failures, true)
}

// GetStatsSummary is the kubelet summary (/stats/summary). Each Running
// sandbox Pod is reported with its VM's memory as the working set, on the
// Pod and on its first container (the VM runs the Pod, whatever its
// containers, so splitting it would be invented). Memory sandboxd did not
// measure (a hibernated VM) is left out rather than reported as zero, and
// CPU is left out because sandboxd reports no CPU usage.
func (a *API) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	us, _ := a.collect(ctx)
	sum := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: a.nodeName, StartTime: metav1.NewTime(a.started)},
		Pods: make([]statsv1alpha1.PodStats, 0, len(us)),
	}
	for _, u := range us {
		start := podStart(u.pod)
		ps := statsv1alpha1.PodStats{
			PodRef:     statsv1alpha1.PodReference{Name: u.pod.Name, Namespace: u.pod.Namespace, UID: string(u.pod.UID)},
			StartTime:  start,
			Containers: make([]statsv1alpha1.ContainerStats, 0, len(u.pod.Spec.Containers)),
		}
		for _, c := range u.pod.Spec.Containers {
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: c.Name, StartTime: start})
		}
		if mem := memoryStats(u.stats); mem != nil {
			ps.Memory = mem
			if len(ps.Containers) > 0 {
				ctr := *mem
				ps.Containers[0].Memory = &ctr
			}
		}
		sum.Pods = append(sum.Pods, ps)
	}
	return sum, nil
}

func memoryStats(st *pool.Stats) *statsv1alpha1.MemoryStats {
	if st == nil || !st.MemUsedMeasured || st.MemUsedBytes < 0 {
		return nil
	}
	at := st.MeasuredAt
	if at.IsZero() {
		at = time.Now()
	}
	used := uint64(st.MemUsedBytes)
	mem := &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: &used, UsageBytes: proto.Uint64(used)}
	if st.MemTotalBytes > st.MemUsedBytes {
		mem.AvailableBytes = proto.Uint64(uint64(st.MemTotalBytes - st.MemUsedBytes))
	}
	return mem
}

func podKey(pod *corev1.Pod) pipeline.PodKey { return pipeline.JoinKey(pod.Namespace, pod.Name) }

func podStart(pod *corev1.Pod) metav1.Time {
	if pod.Status.StartTime != nil {
		return *pod.Status.StartTime
	}
	return pod.CreationTimestamp
}

// GetMetricsResource is /metrics/resource, what metrics-server scrapes:
// the same measurements as the summary, in the kubelet's series. There is
// no container_cpu_usage_seconds_total, for want of a CPU reading.
func (a *API) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	us, failed := a.collect(ctx)
	gauge := func(name, help string) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
	}
	start := gauge("container_start_time_seconds", "Start time of the container since unix epoch in seconds")
	ctrMem := gauge("container_memory_working_set_bytes", "Current working set of the container in bytes")
	podMem := gauge("pod_memory_working_set_bytes", "Current working set of the pod in bytes")
	scrapeErr := gauge("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise")
	for _, u := range us {
		podStartAt := podStart(u.pod)
		mem := memoryStats(u.stats)
		for i, c := range u.pod.Spec.Containers {
			labels := podLabels(u.pod, c.Name)
			start.Metric = append(start.Metric, &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(float64(podStartAt.Unix()))}})
			if mem != nil && i == 0 {
				ctrMem.Metric = append(ctrMem.Metric, sample(labels, *mem.WorkingSetBytes, mem.Time.Time))
			}
		}
		if mem != nil {
			podMem.Metric = append(podMem.Metric, sample(podLabels(u.pod, ""), *mem.WorkingSetBytes, mem.Time.Time))
		}
	}
	v := 0.0
	if failed {
		v = 1
	}
	scrapeErr.Metric = []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(v)}}}
	return []*dto.MetricFamily{start, ctrMem, podMem, scrapeErr}, nil
}

func podLabels(pod *corev1.Pod, container string) []*dto.LabelPair {
	var l []*dto.LabelPair
	if container != "" {
		l = append(l, &dto.LabelPair{Name: proto.String("container"), Value: proto.String(container)})
	}
	return append(l,
		&dto.LabelPair{Name: proto.String("namespace"), Value: proto.String(pod.Namespace)},
		&dto.LabelPair{Name: proto.String("pod"), Value: proto.String(pod.Name)})
}

func sample(labels []*dto.LabelPair, v uint64, at time.Time) *dto.Metric {
	return &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(float64(v))}, TimestampMs: proto.Int64(at.UnixMilli())}
}
