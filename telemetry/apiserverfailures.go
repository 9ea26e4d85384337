package telemetry

import (
	"context"
	"log/slog"
	"regexp"
	"sync"
	"time"
)

// apiserverFailures is the slog handler under klog that folds apiserver
// connection failures. client-go reports each failed list or watch of a
// reflector at error level, with the url.Error in "err"
// (`failed to list *v1.Pod: Get "https://...?resourceVersion=0": dial tcp
// ...: connection refused`), once per retry. This handler logs the first
// failure of each cause (the text after the URL) at warn, with count 1;
// repeats within window are counted, not logged, and the first repeat after
// window is logged with the count since the last line. Other lines pass
// through unchanged.
type apiserverFailures struct {
	next   slog.Handler
	window time.Duration
	now    func() time.Time
	seen   *failureCounts // shared by every WithAttrs/WithGroup copy, and with the transport
}

type failureCounts struct {
	mu     sync.Mutex
	causes map[string]*failureCount
}

type failureCount struct {
	logged time.Time // when a line last went out
	count  int       // failures since that line, not logged
}

// maxCauses bounds the table: causes differ by address, so a roaming
// failure could otherwise grow it without end.
const maxCauses = 64

func newAPIServerFailures(next slog.Handler, seen *failureCounts, window time.Duration, now func() time.Time) slog.Handler {
	return apiserverFailures{next: next, window: window, now: now, seen: seen}
}

// urlError matches a Go url.Error ("Get "https://host/...": cause") inside
// an error's text; the cause is what follows the quoted URL.
var urlError = regexp.MustCompile(`(?:Get|Post|Put|Patch|Delete|Head) "https?://[^"]*": (.+)$`)

// ephemeralPort drops the local side of a connection from a cause
// ("read tcp 10.0.0.5:53422->10.0.0.1:6443: ...") so that each reconnect's
// new port is not a new cause.
var ephemeralPort = regexp.MustCompile(`\S+->`)

func failureCause(err string) string {
	m := urlError.FindStringSubmatch(err)
	if m == nil {
		return ""
	}
	return ephemeralPort.ReplaceAllString(m[1], "")
}

func (h apiserverFailures) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h apiserverFailures) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return h.next.Handle(ctx, r)
	}
	var cause string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			cause = failureCause(a.Value.String())
			return false
		}
		return true
	})
	if cause == "" {
		return h.next.Handle(ctx, r)
	}
	count, ok := h.seen.note(cause, h.now(), h.window)
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, slog.LevelWarn, "apiserver request failed: "+r.Message, r.PC)
	out.AddAttrs(slog.String("cause", cause), slog.Int("count", count))
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return h.next.Handle(ctx, out)
}

// note counts one failure of cause at now, and reports whether to log it
// and the count the line carries.
func (c *failureCounts) note(cause string, now time.Time, window time.Duration) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.causes[cause]
	if f == nil {
		if len(c.causes) >= maxCauses {
			clear(c.causes)
		}
		c.causes[cause] = &failureCount{logged: now}
		return 1, true
	}
	f.count++
	if now.Sub(f.logged) < window {
		return 0, false
	}
	n := f.count
	f.logged, f.count = now, 0
	return n, true
}

func (h apiserverFailures) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(attrs)
	return h
}

func (h apiserverFailures) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}
