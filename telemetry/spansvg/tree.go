package spansvg

import (
	"slices"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// row is one span in display order, with its depth in the tree.
type row struct {
	span  sdktrace.ReadOnlySpan
	depth int
}

// order lays spans out depth first, each span's children right under it,
// siblings by start time. A span whose parent is not among spans is a root.
func order(spans []sdktrace.ReadOnlySpan) []row {
	present := make(map[trace.SpanID]bool, len(spans))
	for _, s := range spans {
		present[s.SpanContext().SpanID()] = true
	}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && present[p.SpanID()] && p.SpanID() != s.SpanContext().SpanID() {
			children[p.SpanID()] = append(children[p.SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }

	out := make([]row, 0, len(spans))
	visited := make(map[trace.SpanID]bool, len(spans))
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		id := s.SpanContext().SpanID()
		if visited[id] { // a malformed input with a parent cycle
			return
		}
		visited[id] = true
		out = append(out, row{span: s, depth: depth})
		kids := children[id]
		slices.SortStableFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	slices.SortStableFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	return out
}
