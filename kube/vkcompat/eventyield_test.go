package vkcompat

import (
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// chanSink records each write's reason on a channel.
type chanSink struct{ wrote chan string }

func newChanSink() *chanSink { return &chanSink{wrote: make(chan string, 8)} }

func (s *chanSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.wrote <- "create " + e.Reason
	return e, nil
}

func (s *chanSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.wrote <- "update " + e.Reason
	return e, nil
}

func (s *chanSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.wrote <- "patch " + e.Reason
	return e, nil
}

func (s *chanSink) none(t *testing.T, when string) {
	t.Helper()
	select {
	case w := <-s.wrote:
		t.Fatalf("%s: %q was written", when, w)
	default:
	}
}

func (s *chanSink) next(t *testing.T, want string) {
	t.Helper()
	select {
	case w := <-s.wrote:
		if w != want {
			t.Fatalf("wrote %q, want %q", w, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%q was never written", want)
	}
}

func event(typ, reason string, at time.Time) *corev1.Event {
	return &corev1.Event{Type: typ, Reason: reason, LastTimestamp: metav1.NewTime(at)}
}

// busyProbe is a busy function whose answer the test sets, and which
// reports each time it was asked, so the test knows the waiting write has
// looked again.
type busyProbe struct {
	busy  atomic.Bool
	asked chan struct{}
}

func newBusyProbe(busy bool) *busyProbe {
	p := &busyProbe{asked: make(chan struct{}, 64)}
	p.busy.Store(busy)
	return p
}

func (p *busyProbe) fn() bool {
	p.asked <- struct{}{}
	return p.busy.Load()
}

func (p *busyProbe) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-p.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Event never asked whether the node is busy")
	}
}

// A Normal Event is held while the node is busy, however many polls pass,
// and written at the first poll that finds the node idle.
func TestANormalEventWaitsWhileTheNodeIsBusy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	sink, probe := newChanSink(), newBusyProbe(true)
	y := NewYieldingSink(sink, 10*time.Second, clk, nil)
	y.SetBusy(probe.fn)

	go func() { _, _ = y.Create(event(corev1.EventTypeNormal, "SandboxClaimed", clk.Now())) }()
	probe.waitAsked(t)
	for range 3 {
		waitTicker(t, clk)
		sink.none(t, "while busy")
		clk.Step(yieldPoll)
		probe.waitAsked(t)
	}
	sink.none(t, "while busy")
	probe.busy.Store(false)
	waitTicker(t, clk)
	clk.Step(yieldPoll)
	probe.waitAsked(t)
	sink.next(t, "create SandboxClaimed")
}

// A node that stays busy holds an Event no longer than maxWait after it
// was recorded: Events recorded long ago go at once.
func TestANormalEventWaitsNoLongerThanMaxWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	sink, probe := newChanSink(), newBusyProbe(true)
	y := NewYieldingSink(sink, time.Second, clk, nil)
	y.SetBusy(probe.fn)

	go func() { _, _ = y.Patch(event(corev1.EventTypeNormal, "SandboxClaimed", clk.Now()), nil) }()
	probe.waitAsked(t)
	waitTicker(t, clk)
	clk.Step(time.Second - yieldPoll)
	probe.waitAsked(t)
	sink.none(t, "before maxWait")
	waitTicker(t, clk)
	clk.Step(yieldPoll)
	probe.waitAsked(t)
	sink.next(t, "patch SandboxClaimed")

	if _, err := y.Update(event(corev1.EventTypeNormal, "Old", clk.Now().Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	sink.next(t, "update Old")
}

// Warnings never wait, and nothing waits while the node is idle or before
// the node's busy function is set.
func TestWarningsAndAnIdleNodeAreWrittenAtOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	sink := newChanSink()
	y := NewYieldingSink(sink, time.Minute, clk, nil)
	if _, err := y.Create(event(corev1.EventTypeNormal, "BeforeSetBusy", clk.Now())); err != nil {
		t.Fatal(err)
	}
	sink.next(t, "create BeforeSetBusy")

	busy := newBusyProbe(true)
	y.SetBusy(busy.fn)
	if _, err := y.Create(event(corev1.EventTypeWarning, "SandboxCapacity", clk.Now())); err != nil {
		t.Fatal(err)
	}
	sink.next(t, "create SandboxCapacity")

	y.SetBusy(newBusyProbe(false).fn)
	if _, err := y.Create(event(corev1.EventTypeNormal, "SandboxClaimed", clk.Now())); err != nil {
		t.Fatal(err)
	}
	sink.next(t, "create SandboxClaimed")
}

// Stop releases a waiting Event at once, and later ones do not wait.
func TestStopEndsTheWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	sink, probe := newChanSink(), newBusyProbe(true)
	y := NewYieldingSink(sink, time.Hour, clk, nil)
	y.SetBusy(probe.fn)

	go func() { _, _ = y.Create(event(corev1.EventTypeNormal, "SandboxClaimed", clk.Now())) }()
	probe.waitAsked(t)
	waitTicker(t, clk)
	sink.none(t, "before Stop")
	y.Stop()
	sink.next(t, "create SandboxClaimed")
	if _, err := y.Create(event(corev1.EventTypeNormal, "SandboxReleased", clk.Now())); err != nil {
		t.Fatal(err)
	}
	sink.next(t, "create SandboxReleased")
}

// waitTicker waits until the waiting write's ticker is registered with the
// fake clock, so that a Step reaches it.
func waitTicker(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "the waiting Event's ticker", clk.HasWaiters)
}
