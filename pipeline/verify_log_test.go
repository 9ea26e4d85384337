package pipeline_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// While sandboxd cannot list, startup verification retries every second or
// two; an operator is warned once (a minute apart), not on every retry,
// and told when the node answers again.
func TestAVerificationOutageIsWarnedOnceNotOnEveryRetry(t *testing.T) {
	env := newSim(t, sim.Config{})
	now := time.Now().UTC().Truncate(time.Second)
	path := previousStateFile(t, map[string]store.Claim{"ns/x": {ID: "sb_00000000000000x1", Token: "tok-x-0000", PodUID: "uid-x", ClaimedAt: now, Deadline: now.Add(time.Hour)}})
	env.sim.InjectFault(sim.Fault{Verb: pool.VerbList, Mode: "500"})
	var logs testkit.Buffer
	cfg := testConfig(env.root, openStore(t, path, true), newReporter())
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.VerifyInterval = 10 * time.Millisecond
	e, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)

	const failed = "startup verification: sandboxd listing failed"
	testkit.WaitFor(t, waitTimeout, "ten failed verification listings", func() bool {
		return strings.Count(logs.String(), failed) >= 10
	})
	var warns int
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, failed) && strings.Contains(line, "level=WARN") {
			warns++
		}
	}
	if warns != 1 {
		t.Fatalf("%d warnings over ten failed listings, want 1:\n%s", warns, logs.String())
	}
	env.sim.ClearFaults()
	testkit.WaitFor(t, waitTimeout, "startup verification done", func() bool {
		select {
		case <-e.Verified():
			return true
		default:
			return false
		}
	})
	if !strings.Contains(logs.String(), "startup verification: sandboxd listed the node again") {
		t.Fatalf("no line saying sandboxd answered again:\n%s", logs.String())
	}
}
