package main

import (
	"errors"
	"strings"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// readiness is /readyz's check: the node's checks (registered; sandboxd
// answering with the token accepted) and the state file's last commit.
// When one fails, the 503 body names every check on a line of its own,
// "name: ok" or "name: why", as the kube-apiserver's /readyz?verbose does.
func readiness(checks func() []kube.Check, stateFile func() error, notes func() []string) func() (string, error) {
	return func() (string, error) {
		all := append(checks(), kube.Check{Name: "state file", Err: stateFile()})
		var b strings.Builder
		failed := false
		for _, c := range all {
			b.WriteString(c.Name)
			if c.Err != nil {
				failed = true
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
