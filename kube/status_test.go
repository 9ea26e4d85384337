package kube

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Pod IP is the owner_addr host when that is an IP, else the node's
// fallback, and never an empty string or a hostname: the apiserver rejects
// a status whose podIP is not an IP.
func TestRunningPodIPIsAnIPOrAbsent(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	fallback := netip.MustParseAddr("192.0.2.10")
	for _, tc := range []struct {
		addr     string
		fallback netip.Addr
		want     string
	}{
		{"10.0.0.5:7777", fallback, "10.0.0.5"},
		{"https://10.0.0.6:8443", fallback, "10.0.0.6"},
		{"https://sbx.example:8443", fallback, "192.0.2.10"},
		{"sbx-node-3.example:7777", fallback, "192.0.2.10"},
		{"", fallback, "192.0.2.10"},
		{"sbx-node-3.example:7777", netip.Addr{}, ""},
		{"", netip.Addr{}, ""},
	} {
		c := pipeline.ClaimView{ID: "sb_1", Address: tc.addr, ClaimedAt: time.Unix(1700000000, 0).UTC()}
		st := runningStatus(pod, c, tc.fallback)
		if st.PodIP != tc.want || st.HostIP != tc.want {
			t.Errorf("owner_addr %q, fallback %v: podIP %q hostIP %q, want %q", tc.addr, tc.fallback, st.PodIP, st.HostIP, tc.want)
		}
		if tc.want == "" && (len(st.PodIPs) != 0 || len(st.HostIPs) != 0) {
			t.Errorf("owner_addr %q without fallback: podIPs %v hostIPs %v, want none", tc.addr, st.PodIPs, st.HostIPs)
		}
		if tc.want != "" && (len(st.PodIPs) != 1 || st.PodIPs[0].IP != tc.want) {
			t.Errorf("owner_addr %q: podIPs %v, want [%s]", tc.addr, st.PodIPs, tc.want)
		}
		if st.Phase != corev1.PodRunning {
			t.Errorf("owner_addr %q: phase %s, want Running", tc.addr, st.Phase)
		}
	}
}

func TestClaimAnnotationsShowTheGrantedDeadline(t *testing.T) {
	pod := &corev1.Pod{}
	dl := time.Date(2026, 12, 4, 16, 0, 0, 0, time.FixedZone("x", 3600))
	claimAnnotations(pod, pipeline.ClaimView{ID: "sb_9", Deadline: dl})
	if pod.Annotations[AnnClaimID] != "sb_9" || pod.Annotations[AnnDeadline] != "2026-12-04T15:00:00Z" {
		t.Fatalf("annotations = %v", pod.Annotations)
	}
	// No token can reach an annotation: a ClaimView holds none.
}
