package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// claimer is the claim transaction's own work, and nothing around it: with
// -sandboxd, each Pod's writer first claims one VM (one exchange, through
// the project's pool.Client, as vk-sandbox makes it) and records it in a
// state file (one fsynced group commit, pool/store), then writes Running.
// So a node that claims can be read against the least any node that claims
// must do: the minimal node plus the claim.
//
// Nothing else of vk-sandbox's is here: no lookup of a lost answer, no
// retry of a claim, no release, no lease, no Event, no owner. A claim that
// fails is reported and its Pod is left Pending, so a run with one does
// not complete.
type claimer struct {
	sbx *pool.Client
	st  *store.Store
	id  pipeline.Identity
}

func newClaimer(url, token, state, node string, inFlight int) (*claimer, error) {
	sbx, err := pool.NewClient(pool.ClientOptions{BaseURL: url, Token: token, MaxIdleConns: inFlight})
	if err != nil {
		return nil, err
	}
	st, err := store.Open(state, store.Options{})
	if err != nil {
		return nil, err
	}
	// Marked as vk-sandbox marks its claims: with the node key beside the
	// state file.
	key, err := st.NodeKey()
	if err != nil {
		st.Close()
		return nil, err
	}
	return &claimer{sbx: sbx, st: st, id: pipeline.Identity{Node: node, Key: key}}, nil
}

// claim claims p's VM and makes it durable.
func (c *claimer) claim(ctx context.Context, p *corev1.Pod) error {
	key := pipeline.JoinKey(p.Namespace, p.Name)
	ref, err := c.id.ClaimRef(key, string(p.UID))
	if err != nil {
		return err
	}
	resp, err := c.sbx.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: ref})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	row := store.Claim{ID: resp.ID, Token: resp.Token, Address: resp.OwnerAddr, PodUID: string(p.UID),
		ClaimedAt: time.Now(), Deadline: resp.Deadline}
	if err := c.st.Put(ctx, string(key), row); err != nil {
		return fmt.Errorf("record claim %s: %w", resp.ID, err)
	}
	return nil
}

func (c *claimer) close() error { return c.st.Close() }
