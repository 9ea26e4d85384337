//go:build tools

// Package tools pins staticcheck (honnef.co/go/tools), the static analysis
// that make lint runs over the main module with the checks chosen in
// staticcheck.conf at the repository root. It is a separate module so that
// the main go.mod never pulls it in.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
