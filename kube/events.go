package kube

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// QuietRecorder drops virtual-kubelet's Normal "ProviderCreateSuccess"
// Event: CreatePod only queues the claim, so that Event says nothing, and
// SandboxClaimed follows with the facts. In a 1,000-Pod burst the two
// together overflowed client-go's 1,000-event broadcaster queue, and about
// 800 Events were dropped. Warnings always pass.
func QuietRecorder(r record.EventRecorder) record.EventRecorder { return quiet{r} }

type quiet struct{ record.EventRecorder }

const vkCreateSuccess = "ProviderCreateSuccess"

func (q quiet) Event(o runtime.Object, typ, reason, msg string) {
	if reason != vkCreateSuccess {
		q.EventRecorder.Event(o, typ, reason, msg)
	}
}

func (q quiet) Eventf(o runtime.Object, typ, reason, f string, a ...any) {
	if reason != vkCreateSuccess {
		q.EventRecorder.Eventf(o, typ, reason, f, a...)
	}
}

func (q quiet) AnnotatedEventf(o runtime.Object, ann map[string]string, typ, reason, f string, a ...any) {
	if reason != vkCreateSuccess {
		q.EventRecorder.AnnotatedEventf(o, ann, typ, reason, f, a...)
	}
}
