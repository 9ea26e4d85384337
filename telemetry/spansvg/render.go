package spansvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options tune the picture. The zero value is usable.
type Options struct {
	// Title is the heading. Default "Trace".
	Title string
	// Note is an optional line under the summary, e.g. where the trace
	// was captured.
	Note string
	// Attributes is the allow-list of attribute keys drawn under each span
	// (an entry ending in "." is a prefix). Nil means DefaultAttributes;
	// an empty, non-nil slice draws none.
	Attributes []string
	// Width of the picture in pixels. Default 1200.
	Width int
}

// Layout, in pixels. Text widths are estimated per character, which is
// close enough for the fonts named below.
const (
	margin     = 16.0
	nameCol    = 300.0 // span names, indented by depth
	indent     = 14.0
	headerH    = 84.0 // title, summary, note, axis labels
	nameLineH  = 22.0
	attrLineH  = 15.0
	rowPad     = 6.0
	barH       = 12.0
	nameCharW  = 7.0 // 12px sans-serif
	attrCharW  = 6.6 // 11px monospace
	labelCharW = 6.2 // 11px sans-serif
	axisTicks  = 8
	minBarW    = 2.0
	errorColor = "#d62728"
)

// palette colours bars by the span name's first dot-separated word, so
// related spans (sandboxd.claim, sandboxd.list) share a colour. Every
// colour is dark enough to carry a white duration label.
var palette = []string{"#4e79a7", "#c9671b", "#3f8f3a", "#8e5b8a", "#2f8584", "#a07a12", "#8c6d4f", "#b8506f"}

// Render writes an SVG waterfall of spans, normally the spans of one trace.
// Times are relative to the earliest start among them.
func Render(w io.Writer, spans []sdktrace.ReadOnlySpan, o Options) error {
	if len(spans) == 0 {
		return errors.New("spansvg: no spans")
	}
	if o.Title == "" {
		o.Title = "Trace"
	}
	if o.Width <= 0 {
		o.Width = 1200
	}
	if o.Attributes == nil {
		o.Attributes = DefaultAttributes
	}
	rows := order(spans)
	t0, t1 := bounds(spans)
	total := t1.Sub(t0)

	width := float64(o.Width)
	x0 := margin + nameCol // time axis origin
	x1 := width - margin   // time axis end
	attrChars := int((width - 2*margin) / attrCharW)
	xOf := func(t time.Time) float64 {
		if total <= 0 {
			return x0
		}
		return x0 + (x1-x0)*float64(t.Sub(t0))/float64(total)
	}

	type laidOut struct {
		row
		y     float64
		attrs []string
		h     float64
	}
	var laid []laidOut
	y := headerH
	for _, r := range rows {
		words := shownAttributes(r.span.Attributes(), o.Attributes)
		for _, ev := range r.span.Events() {
			words = append(words, "◆ "+ev.Name+" +"+formatDuration(ev.Time.Sub(r.span.StartTime())))
		}
		lines := wrap(words, attrChars-int(float64(r.depth)*indent/attrCharW))
		h := nameLineH + float64(len(lines))*attrLineH + rowPad
		laid = append(laid, laidOut{row: r, y: y, attrs: lines, h: h})
		y += h
	}
	height := y + margin + 14

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		o.Width, height, o.Width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")

	// Header: title, summary, optional note.
	fmt.Fprintf(&b, `<text x="%.1f" y="26" font-size="17" font-weight="bold" fill="#222">%s</text>`+"\n", margin, esc(o.Title))
	summary := fmt.Sprintf("trace %s · %d spans · %s", spans[0].SpanContext().TraceID(), len(spans), formatDuration(total))
	fmt.Fprintf(&b, `<text x="%.1f" y="44" font-size="12" fill="#555">%s</text>`+"\n", margin, esc(summary))
	if o.Note != "" {
		fmt.Fprintf(&b, `<text x="%.1f" y="60" font-size="11" fill="#777">%s</text>`+"\n", margin, esc(o.Note))
	}

	// Alternating row bands, then the time grid over them.
	for i, l := range laid {
		if i%2 == 1 {
			fmt.Fprintf(&b, `<rect x="0" y="%.1f" width="%d" height="%.1f" fill="#f5f6f8"/>`+"\n", l.y, o.Width, l.h)
		}
	}
	for _, tk := range ticks(total, axisTicks) {
		x := xOf(t0.Add(tk))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d8dbe0" stroke-width="1"/>`+"\n", x, headerH-6, x, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#666" text-anchor="middle">%s</text>`+"\n", x, headerH-10, esc(formatDuration(tk)))
	}

	colors := map[string]string{}
	for _, l := range laid {
		s := l.span
		family, _, _ := strings.Cut(s.Name(), ".")
		color, ok := colors[family]
		if !ok {
			color = palette[len(colors)%len(palette)]
			colors[family] = color
		}
		failed := s.Status().Code == codes.Error
		if failed {
			color = errorColor
		}
		start, end := s.StartTime(), s.EndTime()
		if end.Before(start) {
			end = start
		}
		dur := end.Sub(start)

		// Name column.
		nx := margin + float64(l.depth)*indent
		name := s.Name()
		if failed {
			name += " ⚠ error"
		}
		name = truncate(name, int((x0-nx-8)/nameCharW))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" fill="#222">%s</text>`+"\n", nx, l.y+15, esc(name))

		// Bar, its duration label and event markers.
		bx, bw := xOf(start), xOf(end)-xOf(start)
		if bw < minBarW {
			bw = minBarW
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="2" fill="%s"><title>%s %s</title></rect>`+"\n",
			bx, l.y+5, bw, barH, color, esc(s.Name()), esc(formatDuration(dur)))
		label := formatDuration(dur)
		lw := float64(len([]rune(label))) * labelCharW
		switch {
		case bx+bw+4+lw <= x1:
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#333">%s</text>`+"\n", bx+bw+4, l.y+15, esc(label))
		case bw >= lw+8:
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#fff" text-anchor="end">%s</text>`+"\n", bx+bw-4, l.y+15, esc(label))
		default:
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#333" text-anchor="end">%s</text>`+"\n", bx-4, l.y+15, esc(label))
		}
		for _, ev := range s.Events() {
			ex := xOf(ev.Time)
			fmt.Fprintf(&b, `<path d="M%.1f %.1f l4 6 l-4 6 l-4 -6 z" fill="#222"><title>%s</title></path>`+"\n", ex, l.y+5, esc(ev.Name))
		}

		// Attribute lines, under the name, across the full width.
		for i, line := range l.attrs {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" fill="#666" xml:space="preserve">%s</text>`+"\n",
				nx+6, l.y+nameLineH+float64(i)*attrLineH+9, esc(line))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#888">times are relative to the first span's start; bars are coloured by the span name's first word</text>`+"\n",
		margin, height-margin+4)
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// bounds returns the earliest start and the latest end of spans.
func bounds(spans []sdktrace.ReadOnlySpan) (time.Time, time.Time) {
	t0, t1 := spans[0].StartTime(), spans[0].EndTime()
	for _, s := range spans {
		if s.StartTime().Before(t0) {
			t0 = s.StartTime()
		}
		if s.EndTime().After(t1) {
			t1 = s.EndTime()
		}
	}
	if t1.Before(t0) {
		t1 = t0
	}
	return t0, t1
}

// esc escapes text for an SVG text node or attribute value.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}
