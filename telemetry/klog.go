package telemetry

import (
	"log/slog"

	"k8s.io/klog/v2"
)

// InstallKlog routes klog (client-go's reflectors and workqueues, the Event
// broadcaster) into l, so that every line of the process goes to one
// stream, in one format, filtered by one --log-level. klog's own verbosity
// stays at 0: its V(n) debug lines are not emitted.
func InstallKlog(l *slog.Logger) { klog.SetSlogLogger(l) }
