package sim_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func metadataQuery(pairs ...string) string {
	q := url.Values{}
	for _, p := range pairs {
		q.Add("metadata", p)
	}
	return "?" + q.Encode()
}

// Labels are fixed at claim time, echoed in the rows, and every filter
// pair must match.
func TestMetadataIsEchoedAndFilterable(t *testing.T) {
	n := newNode(t, sim.Config{})
	web := map[string]string{"app": "web", "pod-uid": "u-1", "formula": "a=b&c"}
	a := n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/a", Metadata: web})
	b := n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/b", Metadata: map[string]string{"app": "web", "pod-uid": "u-2"}})
	n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/c"})

	status, body := n.do("GET", "/v1/sandboxes/"+a.ID, rootToken, nil)
	var row pool.Sandbox
	if status != 200 || json.Unmarshal(body, &row) != nil || !maps.Equal(row.Metadata, web) {
		t.Errorf("get: %d %s, want metadata %v", status, body, web)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{metadataQuery("app=web"), sorted(a.ID, b.ID)},
		{metadataQuery("app=web", "pod-uid=u-2"), []string{b.ID}},
		{metadataQuery("app=web", "pod-uid=u-3"), nil},
		{metadataQuery("formula=a=b&c"), []string{a.ID}}, // the pair splits at its first '='
		{metadataQuery("app="), nil},                     // an empty value is a value
		{metadataQuery("app=web") + "&claim_ref=ns%2Fb", []string{b.ID}},
	} {
		got := n.list(tenantToken, tc.query)
		if g := ids(got); !slices.Equal(g, tc.want) {
			t.Errorf("list%s: %v, want %v", tc.query, g, tc.want)
		}
	}
	for _, r := range n.list(rootToken, metadataQuery("pod-uid=u-1")) {
		if !maps.Equal(r.Metadata, web) {
			t.Errorf("listed row metadata %v, want %v", r.Metadata, web)
		}
	}
	for _, bad := range []string{"app", "=web"} {
		if status, body := n.do("GET", "/v1/sandboxes"+metadataQuery(bad), tenantToken, nil); status != 400 {
			t.Errorf("filter %q: %d %s, want 400", bad, status, body)
		}
	}
}

// The bounds of pool.ValidateMetadata are the server's: outside them a
// claim is a 400, and no VM is made.
func TestMetadataOutOfBoundsIs400(t *testing.T) {
	n := newNode(t, sim.Config{})
	many := map[string]string{}
	for i := range pool.MaxMetadataPairs + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	big := map[string]string{}
	for i := range 9 {
		big[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 500)
	}
	for name, md := range map[string]map[string]string{
		"17 pairs":         many,
		"empty key":        {"": "v"},
		"key with =":       {"a=b": "v"},
		"key with &":       {"a&b": "v"},
		"key with a space": {"a b": "v"},
		"key of 129 bytes": {strings.Repeat("k", 129): "v"},
		"value of 513":     {"k": strings.Repeat("v", 513)},
		"over 4 KiB":       big,
	} {
		if pool.ValidateMetadata(md) == nil {
			t.Fatalf("%s: the test's own example is valid", name)
		}
		status, body := n.do("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default", Metadata: md})
		if status != 400 {
			t.Errorf("%s: %d, want 400", name, status)
		}
		errorBody(t, name, body)
	}
	edge := map[string]string{strings.Repeat("k", 128): strings.Repeat("v", 512)}
	n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", Metadata: edge})
	if got := n.sim.Sandboxes(); len(got) != 1 {
		t.Errorf("%d sandboxes, want only the one within bounds", len(got))
	}
}
