package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Scheduler is a kube-scheduler running against an Env, for tests that
// need Pods bound the way a cluster binds them (taints, node selectors)
// rather than by setting spec.nodeName.
type Scheduler struct {
	// Log is the scheduler's combined stdout and stderr.
	Log string
	p   *proc
}

// StartScheduler starts kube-scheduler with the admin kubeconfig, no leader
// election, and its secure port on a free loopback port, and returns once
// its /healthz answers. It schedules every Pod of the Env that names no
// node, with the default profile.
func (e *Env) StartScheduler(ctx context.Context) (*Scheduler, error) {
	bin, err := binary(ctx, "kube-scheduler", e.logf)
	if err != nil {
		return nil, err
	}
	log := filepath.Join(e.Dir, "kube-scheduler.log")
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, fmt.Errorf("kube-scheduler: %w", err)
		}
		start := time.Now()
		p, err := startProc("kube-scheduler", bin, []string{
			"--kubeconfig=" + e.Kubeconfig,
			// The same kubeconfig authenticates and authorizes requests to
			// its own port; /healthz is always allowed anyway.
			"--authentication-kubeconfig=" + e.Kubeconfig,
			"--authorization-kubeconfig=" + e.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
		}, log)
		if err != nil {
			return nil, err
		}
		host := "https://127.0.0.1:" + strconv.Itoa(port)
		err = waitReady(ctx, p, e.opts.StartTimeout, func(ctx context.Context) error { return probeOK(ctx, host+"/healthz", "") })
		if err == nil {
			e.logf("kubetest: kube-scheduler ready on %s in %s", host, time.Since(start).Round(time.Millisecond))
			return &Scheduler{Log: log, p: p}, nil
		}
		_ = p.stop(0)
		if attempt < portRetries && isAddrInUse(p.tail(50)) {
			continue
		}
		return nil, fmt.Errorf("kubetest: %w", err)
	}
}

// StartSchedulerT is StartScheduler for a test: it fails the test on error,
// and stops the scheduler in t.Cleanup, logging its tail if the test failed.
func (e *Env) StartSchedulerT(t testing.TB) *Scheduler {
	t.Helper()
	s, err := e.StartScheduler(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubetest: tail of %s:\n%s", s.Log, s.p.tail(40))
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Stop stops the scheduler (SIGTERM, then SIGKILL after 10s).
func (s *Scheduler) Stop() error { return s.p.stop(10 * time.Second) }
