//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts cmd in its own process group and makes a cancel
// kill the whole group: go test, the test binary and whatever it started
// (etcd, kube-apiserver, vk-sandbox in e2e).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
