package telemetry_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// client-go's lines (klog) come out as the process's own JSON lines, and
// below the level they are dropped.
func TestKlogLinesGoToTheSameStream(t *testing.T) {
	var buf bytes.Buffer
	telemetry.InstallKlog(telemetry.NewLogger(&buf, slog.LevelWarn, true))
	t.Cleanup(func() { klog.ClearLogger() })
	klog.InfoS("reflector list", "resource", "pods") // below warn: dropped
	klog.ErrorS(nil, "watch of pods ended", "resource", "pods")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("lines = %q, want exactly the error", lines)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not a JSON line: %q", lines[0])
	}
	if rec["msg"] != "watch of pods ended" || rec["resource"] != "pods" || rec["level"] != "ERROR" {
		t.Errorf("line = %v", rec)
	}
}
