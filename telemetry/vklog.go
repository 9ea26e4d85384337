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
func InstallVirtualKubeletLogger(l *slog.Logger) { vklog.L = vkLogger{l: l} }

// vkLogger keeps fields unformatted until a line is actually emitted:
// virtual-kubelet adds fields on every sync, while at the usual log levels
// almost none of its lines is emitted, so formatting them eagerly would be
// CPU spent on every sync for nothing. Each WithField adds one link in front
// of the fields it was called on, instead of copying them all:
// virtual-kubelet adds a dozen per queue item.
type vkLogger struct {
	l      *slog.Logger
	fields *vkFields // newest first; nil: none
}

type vkFields struct {
	kv   []any // key, value pairs
	next *vkFields
}

func (v vkLogger) with(kv ...any) vkLogger {
	return vkLogger{l: v.l, fields: &vkFields{kv: kv, next: v.fields}}
}

func (v vkLogger) log(level slog.Level, msg func() string) {
	ctx := context.Background()
	if !v.l.Enabled(ctx, level) {
		return
	}
	var links []*vkFields
	for f := v.fields; f != nil; f = f.next {
		links = append(links, f)
	}
	attrs := []any{"component", "virtual-kubelet"}
	for i := len(links) - 1; i >= 0; i-- { // oldest first, as they were added
		kv := links[i].kv
		for j := 0; j+1 < len(kv); j += 2 {
			attrs = append(attrs, kv[j], fmt.Sprint(kv[j+1]))
		}
	}
	v.l.Log(ctx, level, msg(), attrs...)
}

func sprint(a []any) func() string { return func() string { return fmt.Sprint(a...) } }
func sprintf(f string, a []any) func() string {
	return func() string { return fmt.Sprintf(f, a...) }
}

func (v vkLogger) Debug(a ...any)            { v.log(slog.LevelDebug, sprint(a)) }
func (v vkLogger) Debugf(f string, a ...any) { v.log(slog.LevelDebug, sprintf(f, a)) }
func (v vkLogger) Info(a ...any)             { v.log(slog.LevelInfo, sprint(a)) }
func (v vkLogger) Infof(f string, a ...any)  { v.log(slog.LevelInfo, sprintf(f, a)) }
func (v vkLogger) Warn(a ...any)             { v.log(slog.LevelWarn, sprint(a)) }
func (v vkLogger) Warnf(f string, a ...any)  { v.log(slog.LevelWarn, sprintf(f, a)) }
func (v vkLogger) Error(a ...any)            { v.log(slog.LevelError, sprint(a)) }
func (v vkLogger) Errorf(f string, a ...any) { v.log(slog.LevelError, sprintf(f, a)) }
func (v vkLogger) Fatal(a ...any)            { v.log(slog.LevelError, sprint(a)); os.Exit(1) }
func (v vkLogger) Fatalf(f string, a ...any) { v.log(slog.LevelError, sprintf(f, a)); os.Exit(1) }

func (v vkLogger) WithField(k string, val any) vklog.Logger { return v.with(k, val) }
func (v vkLogger) WithError(err error) vklog.Logger         { return v.with("error", err) }
func (v vkLogger) WithFields(f vklog.Fields) vklog.Logger {
	kv := make([]any, 0, 2*len(f))
	for k, val := range f {
		kv = append(kv, k, val)
	}
	return v.with(kv...)
}
