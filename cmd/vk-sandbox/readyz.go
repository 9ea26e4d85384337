package main

import (
	"errors"
	"strings"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// readiness is /readyz's check, which means "this process serves its
// node": it holds the node's holder lease, the node is registered, and the
// state file's last commit succeeded. sandboxd's health is a line of the
// detail but never fails it (kube.Check.Info): it is the node's
// SandboxdReady condition and taint. When a check fails, the 503 body
// names every line, "name: ok" or "name: why", as the kube-apiserver's
// /readyz?verbose does.
func readiness(held func() error, checks func() []kube.Check, stateFile func() error, notes func() []string) func() (string, error) {
	return func() (string, error) {
		all := append([]kube.Check{{Name: "node holder", Err: held()}}, checks()...)
		all = append(all, kube.Check{Name: "state file", Err: stateFile()})
		var b strings.Builder
		failed := false
		for _, c := range all {
			b.WriteString(c.Name)
			if c.Err != nil {
				failed = failed || !c.Info
				b.WriteString(": " + c.Err.Error() + "\n")
			} else {
				b.WriteString(": ok\n")
			}
		}
		for _, n := range notes() {
			b.WriteString(n + "\n")
		}
		if !failed {
			return b.String(), nil
		}
		return b.String(), errors.New("readyz check failed")
	}
}
