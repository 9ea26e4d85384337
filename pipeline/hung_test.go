package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// hungRelease holds every release of one sandbox id until the test ends:
// a sandboxd that hangs on one call.
type hungRelease struct {
	pipeline.Sandboxd
	id      string
	entered chan struct{}
	gate    chan struct{}
}

func (h *hungRelease) Release(ctx context.Context, id, tok string) error {
	if id == h.id {
		h.entered <- struct{}{}
		<-h.gate
	}
	return h.Sandboxd.Release(ctx, id, tok)
}

// A sandboxd call that hangs under one key stops nothing else: the lease
// watch passes over the busy key, and other Pods are claimed and released.
func TestHungCallUnderOneKeyStopsNoOtherWork(t *testing.T) {
	env := newSim(t, sim.Config{})
	rep := newReporter()
	hung := &hungRelease{Sandboxd: env.root, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	st := openStore(t, tempStorePath(t), false)
	cfg := testConfig(hung, st, rep)
	clk := driveLoops(&cfg, pipeline.LoopLeaseWatch)
	e := startEngine(t, cfg)
	create(t, e, intent("ns/hung", "uid-hung", ""))
	hung.id = rep.running(t, "uid-hung").claim.ID

	delDone := make(chan struct{})
	go func() {
		defer close(delDone)
		_, _ = e.Delete(context.Background(), pipeline.PodRef{Key: "ns/hung", UID: "uid-hung"}, verdict(true, "bare-pod"))
	}()
	<-hung.entered // the delete holds ns/hung, inside sandboxd
	defer func() { close(hung.gate); <-delDone }()

	// Every row is due. A pass that waits behind the hung call under
	// another key never ends, and passAt fails at its deadline.
	clk.passAt(t, pipeline.LoopLeaseWatch, time.Now().Add(48*time.Hour))
	for i, key := range []string{"ns/a", "ns/b", "ns/c", "ns/d"} {
		uid := "uid-other-" + string(rune('a'+i))
		create(t, e, intent(key, uid, ""))
		run := rep.running(t, uid)
		res, err := e.Delete(context.Background(), run.ref, verdict(true, "bare-pod"))
		if err != nil || !res.Held {
			t.Fatalf("delete of %s while ns/hung is stuck: %+v, %v", key, res, err)
		}
	}
}
