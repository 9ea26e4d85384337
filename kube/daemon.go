package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// DaemonConfig is one virtual node, whole: the provider, the claim pipeline
// it feeds, the virtual node that serves them, and the loops beside them.
type DaemonConfig struct {
	// Provider configures the provider; it feeds the daemon's own
	// pipeline, built from Pipeline.
	Provider ProviderOptions
	// Pipeline configures the claim pipeline; its Reporter is the
	// provider, and its Owners the provider's Authorizer when unset.
	Pipeline pipeline.Config
	Node     NodeOptions
	// Inventory, when set, publishes the NodeInventory every
	// InventoryInterval from the pipeline's claims.
	Inventory         *InventoryPublisher
	InventoryInterval time.Duration
	// Loops are more background loops, started with the node and joined
	// before Run returns (the binary's sandboxd probe and feature watch).
	Loops []func(ctx context.Context, d *Daemon)
	// ShutdownTimeout bounds each of the two waits of a shutdown: for the
	// virtual node to stop, then for in-flight claims. Default 30s.
	ShutdownTimeout time.Duration
	Log             *slog.Logger
}

// Daemon is an assembled virtual node; Run runs it.
type Daemon struct {
	cfg  DaemonConfig
	prov *Provider
	eng  *pipeline.Engine
	node *Node
}

// NewDaemon builds the provider, its pipeline and the virtual node, and
// restores the provider's view of the claims the state file holds.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Inventory != nil && cfg.InventoryInterval <= 0 {
		return nil, errors.New("kube: a NodeInventory publisher needs an interval")
	}
	d := &Daemon{cfg: cfg}
	po := cfg.Provider
	prov, err := newProvider(po, func(rep pipeline.Reporter) (claimEngine, error) {
		pc := cfg.Pipeline
		pc.Reporter = rep
		if pc.Owners == nil && po.Authorizer != nil {
			pc.Owners = po.Authorizer.recordedOwner
		}
		eng, err := pipeline.New(pc)
		d.eng = eng
		return eng, err
	})
	if err != nil {
		return nil, err
	}
	d.prov = prov
	if n := prov.restore(d.eng.Range); n > 0 {
		cfg.Log.Info("restored claims from the state file; Pods deleted while this process was down are released or preserved by their owner", "rows", n)
	}
	if d.node, err = newNode(cfg.Node, prov); err != nil {
		return nil, err
	}
	if cfg.Inventory != nil {
		cfg.Inventory.claims = d.eng
	}
	return d, nil
}

// Provider, Engine and Node are the daemon's parts, for what observes them
// (metrics, readiness), and for tests that drive the provider and its
// pipeline themselves (Engine.Run) without running the virtual node.
func (d *Daemon) Provider() *Provider      { return d.prov }
func (d *Daemon) Engine() *pipeline.Engine { return d.eng }
func (d *Daemon) Node() *Node              { return d.node }

// Run runs the virtual node until ctx ends (or the node fails), then shuts
// down: the node stops taking Pods, in-flight claims finish or roll back,
// and every loop ends. Everything Run started has ended when it returns
// (but for a wait that ran past ShutdownTimeout, which is logged), so the
// caller may close the store then. It never releases a VM because of
// shutdown.
func (d *Daemon) Run(ctx context.Context) error {
	// The pipeline and the loops outlive the node's intake (ctx).
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	var loops sync.WaitGroup
	for _, loop := range d.cfg.Loops {
		loops.Go(func() { loop(loopCtx, d) })
	}
	if d.cfg.Inventory != nil {
		loops.Go(func() { d.cfg.Inventory.run(loopCtx, d.cfg.InventoryInterval) })
	}
	engDone := make(chan struct{})
	go func() { d.eng.Run(loopCtx); close(engDone) }()

	nodeErr := make(chan error, 1)
	go func() { nodeErr <- d.node.run(ctx) }()
	var err error
	select {
	case err = <-nodeErr:
		if ctx.Err() == nil {
			err = fmt.Errorf("virtual node: %w", err)
		} else {
			err = nil
		}
	case <-ctx.Done():
		d.cfg.Log.Info("shutdown: stopping intake")
		select {
		case <-nodeErr:
		case <-time.After(d.cfg.ShutdownTimeout):
			d.cfg.Log.Warn("shutdown: the virtual node did not stop in time")
		}
	}
	// In-flight transactions finish (or roll back); queued ones stay
	// Pending for the next process. The loops end with them.
	stopLoops()
	select {
	case <-engDone:
	case <-time.After(d.cfg.ShutdownTimeout):
		d.cfg.Log.Warn("shutdown: in-flight claims did not finish in time")
	}
	loops.Wait()
	return err
}
