package telemetry

import (
	"errors"
	"log/slog"
	"testing"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

func TestVirtualKubeletLinesReachOurLogger(t *testing.T) {
	buf := captureVKLog(t, slog.LevelInfo)
	vklog.L.WithField("pod", "ns/p").WithError(errors.New("boom")).Warnf("status update failed: %d", 409)
	vklog.L.Debug("below the level")
	logHas(t, buf.String(), []string{`"component":"virtual-kubelet"`, `"pod":"ns/p"`, `"error":"boom"`, "status update failed: 409"},
		"below the level")
}
