package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
)

func TestLogFormatIsJSONOrText(t *testing.T) {
	for _, f := range []string{"json", "text"} {
		if c, err := parseFlags([]string{"--log-format=" + f}); err != nil || c.LogFormat != f {
			t.Errorf("--log-format=%s: %v, %v", f, c, err)
		}
	}
	t.Setenv("VK_LOG_FORMAT", "text")
	if c, err := parseFlags(nil); err != nil || c.LogFormat != "text" {
		t.Errorf("VK_LOG_FORMAT=text: %v, %v", c, err)
	}
	if _, err := parseFlags([]string{"--log-format=logfmt"}); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("--log-format=logfmt: %v", err)
	}
	if _, err := parseFlags([]string{"--sandboxd-ping-interval=0s"}); err == nil {
		t.Error("--sandboxd-ping-interval=0s was accepted")
	}
}

// The startup /v1/info probe tells a refused token from sandboxd being
// unreachable when the process stops: only a 401 says "refused".
func TestProbeSaysRefusedOnlyFor401(t *testing.T) {
	probe := func(ctx context.Context, url string) string {
		t.Helper()
		sbx, err := pool.NewClient(pool.ClientOptions{BaseURL: url, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		probeSandboxd(ctx, sbx, nil, nil, "off", "", slog.New(slog.NewTextHandler(&buf, nil)))
		return buf.String()
	}
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
	}))
	defer refuse.Close()
	if got := probe(t.Context(), refuse.URL); !strings.Contains(got, "refused the token (401") {
		t.Errorf("401: %q", got)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	stopped, cancel := context.WithCancel(t.Context())
	cancel() // shutdown while sandboxd is down
	if got := probe(stopped, down.URL); strings.Contains(got, "refused") || strings.Contains(got, "level=ERROR") {
		t.Errorf("shutdown with sandboxd down: %q", got)
	}
}

// /readyz means "this process serves its node": it fails on the holder
// lease, the node's registration or the state file, and names every line,
// and the sandboxd features found; sandboxd being down is a line of the
// detail but never fails it (the node's SandboxdReady condition and taint
// say it), so one host's sandboxd outage does not hold up a rollout.
func TestReadinessIsServingTheNodeNotSandboxdsHealth(t *testing.T) {
	checks := []kube.Check{{Name: "virtual node"}, {Name: "sandboxd", Info: true, Err: errors.New("unreachable: dial tcp 127.0.0.1:7777: connection refused")}}
	notes := func() []string { return []string{"sandboxd features: token=root metadata=false"} }
	ok := func() error { return nil }
	nodeChecks := func() []kube.Check { return checks }
	detail, err := readiness(ok, nodeChecks, ok, notes)()
	want := "node holder: ok\nvirtual node: ok\nsandboxd: unreachable: dial tcp 127.0.0.1:7777: connection refused\nstate file: ok\nsandboxd features: token=root metadata=false\n"
	if err != nil || detail != want {
		t.Errorf("sandboxd down: readyz = %q (%v), want %q and ready", detail, err, want)
	}
	if detail, err := readiness(func() error { return errors.New("not holding the holder lease kube-node-lease/vk-sandbox-n") }, nodeChecks, ok, notes)(); err == nil ||
		!strings.Contains(detail, "node holder: not holding the holder lease kube-node-lease/vk-sandbox-n\n") {
		t.Errorf("lease not held: %q, %v", detail, err)
	}
	checks[0].Err = errors.New("not registered yet")
	if detail, err := readiness(ok, nodeChecks, ok, notes)(); err == nil || !strings.Contains(detail, "virtual node: not registered yet\n") {
		t.Errorf("node not registered: %q, %v", detail, err)
	}
	checks[0].Err, checks[1].Err = nil, nil
	if detail, err := readiness(ok, nodeChecks, func() error { return errors.New("fsync: input/output error") }, notes)(); err == nil ||
		!strings.Contains(detail, "state file: fsync: input/output error\n") {
		t.Errorf("state file failing: %q, %v", detail, err)
	}
	if detail, err := readiness(ok, nodeChecks, ok, notes)(); err != nil || !strings.Contains(detail, "sandboxd features: ") {
		t.Errorf("all pass: %q, %v", detail, err)
	}
}
