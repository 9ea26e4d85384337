package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// redetectInterval is how often the node's features are asked again: a
// host's sandboxd can be upgraded or downgraded under a running node.
const redetectInterval = 5 * time.Minute

// featureWatch learns what the node's sandboxd supports (pool.Client.Detect,
// which claims and changes nothing), at startup and again every
// redetectInterval, so that a sandboxd restarted as another version is
// noticed. It logs the profile once when first found and again when it
// changes, with a warning for each feature the node lacks and what the
// provider does instead; exports vksandbox_sandboxd_feature; and gives
// /readyz a line naming the profile.
type featureWatch struct {
	sbx     *pool.Client
	log     *slog.Logger
	metrics interface{ SandboxdFeatures(map[string]bool) }
	last    atomic.Pointer[pool.Features]
	skip    atomic.Bool // --sandboxd-detect=false
}

// off is --sandboxd-detect=false: nothing is probed, and every feature
// stays unknown, which each path takes as "try it and check the answer".
func (w *featureWatch) off() {
	w.skip.Store(true)
	w.log.Warn("sandboxd feature detection is off (--sandboxd-detect=false): every feature is tried and its answer checked; on a server before V2 that means a full listing per lost-answer lookup, renewals that fail, and sandboxd's own 404 for kubectl exec, port-forward and top")
}

func (w *featureWatch) run(ctx context.Context) {
	for {
		bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond),
			backoff.WithMaxInterval(30*time.Second), backoff.WithMaxElapsedTime(0))
		_ = backoff.Retry(func() error {
			f, err := w.sbx.Detect(ctx)
			if err != nil {
				w.log.Debug("sandboxd features not detected yet", "error", err)
				return err
			}
			w.found(f)
			return nil
		}, backoff.WithContext(bo, ctx))
		select {
		case <-ctx.Done():
			return
		case <-time.After(redetectInterval):
		}
	}
}

func (w *featureWatch) found(f pool.Features) {
	prev := w.last.Swap(&f)
	if prev != nil && *prev == f {
		return
	}
	if w.metrics != nil {
		w.metrics.SandboxdFeatures(f.Names())
	}
	if prev != nil {
		w.log.Warn("sandboxd's features changed (restarted as another version?)", "before", *prev, "now", f)
	} else {
		w.log.Info("sandboxd features detected", "features", f)
	}
	for _, m := range missing(f) {
		w.log.Warn("sandboxd lacks a feature: "+m.what, "feature", m.feature, "instead", m.instead)
	}
}

// note is /readyz's line about the features, once they are known.
func (w *featureWatch) notes() []string {
	if f := w.last.Load(); f != nil {
		return []string{"sandboxd features: " + f.String()}
	}
	if w.skip.Load() {
		return []string{"sandboxd features: detection off (--sandboxd-detect=false)"}
	}
	return []string{"sandboxd features: not detected yet"}
}

type lack struct{ feature, what, instead string }

// missing says, for each feature the node lacks, what the provider does
// without it. docs/compatibility.md is the same table for operators.
func missing(f pool.Features) []lack {
	var out []lack
	if !f.Metadata {
		out = append(out, lack{"metadata", "claim metadata is dropped (sandboxd before V3)",
			"this node's VMs are told apart by their marked claim_ref alone, which names the Pod generation a VM was made for; no owner label is kept on them"})
	}
	if !f.ClaimRefFilter {
		out = append(out, lack{"claim_ref_filter", "?claim_ref= is ignored (sandboxd before V2)",
			"a Pod key's VMs are found by filtering full listings, which concurrent lookups share"})
	}
	if f.Token == pool.TokenRoot && !f.TokenRead {
		out = append(out, lack{"token_read", "the by-id read carries no sandbox token (sandboxd before V2)",
			"a VM whose claim answer was lost is released by id with the root token, and its Pod claims afresh"})
	}
	if !f.Renew {
		out = append(out, lack{"renew", "leases cannot be renewed (sandboxd before V2)",
			"a VM lives until its grant (at most 24 h); a Pod that asked for longer gets a Warning Event"})
	}
	if !f.Exec && !f.Agent {
		out = append(out, lack{"exec", "no exec verb and no agent relay",
			"kubectl exec is refused with a message naming the missing verb"})
	}
	if !f.Ports {
		out = append(out, lack{"ports", "no ports relay", "kubectl port-forward is refused with a message naming the missing verb"})
	}
	if f.Token == pool.TokenRoot && !f.Stats {
		out = append(out, lack{"stats", "no per-sandbox stats", "kubectl top shows no usage for sandbox Pods"})
	}
	return out
}
