package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Engine.Run/Shutdown: intake stops, every transaction already talking to
// sandboxd completes to Running and durable, queued intents that have not
// started are left alone (no claim), and shutdown never releases a VM.
func TestShutdownFinishesInFlightAndNeverReleases(t *testing.T) {
	const workers, pods = 4, 6
	r := newRig(t, sim.Config{ClaimLatency: 200 * time.Millisecond}, func(c *pipeline.Config) {
		c.Shards, c.Workers = 1, workers // all in one FIFO: the first 4 start
	})
	for i := range pods {
		create(t, r.eng, intent(fmt.Sprintf("ns/p%d", i), fmt.Sprintf("uid-%d", i), ""))
	}
	testkit.WaitFor(t, waitTimeout, "every worker to be inside a claim", func() bool { return r.env.count("claim") == workers })

	r.eng.Shutdown()

	if err := r.eng.Create(context.Background(), intent("ns/late", "uid-late", "")); !errors.Is(err, pipeline.ErrStopping) {
		t.Fatalf("Create after Shutdown = %v, want ErrStopping", err)
	}
	evs := r.rep.snapshot()
	started := 0
	for i := range pods {
		key, uid := fmt.Sprintf("ns/p%d", i), fmt.Sprintf("uid-%d", i)
		row, durable := r.store.Get(key)
		running := find(evs, "running", uid, "")
		switch {
		case durable && running >= 0 && evs[running].claim.ID == row.ID:
			started++
		case !durable && running < 0 && len(r.env.sandboxesFor(key)) == 0:
			// never started: no claim, nothing to report
		default:
			t.Errorf("%s: durable=%v running=%v sandboxes=%d: a transaction was cut short",
				key, durable, running >= 0, len(r.env.sandboxesFor(key)))
		}
	}
	if started != workers {
		t.Errorf("%d transactions completed, want the %d in flight", started, workers)
	}
	if got := r.env.count("claim"); got != workers {
		t.Errorf("claim requests = %d, want %d: a queued intent started after Shutdown", got, workers)
	}
	if got := r.env.count("release"); got != 0 {
		t.Errorf("release requests = %d, want 0: shutdown never releases", got)
	}
}

// A Pod deleted while its transaction is retrying is never claimed for
// again, and leaves no per-UID retry state behind (the rate limiter's
// failure count would otherwise grow by one UID per such Pod, forever).
func TestDeletedWhileRetryingLeavesNoRetryState(t *testing.T) {
	env := newSim(t, sim.Config{})
	g := &gatedSandboxd{Sandboxd: env.root, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	st := openStore(t, tempStorePath(t), false)
	rep := newReporter()
	e := startEngine(t, testConfig(g, st, rep))

	it := intent("ns/gone-soon", "uid-gone-soon", "")
	create(t, e, it)
	<-g.entered // the transaction holds the key lock, inside Claim
	deleted := make(chan error, 1)
	go func() {
		_, err := e.Delete(context.Background(), it.Ref, verdict(true, "bare-pod"))
		deleted <- err
	}()
	// Delete has dropped the intent and now waits for the key lock.
	testkit.WaitFor(t, waitTimeout, "Delete to cancel the intent", func() bool { return e.QueueDepths()[0]+e.QueueDepths()[1] == 0 })
	close(g.gate) // capacity miss: the transaction asks to be retried
	if err := <-deleted; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	rep.pending(t, it.Ref.UID, pipeline.ReasonCapacity, 1)
	testkit.WaitFor(t, waitTimeout, "the deleted UID's retry state to be forgotten", func() bool { return e.NumRequeues(it.Ref.UID) == 0 })
	select {
	case <-g.entered:
		t.Fatal("a deleted Pod was claimed for again")
	default:
	}
}

// blockingScan is an OrphanObserver whose first report blocks until
// released: an orphan scan caught in the middle of its cycle.
type blockingScan struct {
	entered, release chan struct{}
	once             sync.Once
}

func (b *blockingScan) OrphanVerdicts(int, int, int) {}

func (b *blockingScan) OrphanScan(bool) {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
}

// Run joins every loop it started before it returns, so that its caller
// may close the store then: a loop still running would write to a closed
// store. Here an orphan scan is held inside its cycle when Run's context
// ends, and Run must wait for it.
func TestRunReturnsOnlyOnceItsLoopsHaveEnded(t *testing.T) {
	env := newSim(t, sim.Config{})
	cfg := testConfig(env.root, openStore(t, tempStorePath(t), false), newReporter())
	scan := &blockingScan{entered: make(chan struct{}), release: make(chan struct{})}
	cfg.OrphanScanInterval, cfg.OrphanObserver = time.Millisecond, scan
	cfg.LeaseCheckInterval, cfg.ReauthorizeInterval = time.Millisecond, time.Millisecond
	e, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.Run(ctx) }()
	<-scan.entered
	cancel()
	// A negative can only be watched for a while: a Run that does not
	// join its loops returns within microseconds of the cancel.
	select {
	case <-ran:
		t.Fatal("Run returned while its orphan scan was still in its cycle")
	case <-time.After(300 * time.Millisecond):
	}
	close(scan.release)
	<-ran
}
