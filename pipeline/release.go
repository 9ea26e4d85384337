package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// ErrReleaseUnconfirmed: sandboxd answered a release 404, which means
// either "already gone" or "wrong token", and only a root Get could tell
// which. Without the root token the claim is kept and the release retried:
// forgetting the row on an unconfirmed 404 could leave a live VM that
// nothing can release.
var ErrReleaseUnconfirmed = errors.New("sandboxd answered 404 to the release, and without the root token it cannot be confirmed that the VM is gone; the claim is kept and the release retried")

// releaseVM frees one VM with its stored token and returns nil only once
// the VM is known to be gone. On a 404 it confirms with a root Get:
//   - the Get answers 404: the VM is gone, converged;
//   - the Get finds it: the stored token is wrong (sandboxd cannot tell us
//     apart), so the VM is released by id with the root token;
//   - no root token: ErrReleaseUnconfirmed, and the caller keeps the row.
//
// key names the Pod in logs and errors; the token never appears in either.
func (e *Engine) releaseVM(ctx context.Context, key PodKey, id, token string) error {
	err := e.sbx.Release(ctx, id, token)
	if err == nil || !errors.Is(err, pool.ErrNotFound) {
		return err
	}
	if e.sbx.Tenant() {
		return fmt.Errorf("release of %s: %w", id, ErrReleaseUnconfirmed)
	}
	_, gerr := e.sbx.Get(ctx, id)
	switch {
	case errors.Is(gerr, pool.ErrNotFound):
		return nil
	case errors.Is(gerr, pool.ErrForbidden):
		return fmt.Errorf("release of %s: %w", id, ErrReleaseUnconfirmed)
	case gerr != nil:
		return fmt.Errorf("release of %s answered 404; confirming it is gone failed: %w", id, gerr)
	}
	e.log.WarnContext(ctx, "sandboxd refused the stored release token and still holds the VM; releasing it by id with the root token",
		"pod", key, "claim", id)
	// With the root token, a 404 can only mean an unknown id: gone.
	if err := e.sbx.Release(ctx, id, ""); err != nil && !errors.Is(err, pool.ErrNotFound) {
		return err
	}
	e.obs.Decision(ctx, decisionRelease, "root-token-fallback")
	return nil
}
