package pipeline

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// A retried UID comes back after its backoff on Config.Clock, not on the
// wall clock: with a fake clock that never moves it stays held, and one
// step past the backoff hands it out again.
func TestAShardRetriesOnTheEnginesClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := newShard(0, 4, time.Millisecond, time.Minute, clk)
	defer s.q.ShutDown()

	testkit.WaitFor(t, 10*time.Second, "the workqueue's heartbeat ticker on the fake clock", func() bool { return clk.Waiters() >= 1 })
	s.q.AddRateLimited("uid-1")
	testkit.WaitFor(t, 10*time.Second, "the retry's timer on the fake clock", func() bool { return clk.Waiters() >= 2 })
	if n := s.q.Len(); n != 0 {
		t.Fatalf("the retried UID is ready before the fake clock moved (queue length %d): the workqueue reads the wall clock", n)
	}
	clk.Step(time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "the retried UID after one backoff of the fake clock", func() bool { return s.q.Len() == 1 })
}
