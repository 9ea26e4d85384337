package telemetry

import (
	"log/slog"
	"time"

	"k8s.io/klog/v2"
)

// InstallKlog routes klog (client-go's reflectors and workqueues, the Event
// broadcaster) into l, so that every line of the process goes to one
// stream, in one format, filtered by one --log-level. klog's own verbosity
// stays at 0: its V(n) debug lines are not emitted.
//
// A failed request to the apiserver (a reflector's list that could not
// connect) is logged at warn once per distinct cause, with a count, and
// then at most once a minute per cause, sharing LogAPIServerFailures'
// table (see apiserverFailures): an unreachable apiserver is one fact, not
// a line per retry.
func InstallKlog(l *slog.Logger) {
	klog.SetSlogLogger(slog.New(newAPIServerFailures(l.Handler(), apiFailures, apiFailureWindow, time.Now)))
}
