package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// InstallVirtualKubeletLogger routes virtual-kubelet's own log lines (pod
// status update failures, queue retries, ...) into slog, so operators see
// them in the same stream with the same trace ids. Without it they are
// discarded.
func InstallVirtualKubeletLogger(l *slog.Logger) { vklog.L = &vkLogger{l: l} }

// vkLogger keeps fields unformatted until a line is actually emitted:
// virtual-kubelet adds fields on every sync, while at the usual log levels
// almost none of its lines is emitted, so formatting them eagerly would be
// CPU spent on every sync for nothing. Each WithField is one allocation: a
// link in front of the fields it was called on, holding the new pair
// itself, instead of a copy of them all (virtual-kubelet adds a dozen per
// queue item, on every Pod's create and status write).
type vkLogger struct {
	l    *slog.Logger
	key  string // one field (WithField, WithError); "" when kv holds them
	val  any
	kv   vklog.Fields // several fields (WithFields); nil when key holds one
	next *vkLogger    // the fields this link was added to; nil at the root
}

func (v *vkLogger) log(level slog.Level, msg func() string) {
	ctx := context.Background()
	if !v.l.Enabled(ctx, level) {
		return
	}
	var links []*vkLogger
	for f := v; f.next != nil; f = f.next { // the root holds no field
		links = append(links, f)
	}
	attrs := []any{"component", "virtual-kubelet"}
	for i := len(links) - 1; i >= 0; i-- { // oldest first, as they were added
		f := links[i]
		if f.kv == nil {
			attrs = append(attrs, f.key, fmt.Sprint(f.val))
		}
		for k, val := range f.kv {
			attrs = append(attrs, k, fmt.Sprint(val))
		}
	}
	v.l.Log(ctx, level, msg(), attrs...)
}

func sprint(a []any) func() string { return func() string { return fmt.Sprint(a...) } }
func sprintf(f string, a []any) func() string {
	return func() string { return fmt.Sprintf(f, a...) }
}

func (v *vkLogger) Debug(a ...any)            { v.log(slog.LevelDebug, sprint(a)) }
func (v *vkLogger) Debugf(f string, a ...any) { v.log(slog.LevelDebug, sprintf(f, a)) }
func (v *vkLogger) Info(a ...any)             { v.log(slog.LevelInfo, sprint(a)) }
func (v *vkLogger) Infof(f string, a ...any)  { v.log(slog.LevelInfo, sprintf(f, a)) }
func (v *vkLogger) Warn(a ...any)             { v.log(slog.LevelWarn, sprint(a)) }
func (v *vkLogger) Warnf(f string, a ...any)  { v.log(slog.LevelWarn, sprintf(f, a)) }
func (v *vkLogger) Error(a ...any)            { v.log(slog.LevelError, sprint(a)) }
func (v *vkLogger) Errorf(f string, a ...any) { v.log(slog.LevelError, sprintf(f, a)) }
func (v *vkLogger) Fatal(a ...any)            { v.log(slog.LevelError, sprint(a)); os.Exit(1) }
func (v *vkLogger) Fatalf(f string, a ...any) { v.log(slog.LevelError, sprintf(f, a)); os.Exit(1) }

func (v *vkLogger) WithField(k string, val any) vklog.Logger {
	return &vkLogger{l: v.l, key: k, val: val, next: v}
}
func (v *vkLogger) WithError(err error) vklog.Logger { return v.WithField("error", err) }

// WithFields keeps f itself, not a copy: virtual-kubelet builds each
// Fields map for the one call and never touches it again.
func (v *vkLogger) WithFields(f vklog.Fields) vklog.Logger {
	if len(f) == 0 {
		return v
	}
	return &vkLogger{l: v.l, kv: f, next: v}
}
