package pool

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
)

// String, LogValue and Names list the token kind and every feature.
func TestFeaturesPrintEveryFeature(t *testing.T) {
	f := Features{Token: TokenTenant, Renew: true, Agent: true}
	want := "token=tenant metadata=false claim_ref_filter=false token_read=false renew=true exec=false ports=false stats=false agent=true"
	if f.String() != want {
		t.Errorf("String() = %q\nwant %q", f, want)
	}
	if names := f.Names(); !slices.Equal(slices.Sorted(maps.Keys(names)), slices.Sorted(slices.Values(featureNames))) ||
		!names["renew"] || !names["agent"] || names["exec"] {
		t.Errorf("Names() = %v", names)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("sandboxd", "features", f)
	if !strings.Contains(b.String(), "features.token=tenant") || !strings.Contains(b.String(), "features.agent=true") {
		t.Errorf("log line %q", b.String())
	}
}
