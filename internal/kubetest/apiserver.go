package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// apiServerArgs are the flags of the test control plane (scripts/build-tools.sh). The serving certificate is
// self-signed by the apiserver into certDir on the first start and reused on
// every restart, so clients keep trusting it.
func (e *Env) apiServerArgs(port int) []string {
	args := []string{
		"--etcd-servers=" + e.EtcdURL,
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		// The self-signed certificate is issued for the advertise address;
		// pin it so that it covers the address clients dial.
		"--advertise-address=127.0.0.1",
		// The default endpoint reconciler refuses a loopback advertise
		// address and the apiserver exits ("may not be in the loopback
		// range"). Nothing here dials the kubernetes Service, so do not
		// publish its endpoints at all.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + e.certDir(),
		"--token-auth-file=" + e.creds.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + e.creds.saPub,
		"--service-account-signing-key-file=" + e.creds.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// No token controller runs, so ServiceAccount admission would
		// reject every Pod for want of a default service account.
		"--disable-admission-plugins=ServiceAccount",
	}
	args = append(args, e.creds.kubelet.apiServerArgs()...)
	return append(args, e.opts.ExtraAPIServerFlags...)
}

func (e *Env) certDir() string { return filepath.Join(e.Dir, "apiserver-certs") }

// startAPIServer starts kube-apiserver and waits for /readyz. port 0 picks a
// fresh port and retries on a lost port race; a non-zero port (a restart) is
// used as is, because clients already point at it.
func (e *Env) startAPIServer(ctx context.Context, port int) error {
	fixed := port != 0
	for attempt := 1; ; attempt++ {
		if !fixed {
			ports, err := freePorts(1)
			if err != nil {
				return fmt.Errorf("kube-apiserver: %w", err)
			}
			port = ports[0]
		}
		start := time.Now()
		p, err := startProc("kube-apiserver", e.bins.apiserver, e.apiServerArgs(port), e.APIServerLog)
		if err != nil {
			return err
		}
		host := "https://127.0.0.1:" + strconv.Itoa(port)
		err = waitReady(ctx, p, e.opts.StartTimeout, func(ctx context.Context) error {
			return apiServerReady(ctx, host, e.creds.adminToken)
		})
		if err == nil {
			e.apiserver = p
			e.apiPort = port
			e.APIServerURL = host
			e.logf("kubetest: kube-apiserver ready on %s in %s", host, time.Since(start).Round(time.Millisecond))
			return nil
		}
		_ = p.stop(0)
		if !fixed && attempt < portRetries && isAddrInUse(p.tail(50)) {
			e.logf("kubetest: kube-apiserver lost a port race (%d); retrying on a new port", port)
			continue
		}
		return err
	}
}

// readyzClient skips verification: it only probes readiness, possibly
// before the apiserver has written its certificate. Real clients use the CA
// from certDir (see restConfig).
var readyzClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe only
	DisableKeepAlives: true,
}}

func apiServerReady(ctx context.Context, host, token string) error {
	return probeOK(ctx, host+"/readyz", token)
}

// probeOK GETs a probe URL (with token as a bearer, unless empty) and
// fails unless it answers 200.
func probeOK(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := readyzClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", req.URL.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// readyPollInterval trades probe load against start latency; the apiserver
// takes about a second, so 50ms costs at most 5% of it.
const readyPollInterval = 50 * time.Millisecond

// waitReady polls probe until it succeeds, the process exits, or timeout
// (or ctx) expires. Errors carry the tail of the process's log.
func waitReady(ctx context.Context, p *proc, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last := probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		if err := p.exitedErr(); err != nil {
			return err
		}
		select {
		case <-p.done:
			return p.exitedErr()
		case <-ctx.Done():
			why := "timed out"
			if errors.Is(context.Cause(ctx), context.Canceled) {
				why = "canceled"
			}
			return fmt.Errorf("%s not ready (%s after %s; last probe: %v); log %s:\n%s", p.name, why, timeout, last, p.logPath, p.tail(30))
		case <-tick.C:
		}
	}
}

// readCA returns the certificate the apiserver serves with, written to
// certDir on its first start. The file holds the serving certificate
// followed by the CA that signed it; both work as trust roots.
func (e *Env) readCA() ([]byte, error) {
	p := filepath.Join(e.certDir(), "apiserver.crt")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read apiserver certificate: %w", err)
	}
	return b, nil
}
