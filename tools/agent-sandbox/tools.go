//go:build tools

// Package tools pins the upstream agent-sandbox controller
// (sigs.k8s.io/agent-sandbox) used by the interop e2e test
// (e2e/interop_test.go). It is a separate module so that the main
// go.mod never pulls it in.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)
