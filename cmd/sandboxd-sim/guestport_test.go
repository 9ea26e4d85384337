package main

import (
	"maps"
	"testing"
)

func TestInteractiveFlagsReachTheConfig(t *testing.T) {
	o, err := parseFlags([]string{
		"--token-file", writeToken(t, "root", "r00t"),
		"--guest-port", "8080=127.0.0.1:41234", "--guest-port", "22=[::1]:2222",
		"--guest-loopback", "--exec-memory", "1048576",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if !maps.Equal(c.GuestPorts, map[int]string{8080: "127.0.0.1:41234", 22: "[::1]:2222"}) || !c.GuestLoopback || c.ExecMemory != 1<<20 {
		t.Errorf("config: guest ports %v, loopback %v, exec memory %d", c.GuestPorts, c.GuestLoopback, c.ExecMemory)
	}
	o, err = parseFlags([]string{"--token-file", writeToken(t, "root2", "r00t")})
	if err != nil || o.cfg.GuestPorts != nil || o.cfg.GuestLoopback || o.cfg.ExecMemory != 256<<20 {
		t.Errorf("defaults: %v, %+v", err, o.cfg)
	}
}

func TestBadGuestPortFlagsAreErrors(t *testing.T) {
	root := writeToken(t, "root", "r00t")
	for name, v := range map[string]string{
		"no =":       "8080",
		"port 0":     "0=127.0.0.1:1",
		"port 70000": "70000=127.0.0.1:1",
		"no port":    "80=localhost",
		"not a port": "http=127.0.0.1:1",
	} {
		if _, err := parseFlags([]string{"--token-file", root, "--guest-port", v}); err == nil {
			t.Errorf("%s: --guest-port %q accepted", name, v)
		}
	}
	if _, err := parseFlags([]string{"--token-file", root, "--guest-port", "80=127.0.0.1:1", "--guest-port", "80=127.0.0.1:2"}); err == nil {
		t.Error("a guest port given twice was accepted")
	}
}
