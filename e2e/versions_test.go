package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The core contracts on the oldest sandboxd the node supports (V1: no
// metadata, no ?claim_ref= filter, no token on the by-id read, no renew),
// on V2 (no metadata) and on the newest, each against the real apiserver:
// the profile is detected and exported; a claim runs; a delete with a live
// owner preserves and the replacement adopts; the owner's delete releases;
// a bare Pod's delete releases; a restart keeps every row; lost claim
// answers end with one VM per Pod; a VM finalized after its caller gave up
// is released as undelivered; the orphan audit leaves other clients' VMs
// alone; the lease follows what the node can renew; and the NodeInventory
// lists exactly the node's claims.
//
// VK_E2E_DETECT=off runs the same suite with --sandboxd-detect=false, to
// show what feature detection carries: every profile then fails (the
// profile is not exported, and on V1 leases are renewed in vain and the
// Pod is never told its lease cannot be renewed).
func TestContractsOnEverySandboxdVersion(t *testing.T) {
	for _, v := range []string{sim.V1, sim.V2, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) {
			f, err := sim.FeaturesOf(v)
			if err != nil {
				t.Fatal(err)
			}
			p := profileRun{api: v, has: f, ns: newNamespace(t)}
			p.start(t)
			p.detected(t)
			p.ownerContracts(t)
			p.restartKeepsRows(t)
			p.lostAnswers(t, 6)
			p.finalizedAfterGiveUp(t)
			p.orphanAudit(t)
			p.lease(t)
			p.inventory(t)
		})
	}
}

// profileGrant is the emulator's grant cap on the profiles that renew: a
// Pod without ttl-seconds lives across several of them in one run. On V1,
// which cannot renew, the cap is long and a Pod asks for more.
const profileGrant = 10 * time.Second

func (p *profileRun) start(t *testing.T) {
	t.Helper()
	margs, scrape := metricsArgs(t)
	p.scrape = scrape
	args := append(margs, "--sandboxd-claim-timeout", "500ms", "--settle-window", "1s", "--orphan-scan-interval", "300ms",
		"--lease-check-interval", "200ms", "--publish-inventory", "--publish-interval", "300ms")
	if os.Getenv("VK_E2E_DETECT") == "off" {
		args = append(args, "--sandboxd-detect=false")
	}
	grant := profileGrant
	if !p.has.Renew {
		grant = time.Hour
	}
	if err := env.InstallCRDs(context.Background(), "../manifests/test/nodeinventory-crd.yaml"); err != nil {
		t.Fatal(err)
	}
	p.n = startNode(t, sim.Config{APIVersion: p.api, MaxTTL: grant, FinishDetachedClaims: true,
		Pools: map[pool.Key]int{{Template: "default"}: 8}}, args...)
}
