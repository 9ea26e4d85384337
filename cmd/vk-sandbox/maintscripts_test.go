package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The packages' maintainer scripts (packaging/*.sh), run with sh and the
// arguments dpkg and rpm pass, against a fake systemctl that records its
// calls. A real systemd is not involved: the scripts are only asked what
// they would tell it. scripts/check-packages.sh runs them again through
// dpkg, from the built .deb.

// systemdRunDir is the directory whose presence tells the scripts that
// systemd runs; each run points it at a scratch path instead.
const systemdRunDir = "/run/systemd/system"

type maintRun struct {
	systemd  bool   // the scratch /run/systemd/system exists
	dpkgRoot string // DPKG_ROOT, set by dpkg --root
	failing  bool   // the fake systemctl exits 1
}

// runMaintScript runs packaging/<script> with args and returns the
// systemctl calls it made, one string each.
func runMaintScript(t *testing.T, script string, r maintRun, args ...string) []string {
	t.Helper()
	src := readRepoFile(t, "packaging/"+script)
	if strings.Count(src, systemdRunDir) != 1 {
		t.Fatalf("packaging/%s names %s %d times, want once (its guard)", script, systemdRunDir, strings.Count(src, systemdRunDir))
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run-systemd-system")
	if r.systemd {
		if err := os.Mkdir(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	calls := filepath.Join(dir, "calls")
	exit := "0"
	if r.failing {
		exit = "1"
	}
	fake := "#!/bin/sh\necho \"$*\" >>'" + calls + "'\nexit " + exit + "\n"
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, script)
	if err := os.WriteFile(path, []byte(strings.Replace(src, systemdRunDir, runDir, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{path}, args...)...)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	if r.dpkgRoot != "" {
		cmd.Env = append(cmd.Env, "DPKG_ROOT="+r.dpkgRoot)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh %s %q: %v\n%s", script, args, err, out)
	}
	b, err := os.ReadFile(calls)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

const (
	reload  = "daemon-reload"
	restart = "try-restart vk-sandbox.service"
	stop    = "stop vk-sandbox.service"
	disable = "disable vk-sandbox.service"
)

// An install only reloads; an upgrade restarts a running service once the
// new files are in place, and never stops or disables it; a removal (deb
// "remove", rpm 0) stops and disables it before its files go, and reloads
// after. dpkg and rpm tell an upgrade from a removal by their arguments.
func TestMaintainerScriptsRestartOnUpgradeAndStopOnlyOnRemoval(t *testing.T) {
	on := maintRun{systemd: true}
	for _, c := range []struct {
		what   string
		script string
		args   []string
		want   []string
	}{
		{"deb install", "postinstall.sh", []string{"configure", ""}, []string{reload}},
		{"deb install (no old version)", "postinstall.sh", []string{"configure"}, []string{reload}},
		{"deb upgrade, new postinst", "postinstall.sh", []string{"configure", "0.9.0"}, []string{reload, restart}},
		{"deb failed upgrade undone", "postinstall.sh", []string{"abort-upgrade", "1.0.0"}, []string{reload}},
		{"rpm install", "postinstall.sh", []string{"1"}, []string{reload}},
		{"rpm upgrade, new %post", "postinstall.sh", []string{"2"}, []string{reload, restart}},
		{"deb remove", "preremove.sh", []string{"remove"}, []string{stop, disable}},
		{"deb upgrade, old prerm", "preremove.sh", []string{"upgrade", "1.0.0"}, nil},
		{"deb deconfigure", "preremove.sh", []string{"deconfigure", "in-favour", "other", "1"}, nil},
		{"deb failed upgrade, new prerm", "preremove.sh", []string{"failed-upgrade", "0.9.0"}, nil},
		{"rpm erase", "preremove.sh", []string{"0"}, []string{stop, disable}},
		{"rpm upgrade, old %preun", "preremove.sh", []string{"1"}, nil},
		{"deb remove", "postremove.sh", []string{"remove"}, []string{reload}},
		{"deb purge", "postremove.sh", []string{"purge"}, []string{reload}},
		{"deb upgrade, old postrm", "postremove.sh", []string{"upgrade", "1.0.0"}, []string{reload}},
		{"rpm erase", "postremove.sh", []string{"0"}, []string{reload}},
		{"rpm upgrade, old %postun", "postremove.sh", []string{"1"}, []string{reload}},
	} {
		if got := runMaintScript(t, c.script, on, c.args...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s %q called systemctl %q, want %q", c.what, c.script, c.args, got, c.want)
		}
	}
}

// In a foreign root (dpkg --root sets DPKG_ROOT) or without a running
// systemd, the scripts call systemctl not at all: the running systemd, if
// any, is not that root's.
func TestMaintainerScriptsLeaveAForeignRootAlone(t *testing.T) {
	for _, r := range []maintRun{{systemd: true, dpkgRoot: "/srv/chroot"}, {systemd: false}} {
		for _, c := range [][]string{
			{"postinstall.sh", "configure", "0.9.0"}, {"postinstall.sh", "2"},
			{"preremove.sh", "remove"}, {"preremove.sh", "0"},
			{"postremove.sh", "purge"}, {"postremove.sh", "0"},
		} {
			if got := runMaintScript(t, c[0], r, c[1:]...); got != nil {
				t.Errorf("%+v: %s %q called systemctl %q, want no call", r, c[0], c[1:], got)
			}
		}
	}
}

// A failing systemctl never fails the package operation: dpkg and rpm
// would stop half way, with the files of two versions on the host.
func TestMaintainerScriptsNeverFailOnSystemctl(t *testing.T) {
	r := maintRun{systemd: true, failing: true}
	for _, c := range [][]string{
		{"postinstall.sh", "configure", "0.9.0"}, {"preremove.sh", "remove"}, {"postremove.sh", "purge"},
	} {
		if got := runMaintScript(t, c[0], r, c[1:]...); len(got) == 0 {
			t.Errorf("%s %q called no systemctl", c[0], c[1:])
		}
	}
}
