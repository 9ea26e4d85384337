//go:build tools

// Package tools pins the kube-apiserver and kube-scheduler used by the
// integration tests. It is a separate module so that the main go.mod never
// pulls in k8s.io/kubernetes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
