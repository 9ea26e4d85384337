package kube

import (
	"strings"
	"testing"
)

func TestOwnerPluralsFollowEnglishRules(t *testing.T) {
	for kind, want := range map[string]string{
		"Sandbox": "sandboxes", "Policy": "policies", "Box": "boxes", "Class": "classes",
		"Match": "matches", "Mesh": "meshes", "Key": "keys", "Deployment": "deployments",
		"SandboxClaim": "sandboxclaims", "Quiz": "quizes", "Gateway": "gateways",
	} {
		if got := plural(kind); got != want {
			t.Errorf("plural(%q) = %q, want %q", kind, got, want)
		}
	}
}

func FuzzPlural(f *testing.F) {
	for _, s := range []string{"Sandbox", "Policy", "Y", "", "ss", "Day"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kind string) {
		p := plural(kind)
		if kind != "" && (len(p) <= len(strings.ToLower(kind))-1 || p != strings.ToLower(p)) {
			t.Fatalf("plural(%q) = %q", kind, p)
		}
	})
}
