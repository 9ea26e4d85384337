package telemetry

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

func TestVirtualKubeletLinesReachOurLogger(t *testing.T) {
	buf := captureVKLog(t, slog.LevelInfo)
	vklog.L.WithField("pod", "ns/p").WithError(errors.New("boom")).Warnf("status update failed: %d", 409)
	vklog.L.Debug("below the level")
	out := buf.String()
	for _, want := range []string{`"component":"virtual-kubelet"`, `"pod":"ns/p"`, `"error":"boom"`, "status update failed: 409"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in %s", want, out)
		}
	}
	if strings.Contains(out, "below the level") {
		t.Error("a debug line passed an info logger")
	}
}
