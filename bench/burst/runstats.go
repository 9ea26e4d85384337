package main

import (
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

func fillStats(r *runResult, pods []podRec) {
	var t0, lastAck, lastClaim, lastRun, lastStatus time.Time
	for _, p := range pods {
		if !p.CreateStart.IsZero() && (t0.IsZero() || p.CreateStart.Before(t0)) {
			t0 = p.CreateStart
		}
	}
	var client, cts, call, ack2seen, ack2claim, claim2run []float64
	for _, p := range pods {
		if p.CreateAck.After(lastAck) {
			lastAck = p.CreateAck
		}
		if p.StatusAck.After(lastStatus) {
			lastStatus = p.StatusAck
		}
		if p.Claimed.After(lastClaim) {
			lastClaim = p.Claimed
		}
		if !p.CreateAck.IsZero() && !p.CreateStart.IsZero() {
			call = append(call, p.CreateAck.Sub(p.CreateStart).Seconds())
		}
		if !p.Seen.IsZero() && !p.CreateAck.IsZero() {
			ack2seen = append(ack2seen, p.Seen.Sub(p.CreateAck).Seconds())
		}
		if !p.Claimed.IsZero() && !p.CreateAck.IsZero() {
			ack2claim = append(ack2claim, p.Claimed.Sub(p.CreateAck).Seconds())
		}
		if p.Running.IsZero() {
			continue
		}
		if p.Running.After(lastRun) {
			lastRun = p.Running
		}
		if !p.CreateStart.IsZero() {
			client = append(client, p.Running.Sub(p.CreateStart).Seconds())
		}
		if !p.Created.IsZero() {
			cts = append(cts, p.Running.Sub(p.Created.Time).Seconds())
		}
		if !p.Claimed.IsZero() {
			claim2run = append(claim2run, p.Running.Sub(p.Claimed).Seconds())
		}
	}
	since := func(t time.Time) float64 {
		if t.IsZero() || t0.IsZero() {
			return 0
		}
		return t.Sub(t0).Seconds()
	}
	r.WatchS, r.CreatesS, r.ClaimsS = since(lastRun), since(lastAck), since(lastClaim)
	r.WallS = r.WatchS
	if r.Mode == modeBare {
		r.WallS = since(lastStatus)
	}
	r.LatClient, r.LatCreationTS, r.LatCreateCall = podload.Summarize(client), podload.Summarize(cts), podload.Summarize(call)
	r.LatAckToSeen, r.LatAckToClaim, r.LatClaimToRunning = podload.Summarize(ack2seen), podload.Summarize(ack2claim), podload.Summarize(claim2run)
}
