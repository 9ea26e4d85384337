package pipeline

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// lookup finds the VMs sandboxd holds under one key's claim_ref, for the
// paths that look for VMs no row holds (a lost answer's recovery, a delete
// without a row).
//
// A server with the ?claim_ref= filter (V2+) answers each key with its own
// rows. An older one ignores the filter and answers every row, which the
// client then filters: there, a recovery burst of N keys must not become N
// full listings. Concurrent lookups share one listing (singleflight), and
// a listing serves a lookup only if it began after the lookup did, so that
// no lookup misses a VM finalized before it asked. So a burst costs about
// one listing per listing's duration, not one per key: O(keys) work in
// all, not O(keys × rows) of transfer.
type lookup struct {
	sbx Sandboxd
	sf  singleflight.Group

	mu   sync.Mutex
	last sharedListing // the newest full listing, kept only for its start time and rows
}

type sharedListing struct {
	began time.Time
	rows  []pool.Sandbox
}

// byClaimRef lists the rows sel names by claim_ref (Identity.selector).
func (l *lookup) byClaimRef(ctx context.Context, sel pool.ListOptions) ([]pool.Sandbox, error) {
	// Until the node's features are known, each key asks with the filter:
	// the client filters the answer too, so this is right on every
	// version, only dearer on an old one.
	if f, ok := l.sbx.Features(); !ok || f.ClaimRefFilter {
		return l.sbx.List(ctx, sel)
	}
	asked := time.Now()
	for {
		if rows, ok := l.fresh(asked); ok {
			return filterRef(rows, sel.ClaimRef), nil
		}
		v, err, _ := l.sf.Do("all", func() (any, error) {
			began := time.Now()
			rows, err := l.sbx.List(ctx, pool.ListOptions{})
			if err != nil {
				return nil, err
			}
			l.mu.Lock()
			if began.After(l.last.began) {
				l.last = sharedListing{began: began, rows: rows}
			}
			l.mu.Unlock()
			return sharedListing{began: began, rows: rows}, nil
		})
		if err != nil {
			return nil, err
		}
		if got := v.(sharedListing); !got.began.Before(asked) {
			return filterRef(got.rows, sel.ClaimRef), nil
		}
		// The listing joined began before this lookup: ask again.
	}
}

// fresh returns the newest listing if it began at or after asked.
func (l *lookup) fresh(asked time.Time) ([]pool.Sandbox, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.rows == nil || l.last.began.Before(asked) {
		return nil, false
	}
	return l.last.rows, true
}

func filterRef(rows []pool.Sandbox, ref string) []pool.Sandbox {
	var out []pool.Sandbox
	for _, r := range rows {
		if r.ClaimRef == ref {
			out = append(out, r)
		}
	}
	return out
}
