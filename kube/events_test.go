package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
)

func TestWarningsOnlyDropsEveryNormalEvent(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	r := WarningsOnly(vkcompat.QuietRecorder(fake))
	pod := &corev1.Pod{}
	r.Eventf(pod, corev1.EventTypeNormal, EventClaimed, "claimed VM %s", "sb_1")
	r.Event(pod, corev1.EventTypeNormal, eventReleased, "VM released")
	r.AnnotatedEventf(pod, nil, corev1.EventTypeNormal, eventRenewed, "renewed")
	r.Eventf(pod, corev1.EventTypeWarning, "SandboxCapacity", "node %s full", "n1")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0] != "Warning SandboxCapacity node n1 full" {
		t.Fatalf("events = %q", got)
	}
}
