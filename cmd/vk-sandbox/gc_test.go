package main

import (
	"testing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestGCIsSizedFromTheNodePodBudget: with neither GOGC nor GOMEMLIMIT
// set, the collector runs at GOGC=400 under a soft limit that grows with
// --node-pods.
func TestGCIsSizedFromTheNodePodBudget(t *testing.T) {
	percent, limit, ok := gcSettings(2000, env(nil))
	if !ok || percent != 400 {
		t.Fatalf("gcSettings(2000) = %d, %d, %v; want GOGC 400 set", percent, limit, ok)
	}
	if want := int64(128<<20 + 2000*128<<10); limit != want {
		t.Fatalf("limit at 2000 Pods = %d MiB, want %d MiB", limit>>20, want>>20)
	}
	_, bigger, _ := gcSettings(5000, env(nil))
	if bigger <= limit {
		t.Fatalf("the limit does not grow with the budget: %d MiB at 5000 Pods, %d MiB at 2000", bigger>>20, limit>>20)
	}
}

// TestGCLeftToTheOperatorsEnvironment: either variable set by the operator
// leaves both to the runtime.
func TestGCLeftToTheOperatorsEnvironment(t *testing.T) {
	for _, vars := range []map[string]string{{"GOGC": "100"}, {"GOMEMLIMIT": "512MiB"}, {"GOGC": "off", "GOMEMLIMIT": "1GiB"}} {
		if p, l, ok := gcSettings(2000, env(vars)); ok {
			t.Errorf("with %v the binary would set GOGC %d and GOMEMLIMIT %d", vars, p, l)
		}
	}
}
