package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Dir holds etcd data, credentials, certificates and logs. Default: a
	// new temporary directory, removed by Stop. A caller-supplied Dir is
	// left in place.
	Dir string
	// Logf receives progress lines (ports, readiness times). Default: none.
	Logf func(format string, args ...any)
	// Users are extra token identities; see UserConfig.
	Users []User
	// StartTimeout bounds the wait for each process to become ready.
	// Default: 60s, generous for 2 loaded CI cores (a quiet machine needs
	// about 1s).
	StartTimeout time.Duration
	// ExtraAPIServerFlags are appended to the test control plane's flags; a repeated
	// flag overrides the earlier value.
	ExtraAPIServerFlags []string
}

// Env is a running etcd plus kube-apiserver.
//
// Config, Kubeconfig and Clientset stay valid across StopAPIServer and
// StartAPIServer: the port, token and serving certificate do not change.
// Methods are safe for concurrent use.
type Env struct {
	// Config is an admin client config (bearer token in system:masters)
	// that verifies the apiserver against its self-signed CA. Its rate
	// limit is raised for load tests; rest.CopyConfig it to change it.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file equivalent to Config.
	Kubeconfig string
	// Dir is Options.Dir or the temporary directory created for it.
	Dir string
	// EtcdURL is etcd's client URL, e.g. http://127.0.0.1:40123.
	EtcdURL string
	// APIServerURL is the apiserver's URL, e.g. https://127.0.0.1:40125.
	APIServerURL string
	// EtcdLog and APIServerLog are the processes' combined stdout and
	// stderr. Restarts append to the same file.
	EtcdLog, APIServerLog string
	// KubeletClientCA is the PEM file of the CA that signed the
	// apiserver's kubelet client certificate (CN KubeletClientUser): give
	// it to a kubelet API as its client CA (vk-sandbox --client-ca-file) so
	// that the apiserver's proxied exec, port-forward and stats get through.
	KubeletClientCA string

	opts      Options
	ownDir    bool
	bins      struct{ etcd, apiserver string }
	creds     credentials
	clientset kubernetes.Interface

	mu        sync.Mutex // guards the fields below
	etcd      *proc
	apiserver *proc
	apiPort   int
	stopped   bool
}

// Start builds or finds the binaries, starts etcd and kube-apiserver on
// free loopback ports, and returns once /readyz answers 200. On error
// nothing is left running.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	begin := time.Now()
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	e := &Env{opts: o, Dir: o.Dir}
	if e.bins.etcd, err = binary(ctx, "etcd", e.logf); err != nil {
		return nil, err
	}
	if e.bins.apiserver, err = binary(ctx, "kube-apiserver", e.logf); err != nil {
		return nil, err
	}

	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "kubetest-"); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
		e.ownDir = true
	} else if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	e.EtcdLog = filepath.Join(e.Dir, "etcd.log")
	e.APIServerLog = filepath.Join(e.Dir, "kube-apiserver.log")
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()

	if e.creds, err = writeCredentials(e.Dir, o.Users); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	if err := e.startEtcd(ctx); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	if err := e.startAPIServer(ctx, 0); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	if err := e.initClients(ctx); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	e.KubeletClientCA = e.creds.kubelet.caFile
	if err := e.bindKubeletClient(ctx); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	e.logf("kubetest: control plane up in %s (etcd %s, apiserver %s, dir %s)",
		time.Since(begin).Round(time.Millisecond), e.EtcdURL, e.APIServerURL, e.Dir)
	return e, nil
}

// StartT starts an Env for a test and stops it in t.Cleanup. It never
// skips: if the binaries cannot be found or built, the test fails. When the
// test has failed, the cleanup logs the tail of the apiserver log first.
func StartT(t testing.TB) *Env {
	t.Helper()
	return StartTWith(t, Options{})
}

// StartTWith is StartT with options. Dir defaults to t.TempDir() and Logf
// to t.Logf.
func StartTWith(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	e, err := Start(t.Context(), o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubetest: tail of %s:\n%s", e.APIServerLog, tailFile(e.APIServerLog, 0, 40))
		}
		e.Stop()
	})
	return e
}

// Stop kills kube-apiserver and etcd (SIGKILL to each process group: the
// data is disposable), waits for them, and removes Dir if Start created it.
// It is idempotent.
func (e *Env) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	var errs []error
	// The apiserver first, so it does not log a storm of etcd errors.
	for _, p := range []*proc{e.apiserver, e.etcd} {
		if p != nil {
			errs = append(errs, p.stop(0))
		}
	}
	e.apiserver, e.etcd = nil, nil
	if e.ownDir {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		e.logf("kubetest: stop: %v", err)
	}
}

// apiServerStopGrace lets StopAPIServer shut down like a rolling restart:
// in-flight requests finish and watches are closed, not reset.
const apiServerStopGrace = 10 * time.Second

// StopAPIServer stops only kube-apiserver (SIGTERM, then SIGKILL after
// 10s), for fault tests. etcd and its data stay; StartAPIServer brings the
// apiserver back on the same address.
func (e *Env) StopAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.apiserver == nil {
		return errors.New("kubetest: kube-apiserver is not running")
	}
	start := time.Now()
	err := e.apiserver.stop(apiServerStopGrace)
	e.apiserver = nil
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	e.logf("kubetest: kube-apiserver stopped in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// StartAPIServer restarts kube-apiserver on the same port, with the same
// credentials and certificate, and waits for /readyz.
func (e *Env) StartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.stopped:
		return errors.New("kubetest: env is stopped")
	case e.apiserver != nil:
		return errors.New("kubetest: kube-apiserver is already running")
	}
	if err := e.startAPIServer(ctx, e.apiPort); err != nil {
		return fmt.Errorf("kubetest: restart on port %d: %w", e.apiPort, err)
	}
	return nil
}

// Clientset returns an admin clientset built from Config.
func (e *Env) Clientset() kubernetes.Interface { return e.clientset }

// UserConfig returns Config with the admin token replaced by token, which
// should belong to one of Options.Users. An unknown token authenticates as
// nobody and gets 401.
func (e *Env) UserConfig(token string) *rest.Config {
	c := rest.AnonymousClientConfig(e.Config)
	c.BearerToken = token
	return c
}

func (e *Env) logf(format string, args ...any) {
	if e.opts.Logf != nil {
		e.opts.Logf(format, args...)
	}
}
