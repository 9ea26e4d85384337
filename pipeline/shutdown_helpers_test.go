package pipeline_test

import (
	"context"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// gatedSandboxd holds every Claim until the test opens the gate, and then
// answers a capacity miss: a transaction that is in flight on demand.
type gatedSandboxd struct {
	pipeline.Sandboxd
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedSandboxd) Claim(ctx context.Context, _ pool.ClaimRequest) (pool.ClaimResponse, error) {
	g.entered <- struct{}{}
	<-g.gate
	return pool.ClaimResponse{}, &pool.HTTPError{Verb: pool.VerbClaim, Status: 429, Message: "node at max_claims"}
}
