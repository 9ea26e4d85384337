package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
)

// WarningsOnly drops every Normal Event (SandboxClaimed, SandboxReleased,
// ...) and passes Warnings: for a dense node whose operator would rather
// not spend an apiserver write per claim on facts the Pod's status already
// shows (--normal-events=false).
func WarningsOnly(r record.EventRecorder) record.EventRecorder {
	return vkcompat.Filtered(r, func(typ, _ string) bool { return typ != corev1.EventTypeNormal })
}
