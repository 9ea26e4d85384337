package vkcompat

// Event filters (docs/virtual-kubelet.md, 9 and 10).
//
// Behaviour: virtual-kubelet records a Normal "ProviderCreateSuccess" Event
// after every successful CreatePod (QuietRecorder). client-go's
// broadcaster, not virtual-kubelet, queues at most 1,000 Events and then
// drops new ones without a word (Budgeted).
// Pinned by: TestQuietRecorderDropsOnlyTheEmptyCreateSuccess,
// TestBudgetedShedsNormalEventsPastTheBudgetAndReportsEach,
// TestAnEventDroppedUpstreamSpendsNoBudget, and end to end (the node's
// wiring) TestEventsPastTheBudgetAreShedAndCounted and
// TestVirtualKubeletsEmptyCreateEventIsNotWritten.

import (
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// QuietRecorder drops virtual-kubelet's Normal "ProviderCreateSuccess"
// Event: CreatePod only queues the claim, so that Event says nothing, and
// SandboxClaimed follows with the facts. In a burst, two Normal Events per
// Pod outrun client-go's broadcaster, which queues at most 1,000 and then
// drops new Events without a word. Warnings always pass.
func QuietRecorder(r record.EventRecorder) record.EventRecorder {
	return Filtered(r, func(_, reason string) bool { return reason != vkCreateSuccess })
}

// Budgeted records Normal Events while budget allows and sheds the rest,
// passing each shed Event's reason to shed (a metric, a log line).
// Warnings always pass. It must wrap the broadcaster's recorder directly,
// so that an Event another filter drops never spends budget.
//
// Why a budget: client-go's broadcaster writes one Event at a time per
// node and queues the rest; once 1,000 wait it drops new ones without a
// word, so a burst larger than the queue loses Events unseen. Shedding
// here, at a rate the writer keeps up with (the kubelet's default is 50 per
// second, burst 100), makes every Event either written or counted.
func Budgeted(r record.EventRecorder, budget *rate.Limiter, shed func(reason string)) record.EventRecorder {
	return Filtered(r, func(typ, reason string) bool {
		if typ != corev1.EventTypeNormal || budget.Allow() {
			return true
		}
		shed(reason)
		return false
	})
}

// vkCreateSuccess is the reason virtual-kubelet's createOrUpdatePod gives
// the Event it records after a successful CreatePod.
const vkCreateSuccess = "ProviderCreateSuccess"

// Filtered records through r the Events for which pass holds and drops
// the others. The filters above are built on it, and so is any other
// filter in the chain, so that they compose.
func Filtered(r record.EventRecorder, pass func(typ, reason string) bool) record.EventRecorder {
	return filtered{r, pass}
}

type filtered struct {
	record.EventRecorder
	pass func(typ, reason string) bool
}

func (f filtered) Event(o runtime.Object, typ, reason, msg string) {
	if f.pass(typ, reason) {
		f.EventRecorder.Event(o, typ, reason, msg)
	}
}

func (f filtered) Eventf(o runtime.Object, typ, reason, format string, a ...any) {
	if f.pass(typ, reason) {
		f.EventRecorder.Eventf(o, typ, reason, format, a...)
	}
}

func (f filtered) AnnotatedEventf(o runtime.Object, ann map[string]string, typ, reason, format string, a ...any) {
	if f.pass(typ, reason) {
		f.EventRecorder.AnnotatedEventf(o, ann, typ, reason, format, a...)
	}
}
