package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// askedSampler records no span, as the daemon's provider does when no
// span is exported, and remembers the name of each span it was asked
// about: each one the engine started.
type askedSampler struct {
	mu    sync.Mutex
	names []string
}

func (s *askedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	s.names = append(s.names, p.Name)
	s.mu.Unlock()
	return sdktrace.NeverSample().ShouldSample(p)
}

func (s *askedSampler) Description() string { return "askedSampler" }

func (s *askedSampler) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names)
}

// A claim whose trace is not recorded still starts the spans that carry
// its ids to sandboxd and into its log lines (the transaction, the
// reconcile), but not the queue wait, which would be ids, options and a
// read of the queue's length per claim that nothing shows.
func TestAnUnrecordedClaimStartsNoQueueWaitSpan(t *testing.T) {
	s := &askedSampler{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	r := newRig(t, sim.Config{}, nil)
	create(t, r.eng, intent("ns/unrecorded", "uid-unrecorded", ""))
	r.rep.running(t, "uid-unrecorded")

	names := s.started()
	for _, want := range []string{"claim.transaction", "claim.reconcile"} {
		if !slices.Contains(names, want) {
			t.Errorf("the claim of ns/unrecorded started no %s span; started %v", want, names)
		}
	}
	if slices.Contains(names, "queue.wait") {
		t.Errorf("the unrecorded claim of ns/unrecorded started a queue.wait span; started %v", names)
	}
}
