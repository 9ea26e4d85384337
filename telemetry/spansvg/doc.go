// Package spansvg draws the spans of one trace as an SVG waterfall: one row
// per span in tree order (children under their parent, siblings by start
// time), a duration bar on a shared time axis, and a line of key
// attributes under each span name.
//
// It exists for documentation: a picture of a real trace, captured with
// the SDK's in-memory exporter (go.opentelemetry.io/otel/sdk/trace/tracetest),
// without a trace backend. It depends on the standard library and the OTel
// SDK types only.
//
// Attributes are shown only when allow-listed (see Options.Attributes), and
// a key that names a credential (token, authorization, password, secret,
// cookie) is never shown, whatever the allow-list says.
package spansvg
