package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// buildScript is relative to the repository root.
const buildScript = "scripts/build-tools.sh"

var (
	buildMu sync.Mutex
	built   = map[string]bool{} // tools build-tools.sh already ran for in this process
)

// Binary returns the path of a tool of scripts/build-tools.sh (etcd,
// kube-apiserver, kube-scheduler, jaeger, ...). It looks in $VK_TOOLS_BIN,
// then in <repo>/bin, and if the tool is in neither it runs
// `scripts/build-tools.sh <name>`, which reuses the cache outside the clone
// or builds from the tools module, and links the result into <repo>/bin. It fails rather than skips: a test that needs a
// control plane must not pass without one.
func Binary(ctx context.Context, name string) (string, error) {
	return binary(ctx, name, nil)
}

// Installed returns the path of a tool already in $VK_TOOLS_BIN or
// <repo>/bin, without building anything: for optional tools (kubectl) that
// a test uses when present.
func Installed(name string) (string, bool) { return findBinary(name) }

func binary(ctx context.Context, name string, logf func(string, ...any)) (string, error) {
	if p, ok := findBinary(name); ok {
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", name, err)
	}

	// One build per tool and process; build-tools.sh itself takes a file lock, so
	// parallel test binaries wait for each other instead of building twice.
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := findBinary(name); ok {
		return p, nil
	}
	if built[name] {
		return "", fmt.Errorf("find %s: %s ran but %s is not in %s/bin", name, buildScript, name, root)
	}
	if logf != nil {
		logf("kubetest: %s not found; running %s (a cold build takes several minutes)", name, buildScript)
	}
	start := time.Now()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript), name)
	cmd.Dir = root
	cmd.Stdout = io.MultiWriter(os.Stderr, &out)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("find %s: %s failed after %s: %w\n%s", name, buildScript, time.Since(start).Round(time.Second), err, lastLines(out.String(), 30))
	}
	built[name] = true
	if logf != nil {
		logf("kubetest: %s done in %s", buildScript, time.Since(start).Round(time.Millisecond))
	}
	if p, ok := findBinary(name); ok {
		return p, nil
	}
	return "", fmt.Errorf("find %s: %s succeeded but %s is not in %s/bin", name, buildScript, name, root)
}

func findBinary(name string) (string, bool) {
	var dirs []string
	if d := os.Getenv("VK_TOOLS_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	if root, err := repoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		// Stat follows the bin/ symlink into the cache, so a dangling link
		// (cache wiped) counts as missing and triggers a rebuild.
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// repoRoot walks up from the working directory (a package directory under
// go test) to the module root that holds the build script. Nested tools
// modules have a go.mod but no script, so they are passed over.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, buildScript)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no repository root (go.mod with " + buildScript + ") above the working directory")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
