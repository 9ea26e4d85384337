package sim_test

import (
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// owner_addr is the node's, not the VM's: every claim carries the same
// value, and /v1/info advertises it.
func TestOwnerAddrIsNodeWideInEveryForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sim.Config
		want string
	}{
		{"default ip", sim.Config{}, "10.77.0.1:7777"},
		{"ip from a 3-octet prefix", sim.Config{AddrPrefix: "192.168.7"}, "192.168.7.1:7777"},
		{"ip from a 1-octet prefix", sim.Config{AddrPrefix: "10."}, "10.0.0.1:7777"},
		{"origin", sim.Config{OwnerAddrMode: sim.OwnerAddrOrigin}, "https://sandboxd-sim.example:8443"},
		{"hostname", sim.Config{OwnerAddrMode: sim.OwnerAddrHostname}, "sandboxd-sim.example:7777"},
		{"explicit origin", sim.Config{OwnerAddrMode: sim.OwnerAddrOrigin, OwnerAddr: "https://sbx.example:8443"}, "https://sbx.example:8443"},
		{"explicit hostname", sim.Config{OwnerAddr: "sbx-node-3.example:7777"}, "sbx-node-3.example:7777"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.cfg)
			for i := range 5 {
				if c := n.claim("", 60); c.OwnerAddr != tc.want {
					t.Fatalf("claim %d: owner_addr %q, want %q", i, c.OwnerAddr, tc.want)
				}
			}
			if got := n.info().AdvertiseAddr; got != tc.want {
				t.Errorf("advertise_addr %q, want %q", got, tc.want)
			}
			if got := n.sim.OwnerAddr(); got != tc.want {
				t.Errorf("OwnerAddr() %q, want %q", got, tc.want)
			}
			if _, ok := pool.OwnerIP(tc.want); ok != (tc.cfg.OwnerAddrMode == "" && tc.cfg.OwnerAddr == "") {
				t.Errorf("%q parses as an IP: %v", tc.want, ok)
			}
		})
	}
}

// A node that advertises no host leaves owner_addr out of the claim and
// advertise_addr out of the info: absent, not empty.
func TestOwnerAddrNoneIsOmitted(t *testing.T) {
	n := newNode(t, sim.Config{OwnerAddrMode: sim.OwnerAddrNone})
	status, body := n.do("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if status != 200 || strings.Contains(string(body), "owner_addr") || !strings.Contains(string(body), `"id":"sb_`) {
		t.Errorf("claim: %d %s, want an id and no owner_addr", status, body)
	}
	_, body = n.do("GET", "/v1/info", rootToken, nil)
	if strings.Contains(string(body), "advertise_addr") {
		t.Errorf("info %s carries advertise_addr", body)
	}
}

// per-claim is an opt-in that real sandboxd does not have, for tests
// written against it: a distinct address per live claim, none advertised.
func TestOwnerAddrPerClaimIsUniqueWithinThePrefix(t *testing.T) {
	n := newNode(t, sim.Config{OwnerAddrMode: sim.OwnerAddrPerClaim, AddrPrefix: "192.168.7"})
	seen := map[string]bool{}
	for range 20 {
		c := n.claim("", 60)
		if !strings.HasPrefix(c.OwnerAddr, "192.168.7.") || !strings.HasSuffix(c.OwnerAddr, ":7777") || seen[c.OwnerAddr] {
			t.Fatalf("owner_addr %q (seen before: %v)", c.OwnerAddr, seen[c.OwnerAddr])
		}
		seen[c.OwnerAddr] = true
	}
	if got := n.info().AdvertiseAddr; got != "" {
		t.Errorf("advertise_addr %q in per-claim mode, want none", got)
	}
}
