package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	helperPathEnv = "STORE_CRASH_HELPER_PATH"
	helperRunEnv  = "STORE_CRASH_HELPER_RUN"
	stormWorkers  = 8
	stormKeys     = 6 // per worker
)

// stormClaim is the claim the storm stores for value v, so the parent can
// check every field, not only presence.
func stormClaim(v string) Claim {
	at := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	return Claim{ID: v, Token: secretPrefix + v, Address: "10.0.0.1", PodUID: "uid-" + v,
		ClaimedAt: at, Deadline: at.Add(time.Hour), OwnerUID: "owner"}
}

// TestHelperCommitStorm is the child of TestCrashKeepsEveryAcknowledgedCommit:
// a commitStorm until the process is killed, its lines printed straight to
// the stdout pipe.
func TestHelperCommitStorm(t *testing.T) {
	path := os.Getenv(helperPathEnv)
	if path == "" {
		t.Skip("child process of TestCrashKeepsEveryAcknowledgedCommit")
	}
	var mu sync.Mutex
	emit := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	s, err := Open(path, Options{CompactMin: 64, Logger: quiet()}) // compact often: crash inside it too
	if err != nil {
		emit("OPENFAIL %v", err)
		os.Exit(3)
	}
	emit("READY")
	commitStorm(s, os.Getenv(helperRunEnv), emit, func(err error) {
		emit("ERR %v", err)
		os.Exit(4)
	})
	select {} // until SIGKILL
}

func TestCrashKeepsEveryAcknowledgedCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 20 child processes")
	}
	const runs = 20
	path := statePath(t)
	model := map[string]string{} // verified durable state: key -> value
	var tally stormTally
	for run := range runs {
		lines, err := runStorm(t, path, run, time.Duration(5+rand.IntN(76))*time.Millisecond)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		lg, logs := capture()
		s, err := Open(path, Options{Logger: lg})
		if err != nil {
			t.Fatalf("run %d: Open after SIGKILL failed: %v", run, err)
		}
		if strings.Contains(logs.String(), "torn tail") {
			tally.tornRecoveries++
		}
		model = checkStorm(t, run, model, lines, s, &tally)
		mustClose(t, s)
	}
	t.Logf("%d SIGKILLs: %d acknowledged puts and %d acknowledged deletes all kept; "+
		"in-flight ops at the kill: %d landed, %d did not; %d torn tails truncated; %d rows at the end",
		runs, tally.ackedPuts, tally.ackedDels, tally.inFlightLanded, tally.inFlightLost, tally.tornRecoveries, len(model))
	if tally.ackedPuts == 0 {
		t.Fatal("the children acknowledged nothing: the test proved nothing")
	}
}
