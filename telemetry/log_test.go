package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogLineCarriesTraceIDOfCtxSpan(t *testing.T) {
	isolateEnv(t)
	tel := setup(t, Config{}) // tracing off: ids must appear anyway
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo, true).With("component", "pipeline")

	ctx, span := tel.Tracer().Start(context.Background(), "claim")
	log.InfoContext(ctx, "claimed", "pod", "ns/name")
	span.End()

	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	sc := span.SpanContext()
	if rec["trace_id"] != sc.TraceID().String() || rec["span_id"] != sc.SpanID().String() {
		t.Fatalf("log line %v lacks trace_id %s / span_id %s", rec, sc.TraceID(), sc.SpanID())
	}
	if rec["component"] != "pipeline" {
		t.Fatalf("WithAttrs lost through the wrapper: %v", rec)
	}
}

func TestLogLineWithoutSpanHasNoTraceID(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, slog.LevelInfo, false).InfoContext(context.Background(), "boot")
	if strings.Contains(buf.String(), "trace_id") {
		t.Fatalf("trace_id invented without a span: %q", buf.String())
	}
}

func TestLoggerHonoursLevel(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, slog.LevelWarn, false).Info("chatty")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %q", buf.String())
	}
}

func TestRedactKeepsOnlyLength(t *testing.T) {
	const token = "rel-3f9a0c"
	got := Redact(token)
	if got != "<redacted len=10>" || strings.Contains(got, "3f9a") {
		t.Fatalf("Redact(%q) = %q", token, got)
	}
	if Redact("") != "<redacted len=0>" {
		t.Fatalf("Redact(\"\") = %q", Redact(""))
	}
}

// A duration is written as Go writes it, in JSON as in text, never as
// integer nanoseconds.
func TestDurationsAreLoggedAsDurations(t *testing.T) {
	for _, json := range []bool{true, false} {
		var buf bytes.Buffer
		NewLogger(&buf, slog.LevelInfo, json).Info("retry", "wait", 1500*time.Millisecond, "nested", slog.GroupValue(slog.Duration("d", 2*time.Second)))
		line := buf.String()
		if !strings.Contains(line, "1.5s") || !strings.Contains(line, "2s") || strings.Contains(line, "1500000000") {
			t.Errorf("json=%v: %q", json, line)
		}
	}
}
