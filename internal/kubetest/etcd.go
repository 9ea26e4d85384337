package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// etcdQuotaBytes lifts the backend quota from etcd's 2 GiB default so that
// load tests creating many Pods never hit "mvcc: database space exceeded".
const etcdQuotaBytes = 8 << 30

// startEtcd starts a single-member etcd on fresh loopback ports and waits
// until it reports healthy. If it lost a race for a port, it starts again on
// new ports.
func (e *Env) startEtcd(ctx context.Context) error {
	dataDir := filepath.Join(e.Dir, "etcd")
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=kubetest",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=kubetest=" + peer,
			"--quota-backend-bytes=" + strconv.Itoa(etcdQuotaBytes),
			// The data is thrown away with the Env; durability buys nothing
			// here and fsync latency dominates write-heavy tests.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
		p, err := startProc("etcd", e.bins.etcd, args, e.EtcdLog)
		if err != nil {
			return err
		}
		err = waitReady(ctx, p, e.opts.StartTimeout, func(ctx context.Context) error {
			return etcdHealthy(ctx, client)
		})
		if err == nil {
			e.etcd = p
			e.EtcdURL = client
			return nil
		}
		_ = p.stop(0)
		if attempt < portRetries && isAddrInUse(p.tail(50)) {
			e.logf("kubetest: etcd lost a port race (%d, %d); retrying on new ports", ports[0], ports[1])
			// A half-initialized member remembers the old peer URL.
			_ = os.RemoveAll(dataDir)
			continue
		}
		return err
	}
}

func etcdHealthy(ctx context.Context, client string) error {
	body, err := httpGet(ctx, client+"/health", 4096)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s", strings.TrimSpace(string(body)))
	}
	return nil
}
