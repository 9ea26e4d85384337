package spansvg

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

var (
	traceID = trace.TraceID{0x4b, 0xf9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	t0      = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
)

// stub is one ended span of traceID: id, parent id (0 for none), offset and
// length in µs from t0.
func stub(name string, id, parent byte, startUS, durUS int, attrs ...attribute.KeyValue) tracetest.SpanStub {
	s := tracetest.SpanStub{
		Name:        name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{id}, TraceFlags: trace.FlagsSampled}),
		StartTime:   t0.Add(time.Duration(startUS) * time.Microsecond),
		EndTime:     t0.Add(time.Duration(startUS+durUS) * time.Microsecond),
		Attributes:  attrs,
	}
	if parent != 0 {
		s.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{parent}})
	}
	return s
}

func claimTrace() tracetest.SpanStubs {
	commit := stub("store.commit", 5, 3, 600, 180, attribute.Int("vksandbox.store.batch_size", 3))
	retry := stub("sandboxd.claim", 4, 3, 120, 400, attribute.String("http.request.method", "POST"),
		attribute.String("url.full", "http://127.0.0.1:7777/v1/claim?token=hunter2"),
		attribute.String("sandboxd.token", "tok-secret-1"), attribute.String("Authorization", "Bearer tok-secret-2"))
	retry.Events = []sdktrace.Event{{Name: "sandboxd.retry", Time: t0.Add(300 * time.Microsecond)}}
	failed := stub("status.push", 6, 3, 800, 50)
	failed.Status = sdktrace.Status{Code: codes.Error, Description: "boom"}
	// Deliberately out of order: the renderer sorts.
	return tracetest.SpanStubs{
		failed,
		stub("claim.reconcile", 3, 1, 100, 800),
		stub("claim.transaction", 1, 0, 0, 1000, attribute.String("k8s.pod.name", "a<b>&c"), attribute.String("k8s.pod.uid", "uid-1")),
		commit,
		retry,
		stub("queue.wait", 2, 1, 0, 90, attribute.Int("vksandbox.shard", 5)),
	}
}

func TestOrderIsDepthFirstBySiblingStart(t *testing.T) {
	rows := order(claimTrace().Snapshots())
	var got []string
	for _, r := range rows {
		got = append(got, strings.Repeat(" ", r.depth)+r.span.Name())
	}
	want := []string{"claim.transaction", " queue.wait", " claim.reconcile", "  sandboxd.claim", "  store.commit", "  status.push"}
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOrphanSpanIsARoot(t *testing.T) {
	spans := tracetest.SpanStubs{stub("child", 2, 9, 10, 5), stub("root", 1, 0, 0, 20)}.Snapshots()
	rows := order(spans)
	if len(rows) != 2 || rows[0].span.Name() != "root" || rows[1].span.Name() != "child" || rows[1].depth != 0 {
		t.Fatalf("a span whose parent is absent should be a root, in start order: %+v", rows)
	}
}

func TestRenderIsWellFormedAndNamesEverySpan(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, claimTrace().Snapshots(), Options{Title: "One claim", Note: "unit test"}); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if err := testkit.WellFormedXML(svg); err != nil {
		t.Fatalf("not well-formed XML: %v\n%s", err, svg)
	}
	for _, want := range []string{
		"One claim", "unit test", "4bf90102030405060708090a0b0c0d0e", "6 spans", "1.00ms",
		"claim.transaction", "queue.wait", "claim.reconcile", "sandboxd.claim", "store.commit", "status.push ⚠ error",
		"k8s.pod.name=a&lt;b&gt;&amp;c", "vksandbox.shard=5",
		"vksandbox.store.batch_size=3", "http.request.method=POST", "url.full=http://127.0.0.1:7777/v1/claim ",
		"◆ sandboxd.retry +180µs", "400µs", errorColor,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	// Not allow-listed by default, or a credential: never drawn.
	for _, never := range []string{"k8s.pod.uid", "hunter2", "tok-secret", "Authorization", "sandboxd.token", "boom"} {
		if strings.Contains(svg, never) {
			t.Errorf("the SVG shows %q", never)
		}
	}
}

func TestCredentialKeysAreNeverAllowed(t *testing.T) {
	for _, k := range []string{"vksandbox.claim.token", "http.request.header.authorization", "db.password", "x.Secret", "http.cookie"} {
		if allowed(k, []string{"vksandbox.", "http.", "db.", "x.", k}) {
			t.Errorf("%s is allowed", k)
		}
	}
	if !allowed("vksandbox.claim.id", DefaultAttributes) || allowed("vksandboxfoo", DefaultAttributes) {
		t.Error("prefix entries should match only below their dot")
	}
}

func TestEmptyAllowListDrawsNoAttributes(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, claimTrace().Snapshots(), Options{Attributes: []string{}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "k8s.pod.name=") || strings.Contains(b.String(), "vksandbox.") {
		t.Error("attributes drawn with an empty allow-list")
	}
}

func TestRenderRejectsNoSpans(t *testing.T) {
	if err := Render(io.Discard, nil, Options{}); err == nil {
		t.Fatal("Render(nil) succeeded")
	}
}

func TestTicksAreNiceAndCoverTheRange(t *testing.T) {
	for _, c := range []struct {
		total time.Duration
		step  time.Duration
	}{
		{1000 * time.Microsecond, 200 * time.Microsecond},
		{2300 * time.Microsecond, 500 * time.Microsecond},
		{7 * time.Millisecond, time.Millisecond},
		{95 * time.Millisecond, 20 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond},
	} {
		got := ticks(c.total, 8)
		if got[0] != 0 || got[1] != c.step || got[len(got)-1] > c.total || got[len(got)-1]+c.step <= c.total {
			t.Errorf("ticks(%v) = %v, want steps of %v up to the total", c.total, got, c.step)
		}
	}
	if got := ticks(0, 8); len(got) != 1 || got[0] != 0 {
		t.Errorf("ticks(0) = %v", got)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0",
		850:                     "850ns",
		12300:                   "12.3µs",
		180 * time.Microsecond:  "180µs",
		1250 * time.Microsecond: "1.25ms",
		2500 * time.Millisecond: "2.50s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", int64(d), got, want)
		}
	}
}

func TestWrapKeepsWordsWhole(t *testing.T) {
	got := wrap([]string{"aaaa=1", "bbbb=2", "cccc=3", strings.Repeat("x", 30)}, 14)
	want := []string{"aaaa=1  bbbb=2", "cccc=3", strings.Repeat("x", 13) + "…"}
	if !slices.Equal(got, want) {
		t.Fatalf("wrap = %q, want %q", got, want)
	}
}
