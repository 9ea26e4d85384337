package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// The day-2 procedures of docs/install.md are run from the doc itself:
// each block follows a marker naming it, and the tests run its lines, so
// that a procedure changed in the doc is a procedure changed in the test.

// day2Marker precedes each documented block, followed by its name.
const day2Marker = "<!-- e2e/day2_test.go runs the commands of this block: "

// docNode is the node name the procedures are written for.
const docNode = "worker-1-sandboxd"

var trailingComment = regexp.MustCompile(`\s+#\s.*$`)

// day2Block returns the command lines of the named block, without their
// comments, each rewritten by r (the test's paths and names).
func day2Block(t *testing.T, name string, r *strings.Replacer) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), day2Marker+name+" -->")
	if !ok {
		t.Fatalf("docs/install.md has no block %q", name)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatalf("docs/install.md: no ```sh block after the marker %q", name)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(trailingComment.ReplaceAllString(l, ""))
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, r.Replace(l))
		}
	}
	if len(lines) == 0 {
		t.Fatalf("docs/install.md: the block %q has no command", name)
	}
	return lines
}

// day2Host is one host of a procedure: a working directory for its
// relative paths, and what its service manager does (the test's
// vk-sandbox stands for the unit).
type day2Host struct {
	dir string
	// service is called for systemctl's verb and for a package upgrade
	// ("try-restart", as the package's postinst does).
	service func(verb string)
}

// run runs the lines of a block on h: systemctl and dpkg/rpm through
// h.service, every other line with sh -e, vk-sandbox being the binary under
// test and kubectl the harness's, on its apiserver. A failing line fails
// the test. It returns each line's output.
func (h day2Host) run(t *testing.T, lines []string) []string {
	t.Helper()
	path := day2Path(t)
	outs := make([]string, len(lines))
	for i, l := range lines {
		f := strings.Fields(l)
		switch f[0] {
		case "systemctl":
			h.service(f[1])
			continue
		case "dpkg", "rpm":
			h.service("try-restart")
			continue
		}
		cmd := exec.Command("sh", "-e", "-c", l)
		cmd.Dir = h.dir
		cmd.Env = append(os.Environ(), "PATH="+path+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the documented %q failed: %v\n%s", l, err, out)
		}
		outs[i] = string(out)
	}
	return outs
}

// day2Path is a directory with vk-sandbox (the binary under test) and a
// kubectl bound to the harness's apiserver.
func day2Path(t *testing.T) string {
	t.Helper()
	kubectl, err := kubetest.Binary(t.Context(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapper := "#!/bin/sh\nexec '" + kubectl + "' --kubeconfig '" + env.Kubeconfig + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vkBin, filepath.Join(dir, "vk-sandbox")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// unitOf is the service of a host whose unit is the node n: stop and
// disable stop it cleanly (it must exit 0; stopping a stopped one is a
// no-op), start and enable start it and wait for its node, try-restart
// does both.
func unitOf(t *testing.T, n *vkNode) func(string) {
	return func(verb string) {
		t.Helper()
		switch verb {
		case "stop", "disable": // disable --now
			if err := n.vk.Terminate(); err != nil {
				t.Fatalf("systemctl %s: not a clean stop: %v", verb, err)
			}
		case "start", "enable": // enable --now
			n.start()
			n.waitServing()
		case "try-restart": // the tests upgrade a running service
			if err := n.vk.Terminate(); err != nil {
				t.Fatalf("systemctl try-restart: not a clean stop: %v", err)
			}
			n.start()
			n.waitServing()
		default:
			t.Fatalf("systemctl %s: not a verb the test's unit knows", verb)
		}
	}
}

// waitServing waits until the current run serves the node: its Pod
// workers started (the Node may still be Ready from the run before).
func (n *vkNode) waitServing() {
	n.t.Helper()
	n.waitReady()
	testkit.WaitForCtx(n.t, waitFor, "vk-sandbox serving its node", func(context.Context) (bool, error) {
		if err, exited := n.vk.Exited(); exited {
			return false, fmt.Errorf("vk-sandbox exited (%v):\n%s", err, n.vk.Tail(5))
		}
		return strings.Contains(n.vk.Log(), `"msg":"started workers"`), nil
	})
}
