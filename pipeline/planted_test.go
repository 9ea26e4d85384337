package pipeline_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Any client of a shared sandboxd may claim under any claim_ref and write
// any labels. A VM planted under a Pod's look-alike claim_ref (this node's
// old unmarked form, or a guessed mark) with our labels forged, before the
// Pod exists, is another client's: it never marks the key at startup, is
// never recovered for a lost answer, never reported Running, never
// released by a bare Pod's delete of its unheld VMs, by the orphan scan's
// undelivered release or by the Pods' deletes; the orphan scan logs it as
// foreign and does not count it. On V4+ a VM with our exact claim_ref
// claimed by a tenant (a mark replayed) is not ours while the node holds
// the root token. Each Pod gets its own VM.
//
// A claim_ref is not secret, and Pod names come back across generations.
// The owned Pod's previous generation's claim_ref, replayed exactly with
// the root token before the next generation exists, is never recovered for
// the next generation's lost answer (its claim_ref names its own UID); as
// a VM with this node's mark for a generation no Pod holds, it is the
// orphan scan's undelivered release, never the Pod's. The previous mark
// written under the next generation's UID (read off the new Pod) carries
// no valid mark: it is foreign like the other planted VMs.
func TestAPlantedVMIsNeverAdoptedRecoveredOrReleased(t *testing.T) {
	for _, v := range []string{sim.V1, sim.V2, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) { plantedVMs(t, v) })
	}
}

// releaseLog records the sandbox ids every non-GET request names.
type releaseLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *releaseLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			l.mu.Lock()
			l.paths = append(l.paths, r.URL.Path)
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (l *releaseLog) named(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paths {
		if strings.Contains(p, id) {
			return true
		}
	}
	return false
}

// last is the newest orphan verdicts: {unknown, missing, foreign}.
func (o *orphanObs) last() [3]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.verdicts) == 0 {
		return [3]int{-1, -1, -1}
	}
	return o.verdicts[len(o.verdicts)-1]
}

