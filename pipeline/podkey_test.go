package pipeline_test

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// PodKey.Split inverts JoinKey, and a string that is no Pod key says so.
func TestPodKeySplitInvertsJoinKey(t *testing.T) {
	ns, name, ok := pipeline.JoinKey("team-a", "sandbox-0").Split()
	if !ok || ns != "team-a" || name != "sandbox-0" {
		t.Fatalf("JoinKey(...).Split() = %q, %q, %v; want team-a, sandbox-0, true", ns, name, ok)
	}
	if _, _, ok := pipeline.PodKey("no-slash").Split(); ok {
		t.Fatal(`PodKey("no-slash").Split() reported a Pod key`)
	}
}
