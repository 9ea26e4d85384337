package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// Span is one span of a trace as Jaeger stores it, read from its API v3
// (OTLP JSON: hex ids, typed attributes, links).
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Service is the span's resource service.name.
	Service string
	// Kind is the OTLP kind: 1 internal, 2 server, 3 client.
	Kind                 int
	StartNanos, EndNanos int64
	Attrs                map[string]any // string, int64, bool or float64
	Events               []SpanEvent
	Links                []SpanLink
	StatusCode           int // 0 unset, 1 ok, 2 error
	StatusMessage        string
}

// SpanEvent is an event (log) of a span.
type SpanEvent struct {
	Name  string
	Attrs map[string]any
}

// SpanLink is a link to a span of another (or the same) trace.
type SpanLink struct{ TraceID, SpanID string }

// Span kinds, as OTLP numbers them.
const (
	SpanKindInternal = 1
	SpanKindServer   = 2
	SpanKindClient   = 3
)

// Str is a string attribute ("" when absent or of another type).
func (s Span) Str(key string) string { v, _ := s.Attrs[key].(string); return v }

// TraceIDs searches Jaeger (API v1 /api/traces, which filters on tags) for
// traces of service with a span named operation whose tags include every
// one of tags, and returns their ids, newest first, at most limit.
func (j *Jaeger) TraceIDs(ctx context.Context, service, operation string, tags map[string]string, limit int) ([]string, error) {
	q := url.Values{"service": {service}, "lookback": {"2h"}, "limit": {strconv.Itoa(limit)}}
	if operation != "" {
		q.Set("operation", operation)
	}
	if len(tags) > 0 {
		b, _ := json.Marshal(tags)
		q.Set("tags", string(b))
	}
	var out struct {
		Data []struct {
			TraceID string `json:"traceID"`
		} `json:"data"`
	}
	if err := j.getJSON(ctx, "/api/traces?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(out.Data))
	for _, t := range out.Data {
		ids = append(ids, t.TraceID)
	}
	return ids, nil
}

// Services lists the service names Jaeger holds spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var out struct {
		Services []string `json:"services"`
	}
	err := j.getJSON(ctx, "/api/v3/services", &out)
	return out.Services, err
}

// Trace reads every span of one trace (API v3 /api/v3/traces/{id}).
func (j *Jaeger) Trace(ctx context.Context, traceID string) ([]Span, error) {
	var out struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpKV `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := j.getJSON(ctx, "/api/v3/traces/"+url.PathEscape(traceID), &out); err != nil {
		return nil, err
	}
	var spans []Span
	for _, rs := range out.Result.ResourceSpans {
		service, _ := attrMap(rs.Resource.Attributes)["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans = append(spans, s.span(service))
			}
		}
	}
	return spans, nil
}

func (j *Jaeger) getJSON(ctx context.Context, path string, v any) error {
	return getJSON(ctx, j.QueryURL+path, v)
}

// getJSON decodes the 200 answer of GET u into v.
func getJSON(ctx context.Context, u string, v any) error {
	body, err := httpGet(ctx, u, 64<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// The OTLP JSON encoding (ids in hex, 64-bit integers as strings).
type otlpSpan struct {
	TraceID      string   `json:"traceId"`
	SpanID       string   `json:"spanId"`
	ParentSpanID string   `json:"parentSpanId"`
	Name         string   `json:"name"`
	Kind         int      `json:"kind"`
	Start        string   `json:"startTimeUnixNano"`
	End          string   `json:"endTimeUnixNano"`
	Attributes   []otlpKV `json:"attributes"`
	Events       []struct {
		Name       string   `json:"name"`
		Attributes []otlpKV `json:"attributes"`
	} `json:"events"`
	Links []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
	Status struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
}

type otlpKV struct {
	Key   string `json:"key"`
	Value struct {
		String *string  `json:"stringValue"`
		Int    *string  `json:"intValue"`
		Bool   *bool    `json:"boolValue"`
		Double *float64 `json:"doubleValue"`
	} `json:"value"`
}

func (s otlpSpan) span(service string) Span {
	out := Span{
		TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name, Service: service,
		Kind: s.Kind, Attrs: attrMap(s.Attributes), StatusCode: s.Status.Code, StatusMessage: s.Status.Message,
	}
	out.StartNanos, _ = strconv.ParseInt(s.Start, 10, 64)
	out.EndNanos, _ = strconv.ParseInt(s.End, 10, 64)
	for _, e := range s.Events {
		out.Events = append(out.Events, SpanEvent{Name: e.Name, Attrs: attrMap(e.Attributes)})
	}
	for _, l := range s.Links {
		out.Links = append(out.Links, SpanLink{TraceID: l.TraceID, SpanID: l.SpanID})
	}
	return out
}

func attrMap(kvs []otlpKV) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.String != nil:
			m[kv.Key] = *v.String
		case v.Int != nil:
			i, _ := strconv.ParseInt(*v.Int, 10, 64)
			m[kv.Key] = i
		case v.Bool != nil:
			m[kv.Key] = *v.Bool
		case v.Double != nil:
			m[kv.Key] = *v.Double
		}
	}
	return m
}
