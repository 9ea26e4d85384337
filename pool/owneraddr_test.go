package pool

import (
	"strings"
	"testing"
)

// Every owner_addr form a real node answers with: only an IP host may
// become a Pod IP.
func TestOwnerIPTakesOnlyAnIPHostFromEveryOwnerAddrForm(t *testing.T) {
	for _, tc := range []struct {
		addr, host, ip string
	}{
		{"10.0.0.5:7777", "10.0.0.5", "10.0.0.5"},
		{"[fd00::5]:7777", "fd00::5", "fd00::5"},
		{"10.0.0.5", "10.0.0.5", "10.0.0.5"},
		{"https://10.0.0.6:8443", "10.0.0.6", "10.0.0.6"},
		{"https://sbx.example:8443", "sbx.example", ""},
		{"http://[fd00::7]:7777/", "fd00::7", "fd00::7"},
		{"sbx-node-3.example:7777", "sbx-node-3.example", ""},
		{"sbx-node-3", "sbx-node-3", ""},
		{"", "", ""},
		{"  ", "", ""},
		{"::ffff:10.0.0.8", "::ffff:10.0.0.8", "10.0.0.8"},
		{"[fe80::1%eth0]:7777", "fe80::1%eth0", ""},
		{"http://%zz", "", ""},
	} {
		if got := ownerHost(tc.addr); got != tc.host {
			t.Errorf("ownerHost(%q) = %q, want %q", tc.addr, got, tc.host)
		}
		ip, ok := OwnerIP(tc.addr)
		if ok != (tc.ip != "") || (ok && ip.String() != tc.ip) {
			t.Errorf("OwnerIP(%q) = %v, %v; want %q", tc.addr, ip, ok, tc.ip)
		}
	}
}

func TestValidateMetadataEnforcesSandboxdBounds(t *testing.T) {
	ok := map[string]string{"managed-by": "vk-sandbox", "vk-sandbox/node": "n1", "k": strings.Repeat("v", 512)}
	if err := ValidateMetadata(ok); err != nil {
		t.Fatalf("within bounds: %v", err)
	}
	if err := ValidateMetadata(nil); err != nil {
		t.Fatalf("no labels: %v", err)
	}
	many := map[string]string{}
	for i := range 17 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	big := map[string]string{}
	for i := range 9 {
		big[strings.Repeat("k", i+1)] = strings.Repeat("v", 500)
	}
	for name, m := range map[string]map[string]string{
		"17 pairs":       many,
		"empty key":      {"": "v"},
		"long key":       {strings.Repeat("k", 129): "v"},
		"key with =":     {"a=b": "v"},
		"key with &":     {"a&b": "v"},
		"key with space": {"a b": "v"},
		"non-ASCII key":  {"clé": "v"},
		"long value":     {"k": strings.Repeat("v", 513)},
		"over 4 KiB":     big,
	} {
		if err := ValidateMetadata(m); err == nil {
			t.Errorf("%s: accepted, want an error", name)
		}
	}
}

// Servers that predate the filters ignore them, so a row must match on the
// client side too.
func TestListOptionsMatchClaimRefAndEveryLabel(t *testing.T) {
	o := ListOptions{ClaimRef: "vk-sandbox/n1/ns/a", Metadata: map[string]string{"managed-by": "vk-sandbox", "vk-sandbox/node": "n1"}}
	row := Sandbox{ClaimRef: "vk-sandbox/n1/ns/a", Metadata: map[string]string{"managed-by": "vk-sandbox", "vk-sandbox/node": "n1", "x": "y"}}
	if !o.Matches(row) {
		t.Fatal("a row with every label and the claim_ref does not match")
	}
	for name, r := range map[string]Sandbox{
		"other claim_ref": {ClaimRef: "ns/a", Metadata: row.Metadata},
		"missing label":   {ClaimRef: row.ClaimRef, Metadata: map[string]string{"managed-by": "vk-sandbox"}},
		"other node":      {ClaimRef: row.ClaimRef, Metadata: map[string]string{"managed-by": "vk-sandbox", "vk-sandbox/node": "n2"}},
		"no labels":       {ClaimRef: row.ClaimRef},
	} {
		if o.Matches(r) {
			t.Errorf("%s: matches, want not", name)
		}
	}
	if !(ListOptions{}).Matches(Sandbox{}) {
		t.Error("the empty filter must match every row")
	}
}
