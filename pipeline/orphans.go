package pipeline

import (
	"context"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// OrphanObserver receives orphan scan results. telemetry.Metrics satisfies it.
type OrphanObserver interface {
	OrphanVerdicts(unknownSandboxes, missingClaims, foreignSandboxes int)
	OrphanScan(ok bool)
}

// watchOrphans audits the claim table against the sandboxd listing every
// interval. It reports, and it releases nothing but undelivered VMs (see
// releaseUndelivered):
//   - unknown: listed sandboxes that this node made (Identity.Owns) and
//     that no claim holds (for example a lost claim response whose token
//     could not be recovered). Other clients' sandboxes on the same
//     sandboxd are not this node's to report; one under a look-alike
//     claim_ref without this node's mark is logged once and counted as
//     foreign: another client that can plant VMs where this node's would
//     be is worth an alert, though the VMs are not this node's to touch;
//   - missing: claims whose sandbox is not listed.
//
// A failed listing is not an empty list: that cycle is skipped. Each
// verdict is logged once, when it first appears.
func (e *Engine) watchOrphans(ctx context.Context, interval time.Duration, obs OrphanObserver) {
	seen := map[string]bool{}
	ages := firstSeen{}
	e.every(ctx, LoopOrphanScan, interval, func() { seen, ages = e.scanOrphans(ctx, obs, seen, ages) })
}

func (e *Engine) scanOrphans(ctx context.Context, obs OrphanObserver, seen map[string]bool, ages firstSeen) (map[string]bool, firstSeen) {
	rows, err := e.sbx.List(ctx, pool.ListOptions{})
	if err != nil {
		obs.OrphanScan(false)
		e.log.Warn("orphan scan: sandboxd listing failed; cycle skipped", "error", err)
		return seen, ages
	}
	obs.OrphanScan(true)
	listed := make(map[string]struct{}, len(rows))
	ours := map[string]pool.Sandbox{}
	var alike []pool.Sandbox // look-alike claim_refs without this node's mark
	for _, r := range rows {
		listed[r.ID] = struct{}{}
		if _, _, ok := e.owns(r); ok {
			ours[r.ID] = r
		} else if e.foreign(r, false) {
			alike = append(alike, r)
		}
	}
	held := map[string]struct{}{}
	now := map[string]bool{}
	missing := 0
	e.store.Range(func(key string, c store.Claim) bool {
		held[c.ID] = struct{}{}
		if _, ok := listed[c.ID]; !ok {
			missing++
			v := "missing/" + c.ID
			now[v] = true
			if !seen[v] {
				e.log.Warn("orphan scan: a claim's sandbox is not listed by sandboxd", "pod", key, "claim", c.ID)
			}
		}
		return true
	})
	unheld := make([]string, 0, len(ours))
	for id := range ours {
		if _, ok := held[id]; !ok {
			unheld = append(unheld, id)
		}
	}
	ages = ages.update(unheld, e.cfg.Clock.Now())
	unknown := 0
	for _, id := range unheld {
		r := ours[id]
		if e.releaseUndelivered(ctx, r, ages[id]) {
			continue
		}
		unknown++
		v := "unknown/" + id
		now[v] = true
		if !seen[v] {
			e.log.Warn("orphan scan: sandboxd lists a sandbox no claim knows about; it is left to its lease", "sandbox", id, "claim_ref", r.ClaimRef)
		}
	}
	foreign := 0
	for _, r := range alike {
		if _, ok := held[r.ID]; ok {
			continue // a row holds it by id: this node's, from before the mark
		}
		foreign++
		v := "foreign/" + r.ID
		now[v] = true
		if !seen[v] {
			e.log.Warn("orphan scan: a sandbox under this node's claim_ref form without this node's mark is another client's; it is not this node's to report or release",
				"sandbox", r.ID, "claim_ref", r.ClaimRef)
		}
	}
	obs.OrphanVerdicts(unknown, missing, foreign)
	return now, ages
}
