package pipeline_test

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// SplitKey inverts JoinKey, and a string that is no Pod key says so.
func TestSplitKeyInvertsJoinKey(t *testing.T) {
	ns, name, ok := pipeline.SplitKey(pipeline.JoinKey("team-a", "sandbox-0"))
	if !ok || ns != "team-a" || name != "sandbox-0" {
		t.Fatalf("SplitKey(JoinKey) = %q, %q, %v; want team-a, sandbox-0, true", ns, name, ok)
	}
	if _, _, ok := pipeline.SplitKey("no-slash"); ok {
		t.Fatal(`SplitKey("no-slash") reported a Pod key`)
	}
}
