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

type vkLogger struct{ l *slog.Logger }

func (v vkLogger) log(level slog.Level, msg string) {
	v.l.Log(context.Background(), level, msg, "component", "virtual-kubelet")
}

func (v vkLogger) Debug(a ...any)            { v.log(slog.LevelDebug, fmt.Sprint(a...)) }
func (v vkLogger) Debugf(f string, a ...any) { v.log(slog.LevelDebug, fmt.Sprintf(f, a...)) }
func (v vkLogger) Info(a ...any)             { v.log(slog.LevelInfo, fmt.Sprint(a...)) }
func (v vkLogger) Infof(f string, a ...any)  { v.log(slog.LevelInfo, fmt.Sprintf(f, a...)) }
func (v vkLogger) Warn(a ...any)             { v.log(slog.LevelWarn, fmt.Sprint(a...)) }
func (v vkLogger) Warnf(f string, a ...any)  { v.log(slog.LevelWarn, fmt.Sprintf(f, a...)) }
func (v vkLogger) Error(a ...any)            { v.log(slog.LevelError, fmt.Sprint(a...)) }
func (v vkLogger) Errorf(f string, a ...any) { v.log(slog.LevelError, fmt.Sprintf(f, a...)) }
func (v vkLogger) Fatal(a ...any)            { v.log(slog.LevelError, fmt.Sprint(a...)); os.Exit(1) }
func (v vkLogger) Fatalf(f string, a ...any) {
	v.log(slog.LevelError, fmt.Sprintf(f, a...))
	os.Exit(1)
}
func (v vkLogger) WithField(k string, val any) vklog.Logger {
	return vkLogger{l: v.l.With(k, fmt.Sprint(val))}
}
func (v vkLogger) WithFields(f vklog.Fields) vklog.Logger {
	l := v.l
	for k, val := range f {
		l = l.With(k, fmt.Sprint(val))
	}
	return vkLogger{l: l}
}
func (v vkLogger) WithError(err error) vklog.Logger {
	return vkLogger{l: v.l.With("error", fmt.Sprint(err))}
}
