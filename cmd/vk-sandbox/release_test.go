package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// stampFlags are the -X flags of the Makefile's LDFLAGS, which every
// build that ships must pass too, so that --version and
// vksandbox_build_info name the release and its commit.
var stampFlags = regexp.MustCompile(`-X main\.(version|stampedCommit)=`)

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The Makefile, the goreleaser build and the image build stamp the same
// variables, and those are the variables main.go declares.
func TestReleaseBuildsStampVersionAndCommit(t *testing.T) {
	_ = []*string{&version, &stampedCommit} // the variables -X sets exist
	mk := readRepoFile(t, "Makefile")
	if got := stampFlags.FindAllString(mk, -1); len(got) != 2 {
		t.Fatalf("the Makefile's LDFLAGS stamp %q, want main.version and main.stampedCommit", got)
	}
	gr := readRepoFile(t, ".goreleaser.yaml")
	for _, want := range []string{"-X main.version={{ .Version }}", "-X main.stampedCommit={{ .Env.VK_COMMIT }}"} {
		if !strings.Contains(gr, want) {
			t.Errorf(".goreleaser.yaml does not pass %q", want)
		}
	}
	df := readRepoFile(t, "Dockerfile")
	for _, re := range []string{
		`(?m)^FROM --platform=\$BUILDPLATFORM golang:\S+ AS build$`,
		`(?m)^ARG TARGETOS`, `(?m)^ARG TARGETARCH`, `(?m)^ARG VERSION`, `(?m)^ARG COMMIT`,
		`make build-linux GOARCH=\$\{TARGETARCH\} VERSION=\$\{VERSION\} COMMIT=\$\{COMMIT\}`,
		`org\.opencontainers\.image\.source="https://github\.com/cocoonstack/vk-sandbox"`,
		`org\.opencontainers\.image\.version="\$\{VERSION\}"`,
		`org\.opencontainers\.image\.revision="\$\{COMMIT\}"`,
		`org\.opencontainers\.image\.licenses="Apache-2\.0"`,
	} {
		if !regexp.MustCompile(re).MatchString(df) {
			t.Errorf("Dockerfile lacks %s", re)
		}
	}
	if !strings.Contains(readRepoFile(t, "LICENSE"), "Apache License\n                           Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache-2.0 text")
	}
}

// The packages install the unit where its ExecStart finds the binary, the
// env file as a config file, and their maintainer scripts; they do not own
// the unit's state directory, which StateDirectory= makes (and a package
// would take away on removal).
func TestPackagesMatchTheUnit(t *testing.T) {
	unit := readRepoFile(t, "packaging/vk-sandbox.service")
	gr := readRepoFile(t, ".goreleaser.yaml")
	m := regexp.MustCompile(`(?m)^ExecStart=(/\S+)/vk-sandbox$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("the unit has no ExecStart=<dir>/vk-sandbox")
	}
	if !strings.Contains(gr, "bindir: "+m[1]+"\n") {
		t.Errorf(".goreleaser.yaml does not install the binary into %s, where the unit runs it", m[1])
	}
	for _, want := range []string{"src: packaging/vk-sandbox.service", "dst: /etc/vk-sandbox/env", "type: config|noreplace",
		"postinstall: packaging/postinstall.sh", "preremove: packaging/preremove.sh", "postremove: packaging/postremove.sh"} {
		if !strings.Contains(gr, want) {
			t.Errorf(".goreleaser.yaml's nfpms lack %q", want)
		}
	}
	if !strings.Contains(unit, "\nStateDirectory=vk-sandbox\n") {
		t.Error("the unit has no StateDirectory=vk-sandbox")
	}
	if strings.Contains(gr, "dst: /var/lib/") {
		t.Error(".goreleaser.yaml's nfpms install under /var/lib: the unit's StateDirectory= owns its state directory")
	}
}
