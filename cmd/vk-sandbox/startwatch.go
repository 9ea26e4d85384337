package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// notReadyWarnEvery is how often a node that is not Ready yet says so.
const notReadyWarnEvery = 15 * time.Second

// warnUntilReady logs at warn, every notReadyWarnEvery until the node is
// Ready, what it still waits for: the node registers only once the
// apiserver has answered its Pod list, so a wrong or unreachable apiserver
// otherwise shows as silence.
func warnUntilReady(ctx context.Context, ready <-chan struct{}, checks func() []kube.Check, apiserver string, log *slog.Logger) {
	start := time.Now()
	t := time.NewTicker(notReadyWarnEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ready:
			return
		case <-t.C:
		}
		var waiting []string
		for _, c := range checks() {
			if c.Err != nil {
				waiting = append(waiting, c.Name+": "+c.Err.Error())
			}
		}
		log.Warn("the virtual node is not ready yet", "waited", time.Since(start).Round(time.Second),
			"apiserver", apiserver, "checks", strings.Join(waiting, "; "))
	}
}
