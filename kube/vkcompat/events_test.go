package vkcompat

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

func TestQuietRecorderDropsOnlyTheEmptyCreateSuccess(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	r := QuietRecorder(fake)
	pod := &corev1.Pod{}
	r.Event(pod, corev1.EventTypeNormal, "ProviderCreateSuccess", "Create pod in provider successfully")
	r.Eventf(pod, corev1.EventTypeNormal, "SandboxClaimed", "claimed VM %s", "sb_1")
	r.Event(pod, corev1.EventTypeWarning, "ProviderCreateFailed", "boom")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	if len(got) != 2 || got[0] != "Normal SandboxClaimed claimed VM sb_1" || got[1] != "Warning ProviderCreateFailed boom" {
		t.Fatalf("events = %q", got)
	}
}

// The budget sheds only Normal Events, and only past its burst; every shed
// Event is reported with its reason. Warnings pass however many there are.
func TestBudgetedShedsNormalEventsPastTheBudgetAndReportsEach(t *testing.T) {
	fake := record.NewFakeRecorder(20)
	var shed []string
	budget := rate.NewLimiter(rate.Every(time.Hour), 2) // the burst only
	r := Budgeted(fake, budget, func(reason string) { shed = append(shed, reason) })
	pod := &corev1.Pod{}
	for i := range 3 {
		r.Eventf(pod, corev1.EventTypeNormal, "SandboxClaimed", "claimed VM sb_%d", i)
		r.Eventf(pod, corev1.EventTypeWarning, "SandboxCapacity", "full %d", i)
	}
	r.AnnotatedEventf(pod, nil, corev1.EventTypeNormal, "SandboxLeaseRenewed", "renewed")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal SandboxClaimed claimed VM sb_0", "Warning SandboxCapacity full 0",
		"Normal SandboxClaimed claimed VM sb_1", "Warning SandboxCapacity full 1",
		"Warning SandboxCapacity full 2",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	if strings.Join(shed, ",") != "SandboxClaimed,SandboxLeaseRenewed" {
		t.Fatalf("shed reported %q, want SandboxClaimed then SandboxLeaseRenewed", shed)
	}
}

// Wrapped as the binary wraps it, an Event another filter drops spends no
// budget.
func TestAnEventDroppedUpstreamSpendsNoBudget(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	budget := rate.NewLimiter(rate.Every(time.Hour), 1)
	r := QuietRecorder(Budgeted(fake, budget, func(string) { t.Error("an Event was shed") }))
	pod := &corev1.Pod{}
	r.Event(pod, corev1.EventTypeNormal, vkCreateSuccess, "Create pod in provider successfully")
	r.Eventf(pod, corev1.EventTypeNormal, "SandboxClaimed", "claimed VM %s", "sb_1")
	if len(fake.Events) != 1 {
		t.Fatalf("%d Events recorded, want SandboxClaimed alone", len(fake.Events))
	}
}
