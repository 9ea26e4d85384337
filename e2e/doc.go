// Package e2e holds the end-to-end tests of vk-sandbox: the real binary
// against a real etcd and kube-apiserver (internal/kubetest) and the project's
// sandboxd emulator over real HTTP. There is no non-test code here.
package e2e