func plantedVMs(t *testing.T, api string) {
	calls := &releaseLog{}
	env := newSimBehind(t, simDefaults(sim.Config{APIVersion: api}), calls.wrap)
	f, err := sim.FeaturesOf(api)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plant := func(c *pool.Client, key, ref string) pool.ClaimResponse {
		t.Helper()
		r, err := c.Claim(ctx, pool.ClaimRequest{Template: template, ClaimRef: ref, TTLSeconds: 3600,
			Metadata: testID.Labels(pipeline.PodRef{Key: pipeline.PodKey(key), UID: "uid-planter", OwnerUID: "owner-1"})})
		if err != nil {
			t.Fatalf("plant %s: %v", ref, err)
		}
		return r
	}
	var planted []pool.ClaimResponse
	for _, key := range []string{"ns/owned", "ns/bare"} {
		old := "vk-sandbox/" + testNode + "/" + key
		planted = append(planted,
			plant(env.node, key, old),                             // a tenant, this node's old form
			plant(env.root, key, old+"/"+strings.Repeat("0", 32))) // root, a guessed mark
	}
	if f.TenantAPI {
		// A tenant replays the owned Pod's exact claim_ref (a mark it read).
		planted = append(planted, plant(env.node, "ns/owned", mustRef(testID, "ns/owned", "uid-owned")))
	}
	// The owned Pod's previous generation's exact claim_ref, replayed, and
	// its mark under the next generation's UID.
	prevRef := mustRef(testID, "ns/owned", "uid-owned-gen-1")
	replay := plant(env.root, "ns/owned", prevRef)
	planted = append(planted, plant(env.root, "ns/owned", "vk-sandbox/"+testNode+"/ns/owned/uid-owned/"+markOf(prevRef)))
	// This node's own VM for the bare Pod, from a claim never made durable.
	unheld := preClaim(t, env.root, "ns/bare", "uid-gone", "")

	if _, err := env.root.Detect(ctx); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	rep := newReporter()
	cfg := testConfig(env.root, openStore(t, tempStorePath(t), false), rep)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.SettleWindow = 1 // every VM no row holds is past it: the scan would release one it took for ours
	obs := &orphanObs{}
	cfg.OrphanObserver = obs
	cfg.Owners = func(context.Context, pipeline.PodKey, pipeline.ClaimView) pipeline.Verdict {
		return pipeline.Verdict{Release: true, Reason: "owner-gone"} // the owner is gone
	}
	clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
	e := startEngine(t, cfg)
	<-e.Verified()

	isPlanted := func(id string) bool {
		for _, p := range planted {
			if p.ID == id {
				return true
			}
		}
		return false
	}
	// A bare Pod's delete of its unheld VMs releases this node's, only.
	res, err := e.Delete(ctx, pipeline.PodRef{Key: "ns/bare", UID: "uid-gone"}, verdict(true, "bare-pod"))
	if err != nil || !res.Held {
		t.Fatalf("delete of the bare Pod's unheld VM = %+v, %v; want held", res, err)
	}
	// (Before V2 its token cannot be read back: root releases it by id.)
	if !calls.named(unheld.ID) {
		t.Fatalf("this node's unheld VM %s was not released", unheld.ID)
	}

	// The owned Pod's first claim answer is lost: the recovery looks the
	// key up and takes only this node's VM.
	env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
	create(t, e, intent("ns/owned", "uid-owned", "owner-1"))
	owned := rep.running(t, "uid-owned")
	create(t, e, intent("ns/bare", "uid-bare", ""))
	bare := rep.running(t, "uid-bare")
	for _, run := range []event{owned, bare} {
		if isPlanted(run.claim.ID) || run.claim.ID == unheld.ID || run.claim.ID == replay.ID {
			t.Fatalf("Pod %s Running on %s, a planted, replayed or released VM", run.ref.Key, run.claim.ID)
		}
	}
	if !alive(env, replay.ID) || calls.named(replay.ID) {
		t.Fatalf("the replayed previous generation's VM %s was taken by the next generation's recovery", replay.ID)
	}

	// Two scans: a V1 row carries no claimed_at, so its age counts from the
	// first listing (bornBy).
	clk.pass(t, pipeline.LoopOrphanScan)
	clk.passAt(t, pipeline.LoopOrphanScan, clk.Now().Add(time.Second))
	if v := obs.last(); v[0] != 0 || v[2] != len(planted) {
		t.Errorf("orphan scan counts %d unknown and %d foreign sandboxes, want 0 and %d: planted VMs are another client's, and counted as such",
			v[0], v[2], len(planted))
	}
	// The exact replay is, by its mark, this node's VM of a generation no
	// Pod holds: past the settle window the scan releases it as undelivered.
	rep.waitFor(t, "the replayed VM's undelivered release", func(evs []event) bool {
		return find(evs, "decision", "", "release/undelivered") >= 0
	})
	if alive(env, replay.ID) {
		t.Errorf("the replayed previous generation's VM %s outlived the orphan scan", replay.ID)
	}
	for _, key := range []string{"ns/owned", "ns/bare"} {
		if _, err := e.Delete(ctx, pipeline.PodRef{Key: pipeline.PodKey(key), UID: "uid-" + key[3:]}, verdict(true, "owner-gone")); err != nil {
			t.Fatal(err)
		}
	}
	live := map[string]bool{}
	for _, sb := range env.sim.Sandboxes() {
		live[sb.ID] = true
	}
	if live[owned.claim.ID] || live[bare.claim.ID] {
		t.Errorf("the Pods' own VMs outlived their deletes")
	}
	out := logs.String()
	for _, p := range planted {
		if !live[p.ID] || calls.named(p.ID) {
			t.Errorf("planted VM %s: live %t, named by a write %t; want live and never touched", p.ID, live[p.ID], calls.named(p.ID))
		}
		if !strings.Contains(out, p.ID) {
			t.Errorf("planted VM %s is not logged as another client's", p.ID)
		}
		if strings.Contains(out, p.Token) {
			t.Fatalf("a planted VM's token is in the log")
		}
	}
	if !strings.Contains(out, "orphan scan: a sandbox under this node's claim_ref form without this node's mark") {
		t.Errorf("the orphan scan does not report the planted VMs as foreign")
	}
}
