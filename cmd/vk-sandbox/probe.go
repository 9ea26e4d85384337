package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// probeSandboxd asks sandboxd's /v1/info, once it answers, for two facts
// that are not configured here:
//   - whether the token is the node's root token. A tenant token is
//     answered 403; the client then stops making root-only calls, and one
//     warning says what that turns off;
//   - the node's advertise_addr: the address of a claim recovered from a
//     lost answer (index rows carry none), and the Pod IP fallback for
//     claims whose owner_addr carries no IP, unless --node-ip gave one.
//
// It retries with backoff while sandboxd is unreachable, and gives up on an
// answer that will not change (401, or any other 4xx).
func probeSandboxd(ctx context.Context, sbx *pool.Client, prov *kube.Provider, eng *pipeline.Engine, fallback string, nodeIP string, log *slog.Logger) {
	ip, fixed, _ := podIPFallback(fallback, nodeIP, net.InterfaceAddrs) // checked at startup
	if prov != nil && ip.IsValid() {
		prov.SetPodIPFallback(ip)
	}
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxInterval(30*time.Second), backoff.WithMaxElapsedTime(0))
	_ = backoff.RetryNotify(func() error {
		info, err := sbx.Info(ctx)
		switch {
		case err == nil:
			eng.NoteOwnerAddr(info.AdvertiseAddr)
			if ip, ok := pool.OwnerIP(info.AdvertiseAddr); ok && !fixed && prov != nil {
				prov.SetPodIPFallback(ip)
			}
			log.Info("sandboxd answered with the root token", "advertise_addr", info.AdvertiseAddr)
			return nil
		case errors.Is(err, pool.ErrForbidden):
			log.Warn("the sandboxd token is a tenant token: claims, releases and lease renewals work, but these are off: " +
				"recovering the credential of a claim whose answer was lost (such a VM is left to its lease), " +
				"confirming that a release answered 404 really freed the VM (the release is retried instead), " +
				"the pool view in the NodeInventory, and the advertise_addr Pod IP fallback (set --node-ip). " +
				"Give vk-sandbox the node's api_token to turn them on.")
			return nil
		case pool.IsRetryable(err):
			return err
		case ctx.Err() != nil:
			// Shutdown came before sandboxd answered: nothing was refused.
			return backoff.Permanent(err)
		case pool.StatusCode(err) == http.StatusUnauthorized:
			log.Error("sandboxd refused the token (401 on /v1/info); check --sandboxd-token-file", "error", err)
		default:
			log.Error("sandboxd's /v1/info failed; the advertise_addr and the token's kind stay unknown", "error", err)
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(bo, ctx), func(err error, wait time.Duration) {
		log.Debug("sandboxd not answering /v1/info yet", "error", err, "retry_in", wait)
	})
}
