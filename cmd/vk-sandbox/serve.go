package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// nodeHolder is this process's hold on its node name (kube.Holder) and
// the identity it holds it under.
type nodeHolder struct {
	*kube.Holder
	identity, lease string
	log             *slog.Logger
}

// acquireHolder takes the node's holder lease under this host's identity,
// or refuses to start: another live vk-sandbox serves the node, or the
// Node is not a virtual-kubelet node.
func acquireHolder(ctx context.Context, cfg *config, client kubernetes.Interface, log *slog.Logger) (*nodeHolder, error) {
	id, err := holderIdentity(filepath.Dir(cfg.StatePath), os.Hostname)
	if err != nil {
		return nil, err
	}
	h, err := kube.NewHolder(kube.HolderOptions{Client: client, Node: cfg.NodeName, Identity: id, Log: log})
	if err != nil {
		return nil, err
	}
	if err := h.Acquire(ctx); err != nil {
		return nil, err
	}
	lease := kube.HolderLeaseNamespace + "/" + kube.HolderLeaseName(cfg.NodeName)
	log.Info("holding the node", "node", cfg.NodeName, "holder", id, "lease", lease)
	return &nodeHolder{Holder: h, identity: id, lease: lease, log: log}, nil
}

// check is /readyz's "node holder" line.
func (h *nodeHolder) check() error {
	if h.Held() {
		return nil
	}
	return fmt.Errorf("not holding the holder lease %s", h.lease)
}

// serve runs run (the daemon) while the lease is renewed. Losing the
// lease stops the daemon as a shutdown does (intake stops, in-flight
// claims finish) and is then an error: the process exits non-zero rather
// than serve beside another holder. The lease is renewed until run has
// returned, through the whole shutdown, and cleared after a clean one, so
// that the next process takes the node at once.
func (h *nodeHolder) serve(ctx context.Context, run func(context.Context) error) error {
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	holdCtx, stopHolding := context.WithCancel(context.WithoutCancel(ctx))
	lost := make(chan error, 1)
	go func() {
		err := h.Run(holdCtx)
		if err != nil {
			h.log.Error("this process no longer holds its node: stopping", "error", err)
			stopServing()
		}
		lost <- err
	}()
	err := run(serveCtx)
	stopHolding()
	if lerr := <-lost; lerr != nil {
		return errors.Join(lerr, err)
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := h.Release(rctx); rerr != nil {
		h.log.Warn("the holder lease was not cleared: the next process on another host waits for it to expire", "error", rerr)
	}
	return err
}
