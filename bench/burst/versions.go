package main

// sandboxdRun is what a burst against an older sandboxd, or with lost
// claim answers (-sandboxd-api, -lose-answers), left at the node: every
// figure is read from the emulator when the last Pod is Running.
type sandboxdRun struct {
	API string `json:"api"`
	// LostAnswers: claims made whose answer never came (the emulator's
	// claim_answer_lost).
	LostAnswers int64 `json:"lost_answers"`
	// FullListings: listings answered with no filter (list_full): each
	// lookup's on a server without ?claim_ref=, shared among concurrent ones.
	FullListings int64 `json:"full_listings"`
	// VMsHeld: live VMs this node made. PodsWithTwoVMs: Pod keys with more
	// than one. VMsLeaked: VMs held beyond one per Running Pod.
	VMsHeld        int `json:"vms_held"`
	PodsWithTwoVMs int `json:"pods_with_two_vms"`
	VMsLeaked      int `json:"vms_leaked"`
}

// sandboxdFigures reads the figures of sandboxdRun from the node's emulator.
func (v *vkNode) sandboxdFigures(api string, running int) *sandboxdRun {
	c := v.sim.Counters()
	r := &sandboxdRun{API: api, LostAnswers: c["claim_answer_lost"], FullListings: c["list_full"]}
	perKey := map[string]int{}
	id := v.identity()
	for _, sb := range v.sim.Sandboxes() {
		if key, _, ok := id.Owns(sb, true); ok {
			r.VMsHeld++
			perKey[string(key)]++
		}
	}
	for _, n := range perKey {
		if n > 1 {
			r.PodsWithTwoVMs++
		}
	}
	r.VMsLeaked = max(r.VMsHeld-running, 0)
	return r
}
