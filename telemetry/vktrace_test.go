package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// captureVKLog routes virtual-kubelet's log lines into a buffer at level.
func captureVKLog(t *testing.T, level slog.Level) *bytes.Buffer {
	t.Helper()
	prev := vklog.L
	t.Cleanup(func() { vklog.L = prev })
	var buf bytes.Buffer
	InstallVirtualKubeletLogger(NewLogger(&buf, level, true))
	return &buf
}

// A recorded virtual-kubelet span carries the fields it is given as
// attributes and the lines logged under it as events, and those lines
// carry the fields, oldest first.
func TestRecordedVirtualKubeletSpanGetsFieldsAndLogLines(t *testing.T) {
	tel, exp := setupInMemory(t)
	buf := captureVKLog(t, slog.LevelDebug)
	ctx, root := tel.Tracer().Start(context.Background(), "claim")
	ctx, span := vktrace.StartSpan(ctx, "syncPodStatusFromProviderHandler")
	ctx = span.WithField(ctx, "key", "ns/p")
	ctx = span.WithFields(ctx, vklog.Fields{"requeues": 2})
	vklog.G(ctx).Debug("processing pod status update")
	span.End()
	root.End()

	var attrs []attribute.KeyValue
	var events []string
	found := false
	for _, s := range exp.GetSpans() {
		if s.Name == "syncPodStatusFromProviderHandler" {
			found, attrs = true, s.Attributes
			for _, e := range s.Events {
				events = append(events, e.Name)
			}
		}
	}
	if !found {
		t.Fatalf("virtual-kubelet span not exported: %v", exp.GetSpans())
	}
	want := map[attribute.Key]string{"key": "ns/p", "requeues": "2"}
	for _, a := range attrs {
		if w, ok := want[a.Key]; ok && a.Value.String() == w {
			delete(want, a.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("span attributes %v lack %v", attrs, want)
	}
	if len(events) != 1 || events[0] != "processing pod status update" {
		t.Errorf("span events %q, want the one line logged under it", events)
	}
	line := buf.String()
	logHas(t, line, []string{`"method":"syncPodStatusFromProviderHandler"`, `"key":"ns/p"`, `"requeues":"2"`, "processing pod status update"})
	if m, k := strings.Index(line, `"method"`), strings.Index(line, `"key"`); m < 0 || k < m {
		t.Errorf("fields out of order (the span's name first, then what was added): %s", line)
	}
}

// An unrecorded span (traces not exported) still gives its fields to the
// lines logged under it. One that starts a trace mints ids, so that what
// is logged and started under it shares a trace_id; one under another
// span adds nothing else: no OTel span, so the span in its context is
// still the one above it.
func TestUnrecordedVirtualKubeletSpanStillLabelsLogLines(t *testing.T) {
	setup(t, Config{NodeName: "node-a", Version: "v1.2.3"}) // no exporter: never sampled
	buf := captureVKLog(t, slog.LevelInfo)
	ctx, span := vktrace.StartSpan(context.Background(), "updatePodStatus")
	if trace.SpanFromContext(ctx).IsRecording() {
		t.Fatal("span recorded without an exporter")
	}
	root := trace.SpanContextFromContext(ctx)
	if !root.IsValid() {
		t.Fatal("a virtual-kubelet span that starts a trace minted no ids: the lines and claims under it could not be correlated")
	}
	under, child := vktrace.StartSpan(ctx, "createOrUpdatePod")
	if got := trace.SpanContextFromContext(under); !got.Equal(root) {
		t.Errorf("under a span, an unexported virtual-kubelet span's context holds span %s/%s, want the one above, %s/%s: it should make no OTel span",
			got.TraceID(), got.SpanID(), root.TraceID(), root.SpanID())
	}
	child.End()
	ctx = span.WithField(ctx, "key", "ns/q")
	vklog.G(ctx).Debug("below the level")
	vklog.G(ctx).WithError(context.Canceled).Error("error while updating pod status in kubernetes")
	span.End()
	logHas(t, buf.String(), []string{`"method":"updatePodStatus"`, `"key":"ns/q"`, `"error":"context canceled"`, "error while updating"},
		"below the level")
}
