package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hostnameIs(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

// The default node name is the host's, lower-cased and made a DNS-1123
// subdomain, with -sandboxd: two hosts never default to one name. A host
// name that cannot make one is a startup error that says so.
func TestTheDefaultNodeNameIsTheHostsOwn(t *testing.T) {
	for host, want := range map[string]string{
		"worker-1":             "worker-1-sandboxd",
		"Worker_1.Example.COM": "worker-1.example.com-sandboxd",
		"gpu box 7":            "gpu-box-7-sandboxd",
	} {
		if got, err := defaultNodeName(hostnameIs(host)); err != nil || got != want {
			t.Errorf("host %q: %q, %v; want %q", host, got, err, want)
		}
	}
	for _, host := range []string{"", "___", strings.Repeat("a", 250)} {
		if got, err := defaultNodeName(hostnameIs(host)); err == nil || !strings.Contains(err.Error(), "no --node-name") {
			t.Errorf("host %q: %q, %v; want an error saying there is no --node-name", host, got, err)
		}
	}
	if _, err := defaultNodeName(func() (string, error) { return "", errors.New("uname failed") }); err == nil || !strings.Contains(err.Error(), "uname failed") {
		t.Errorf("unreadable host name: %v", err)
	}
	host, _ := os.Hostname()
	want, _ := defaultNodeName(hostnameIs(host))
	if c, err := parseFlags(nil); err != nil || c.NodeName != want {
		t.Errorf("no --node-name: %q, %v; want %q", c.NodeName, err, want)
	}
	if _, err := parseFlags([]string{"--node-name", "Not_A_Node"}); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Errorf("--node-name Not_A_Node: %v", err)
	}
}

// The holder identity is the host name and an instance id kept beside
// the state file: the same host with the same state directory is the same
// holder after any restart, and another state directory is another holder.
func TestTheHolderIdentityIsStablePerHostAndStateDirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := holderIdentity(dir, hostnameIs("host-a"))
	if err != nil || !strings.HasPrefix(a, "host-a/") || len(a) != len("host-a/")+16 {
		t.Fatalf("identity %q, %v", a, err)
	}
	if again, err := holderIdentity(dir, hostnameIs("host-a")); err != nil || again != a {
		t.Errorf("restart: %q, %v; want %q", again, err, a)
	}
	if other, err := holderIdentity(t.TempDir(), hostnameIs("host-a")); err != nil || other == a {
		t.Errorf("another state directory: %q, %v; want another identity than %q", other, err, a)
	}
	if err := os.WriteFile(filepath.Join(dir, instanceIDFile), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fresh, err := holderIdentity(dir, hostnameIs("host-a")); err != nil || fresh == a || !strings.HasPrefix(fresh, "host-a/") {
		t.Errorf("a damaged id file: %q, %v; want a new identity", fresh, err)
	}
}
