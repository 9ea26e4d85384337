package pool

import (
	"encoding/json"
	"fmt"
	"net/url"
)

// sandboxd's bounds on claim metadata. A claim outside them is a 400.
const (
	MaxMetadataPairs    = 16
	maxMetadataKeyLen   = 128
	maxMetadataValueLen = 512
	maxMetadataJSON     = 4 << 10
)

// ValidateMetadata checks labels against sandboxd's bounds: at most 16
// pairs; keys of 1-128 bytes of printable ASCII without '=' or '&'; values
// of at most 512 bytes; at most 4 KiB as JSON. The error names the first
// offending key.
func ValidateMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return fmt.Errorf("metadata: %d pairs, at most %d", len(m), MaxMetadataPairs)
	}
	for k, v := range m {
		if len(k) == 0 || len(k) > maxMetadataKeyLen {
			return fmt.Errorf("metadata key %q: want 1-%d bytes", k, maxMetadataKeyLen)
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; c < 0x21 || c > 0x7e || c == '=' || c == '&' {
				return fmt.Errorf("metadata key %q: printable ASCII without '=' or '&' only", k)
			}
		}
		if len(v) > maxMetadataValueLen {
			return fmt.Errorf("metadata key %q: value of %d bytes, at most %d", k, len(v), maxMetadataValueLen)
		}
	}
	if len(m) > 0 {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if len(b) > maxMetadataJSON {
			return fmt.Errorf("metadata: %d bytes as JSON, at most %d", len(b), maxMetadataJSON)
		}
	}
	return nil
}

// Matches reports whether the row satisfies o: the exact claim_ref when one
// is given, and every metadata pair. Servers that predate the filters
// ignore them, so the client applies them to every listing too.
func (o ListOptions) Matches(s Sandbox) bool {
	if o.ClaimRef != "" && s.ClaimRef != o.ClaimRef {
		return false
	}
	for k, v := range o.Metadata {
		if got, ok := s.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// query renders o as GET /v1/sandboxes parameters: claim_ref=<exact> and
// one metadata=k=v per pair.
func (o ListOptions) query() url.Values {
	if o.ClaimRef == "" && len(o.Metadata) == 0 {
		return nil
	}
	q := url.Values{}
	if o.ClaimRef != "" {
		q.Set("claim_ref", o.ClaimRef)
	}
	for k, v := range o.Metadata {
		q.Add("metadata", k+"="+v)
	}
	return q
}
