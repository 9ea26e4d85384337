package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const unitFile = "../../packaging/vk-sandbox.service"

// The systemd unit runs vk-sandbox as a dedicated unprivileged user with
// the sandboxing docs/install.md describes, and the env file cannot undo
// it: it sets neither credential path, which the unit points at the
// credentials it loads for that user.
func TestSystemdUnitIsHardened(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"DynamicUser=yes",
		"LoadCredential=kubeconfig:/etc/vk-sandbox/kubeconfig",
		"LoadCredential=sandboxd-token:/etc/vk-sandbox/sandboxd-token",
		"Environment=KUBECONFIG=%d/kubeconfig",
		"Environment=SANDBOXD_TOKEN_FILE=%d/sandboxd-token",
		"StateDirectory=vk-sandbox",
		"StateDirectoryMode=0700",
		"CapabilityBoundingSet=",
		"NoNewPrivileges=yes",
		"SystemCallFilter=@system-service",
		"ProtectProc=invisible",
		"ProcSubset=pid",
		"Restart=always",
		"StartLimitIntervalSec=0",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(unit) {
			t.Errorf("%s has no line %q", unitFile, want)
		}
	}
	// A start refused while another process holds the node is retried for
	// as long as that lasts: the start limit is a [Unit] option, ignored
	// in [Service].
	if u, _, _ := strings.Cut(unit, "[Service]"); !strings.Contains(u, "\nStartLimitIntervalSec=0\n") {
		t.Errorf("%s: StartLimitIntervalSec=0 is not in [Unit]", unitFile)
	}
	if m := regexp.MustCompile(`(?m)^(User|Group)=.*$`).FindString(unit); m != "" {
		t.Errorf("%s sets %q: the user is DynamicUser's", unitFile, m)
	}

	env, err := os.ReadFile("../../packaging/env.example")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^(KUBECONFIG|SANDBOXD_TOKEN_FILE)=.*$`).FindString(string(env)); m != "" {
		t.Errorf("packaging/env.example sets %q, which would win over the unit's credential path", m)
	}
}

// The exposure score docs/install.md quotes, when systemd-analyze can read
// the unit file on its own (systemd 250 or later; no running systemd is
// needed). A score above it means a protection was lost.
func TestSystemdUnitExposureScore(t *testing.T) {
	const quoted = 1.4
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", unitFile).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for vk-sandbox\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		if strings.Contains(string(out), "--offline") || err != nil {
			t.Skipf("systemd-analyze cannot analyse a unit file offline here: %v\n%s", err, out)
		}
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	if score > quoted {
		t.Errorf("systemd-analyze security rates %s %.1f, worse than the %.1f docs/install.md quotes:\n%s", unitFile, score, quoted, out)
	}
}
