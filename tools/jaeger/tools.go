//go:build tools

// Package tools pins the Jaeger v2 all-in-one binary (OTLP receiver, trace
// storage in memory, query API and UI) used by make demo-observability and
// make test-observability. It is a separate module so that the main go.mod
// never pulls it in. v1.76.0 does not build with this toolchain; keep
// v1.75.0 until a later release does.
package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
